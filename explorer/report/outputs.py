"""Where a command may write: nothing a user wrote is overwritten unless they ask (--force),
and nothing half-written is left behind.

`claim_dir` / `claim_file` are called before any work: they refuse a path that cannot be
written (/proc/x, a path under a regular file) with one line, claim the destination
atomically (an exclusive claim file, inside a claimed directory or beside a claimed file as
`.NAME.memtrade-claim`, so two runs given one --out cannot both write it: the second is
refused at once, not after its work), and
hand out a temporary sibling to write into. `Staged.commit()` renames the result into place;
leaving the `with` block by an error, Ctrl-C or SIGTERM (explorer/cli/signals.py) removes the
temporary files and the claim, so an interrupted or failed command leaves the destination as
it found it.

A process killed outright (SIGKILL, the OOM killer) cannot clean up. Its claim names its
process id and host, so the next command into the same destination on that host finds the
process gone, takes the claim over and says so in one line; temporary siblings carry the
process id in their names (`.NAME.PID-XXXX.tmp`), and the command that holds the claim
removes those of processes that are gone.
"""
from __future__ import annotations

import errno
import os
import re
import shutil
import socket
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from sdf3.errors import InputError

CLAIM = ".memtrade-claim"          # inside a claimed directory while its command runs
SAFE_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")
MAX_NAME = 64                       # characters of an app name kept in a default directory name


