"""``govsync import``: manifests for the objects the server holds and no state records."""

from __future__ import annotations

import sys

import click

from govsync import runtime
from govsync.adoption import READS_IN_FLIGHT, import_objects
from govsync.cli.root import global_options
from govsync.commands.workspace import read_snapshot, recorded_elsewhere
from govsync.errors import MigrateError
from govsync.importfolders import layout
from govsync.manifests.manifest import Context
from govsync.settings import Settings


@click.command("import")
@global_options
@click.option("--kind", "kinds", multiple=True, metavar="KIND",
              help="Only this kind (repeatable; default: every kind govsync can find).")
@click.option("--name", "name_glob", metavar="GLOB",
              help="Only objects whose name matches (shell-style: 'prod-*').")
@click.option("--out", "out_dir", type=click.Path(),
              help="The folder of the manifests: new, empty, or written by an earlier "
                   "`govsync import` (new objects are added; nothing written before is "
                   "rewritten). Default: imported; with --env, imported/ in the first of "
                   "its paths every environment reads.")
@click.option("--env-out", "env_out", type=click.Path(),
              help="With --env: the folder of its Import and Patch documents (ids and "
                   "secret variables differ per environment). Default: imported/ in the "
                   "first of its paths no other environment reads.")
@click.option("--merge", is_flag=True,
              help="Where a file to add to was edited since (or was not written by "
                   "`govsync import`), write the new objects in a new file beside it "
                   "instead of refusing.")
def import_command(settings: Settings, kinds: tuple[str, ...], name_glob: str | None,
                   out_dir: str | None, env_out: str | None, merge: bool) -> None:
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

    selection = settings.selection
    project = selection.project
    where = layout(selection.name, selection.paths(()) if selection.name else (),
                   [project.paths(e) or () for e in project.environments.values()]
                   if project is not None else [], out_dir, env_out)
    try:
        done = import_objects(runtime.client(settings, connections=READS_IN_FLIGHT, reads=True),
                              read_snapshot(settings), where, kinds=kinds,
                              name_glob=name_glob,
                              elsewhere=lambda ids: recorded_elsewhere(settings, ids),
                              merge=merge,
                              context=Context(selection.variables(), selection.name))
    except MigrateError as exc:
        for line in exc.problems:
            click.echo(f"Error: {line}", err=True)
        sys.exit(1)
    for line in done.unlisted:
        click.echo(f"Not read: {line}", err=True)
    for line in done.skipped:
        click.echo(f"Left out: {line}", err=True)
    placed = done.placed
    for line in placed.absent if placed is not None else ():
        click.echo(f"Not on the server: {line}", err=True)
    adopted = placed.imports if placed is not None else []
    if not adopted:
        already = len(placed.already) if placed is not None else 0
        click.echo(f"Nothing to import: of the objects found, {done.recorded} are recorded "
                   f"in the state and {already} adopted by Import documents already; "
                   "nothing was written.")
        return
    assert placed is not None
    into = where.shared if where.own is None else f"{where.shared} and {where.own}"
    click.echo(f"Imported {len(adopted)} object{'s' if len(adopted) != 1 else ''} "
               f"into {into} ({done.recorded} already recorded in the state).")
    if where.own is not None:
        click.echo(f"Manifests: {len(placed.shared)} shared (in {where.shared}), "
                   f"{len(placed.own)} of environment {where.environment} only, "
                   f"{len(adopted) - len(placed.shared) - len(placed.own)} defined already; "
                   f"{len(placed.patches)} Patch document(s) in {where.own}.")
    if done.variables:
        click.echo(f"Set {len(done.variables)} secret variable"
                   f"{'s' if len(done.variables) != 1 else ''} before planning: "
                   + ", ".join(done.variables))
