"""``govsync import``: manifests for the objects the server holds and no state records."""

from __future__ import annotations

import sys

import click

from govsync import runtime
from govsync.adoption import READS_IN_FLIGHT, import_objects
from govsync.cli.root import global_options
from govsync.commands.workspace import read_snapshot, recorded_elsewhere
from govsync.errors import MigrateError
from govsync.settings import Settings


@click.command("import")
@global_options
@click.option("--kind", "kinds", multiple=True, metavar="KIND",
              help="Only this kind (repeatable; default: every kind govsync can find).")
@click.option("--name", "name_glob", metavar="GLOB",
              help="Only objects whose name matches (shell-style: 'prod-*').")
@click.option("--out", "out_dir", default="imported", show_default=True, type=click.Path(),
              help="The folder to write: new, empty, or written by an earlier `govsync "
                   "import` (then only what changed is rewritten).")
def import_command(settings: Settings, kinds: tuple[str, ...], name_glob: str | None,
                   out_dir: str) -> None:
    """Write manifests for what the server holds and the state does not record.

    Reads every object of each kind through its List (api-lifecycle.md), or
    a kind without one by its Get per object it belongs to (a connector's AI
    provider, per connector; the kinds nothing finds are named on stderr), and
    writes to --out a manifest for each one the workspace's state does not
    record, with references between them as `*Ref`, `{fromEnv: VAR}` in place
    of every secret (no read returns one; the variables to set are listed),
    and an Import document each, so that `govsync plan` adopts them: no
    create, no update. Nothing is written unless all of it is valid.

    \b
    Example:
      govsync import --endpoint https://api.example.com --out imported/
      govsync import --kind Policy --kind Hook --name 'prod-*' --out imported/
      govsync plan manifests/ imported/     # every imported object an import
    """

    try:
        done = import_objects(runtime.client(settings, connections=READS_IN_FLIGHT, reads=True),
                              read_snapshot(settings), out_dir, kinds=kinds,
                              name_glob=name_glob,
                              elsewhere=lambda ids: recorded_elsewhere(settings, ids))
    except MigrateError as exc:
        for line in exc.problems:
            click.echo(f"Error: {line}", err=True)
        sys.exit(1)
    for line in done.unlisted:
        click.echo(f"Not read: {line}", err=True)
    for line in done.skipped:
        click.echo(f"Left out: {line}", err=True)
    if not done.found:
        click.echo(f"Nothing to import: the state records every object found "
                   f"({done.recorded}); nothing was written.")
        return
    click.echo(f"Imported {len(done.found)} object{'s' if len(done.found) != 1 else ''} "
               f"into {out_dir} ({done.recorded} already recorded in the state).")
    if done.variables:
        click.echo(f"Set {len(done.variables)} secret variable"
                   f"{'s' if len(done.variables) != 1 else ''} before planning: "
                   + ", ".join(done.variables))
