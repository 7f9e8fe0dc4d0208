"""What a person at a terminal sees while apply runs (issue 23): a progress bar,
and one line per object kept in the scrollback."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

HOOKS = "".join(
    f"---\napiVersion: govsync/v1\nkind: Hook\nmetadata: {{name: t{i}}}\n"
    f"spec: {{code: \"def handler(e):\\n    return 1\\n\", timeoutMs: 100}}\n" for i in range(3))


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="no pseudo-terminals here")
def test_the_progress_bar_leaves_a_line_per_object(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "hooks.yaml").write_text(HOOKS)
    primary, secondary = os.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOVSYNC_")
           and k != "NO_COLOR"}
    env.update(TERM="xterm", COLUMNS="120")
    proc = subprocess.Popen(
        [sys.executable, "-m", "govsync", "apply", "m", "--endpoint", "local",
         "--auto-approve"], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
        stdout=secondary, stderr=secondary)
    os.close(secondary)
    seen = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([primary], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(primary, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=30)
    os.close(primary)
    text = seen.decode(errors="replace")
    assert proc.returncode == 0, text
    for i in range(3):
        assert f"Hook/t{i}: create applied (id " in text, text
    assert "Changing workspace 'default', endpoint local, state .govsync/state.db" in text
