"""`govsync test`: the PolicyTest cases of the manifests, decided by their policies' code
(policytests.run), offline: no state, no API."""

from __future__ import annotations

import os
import sys
import time

import click

from govsync.cli.root import load, out, paths_argument, project_options
from govsync.errors import GovsyncError, ManifestError
from govsync.policytests import Report, run
from govsync.project import Selection
from govsync.render.testreport import junit_xml, report_json, report_lines

# How often --watch looks at the files' modification times.
WATCH_SECONDS = 0.5


@click.command("test")
@paths_argument
@project_options
@click.option("--target", "targets", multiple=True, metavar="PATTERN",
              help="Only the tests of this policy (Policy/name, or a glob such as "
                   "'Policy/pii-*') or this PolicyTest (PolicyTest/name); repeatable.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True,
              help="json: {formatVersion, tests: [{policy, test, case, stage, status, "
                   "decision, expected, message, ...}], summary: {passed, failed, errors}}.")
@click.option("--junit", "junit", metavar="FILE", type=click.Path(dir_okay=False),
              help="Also write the results as JUnit XML (one test suite per policy).")
@click.option("--require-tests", is_flag=True,
              help="Exit 1 when there is no test case at all.")
@click.option("--watch", is_flag=True,
              help="Run again whenever a manifest or the project file changes (Ctrl-C "
                   "stops).")
def test_command(paths: tuple[str, ...], selection: Selection, targets: tuple[str, ...],
                 fmt: str, junit: str | None, require_tests: bool, watch: bool) -> None:
    """Run the PolicyTest cases: each policy's code decides each case's input.

    A hook the code reads (input.hooks.<name>) and the case does not give a
    result for is run: its JavaScript, sandboxed (no network, no file system,
    its timeoutMs, the case's env). Nothing is sent to the API and no state is
    read. Exit 0 when every case passes (also when there is none, unless
    --require-tests), 1 when one fails or errs. In a project with
    environments and no --env, every environment is tested.

    \b
    Example:
      govsync test manifests/
      govsync test --env prod --format json | jq '.tests[] | select(.status != "passed")'
      govsync test --target 'Policy/pii-*' --junit policy-tests.xml
    """
    if not watch:
        sys.exit(_once(paths, selection, targets, fmt, junit, require_tests))
    seen = None
    try:
        while True:
            try:
                _once(paths, selection, targets, fmt, junit, require_tests)
            except GovsyncError as exc:  # a manifest being edited: say it, wait for the next
                for line in _error_lines(exc):
                    click.echo(line, err=True)
            seen = _wait(selection, paths, seen)
    except KeyboardInterrupt:
        sys.exit(130)


def _once(paths: tuple[str, ...], selection: Selection, targets: tuple[str, ...], fmt: str,
          junit: str | None, require_tests: bool) -> int:
    report = Report()
    started = time.monotonic()
    for each in selection.each_environment():
        manifests = load(paths, each, short=True)
        found = run(manifests, targets=targets, environment=each.name)
        report.outcomes.extend(found.outcomes)
    seconds = time.monotonic() - started
    if junit:
        try:
            with open(junit, "wb") as fh:
                fh.write(junit_xml(report, seconds))
        except OSError as exc:
            raise GovsyncError(f"cannot write {junit}: {exc.strerror}") from None
    if fmt == "json":
        click.echo(report_json(report), nl=False)
    elif not out().quiet or not report.ok:
        for line in report_lines(report, verbose=out().verbose > 0):
            click.echo(line)
    if not report.outcomes and require_tests:
        click.echo("no test cases: --require-tests asks for at least one (kind: PolicyTest)",
                   err=True)
        return 1
    return 0 if report.ok else 1


def _error_lines(exc: GovsyncError) -> list[str]:
    if isinstance(exc, ManifestError):
        return [str(p) for p in exc.problems]
    return [f"Error: {exc}"]


def _wait(selection: Selection, paths: tuple[str, ...],
          seen: dict[str, tuple[int, int]] | None) -> dict[str, tuple[int, int]]:
    """Until a file under the paths (or the project file) changes: their stamps."""
    before = seen if seen is not None else _stamps(selection, paths)
    while True:
        time.sleep(WATCH_SECONDS)
        now = _stamps(selection, paths)
        if now != before:
            click.echo("", err=True)
            return now


def _stamps(selection: Selection, paths: tuple[str, ...]) -> dict[str, tuple[int, int]]:
    found: dict[str, tuple[int, int]] = {}
    roots = [*selection.paths(paths)]
    if selection.project is not None:
        roots.append(selection.project.file)
    for root in roots:
        for folder, _, files in os.walk(root) if os.path.isdir(root) else [("", [], [root])]:
            for name in files:
                path = os.path.join(folder, name)
                if path.endswith((".yaml", ".yml")):
                    try:
                        st = os.stat(path)
                    except OSError:
                        continue
                    found[path] = (st.st_mtime_ns, st.st_size)
    return found
