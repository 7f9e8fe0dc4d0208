"""`govsync state ...` and `govsync audit export`: the recorded state and its history."""

from __future__ import annotations

import json
from typing import Any

import click

from govsync.cli.root import echo_json, global_options, json_errors, load, out
from govsync.commands import state_commands
from govsync.commands.workspace import read_snapshot
from govsync.errors import GovsyncError, StateError
from govsync.render.documents import state_history_public, state_list_public
from govsync.settings import Settings


@click.group()
def state() -> None:
    """Inspect and repair the recorded state of a workspace.

    \b
    Example:
      govsync state list
      govsync state resolve Hook/risk --id hook-123
    """


@state.command("list")
@json_errors
@global_options
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def state_list(settings: Settings, fmt: str) -> None:
    """List the addresses in state with their ids and statuses.

    \b
    Example:
      govsync state list --workspace prod
    """

    snap = read_snapshot(settings)
    if fmt == "json":
        echo_json(state_list_public(snap))
        return
    for e in snap.entries.values():
        click.echo(f"{e.address}\t{e.id or '-'}\t{e.status}")
    if not snap.lineage:
        out().info(f"No state yet for workspace {snap.workspace!r} ({settings.state} does not "
                   "exist; the first apply creates it).")
        return
    out().info(f"{len(snap.entries)} object(s) in workspace {snap.workspace!r} "
               f"(lineage {snap.lineage}, serial {snap.serial}).")


@state.command("show")
@click.argument("address")
@global_options
def state_show(address: str, settings: Settings) -> None:
    """Show one entry: id, status, the spec last applied (secrets as fingerprints), the API's answer.

    \b
    Example:
      govsync state show Hook/risk_score
    """

    echo_json(state_commands.state_entry(settings, address).as_dict())


@state.command("forget")
@click.argument("addresses", metavar="ADDRESS...", nargs=-1, required=True)
@global_options
def state_forget(addresses: tuple[str, ...], settings: Settings) -> None:
    """Drop entries from state (the objects stay on the server).

    All of them or none: an address not in state changes nothing.

    \b
    Example:
      govsync state forget Space/old-analytics Hook/old-risk
    """

    for entry in state_commands.state_forget(settings, list(addresses)):
        click.echo(f"Forgot {entry.address} (id {entry.id}); it stays on the server.")


@state.command("import")
@click.argument("address")
@click.argument("object_id", metavar="ID")
@click.argument("paths", nargs=-1, type=click.Path())
@global_options
def state_import(address: str, object_id: str, paths: tuple[str, ...], settings: Settings) -> None:
    """Adopt an object that already exists on the server under ID.

    The manifest's current spec (found under PATHS, default: the project's
    paths for the environment, else .) becomes its baseline: the next plan
    shows no change for it. The id is verified first by reading the object
    (its Get, or its List); an id the server does not hold is refused. Where
    it cannot be read (no endpoint, a kind the API or the endpoint cannot
    read), it is recorded as given: check it yourself.

    \b
    Example:
      govsync state import Space/analytics space-0a1b2c manifests/
    """

    default = () if settings.selection.project is not None else (".",)
    entry, checked = state_commands.state_import(settings, address, object_id,
                                           load(paths or default, settings.selection))
    if checked.startswith("verified by "):
        click.echo(f"Recorded {entry.address} as {entry.id}, {checked}.")
    else:
        click.echo(f"Recorded {entry.address} as {entry.id} without verification: "
                   f"{checked}, check the id yourself.")


@state.command("mv")
@click.argument("old", metavar="FROM")
@click.argument("new", metavar="TO")
@global_options
def state_mv(old: str, new: str, settings: Settings) -> None:
    """Re-address an entry (the same as a `kind: Moved` document), without calling the API.

    Both addresses are of one kind; for kinds whose API name is metadata.name
    the name cannot change (the API cannot rename).

    \b
    Example:
      govsync state mv DataLabel/ssn DataLabel/national-id
    """

    entry = state_commands.state_move(settings, old, new)
    click.echo(f"Moved {old} to {new} (id {entry.id}); nothing was sent.")


@state.command("resolve")
@click.argument("addresses", metavar="ADDRESS...", nargs=-1, required=True)
@click.option("--id", "object_id", help="The create succeeded: the object's id on the server.")
@click.option("--absent", is_flag=True, help="The create did not happen: plan will create it again.")
@global_options
def state_resolve(addresses: tuple[str, ...], object_id: str | None, absent: bool,
                  settings: Settings) -> None:
    """Settle uncertain creates (sent, outcome unknown): one that exists (--id), or
    any number that do not (--absent). Refused while an apply runs.

    \b
    Example:
      govsync state resolve Hook/risk_score --id hook-123
      govsync state resolve Hook/risk_score Hook/fraud_score --absent
    """

    if bool(object_id) == absent:
        raise click.UsageError("give exactly one of --id ID and --absent")
    for entry in state_commands.state_resolve(settings, list(addresses), None if absent else object_id):
        click.echo(f"Resolved {entry.address}: " + (
            "absent; the next apply creates it." if absent else f"exists as {object_id}."))


