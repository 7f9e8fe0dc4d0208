"""The review workflow: `apply`, `drift`, `graph`, `show` and `approve` (`plan`: plan.py)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import threading
from typing import Any

import click

from govsync import approvals, commands, envvars, planfile, render
from govsync.cli.interrupt import graceful
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
    replace_option,
    target_option,
)
from govsync.cli.scope import require_environment, saved_plan_settings
from govsync.errors import GovsyncError
from govsync.planfile import SavedPlan
from govsync.project import Selection
from govsync.redact import url as safe_url
from govsync.render.graph import change_graph, dependency_graph
from govsync.render.graph import render as render_graph
from govsync.settings import Settings
from govsync.sshsig import PassphraseNeeded


def where(settings: Settings) -> str:
    """What a command acts on: environment, workspace, endpoint and state (masked)."""

    env = settings.selection.name
    return (f"environment {env}, " if env else "") + (
        f"workspace {settings.workspace!r}, endpoint "
        f"{safe_url(settings.endpoint) if settings.endpoint else '(none)'}, state "
        f"{safe_url(settings.state)}")


def prompt(settings: Settings) -> str:
    """The confirmation question, naming what it will change (contract section 5)."""
    return f"Apply these changes to {where(settings)}? Only 'yes' will be accepted"


def confirmed(prompt: str, *, cancelled: str = "apply cancelled",
              skip: str = "--auto-approve", does: str = "applies") -> bool:
    """Ask for `yes`: at a terminal, or as one line of standard input (``echo yes |``),
    as Terraform does.  End of input or any other answer cancels (GovsyncError:
    ``cancelled``, naming the flag that ``skip``s the question)."""
    stdin = sys.stdin
    if stdin.isatty():
        answer = str(click.prompt(prompt, default="", show_default=False))
    else:
        click.echo(f"{prompt}: ", nl=False, err=True)
        line = stdin.readline()
        if not line:
            click.echo("", err=True)
            raise GovsyncError(f"{cancelled}: standard input ended before an answer; "
                               f"nothing was changed (pipe `yes`, or pass {skip})")
        answer = line
        click.echo(answer.strip(), err=True)
    if answer.strip() != "yes":
        said = f"the answer was {answer.strip()[:40]!r}" if answer.strip() else "no answer"
        raise GovsyncError(f"{cancelled}: {said}, and only 'yes' {does}; "
                           "nothing was changed")
    return True


@click.command()
@paths_argument
@global_options
@target_option
@replace_option
@refresh_option
@click.option("--auto-approve", is_flag=True,
              help="Apply without asking for `yes` (otherwise asked at the terminal, or "
                   "read as one line of standard input: `echo yes | govsync apply ...`).")
@click.option("--parallelism", default=32, show_default=True, type=click.IntRange(1, 256),
              help="Requests in flight at most (halved automatically on 429/503; "
                   "BENCHMARKS.md shows why 32).")
@click.option("--forget-orphans", is_flag=True,
              help="Drop orphans from state (they stay on the server: the API cannot delete).")
@click.option("--lock-timeout", default=0.0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds to wait for another apply on this workspace to finish.")
@allow_endpoint_change_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True,
              help="json: one JSON line per finished change, then a summary line, and "
                   "nothing else on stdout (the plan goes to stderr). Needs --auto-approve "
                   "or a saved plan.")
@click.option("--reviewed", "reviewed_file", metavar="PLAN", type=click.Path(dir_okay=False),
              help="The plan a review showed (a pull request's `plan --out`): plan PATHS "
                   "again with these credentials and apply only if the changes are exactly "
                   "PLAN's (its approvals count); otherwise refuse and show the difference.")
def apply(paths: tuple[str, ...], settings: Settings, auto_approve: bool, parallelism: int,
          forget_orphans: bool, lock_timeout: float, allow_endpoint_change: bool,
          fmt: str, reviewed_file: str | None) -> None:
    """Apply the manifests (or a saved plan) through the API.

    With PATHS, plans first and shows the plan; with one saved plan FILE (from
    `govsync plan --out`), applies exactly that plan, refused if the state
    changed since. Every success is recorded in state at once.

    \b
    Example:
      govsync apply manifests/ --endpoint local --auto-approve
      govsync apply plan.json
      govsync apply --env prod --reviewed plan.json     # CI, on merge
      govsync apply plan.json --format json | jq 'select(.type == "summary")'
    """

    o = out()

    # A saved plan was reviewed when it was made (`govsync plan --out`): apply
    # it without asking again, as `terraform apply PLANFILE` does.
    saved_plan = planfile.is_plan_file(list(paths))
    if saved_plan and reviewed_file:
        raise click.UsageError("--reviewed PLAN plans PATHS again: give manifest paths (or "
                               "none, with a project file), not a saved plan")
    reviewed = planfile.read(reviewed_file) if reviewed_file else None
    if fmt == "json":
        if not (auto_approve or saved_plan or reviewed):
            raise click.UsageError("--format json cannot ask for confirmation: pass "
                                   "--auto-approve, or apply a saved plan (govsync plan --out)")
        return _apply_json(paths, settings, saved_plan, reviewed, commands.ApplyOptions(
            parallelism=parallelism, forget_orphans=forget_orphans, lock_timeout=lock_timeout,
            allow_endpoint_change=allow_endpoint_change))
    settings, source = _source(paths, settings, saved_plan, reviewed)

    def confirm(the_plan: Any) -> bool:
        o.info(f"Changing {where(settings)}.")
        click.echo(render.plan_text(the_plan, color=o.color), nl=False, color=o.color)
        if not (auto_approve or saved_plan or reviewed):
            confirmed(prompt(settings))
        # From here on, the first Ctrl-C lets what is in flight finish (cli/interrupt.py).
        stack.enter_context(graceful(stopping))
        return True

    from govsync.apply import DONE
    from govsync.render.progress import LineReporter, ProgressReporter

    reporter = (ProgressReporter(o.color, o.quiet) if o.color and sys.stderr.isatty()
                else LineReporter(o.color, o.quiet))
    stopping = threading.Event()
    with contextlib.ExitStack() as stack:
        the_plan, result = commands.apply(source, settings, commands.ApplyOptions(
            parallelism=parallelism, forget_orphans=forget_orphans, lock_timeout=lock_timeout,
            allow_endpoint_change=allow_endpoint_change, confirm=confirm, reporter=reporter,
            stopping=stopping))
    if the_plan.governance is not None:
        click.echo(f"Recorded the governance of workspace {settings.workspace!r}.")
    if not result.outcomes:
        if the_plan.has_changes():
            # Only orphans or uncertain entries: nothing to send, but they are
            # reported (contract section 2), never hidden behind "No changes".
            click.echo(render.plan_text(the_plan, color=o.color), nl=False, color=o.color)
            click.echo("Nothing to apply.")
        else:
            click.echo("No changes. Nothing to apply.")
        return
    s = result.summary()
    click.echo(
        f"Apply: {s['applied']} applied, {s['failed']} failed, {s['skipped']} skipped, "
        f"{s['uncertain']} uncertain, {s['forgotten']} forgotten "
        f"({result.requests} requests in {result.seconds:.2f} s)."
    )
    if not result.ok:
        for oc in result.outcomes:
            if oc.status not in DONE:
                click.echo(f"  {oc.address}: {oc.status}: {oc.code + ' ' if oc.code else ''}{oc.error}")
        if result.stopped:
            click.echo(f"Error: apply stopped: {result.stopped}.", err=True)
        click.echo("What succeeded is recorded in state; fix the failures and apply again.", err=True)
        sys.exit(1)


def _source(paths: tuple[str, ...], settings: Settings, saved_plan: bool,
            reviewed: SavedPlan | None) -> tuple[Settings, commands.Source]:
    """What apply applies, and to what: a saved plan with the environment, workspace
    and state it records; else the manifests of the selected environment (held to
    the reviewed plan, if one is given)."""
    if saved_plan:
        saved = planfile.read(paths[0])
        return saved_plan_settings(settings, saved.plan, paths[0]), commands.Saved(saved)
    require_environment(settings.selection, "plan")
    manifests = load(paths, settings.selection)
    if reviewed is not None:
        return settings, commands.Reviewed(manifests, reviewed)
    return settings, commands.Manifests(manifests)


def _apply_json(paths: tuple[str, ...], settings: Settings, saved_plan: bool,
                reviewed: SavedPlan | None, options: commands.ApplyOptions) -> None:
    """``apply --format json``: JSON lines on stdout, the plan and messages on stderr.

    The summary line comes last whatever happens, an error before anything
    was sent included (its message is the summary's ``stopped``)."""
    from govsync.apply import ApplyResult
    from govsync.render.progress import JsonReporter

    o = out()
    reporter = JsonReporter()

    stopping = threading.Event()
    stack = contextlib.ExitStack()

    def show(the_plan: Any) -> bool:
        if not o.quiet:
            click.echo(render.plan_text(the_plan), nl=False, err=True)
        stack.enter_context(graceful(stopping))
        return True

    try:
        settings, source = _source(paths, settings, saved_plan, reviewed)
        with stack:
            _plan, result = commands.apply(source, settings, dataclasses.replace(
                options, confirm=show, reporter=reporter, stopping=stopping))
    except GovsyncError as exc:
        problems = getattr(exc, "problems", None)
        why = (f"{len(problems)} error(s) in the manifests, the first: {problems[0]}"
               if problems else str(exc) or type(exc).__name__)
        reporter.summary(ApplyResult(), stopped=why)
        raise
    reporter.summary(result)
    if result.stopped:
        click.echo(f"Error: apply stopped: {result.stopped}.", err=True)
    if not result.ok:
        sys.exit(1)


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

    report = commands.drift(load(paths, settings.selection, short=True), settings,
                            read_secrets=not without_secrets,
                            allow_endpoint_change=allow_endpoint_change)
    o = out()
    if fmt == "json":
        click.echo(render.drift_json(report), nl=False)
    elif fmt == "markdown":
        click.echo(render.drift_markdown(report), nl=False)
    else:
        click.echo(render.drift_text(report, color=o.color), nl=False, color=o.color)
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

        the_graph = change_graph(commands.plan(manifests, settings, read_secrets=False),
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
    from govsync.render.documents import show_text

    saved = planfile.read(file)
    settings = saved_plan_settings(settings, saved.plan, file)
    if digest:
        click.echo(approvals.review_message(saved.review_digest).decode(), nl=False)
        return
    o = out()
    if fmt == "json":
        click.echo(render.plan_json(saved.plan), nl=False)
        return
    if fmt == "markdown":
        click.echo(render.plan_markdown(saved.plan, title="govsync saved plan"), nl=False)
        return
    verification, record = commands.inspect_saved(saved, settings)
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
    from govsync.render import plan_text
    from govsync.render.documents import requests_text

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
