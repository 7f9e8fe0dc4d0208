"""The review workflow besides plan and apply: `drift`, `graph`, `show` and `approve`
(`plan`: plan.py, `apply`: apply.py)."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from govsync import approvals, envvars, planfile
from govsync.cli.root import (
    FORMATS,
    allow_endpoint_change_option,
    global_options,
    json_errors,
    load,
    out,
    paths_argument,
    project_options,
    refresh_option,
    target_option,
)
from govsync.cli.scope import confirmed, saved_plan_settings
from govsync.commands.drifting import drift as drift_report
from govsync.commands.planning import plan as make_plan
from govsync.commands.saving import inspect_saved
from govsync.errors import GovsyncError
from govsync.project import Selection
from govsync.render.documents import requests_text, show_text
from govsync.render.graph import change_graph, dependency_graph
from govsync.render.graph import render as render_graph
from govsync.render.markdown import drift_markdown, plan_markdown
from govsync.render.planjson import drift_json, plan_json
from govsync.render.text import drift_text, plan_text
from govsync.settings import Settings
from govsync.sshsig import PassphraseNeeded


@click.command()
@json_errors
@paths_argument
@global_options
@target_option
@refresh_option
@click.option("--format", "fmt", type=FORMATS, default="text", show_default=True)
@click.option("--without-secrets", is_flag=True,
              help="Do not read secrets' values (a job with read-only credentials): a "
                   "secret whose value changed is not seen.")
@allow_endpoint_change_option
def drift(paths: tuple[str, ...], settings: Settings, fmt: str, without_secrets: bool,
          allow_endpoint_change: bool) -> None:
    """Check that the API, the state and the manifests agree (for a scheduled job).

    Reports unapplied changes, orphans, uncertain entries, and live checks
    where the API has a read operation (policy owner groups, via ListGroups).
    Exit 0 in sync, 2 drift, 1 error.

    \b
    Example:
      govsync drift manifests/ --endpoint https://api.example.com --format markdown
    """

    report = drift_report(load(paths, settings.selection, short=True, rules=True), settings,
                            read_secrets=not without_secrets,
                            allow_endpoint_change=allow_endpoint_change)
    o = out()
    if fmt == "json":
        click.echo(drift_json(report), nl=False)
    elif fmt == "markdown":
        click.echo(drift_markdown(report), nl=False)
    else:
        click.echo(drift_text(report, color=o.color), nl=False, color=o.color)
    if not report.in_sync:
        sys.exit(2)


@click.command("graph")
@paths_argument
@global_options
@click.option("--format", "fmt", type=click.Choice(["mermaid", "dot"]), default="mermaid",
              show_default=True, help="Mermaid flowchart (renders in GitHub Markdown) or "
                                      "Graphviz DOT.")
@click.option("--plan", "of_plan", is_flag=True,
              help="Only what the plan changes, coloured by action (create green, update "
                   "yellow, replace orange, delete dark red, forget grey, blocked red, "
                   "orphan magenta, uncertain cyan); reads the state like `govsync plan`.")
def graph_command(paths: tuple[str, ...], settings: Settings, fmt: str, of_plan: bool) -> None:
    """Print the dependency graph of the manifests (an edge A --> B: A comes first).

    Edges come from references (spaceRef...) and metadata.dependsOn. With
    --plan, only the changes, linked when one depends on another (directly
    or through unchanged objects).

    \b
    Example:
      govsync graph manifests/ > graph.mmd
      govsync graph manifests/ --format dot | dot -Tsvg > graph.svg
      govsync graph manifests/ --plan --endpoint local
    """

    manifests = load(paths, settings.selection)
    if of_plan:

        the_graph = change_graph(make_plan(manifests, settings, read_secrets=False),
                                 manifests.objects)
        if not the_graph.nodes:
            out().info("No changes: the plan's graph is empty (drop --plan for the whole "
                       "dependency graph).")
    else:
        the_graph = dependency_graph(manifests.objects)
    click.echo(render_graph(the_graph, fmt), nl=False)


@click.command("show")
@json_errors
@click.argument("file", type=click.Path(dir_okay=False))
@global_options
@click.option("--format", "fmt", type=click.Choice([*FORMATS.choices, "html"]), default="text",
              show_default=True,
              help="html: the plan page with its approvals, as one self-contained file.")
@click.option("--digest", is_flag=True,
              help="Print only the line approvers sign (its review digest), for "
                   "`ssh-keygen -Y sign -n govsync-plan`.")
def show_command(file: str, settings: Settings, fmt: str, digest: bool) -> None:
    """Show a saved plan (from `govsync plan --out`) without applying it.

    Shows every request it would send, field by field, whether its
    authentication verifies against its workspace's state (when the state is
    reachable), the review digest approvers sign, and the approvals in
    FILE.sig. --format json prints the same document as `plan --format json`.

    \b
    Example:
      govsync show plan.json
      govsync show plan.json --format html > plan.html
      govsync show plan.json --digest | ssh-keygen -Y sign -n govsync-plan -f ~/.ssh/id_ed25519
    """
    saved = planfile.read(file)
    settings = saved_plan_settings(settings, saved.plan, file)
    if digest:
        click.echo(approvals.review_message(saved.review_digest).decode(), nl=False)
        return
    o = out()
    if fmt == "json":
        click.echo(plan_json(saved.plan), nl=False)
        return
    if fmt == "markdown":
        click.echo(plan_markdown(saved.plan, title="govsync saved plan"), nl=False)
        return
    verification, record = inspect_saved(saved, settings)
    if fmt == "html":
        from govsync.ui import saved_plan_file

        signers, required, source = _signers(record, settings, saved.plan.workspace)
        click.echo(saved_plan_file(saved, verification, signers, required, source), nl=False)
        return
    click.echo(show_text(saved, verification=verification, color=o.color,
                         verbose=o.verbose > 0), nl=False, color=o.color)
    signers, required, source = _signers(record, settings, saved.plan.workspace)
    for line in approvals.describe(saved, signers, required, source):
        click.echo(line)


def _signers(record: Any, settings: Settings, workspace: str
             ) -> tuple[list[Any] | None, int, str]:
    """The allowed signers to check approvals against: those the workspace records,
    else the project's (None: neither has any)."""

    if record is not None and record.required:
        return (record.allowed(workspace), record.required,
                f"recorded with workspace {workspace!r}")
    project = settings.selection.project
    if project is not None and project.approvals is not None:
        return (approvals.read_allowed_signers(project.approvals), project.approvals.required,
                project.approvals.allowed_signers)
    return None, 0, ""


