"""bench/ui: the dashboard at 10,000 objects, and the plan file of 1,000 changes.

Makes a project of two environments over N generated objects (bench/plan's
generator: hooks, policies, suspensions, reports, spaces, connectors...):
``prod`` recorded as applied (its state written as an apply records it), with
1% of its hooks' code changed by one character since; ``staging`` never
applied (N creates pending).  Then:

* server: ``govsync ui`` as a process on loopback; once it has planned both
  environments, each page GET --runs times (loopback included, so the figure
  is an upper bound of the server's time): the overview, prod's page (first
  page of its changes) and staging's, prod's plan and graph pages;
* browser: headless Chromium (Debian's, driven by Playwright; skipped when
  missing) opens the overview and prod's page: its navigation timing's
  DOMContentLoaded (the deferred scripts have run: the page is interactive)
  and load; and the graph of N objects;
* plan file: ``govsync plan --format html`` of M creates (a set of its own):
  bytes and seconds.

Usage: python bench/ui/run.py [--objects 10000] [--changes 1000] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "plan"))

from common import compile_package  # noqa: E402
from generate import applied_entries, write  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
BROWSER_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync",
                "--proxy-server=http://127.0.0.1:9",
                "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"]
PROJECT = """\
apiVersion: govsync/v1
kind: Project
paths: [manifests/]
environments:
  staging: {}
  prod: {}
"""


def make_project(root: str, objects: int) -> None:
    from govsync.state import empty_snapshot
    from govsync.state.sqlite import SqliteStore

    manifests = os.path.join(root, "manifests")
    write(objects, manifests)
    with open(os.path.join(root, "govsync.yaml"), "w") as fh:
        fh.write(PROJECT)
    os.makedirs(os.path.join(root, ".govsync"))
    entries = applied_entries(manifests, empty_snapshot("prod"))
    with SqliteStore(os.path.join(root, ".govsync", "state.db")) as store:
        store.snapshot("prod")  # made
        store.put_many("prod", entries)
    # 1% of the hooks' code changed by one character since it was applied.
    hooks = max(1, objects // 100)
    changed = 0
    for name in sorted(os.listdir(manifests)):
        path = os.path.join(manifests, name)
        with open(path) as fh:
            text = fh.read()
        while changed < hooks and "{'allow': True}" in text:
            text = text.replace("{'allow': True}", "{'allow': False}", 1)
            changed += 1
        with open(path, "w") as fh:
            fh.write(text)


def fetch(url: str) -> tuple[float, int]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=300) as response:
        body = response.read()
    return time.perf_counter() - start, len(body)


def start_ui(root: str) -> tuple[subprocess.Popen[bytes], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOVSYNC_")}
    proc = subprocess.Popen([sys.executable, "-m", "govsync", "ui", "--listen", "127.0.0.1:0"],
                            cwd=root, env={**env, "PYTHONUNBUFFERED": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    if "listening on" not in line:
        proc.kill()
        raise SystemExit(f"govsync ui did not start: {line}")
    return proc, line.split("listening on ", 1)[1].strip().rstrip("/")


def browser_timings(url: str, paths: list[str]) -> list[tuple[str, float, float]] | str:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return "skipped: Playwright for Python is not installed"
    if not os.path.exists(CHROMIUM):
        return f"skipped: {CHROMIUM} is missing"
    out = []
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS,
            viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        for path in paths:
            page.goto(url + path)  # once to warm the browser's own caches
            page.goto(url + path, wait_until="load")
            timing = page.evaluate(
                "(() => { const n = performance.getEntriesByType('navigation')[0];"
                " return [n.domContentLoadedEventEnd, n.loadEventEnd]; })()")
            out.append((path, timing[0] / 1000, timing[1] / 1000))
        context.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--objects", type=int, default=10000)
    parser.add_argument("--changes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()
    compile_package()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}")
    root = tempfile.mkdtemp(prefix="bench-ui-")
    try:
        start = time.perf_counter()
        make_project(root, args.objects)
        print(f"project: {args.objects} objects, prod applied (1% of hooks changed), staging "
              f"new ({time.perf_counter() - start:.1f} s to make)")
        proc, url = start_ui(root)
        try:
            start = time.perf_counter()
            fetch(url + "/")  # plans both environments
            print(f"first page (both environments planned): {time.perf_counter() - start:.2f} s")
            print(f"\n{'page':<40} {'min ms':>8} {'median':>8} {'max':>8} {'KB':>8}")
            pages = ["/", "/environments/prod", "/environments/staging",
                     "/environments/prod/plan", "/environments/prod/graph"]
            for path in pages:
                times, size = [], 0
                for _ in range(args.runs):
                    seconds, size = fetch(url + path)
                    times.append(seconds * 1000)
                print(f"{path:<40} {min(times):>8.1f} {statistics.median(times):>8.1f} "
                      f"{max(times):>8.1f} {size / 1024:>8.0f}")
            if not args.no_browser:
                found = browser_timings(url, ["/", "/environments/prod",
                                              "/environments/prod/graph"])
                if isinstance(found, str):
                    print(f"\nbrowser: {found}")
                else:
                    print(f"\n{'in headless Chromium':<40} {'DOMContentLoaded s':>19} "
                          f"{'load s':>8}")
                    for path, ready, loaded in found:
                        print(f"{path:<40} {ready:>19.3f} {loaded:>8.3f}")
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        changes = os.path.join(root, "changes")
        write(args.changes, changes)
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "govsync", "plan", "--env", "staging",
                               changes, "--format", "html"], cwd=root, capture_output=True, check=True,
                              env={k: v for k, v in os.environ.items()
                                   if not k.startswith("GOVSYNC_")})
        seconds = time.perf_counter() - start
        print(f"\nplan file: govsync plan --format html of {args.changes} creates: "
              f"{len(done.stdout) / 1e6:.2f} MB in {seconds:.2f} s")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
