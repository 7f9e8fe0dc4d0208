"""Self-contained tools: `schema`, `migrate terraform`, `fmt`, `init`, `docs`."""

from __future__ import annotations

import gc
import os
import sys

import click

from govsync import envvars
from govsync.cli.root import cli, out
from govsync.docs import write_docs
from govsync.errors import MigrateError
from govsync.fmt import format_paths
from govsync.init import init, next_steps
from govsync.migrate import migrate_terraform


@click.command()
@click.option("--out", "out_dir", default="schemas", show_default=True, type=click.Path(file_okay=False),
              help="Directory for manifest.schema.json and openapi.json.")
@click.option("--check", is_flag=True, help="Exit 1 if the files there are not current.")
def schema(out_dir: str, check: bool) -> None:
    """Write the JSON Schema of manifests and the API's OpenAPI document.

    \b
    Example:
      govsync schema --out schemas/
    """
    from govsync.schema import write_schemas

    stale = write_schemas(out_dir, check=check)
    if check and stale:
        click.echo("Stale: " + ", ".join(stale) + " (run `govsync schema`)", err=True)
        sys.exit(1)
    out().info(f"Wrote the schemas to {out_dir}/" if not check else "Schemas are current.")


# -- guardrails and approvals ---------------------------------------------------------


@click.group()
def migrate() -> None:
    """Move in from another tool, adopting the objects it made: nothing is created.

    \b
    Example:
      govsync migrate terraform formal.tfstate --out manifests/
      terraform state pull | govsync migrate terraform - --out manifests/
    """


@migrate.command("terraform")
@click.argument("tfstate", metavar="TFSTATE|-")
@click.option("--out", "out_dir", default="manifests", show_default=True, type=click.Path(),
              help="The folder to write: new, empty, or written by an earlier run over "
                   "the same state (then only what changed is rewritten).")
@click.option("--owner-group", metavar="NAME",
              help="The owner (a group's name) of each policy whose state has none "
                   "(provider schema version 2 no longer keeps it).")
def migrate_terraform_command(tfstate: str, out_dir: str, owner_group: str | None) -> None:
    """Write manifests for the formalco/formal resources of a Terraform state.

    Reads a Terraform state (format version 4, as `terraform state pull` prints
    it; `-` reads standard input) and writes to --out: a manifest for every
    resource that has a govsync kind, an Import document for each (its id:
    govsync's first apply adopts it and creates nothing), `{fromEnv: VAR}` in
    place of every secret (the variables to set are listed), MIGRATION.md (what
    was migrated, what stays in Terraform and why, what to do next) and
    terraform-state-rm.sh (the `terraform state rm` of exactly the migrated
    resources, to run after the first apply). Nothing is written unless all of
    it is valid; no value of the state is ever printed or written.

    \b
    Example:
      terraform state pull > formal.tfstate
      govsync migrate terraform formal.tfstate --out manifests/
      govsync plan manifests/          # every object an import, nothing created
    """

    # A migration makes millions of small acyclic objects (the state's JSON, the
    # manifests, their YAML read back): the cyclic collector would rescan them
    # for nothing (40% of the time at 10,000 resources).  The command ends soon
    # after, as plan and validate do (see ``load``).
    gc.disable()
    try:
        done = migrate_terraform(tfstate, out_dir, owner_group=owner_group)
    except MigrateError as exc:
        for line in exc.problems:
            click.echo(f"Error: {line}", err=True)
        sys.exit(1)
    migrated, kept = done.conversion.migrated, done.conversion.kept
    report = os.path.join(out_dir, "MIGRATION.md")
    click.echo(f"Migrated {len(migrated)} of {len(migrated) + len(kept)} formalco/formal "
               f"resource instances into {out_dir} ({len(kept)} "
               f"{'stays' if len(kept) == 1 else 'stay'} in Terraform: see {report}).")
    if done.variables:
        click.echo(f"Set {len(done.variables)} secret variable"
                   f"{'s' if len(done.variables) != 1 else ''} before planning: "
                   + _some(done.variables, report))
    if done.ownerless:
        many = len(done.ownerless) != 1
        click.echo(f"{len(done.ownerless)} polic{'ies need' if many else 'y needs'} an owner "
                   "(groupName or userEmail): " + _some(done.ownerless, report))
    changed = len(done.written.changed) + len(done.written.removed)
    out().info(f"Wrote {changed} file{'s' if changed != 1 else ''} in {out_dir}." if changed
               else f"Nothing changed: {out_dir} is up to date.")
    out().info(f"Next: govsync validate {out_dir} && govsync plan {out_dir}")


