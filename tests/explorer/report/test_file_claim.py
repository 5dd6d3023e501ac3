"""A claimed output file (explorer/report/outputs.py claim_file): claimed exclusively before
any work, so a second command into the same file (`explore profile --out`, `explore run
--output`) is refused at once, with or without --force, while the first holds it; the claim
goes when the first commits, fails or is interrupted, and a claim whose process is gone is
taken over."""
from __future__ import annotations

import os
import time

import pytest

from explorer.cli.main import main
from explorer.report.outputs import claim_file, file_claim
from refusals import one_line
from sdf3.errors import InputError

ENDINGS = {"commit": None, "error": ValueError, "interrupt": KeyboardInterrupt}


@pytest.mark.parametrize("ending", list(ENDINGS))
@pytest.mark.parametrize("force", [False, True])
def test_a_held_claim_refuses_a_second_and_goes_with_the_first(tmp_path, ending, force):
    path = tmp_path / "profile.yaml"
    staged = claim_file(path, False)
    assert file_claim(path).read_text().split()[0] == str(os.getpid())
    with pytest.raises(InputError, match="another memtrade command is writing there"):
        claim_file(path, force)
    stop = ENDINGS[ending]
    try:
        with staged as tmp:
            tmp.write_text("ours")
            if stop is not None:
                raise stop()
    except (ValueError, KeyboardInterrupt):
        pass
    assert not file_claim(path).exists()
    assert path.exists() == (ending == "commit")
    assert sorted(p.name for p in tmp_path.iterdir()) == (["profile.yaml"] if ending == "commit" else [])
    claim_file(path, True).discard()            # free again (--force over the committed file)


def test_the_claim_of_a_process_that_is_gone_is_taken_over(tmp_path, capsys):
    import subprocess
    import sys
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    path = tmp_path / "p.yaml"
    file_claim(path).write_text(f"{gone} {os.uname().nodename}\n")
    staged = claim_file(path, False)
    assert f"process {gone}) is gone; taking its claim over" in capsys.readouterr().err
    staged.discard()
    assert not file_claim(path).exists()


def test_explore_profile_into_a_claimed_file_is_refused_before_measuring(tmp_path, capsys):
    from conftest import write_tiny_onnx
    write_tiny_onnx(tmp_path / "tiny.onnx")
    (tmp_path / "app.yaml").write_text("name: t\ncnns:\n  - {name: tiny, model: tiny.onnx}\n")
    out = tmp_path / "p.yaml"
    held = claim_file(out, False)              # a first `explore profile` at work
    began = time.monotonic()
    assert main(["profile", str(tmp_path / "app.yaml"), "--out", str(out)]) == 2
    one_line(capsys.readouterr().err, "", [f"--out {out}: another memtrade command is writing there"])
    assert time.monotonic() - began < 10     # no layer measured
    held.discard()
