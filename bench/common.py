"""What the benchmarks share: compiled bytecode, and the reference server on loopback.

``compile_package``: a wheel install compiles every module when it installs;
an editable install writes ``__pycache__`` on the first run, unless
PYTHONDONTWRITEBYTECODE is set (as on the machines these figures come from),
in which case every run compiles govsync's ~60 modules from source again
(~30 ms).  The benchmarks time govsync as a user runs it, so they compile the
package once first.

``start_server``: ``govsync serve`` on a loopback port of its own (the
server binds port 0 and reports it) with its own ``--db``, waited for until
it answers.
"""

from __future__ import annotations

import compileall
import importlib.util
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEY = "bench-key"
SEED = os.path.join(ROOT, "examples", "server-seed.yaml")


def compile_package() -> None:
    spec = importlib.util.find_spec("govsync")
    assert spec is not None and spec.origin is not None, "govsync is not installed"
    compileall.compile_dir(os.path.dirname(spec.origin), quiet=1)


def get(url: str, path: str, timeout: float = 120) -> bytes:
    """GET a path of the server with the benchmarks' key."""
    req = urllib.request.Request(url + path, headers={"X-API-KEY": KEY})
    with urllib.request.urlopen(req, timeout=timeout) as response:
        return bytes(response.read())


def start_server(db: str, *, latency_ms: int = 0, seed: bool = True,
                 extra: list[str] | None = None,
                 wait: float = 300) -> tuple[subprocess.Popen[bytes], str]:
    """``govsync serve --db DB`` on a loopback port of its own: the process and its URL.

    The server binds port 0 and says which port it got (its "listening on"
    line): a port chosen here and bound there could be taken in between, by
    another benchmark's server with the same key."""
    import threading

    proc = subprocess.Popen(
        [sys.executable, "-m", "govsync", "serve", "--port", "0", "--db", db,
         "--api-key", KEY, *(["--seed", SEED] if seed else []),
         *(["--latency-ms", str(latency_ms)] if latency_ms else []), *(extra or [])],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stderr is not None
    found: list[str] = []
    said = threading.Event()

    def read() -> None:  # the first "listening on" line; the rest is drained
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode(errors="replace")
            if not found and " listening on " in line:
                found.append(line.split(" listening on ", 1)[1].split()[0])
                said.set()
        said.set()

    threading.Thread(target=read, daemon=True).start()
    if not said.wait(wait) or not found:
        proc.kill()
        raise SystemExit(f"server did not start (exit code {proc.poll()})")
    url = found[0]
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            get(url, "/_govsync/health", timeout=1)
            return proc, url
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"server exited with {proc.returncode}") from None
            time.sleep(0.02)
    proc.kill()
    raise SystemExit("server did not start")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
