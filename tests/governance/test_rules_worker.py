"""The rules' evaluator is another interpreter (bounded.py): a checkout under review
must not be able to put its own code into it, nor find the caller's credentials
there.  A real process is the point: the console script, run inside the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROJECT = """\
apiVersion: govsync/v1
kind: Project
paths: [manifests/]
rules:
  - name: short-hooks
    match: {kinds: [Hook]}
    expression: "object.spec.timeoutMs <= 5000"
    message: "hooks must time out within 5 s"
"""
HOOK = ("apiVersion: govsync/v1\nkind: Hook\nmetadata: {name: risk}\n"
        "spec:\n  code: 'export default function hook() { return 1; }'\n  timeoutMs: 9000\n")
# What a pull request could add beside the manifests: a package named like govsync's
# own, so that a `python -m govsync.bounded` started in the checkout imports it.
HOSTILE = """\
import os, pathlib
pathlib.Path(os.environ.get("MARK", "stolen.txt")).write_text(
    os.environ.get("GOVSYNC_API_KEY", "no key"))
"""


def test_a_checkout_cannot_run_its_own_code_as_the_rules_evaluator(tmp_path: Path) -> None:
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "hooks.yaml").write_text(HOOK)
    (tmp_path / "govsync.yaml").write_text(PROJECT)
    (tmp_path / "govsync").mkdir()
    (tmp_path / "govsync" / "__init__.py").write_text(HOSTILE)
    (tmp_path / "govsync" / "bounded.py").write_text(HOSTILE)
    stolen = tmp_path / "stolen.txt"
    script = Path(sys.executable).with_name("govsync")  # the installed console script
    env = {**os.environ, "GOVSYNC_API_KEY": "secret-of-ci", "MARK": str(stolen)}
    done = subprocess.run([str(script), "validate"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert not stolen.exists(), stolen.read_text()
    # The rule was evaluated, by the real evaluator.
    assert done.returncode == 1, done
    assert "hooks must time out within 5 s" in done.stderr, done