def fresh_dir(path: str | Path, force: bool, flag: str = "--out") -> Path:
    """`path` as a directory to write into: absent, empty, or non-empty with --force."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise InputError(f"{flag} {out}: expected a directory, found a file")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise InputError(f"{flag} {out}: directory is not empty (use --force to write into it)")
    return out


def fresh_file(path: str | Path, force: bool, flag: str = "--out") -> Path:
    """`path` as a file to write: absent, or present with --force."""
    out = Path(path)
    if out.is_dir():
        raise InputError(f"{flag} {out}: expected a file, found a directory")
    if out.exists() and not force:
        raise InputError(f"{flag} {out}: file exists (use --force to overwrite it)")
    return out


def safe_name(name: str, fallback: str = "app") -> str:
    """A directory name (never a path) from an app's name: runs of characters other than
    letters, digits, '_', '-' and '.' (and '..') become one '_'; no leading or trailing
    '.', '_', '-'; at most MAX_NAME characters; `fallback` when nothing is left."""
    safe = re.sub(r"_+", "_", SAFE_CHARS.sub("_", name).replace("..", "_"))
    safe = safe.strip("._-")[:MAX_NAME].strip("._-")
    return safe or fallback


def _why(err: OSError) -> str:
    return err.strerror or errno.errorcode.get(err.errno or 0, type(err).__name__)


def _make_parents(path: Path, flag: str) -> list[Path]:
    """Create the missing ancestors of `path` (refusing one that is a file); the created ones,
    deepest first, so a discarded claim can remove them again."""
    missing = []
    p = path.parent
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    if p.exists() and not p.is_dir():
        raise InputError(f"{flag} {path}: cannot write there ({p} is a file, not a directory)")
    created = []
    try:
        for d in reversed(missing):
            try:
                d.mkdir()
                created.append(d)
            except FileExistsError:     # made meanwhile by another run: share it
                if not d.is_dir():
                    raise
    except OSError as err:
        _remove_dirs(reversed(created))
        raise InputError(f"{flag} {path}: cannot write there ({_why(err)})") from None
    return list(reversed(created))


def _remove_dirs(dirs) -> None:
    for d in dirs:
        try:
            d.rmdir()
        except OSError:
            pass          # not empty (someone else wrote there) or gone: leave it


def interrupt_behind(err: BaseException | None) -> KeyboardInterrupt | None:
    """The Ctrl-C or SIGTERM (a KeyboardInterrupt) that `err` is or was raised while handling:
    an extension module being initialised when the signal lands (onnxruntime's pybind11
    module) turns it into its own ImportError, and the command must still end as stopped."""
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, KeyboardInterrupt):
            return err
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return None


@dataclass
class Staged:
    """A claimed destination and the temporary sibling written in its place."""
    final: Path
    tmp: Path
    is_dir: bool
    force: bool
    flag: str = "--out"
    created: list[Path] = field(default_factory=list)   # dirs made by the claim, deepest first
    done: bool = False

    def __enter__(self) -> Path:
        return self.tmp

    def __exit__(self, kind, value, tb) -> bool:
        if kind is None:
            self.commit()
            return False
        self.discard()
        stop = interrupt_behind(value)
        if stop is not None and not str(stop):                       # Ctrl-C, SIGTERM
            raise type(stop)(f"{self.final} not written (partial output removed)") from None
        return False

    def commit(self) -> Path:
        """Move what was written in `tmp` to `final`; returns `final`."""
        if self.done:
            return self.final
        try:
            if not self.is_dir:
                self._commit_file()
            else:
                self._commit_dir()
        except OSError as err:
            self.discard()
            raise InputError(f"{self.flag} {self.final}: could not move the result into place "
                             f"({_why(err)})") from None
        self.done = True
        return self.final

    def _commit_file(self) -> None:
        if self.force:
            os.replace(self.tmp, self.final)
        else:
            os.link(self.tmp, self.final)     # fails if the name was taken meanwhile: no overwrite
            os.unlink(self.tmp)
        file_claim(self.final).unlink(missing_ok=True)

    def _commit_dir(self) -> None:
        claim = self.final / CLAIM
        if not self.force and not self.final.is_symlink():
            claim.unlink(missing_ok=True)
            os.rename(self.tmp, self.final)   # replaces the (empty) claimed directory atomically
            return
        for entry in sorted(self.tmp.iterdir()):
            dest = self.final / entry.name
            if dest.is_dir() and not dest.is_symlink():
                shutil.rmtree(dest)           # e.g. an older deployment's models/: no stale files
            elif dest.exists() or dest.is_symlink():
                dest.unlink()
            os.rename(entry, dest)
        self.tmp.rmdir()
        claim.unlink(missing_ok=True)

    def discard(self) -> None:
        """Remove the temporary output, the claim and the directories the claim created."""
        if self.done:
            return
        self.done = True
        if self.tmp.is_dir() and not self.tmp.is_symlink():
            shutil.rmtree(self.tmp, ignore_errors=True)
        elif self.tmp.exists():
            self.tmp.unlink()
        (self.final / CLAIM if self.is_dir else file_claim(self.final)).unlink(missing_ok=True)
        _remove_dirs(self.created)


def _claim_final_dir(out: Path, force: bool, flag: str) -> bool:
    """Claim directory `out` by creating its claim file exclusively; True if `out` was made."""
    made = False
    try:
        out.mkdir()
        made = True
    except FileExistsError:
        if not out.is_dir():
            raise InputError(f"{flag} {out}: expected a directory, found a file") from None
    except OSError as err:
        raise InputError(f"{flag} {out}: cannot write there ({_why(err)})") from None
    try:
        _write_claim(out / CLAIM)
    except FileExistsError:
        _take_over(out / CLAIM, flag, out)
    except OSError as err:
        if made:
            out.rmdir()
        raise InputError(f"{flag} {out}: cannot write there ({_why(err)})") from None
    others = [p.name for p in out.iterdir() if p.name != CLAIM]
    if others and not force:
        (out / CLAIM).unlink()
        raise InputError(f"{flag} {out}: directory is not empty (use --force to write into it)")
    return made


def _write_claim(path: Path) -> None:
    """Create the claim file exclusively, naming this process and host."""
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    try:
        os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
    finally:
        os.close(fd)


def process_gone(pid: int) -> bool:
    """Whether no process `pid` runs on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:        # someone else's process
        return False
    return False


def claim_owner(path: Path) -> tuple[int, str] | None:
    """(process id, host) a claim file names; None when it cannot be read."""
    try:
        words = path.read_text().split()
        return int(words[0]), (words[1] if len(words) > 1 else "")
    except (OSError, ValueError, IndexError):
        return None


