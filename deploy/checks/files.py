"""The digests of the files `explore deploy` wrote (manifest key "files": relative path ->
SHA-256): verified when a deployment is loaded, and the words for a step that fails.

`verify` runs where a deployment is loaded (`explore run`, `memtrade.Session`, through
deploy/checks/manifest_check.py): every recorded file hashed once, and every step model
and reference the manifest names must be among them, so a model or reference with one byte
changed, or gone, is refused before anything is allocated or run, in one line naming the
file. A manifest without the key (written by hand) is not verified.

A step model that fails to load or run while every file is as deploy wrote it was made
wrong by memtrade (the deploy-time check, deploy/checks/step_models.py, missed it): the line
says so and asks for a report. Only a file that differs from its digest, or is missing,
makes the deployment "damaged or edited". A manifest without digests cannot tell.
"""
from __future__ import annotations

from pathlib import Path

from csdf.zoo.cache import sha256_file
from sdf3.errors import InputError

KEY = "files"


class Damaged(InputError):
    """A file of a deployment is not as `explore deploy` wrote it."""


digest = sha256_file     # a file's SHA-256, hex, read in blocks (the zoo's cache check too)


def digests(root: str | Path, rels: list[str]) -> dict[str, str]:
    """SHA-256 of each file `rels` names under `root`, in sorted order."""
    return {rel: digest(Path(root) / rel) for rel in sorted(set(rels))}


def verify(manifest, root: str | Path) -> None:
    """Raise Damaged for the first file of the deployment (a
    deploy.runtime.manifest_records.Manifest) that is not as `explore deploy` wrote it."""
    recorded = manifest.files
    if not recorded:
        return
    root = Path(root)

    def fail(line: str) -> None:
        raise Damaged(line)
    named = list(manifest.models) + [c.reference for c in manifest.cnns.values() if c.reference]
    for rel in named:
        if rel not in recorded:
            fail(f"{root / rel}: not among the files `explore deploy` recorded (key '{KEY}'): the "
                 f"deployment is damaged or was edited; deploy it again")
    for rel, want in sorted(recorded.items()):
        path = root / rel
        if not inside(root, path):
            fail(f"{root / 'manifest.json'}: key '{KEY}': {rel!r} leads outside the deployment directory")
        if not path.is_file():
            fail(f"{path}: the file is gone: the deployment is damaged or was edited; deploy it again")
        if digest(path) != want:
            fail(f"{path}: differs from what `explore deploy` wrote (its SHA-256 is not the one "
                 f"in key '{KEY}'): the deployment is damaged or was edited; deploy it again")


def inside(root: Path, path: Path) -> bool:
    """Whether `path`, links resolved, lies inside directory `root`."""
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def changed(manifest, root: str | Path) -> list[str] | None:
    """The files of the deployment (a deploy.runtime.manifest_records.Manifest) that differ
    from what deploy wrote (or are gone); None when the manifest holds no digests."""
    recorded = manifest.files
    if not recorded:
        return None
    out = []
    for rel, want in sorted(recorded.items()):
        path = Path(root) / str(rel)
        if not path.is_file() or digest(path) != want:
            out.append(str(rel))
    return out


def blame(manifest, root: str | Path) -> str:
    """The words that end a step failure's line: whose fault it is."""
    found = changed(manifest, root)
    if found is None:
        return "the deployment may be damaged or edited; deploy it again"
    if found:
        more = f" and {len(found) - 1} more" if len(found) > 1 else ""
        return (f"{found[0]}{more} differ from what `explore deploy` wrote: the deployment is "
                f"damaged or was edited; deploy it again")
    return ("every file is as `explore deploy` wrote it: this is a fault of memtrade, please "
            "report it with the deployment")
