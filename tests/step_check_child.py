"""The step-model check of `explore deploy` (deploy/checks/step_models.py) as one child
process that serves the whole test session (tests/conftest.py `_step_check_child`).

`explore deploy` runs `python -m deploy.checks.step_models` once per deployment: a fresh
interpreter that imports onnx and ONNX Runtime, then loads each step model as `explore run`
would (`check_model`). In the tests that start-up is most of a small deployment's time (the
tests under tests/deploy/steps spent two thirds of their time in it). This child makes the
same `check_model` calls, in a process of its own as the real child, for one request after
another: a request is one line of JSON (the caller's working folder, and the paths in
order, relative ones read from that folder as the real child reads them), the answer one line
`STEPCHECK <json>`: [index, reason] of the first path refused, or null, as
`first_refused` returns it ({"error": ...} if this child could not answer)."""
from __future__ import annotations

import json
import os
import sys

TAG = "STEPCHECK "


def main() -> None:
    from deploy.checks.step_models import check_entry
    for line in sys.stdin:
        try:
            request = json.loads(line)
            os.chdir(request["cwd"])
            found = None
            for i, path in enumerate(request["paths"]):
                why = check_entry(path)
                if why is not None:
                    found = [i, why]
                    break
        except Exception as err:      # the caller runs the real child for this request
            found = {"error": repr(err)}
        sys.stdout.write(TAG + json.dumps(found) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
