"""How apply reports its progress: a line per change (CI logs), a bar (a terminal),
or JSON lines (scripts)."""

from __future__ import annotations

from typing import Any

import click

from govsync.apply import DONE, ApplyResult, ChangeOutcome, ChangeStatus
from govsync.formats import FORMAT_VERSION
from govsync.render.documents import dumps

COLORS = {ChangeStatus.APPLIED: "green", ChangeStatus.FORGOTTEN: "green", ChangeStatus.FAILED: "red",
          ChangeStatus.UNCERTAIN: "cyan", ChangeStatus.SKIPPED: "yellow"}


class LineReporter:
    """One line per finished change (CI logs): address, action, outcome."""

    def __init__(self, color: bool, quiet: bool = False) -> None:
        self.color = color
        self.quiet = quiet

    def start(self, total: int) -> None:
        if not self.quiet:
            click.echo(f"Applying {total} change(s)...", err=True)

    def finished(self, o: ChangeOutcome) -> None:
        if self.quiet and o.status in DONE:
            return
        fg = COLORS.get(o.status)
        detail = f" (id {o.id})" if o.status == ChangeStatus.APPLIED and o.id else ""
        if o.error:
            detail = f": {o.code + ' ' if o.code else ''}{o.error}"
        line = f"{o.address}: {o.action} {click.style(o.status, fg=fg) if self.color else o.status}"
        click.echo(f"{line}{detail} [{o.seconds:.2f}s]", err=True, color=self.color)

    def close(self) -> None:
        pass


class ProgressReporter(LineReporter):
    """A progress bar on a terminal, with every finished change printed above it as
    LineReporter prints it, so the scrollback keeps one line per object."""

    def start(self, total: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        self.progress = Progress("[progress.description]{task.description}", BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(), transient=True,
                                 console=Console(stderr=True))
        self.task = self.progress.add_task("Applying", total=total)
        self.progress.start()

    def finished(self, o: ChangeOutcome) -> None:
        self.progress.advance(self.task)
        if self.quiet and o.status in DONE:
            return
        detail = f" (id {o.id})" if o.status == ChangeStatus.APPLIED and o.id else ""
        if o.error:
            detail = f": {o.code + ' ' if o.code else ''}{o.error}"
        self.progress.console.print(f"{o.address}: {o.action} {o.status}{detail} "
                                    f"[{o.seconds:.2f}s]", markup=False, highlight=False,
                                    style=COLORS.get(o.status))

    def close(self) -> None:
        self.progress.stop()


class JsonReporter:
    """``apply --format json``: one JSON line per change on stdout as it finishes,
    and :meth:`summary` for the last line.  Nothing else goes to stdout."""

    def start(self, total: int) -> None:
        pass

    def finished(self, o: ChangeOutcome) -> None:
        click.echo(dumps(change_line(o)), nl=False)

    def close(self) -> None:
        pass

    def summary(self, result: ApplyResult, stopped: str = "") -> None:
        click.echo(dumps(summary_line(result, stopped)), nl=False)


def change_line(o: ChangeOutcome) -> dict[str, Any]:
    line: dict[str, Any] = {
        "formatVersion": FORMAT_VERSION, "type": "change", "address": o.address,
        "action": o.action, "outcome": o.status, "id": o.id, "seconds": round(o.seconds, 3),
    }
    if o.error:
        line["error"] = o.error
    if o.code:
        line["code"] = o.code
    return line


def summary_line(result: ApplyResult, stopped: str = "") -> dict[str, Any]:
    """The last line; ``stopped``: an error that ended the apply before its changes did."""
    why = stopped or result.stopped
    return {
        "formatVersion": FORMAT_VERSION, "type": "summary", "counts": result.summary(),
        "requests": result.requests, "seconds": round(result.seconds, 3),
        "ok": result.ok and not why, "stopped": why or None,
    }