def _some(names: list[str], where: str, shown: int = 10) -> str:
    """The first names of a list, and how many more ``where`` lists."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more (all in {where})" if more > 0 else "")


# -- the pull-request workflow: fmt, init, docs ------------------------------------


@click.command("fmt")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--check", is_flag=True,
              help="Write nothing; list the files that would change and exit 1 if any.")
def fmt_command(paths: tuple[str, ...], check: bool) -> None:
    """Rewrite manifests in the canonical layout (every comment kept).

    Keys in the order apiVersion, kind, metadata (name, dependsOn), spec;
    two-space indentation with sequences indented under their key; documents
    separated by `---`. Only files that change are rewritten, and listed. A
    file with a YAML error is reported as FILE:LINE:COL, in the same words as
    `govsync validate`, and left alone (exit 1).

    \b
    Example:
      govsync fmt manifests/
      govsync fmt --check manifests/    # in CI or a pre-commit hook
    """

    report = format_paths(list(paths), write=not check)
    for problem in report.problems:
        click.echo(str(problem), err=True)
    for name in report.changed:
        click.echo(name)
    n = len(report.changed)
    o = out()
    if check:
        if n:
            o.info(f"{n} file(s) not in the canonical layout: run `govsync fmt` on them.")
    else:
        o.info(f"Reformatted {n} of {len(report.files)} file(s).")
    if report.problems or (check and n):
        sys.exit(1)


@click.command("init")
@click.argument("directory", default=".", type=click.Path(file_okay=False))
@click.option("--force", is_flag=True, help="Overwrite files that already exist.")
@click.option("--ci", type=click.Choice(["github", "gitlab", "none"]), default="github",
              show_default=True, help="CI pipeline to add: GitHub Actions, GitLab CI, or none.")
@click.option("--install-spec", envvar=envvars.INSTALL_SPEC, show_envvar=True, metavar="SPEC",
              help="The pip requirement CI installs govsync with (requirements-govsync.txt); "
                   "default: how this govsync was installed.")
def init_command(directory: str, force: bool, ci: str, install_spec: str | None) -> None:
    """Scaffold a repository of manifests in DIRECTORY (default: here).

    Writes commented example manifests (one file per family of kinds, all
    valid), their JSON Schema for editors, a README, a .gitignore and the CI
    pipeline (plan on pull requests, apply the saved plan on merge, drift on a
    schedule). Refuses to overwrite existing files unless --force.

    \b
    Example:
      govsync init governance/
      govsync init --ci gitlab
    """

    result = init(directory, force=force, ci=ci, install_spec=install_spec)
    for rel in result.created:
        click.echo(f"created {os.path.join(directory, rel)}")
    for rel in result.updated:
        click.echo(f"updated {os.path.join(directory, rel)}")
    click.echo("")
    click.echo(next_steps(result), nl=False)


@click.command("docs")
@click.option("--out", "out_dir", default="docs", show_default=True,
              type=click.Path(file_okay=False),
              help="Directory for cli.md, kinds.md and json/*.schema.json.")
@click.option("--check", is_flag=True, help="Exit 1 if the files there are not current.")
def docs_command(out_dir: str, check: bool) -> None:
    """Write the reference docs: cli.md (every --help), kinds.md (every kind), and the
    JSON Schema of every JSON output in json/.

    \b
    Example:
      govsync docs --out docs/
      govsync docs --check
    """

    stale = write_docs(out_dir, cli, check=check)
    if check and stale:
        click.echo("Stale: " + ", ".join(stale) + " (run `govsync docs`)", err=True)
        sys.exit(1)
    out().info(f"Wrote the documentation to {out_dir}/" if not check else "Documentation is current.")
