"""Output paths: an --out that cannot be written is refused before any work, the
default directory is a safe name under runs/, directories are claimed atomically, and a
failed or interrupted command leaves no partial output behind."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from explorer.cli.main import main
from explorer.report.outputs import MAX_NAME, claim_dir, claim_file, claim_new_dir, safe_name
from sdf3.errors import InputError
from deploy_fixtures import tiny_plan_file

ROOT = Path(__file__).resolve().parents[3]
WORKED = ROOT / "apps" / "worked_example.yaml"


def _one_line(capsys, *words: str) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("explore: ") and "\n" not in err and "Traceback" not in err, err
    for w in words:
        assert w in err, (w, err)
    return err


def _unwritable(tmp_path: Path) -> dict[str, Path]:
    plain = tmp_path / "plain.txt"
    plain.write_text("a regular file")
    return {"proc": Path("/proc/memtrade-x"), "under a file": plain / "x",
            "deep under a file": plain / "a" / "b"}


# ---- refused before any work -----------------------------------------------------------------
@pytest.mark.parametrize("where", ["proc", "under a file", "deep under a file"])
@pytest.mark.parametrize("command", ["explore", "csdf", "deploy", "profile"])
def test_unwritable_out_is_refused_before_any_work(tmp_path, capsys, command, where):
    out = _unwritable(tmp_path)[where]
    missing = str(tmp_path / "no-such-input")       # the work would fail on this first
    argv = {"explore": [missing, "--out", str(out)],
            "csdf": ["csdf", missing, "--out", str(out)],
            "deploy": ["deploy", missing, "--out", str(out)],
            "profile": ["profile", missing, "--out", str(out)]}[command]
    assert main(argv) == 2
    _one_line(capsys, f"--out {out}: cannot write there")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain.txt"]


# ---- the default directory ----------------------------------------------------------------------
@pytest.mark.parametrize("name, expected", [
    ("worked-example", "worked-example"), ("../../x", "x"), ("/etc/cron.d/x", "etc_cron.d_x"),
    ("a" * 300, "a" * MAX_NAME), ("..", "app"), ("Ünïcode name", "n_code_name"), ("a..b", "a_b"), ("", "app")])
def test_safe_name_is_a_name_never_a_path(name, expected):
    safe = safe_name(name)
    assert safe == expected
    assert "/" not in safe and not safe.startswith(".") and 0 < len(safe) <= MAX_NAME


@pytest.mark.parametrize("name", ["../../escaped", "/tmp/memtrade-absolute", "n" * 5000])
def test_default_out_stays_under_runs(tmp_path, monkeypatch, capsys, name):
    doc = yaml.safe_load(WORKED.read_text())
    doc["name"] = name
    app = tmp_path / "app" / "app.yaml"
    app.parent.mkdir()
    app.write_text(yaml.safe_dump(doc))
    work = tmp_path / "work" / "deep"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    assert main([str(app), "--mem", "1MB", "--quiet"]) == 0
    (made,) = (work / "runs").iterdir()
    assert made.name == f"{safe_name(name)}-1" and (made / "plan.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app", "work"]
    assert sorted(p.name for p in work.iterdir()) == ["runs"]
    assert not Path("/tmp/memtrade-absolute").exists()


# ---- claimed atomically ----------------------------------------------------------------------
def test_one_out_cannot_be_claimed_twice(tmp_path):
    first = claim_dir(tmp_path / "out", False)
    with pytest.raises(InputError, match="another memtrade command is writing there"):
        claim_dir(tmp_path / "out", False)
    with pytest.raises(InputError, match="another memtrade command"):
        claim_dir(tmp_path / "out", True)              # --force does not take it either
    with first as tmp:
        (tmp / "a.txt").write_text("first")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.txt"]
    with pytest.raises(InputError, match="not empty"):
        claim_dir(tmp_path / "out", False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]   # no temporary siblings


def test_default_dirs_claimed_together_differ(tmp_path):
    a = claim_new_dir(tmp_path / "runs", "app")
    b = claim_new_dir(tmp_path / "runs", "app")
    assert (a.final.name, b.final.name) == ("app-1", "app-2")
    for staged, text in ((b, "b"), (a, "a")):
        with staged as tmp:
            (tmp / "who").write_text(text)
    assert [(tmp_path / "runs" / f"app-{i}" / "who").read_text() for i in (1, 2)] == ["a", "b"]


def test_force_replaces_what_it_writes_and_keeps_the_rest(tmp_path):
    out = tmp_path / "out"
    (out / "models").mkdir(parents=True)
    (out / "models" / "stale.onnx").write_text("old step")
    (out / "notes.txt").write_text("the user's")
    (out / "manifest.json").write_text("old")
    with claim_dir(out, True) as tmp:
        (tmp / "models").mkdir()
        (tmp / "models" / "new.onnx").write_text("new step")
        (tmp / "manifest.json").write_text("new")
    assert sorted(p.name for p in (out / "models").iterdir()) == ["new.onnx"]
    assert (out / "manifest.json").read_text() == "new"
    assert (out / "notes.txt").read_text() == "the user's"
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "models", "notes.txt"]


def test_claimed_file_is_not_overwritten_without_force(tmp_path):
    path = tmp_path / "p.json"
    staged = claim_file(path, False)
    assert staged.tmp.suffix == ".json" and staged.tmp.parent == tmp_path
    path.write_text("someone else's")          # taken while the work ran
    with pytest.raises(InputError, match="could not move the result into place"):
        with staged as tmp:
            tmp.write_text("ours")
    assert path.read_text() == "someone else's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json"]


# ---- failures and Ctrl-C leave nothing ------------------------------------------------------------
def test_ctrl_c_while_writing_leaves_no_out_and_says_one_line(tmp_path, monkeypatch, capsys):
    import memtrade.front_files as report     # the files of an exploration (memtrade.explore)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(report, "write_report_html", interrupted)   # after plan.json is written
    out = tmp_path / "sub" / "out"
    assert main([str(WORKED), "--mem", "1MB", "--quiet", "--out", str(out)]) == 130
    _one_line(capsys, "explore: interrupted", f"{out} not written")
    assert list(tmp_path.iterdir()) == []               # not even the parent it created
    monkeypatch.undo()
    assert main([str(WORKED), "--mem", "1MB", "--quiet", "--out", str(out)]) == 0   # rerun
    assert (out / "plan.json").is_file() and (out / "report.html").is_file()
    assert sorted(p.name for p in out.parent.iterdir()) == ["out"]


def _tiny_plan(tmp_path: Path) -> Path:
    return tiny_plan_file(tmp_path)


def test_failed_deploy_leaves_nothing_behind(tmp_path, monkeypatch, capsys):
    import deploy.runtime.manifest as mf

    plan = _tiny_plan(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())

    def fails(*args, **kwargs):      # step models are written by now; the manifest fails
        raise InputError("manifest: disk full")
    monkeypatch.setattr(mf, "save", fails)
    out = tmp_path / "dep"
    assert main(["deploy", str(plan), "--out", str(out)]) == 2
    _one_line(capsys, "disk full")
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    # into an existing deployment with --force: the old one stays whole
    monkeypatch.undo()
    assert main(["deploy", str(plan), "--out", str(out)]) == 0
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    monkeypatch.setattr(mf, "save", fails)
    assert main(["deploy", str(plan), "--out", str(out), "--force"]) == 2
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == files
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(before + ["dep"])


def _race(path: str, barrier, results) -> None:
    barrier.wait()
    try:
        claim_dir(path, False)
        results.put("won")
    except InputError as err:
        results.put(str(err))


def test_two_processes_racing_for_one_out_one_wins(tmp_path):
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    for i in range(4):
        barrier, results = ctx.Barrier(3), ctx.Queue()
        path = str(tmp_path / f"out{i}")
        procs = [ctx.Process(target=_race, args=(path, barrier, results)) for _ in range(3)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(30)
        got = sorted(results.get(timeout=5) for _ in procs)
        assert got.count("won") == 1, got
        assert all("another memtrade command is writing there" in g for g in got if g != "won")