@click.command("approve")
@click.argument("plan_file", metavar="PLAN", type=click.Path(dir_okay=False))
@click.option("--key", "key_file", required=True, type=click.Path(dir_okay=False),
              help="Your SSH private key (ed25519, ecdsa or rsa), e.g. ~/.ssh/id_ed25519.")
@click.option("--yes", "assume_yes", is_flag=True,
              help="Sign without asking (otherwise approve asks after showing the plan: at "
                   "the terminal, or as one line of standard input: `echo yes | govsync "
                   "approve ...`).")
@project_options
def approve(plan_file: str, key_file: str, assume_yes: bool, selection: Selection) -> None:
    """Sign a saved plan: add your SSH signature to PLAN.sig.

    Shows what you are signing first: every change and every request the plan
    sends, and its review digest. The signature covers that digest (what the
    plan would send, to which workspace and environment), namespace
    govsync-plan, as `govsync show PLAN --digest | ssh-keygen -Y sign -n
    govsync-plan` makes it, so it also holds for the same plan made again at
    merge (`govsync apply --reviewed`). Apply counts the valid signatures of
    distinct people listed in the allowed signers its workspace records. An
    encrypted key asks for its passphrase (or reads GOVSYNC_KEY_PASSPHRASE).

    \b
    Example:
      govsync approve plan.json --key ~/.ssh/id_ed25519
    """
    saved = planfile.read(plan_file)
    env = f", environment {saved.plan.environment}" if saved.plan.environment else ""
    click.echo(f"You are approving {plan_file}: workspace {saved.plan.workspace!r}{env}, "
               f"review digest sha256:{saved.review_digest}.", err=True)
    click.echo(plan_text(saved.plan) + requests_text(saved.plan), nl=False, err=True)
    if not assume_yes:
        # As apply asks: at a terminal, or one line of standard input.
        confirmed("Sign this plan? Only 'yes' will be accepted", cancelled="not signed",
                  skip="--yes", does="signs")
    allowed = selection.project.approvals if selection.project else None
    signers = approvals.read_allowed_signers(allowed) if allowed is not None else None
    source = allowed.allowed_signers if allowed is not None else ""
    secret = os.environ.get(envvars.KEY_PASSPHRASE)
    passphrase = secret.encode() if secret else None
    try:
        private = approvals.load_key(key_file, passphrase)
    except PassphraseNeeded as exc:
        if passphrase is not None or not sys.stdin.isatty():
            raise GovsyncError(f"{key_file}: the key is encrypted and the passphrase is "
                               f"missing or wrong ({exc}): set {envvars.KEY_PASSPHRASE} or run "
                               "on a terminal") from exc
        typed = click.prompt(f"Passphrase for {key_file}", hide_input=True, default="",
                             show_default=False)
        try:
            private = approvals.load_key(key_file, str(typed).encode())
        except PassphraseNeeded as again:
            raise GovsyncError(f"{key_file}: wrong passphrase") from again
    signed = approvals.approve(saved, private, signers, source)
    if signed.replaced:
        click.echo(f"Approved {plan_file} as {signed.who}: your earlier signature in "
                   f"{signed.path} was replaced by this one (one counts per signer).")
    else:
        click.echo(f"Approved {plan_file} as {signed.who}: signature added to {signed.path}.")