@state.command("export")
@global_options
def state_export(settings: Settings) -> None:
    """Print the workspace's state as JSON (backup; moving between SQLite and PostgreSQL).

    \b
    Example:
      govsync state export > backup.json
      govsync state import-all backup.json --state postgresql://ci@db/govsync
    """

    echo_json(state_commands.state_export(settings))


@state.command("import-all")
@click.argument("file", type=click.File("r"))
@global_options
def state_import_all(file: Any, settings: Settings) -> None:
    """Replace the workspace's state with an export.

    \b
    Example:
      govsync state import-all backup.json --workspace prod
    """


    try:
        data = json.load(file)
    except ValueError as exc:
        raise StateError(f"{file.name} is not JSON: {exc}") from exc
    serial = state_commands.state_import_all(settings, data)
    click.echo(f"Imported {len(data.get('entries', []))} entries (serial {serial}).")


@state.command("readonly-role")
@click.argument("role", metavar="ROLE")
@global_options
def state_readonly_role(role: str, settings: Settings) -> None:
    """Print the SQL that makes ROLE the read-only role of a PostgreSQL state.

    The role may then plan, drift, show and list (what pull-request jobs do),
    and nothing else: no write, and never the key that authenticates saved
    plans, so it cannot forge one. Run it with the credentials that own the
    state (it makes the tables first if there are none yet); pipe the output to
    psql as that owner, with -v ON_ERROR_STOP=1 so that psql stops (and exits
    non-zero) at the first error. Create the role itself first (CREATE ROLE ...
    LOGIN): the first statement stops the script, naming it, when it does not
    exist.

    \b
    Example:
      govsync state readonly-role govsync_reader | psql -v ON_ERROR_STOP=1 "$GOVSYNC_STATE"
    """

    for statement in state_commands.state_readonly_role(settings, role):
        click.echo(statement)


@state.command("unlock")
@global_options
def state_unlock(settings: Settings) -> None:
    """Clear a workspace lock left behind by an apply that is gone.

    \b
    Example:
      govsync state unlock --workspace prod
    """

    holder, free = state_commands.state_unlock(settings)
    if not free:
        raise GovsyncError(
            f"the workspace is still locked by a running process ({holder or 'unknown holder'}): "
            "the lock ends when that process exits; stop that process first (kill its pid on "
            "its host), and only then, if its lock remains on PostgreSQL, may an administrator "
            "end its session with pg_terminate_backend")
    click.echo(f"Unlocked (was held by {holder})." if holder else "The workspace was not locked.")


@state.command("history")
@json_errors
@global_options
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=1))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def state_history(settings: Settings, limit: int, fmt: str) -> None:
    """Show past applies: who, when, what changed, outcome.

    \b
    Example:
      govsync state history --limit 5
    """

    records = state_commands.state_history(settings, limit)
    if fmt == "json":
        echo_json(state_history_public(settings.workspace, records))
        return
    for r in records:
        s = r.get("summary", {})
        click.echo(f"{r.get('at')}  {r.get('user')}@{r.get('host')}  "
                   f"{'ok' if r.get('ok') else 'FAILED'}  "
                   + ", ".join(f"{v} {k}" for k, v in s.items() if v))


@click.group()
def audit() -> None:
    """The apply history for access reviews.

    \b
    Example:
      govsync audit export --since 2025-01-01 --format csv > applies.csv
    """


@audit.command("export")
@json_errors
@global_options
@click.option("--since", metavar="DATE", help="Only applies from DATE on (2025-01-31, or an "
                                                "ISO time such as 2025-01-31T12:00:00Z).")
@click.option("--format", "fmt", type=click.Choice(["json", "csv"]), default="json",
              show_default=True, help="JSON lines (one apply a line) or CSV (one change a row).")
def audit_export(settings: Settings, since: str | None, fmt: str) -> None:
    """Write every apply of the workspace: when, who (user, host, CI actor), the plan's
    hash, its approvers, the manifests' git commit, and each change with its outcome.
    Never a secret.

    \b
    Example:
      govsync audit export --env prod > audit.jsonl
      govsync audit export --since 2025-01-01 --format csv
    """

    click.echo(state_commands.audit_export(settings, since=since, fmt=fmt), nl=False)


# -- moving in from another tool --------------------------------------------------------