def _take_over(claim: Path, flag: str, out: Path) -> None:
    """The claim of a process that is gone (killed outright) is taken over, with one line
    saying so; a live one, or one of another host, refuses the command."""
    owner = claim_owner(claim)
    if owner is None or owner[1] != socket.gethostname() or not process_gone(owner[0]):
        raise InputError(f"{flag} {out}: another memtrade command is writing there (remove "
                         f"{claim} if none is)") from None
    claim.unlink(missing_ok=True)
    try:
        _write_claim(claim)
    except FileExistsError:      # another command took it over first
        raise InputError(f"{flag} {out}: another memtrade command is writing there (remove "
                         f"{claim} if none is)") from None
    print(f"explore: note: {flag} {out}: the command that claimed it (process {owner[0]}) is "
          f"gone; taking its claim over", file=sys.stderr)


def _tmp_prefix(name: str) -> str:
    return f".{name}.{os.getpid()}-"


def sweep_stale(parent: Path, name: str, suffix: str) -> list[Path]:
    """Remove the temporary siblings (`_tmp_prefix`) of `parent/name` left by processes that
    are gone; the ones removed."""
    pattern = re.compile(rf"^\.{re.escape(name)}\.(\d+)-[^.]*{re.escape(suffix)}$")
    removed = []
    try:
        entries = list(parent.iterdir())
    except OSError:
        return removed
    for entry in entries:
        found = pattern.match(entry.name)
        if not found or int(found.group(1)) == os.getpid() or not process_gone(int(found.group(1))):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        removed.append(entry)
    return removed


def claim_dir(path: str | Path, force: bool, flag: str = "--out") -> Staged:
    """Claim directory `path` before any work (see the module docstring); use as
    `with claim_dir(...) as tmp:` and write into `tmp`."""
    out = Path(path)
    created = _make_parents(out, flag)
    try:
        if _claim_final_dir(out, force, flag):
            created.insert(0, out)
    except InputError:
        _remove_dirs(created)
        raise
    sweep_stale(out.parent, out.name, ".tmp")      # this command holds the claim now
    try:
        tmp = Path(tempfile.mkdtemp(prefix=_tmp_prefix(out.name), suffix=".tmp", dir=out.parent))
        os.chmod(tmp, 0o777 & ~_umask())
    except OSError as err:
        (out / CLAIM).unlink(missing_ok=True)
        _remove_dirs(created)
        raise InputError(f"{flag} {out}: cannot write there ({_why(err)})") from None
    return Staged(out, tmp, True, force, flag, created)


def claim_new_dir(parent: str | Path, stem: str, flag: str = "--out") -> Staged:
    """Claim `parent/<stem>-<n>` for the first n whose directory does not exist yet (made
    exclusively, so two runs started together get different n)."""
    parent = Path(parent)
    n = 1
    while True:
        out = parent / f"{stem}-{n}"
        if not out.exists():
            try:
                return claim_dir(out, False, flag)
            except InputError:
                if not out.exists():
                    raise       # not a lost race: the directory cannot be made at all
        n += 1


def claim_file(path: str | Path, force: bool, flag: str = "--out") -> Staged:
    """Claim file `path` before any work: absent, or present with --force, and writable.
    The temporary sibling keeps the suffix (writers choose the format by it)."""
    out = Path(path)
    fresh_file(out, force, flag)
    created = _make_parents(out, flag)
    claim = file_claim(out)
    try:
        _write_claim(claim)
    except FileExistsError:
        try:
            _take_over(claim, flag, out)
        except InputError:
            _remove_dirs(created)
            raise
    except OSError as err:
        _remove_dirs(created)
        raise InputError(f"{flag} {out}: cannot write there ({_why(err)})") from None
    sweep_stale(out.parent, out.stem, out.suffix)
    try:
        fd, tmp = tempfile.mkstemp(prefix=_tmp_prefix(out.stem), suffix=out.suffix, dir=out.parent)
        os.close(fd)
        os.chmod(tmp, 0o666 & ~_umask())
    except OSError as err:
        claim.unlink(missing_ok=True)
        _remove_dirs(created)
        raise InputError(f"{flag} {out}: cannot write there ({_why(err)})") from None
    return Staged(out, Path(tmp), False, force, flag, created)


def file_claim(out: Path) -> Path:
    """The claim file of file `out` while a command writes it: `.NAME.memtrade-claim` beside it."""
    return out.with_name(f".{out.name}{CLAIM}")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
