"""`govsync agent`: the agent, and its pause, resume and accept."""

from __future__ import annotations

import os
import signal
import sys

import click

from govsync import envvars
from govsync.agent import Agent, Options, SinkPolicy, accept, pause, resume
from govsync.agentconfig import GITHUB_API, parse_duration
from govsync.agentweb import Served, create_app
from govsync.cli.root import global_options
from govsync.cli.scope import given
from govsync.cli.service import serving
from govsync.commands.endpoint import normal_endpoint
from govsync.envvars import UI_TOKEN
from govsync.errors import ConfigError
from govsync.project import SettingValue, select
from govsync.served import loopback
from govsync.settings import Settings, resolve
from govsync.ui.app import parse_listen


@click.group("agent", invoke_without_command=True)
@click.option("--project", "project_file", envvar=envvars.PROJECT, show_envvar=True,
              metavar="FILE", help="The project file (with --repo: its path in the checkout; "
                                   "default govsync.yaml).")
@click.option("--repo", metavar="PATH|URL", help="The git repository to keep a checkout of "
                                                 "(default: the project where it is, no git).")
@click.option("--branch", metavar="NAME", help="Its branch (default: the repository's).")
@click.option("--checkout", "checkout_dir", default=os.path.join(".govsync", "agent", "checkout"),
              show_default=True, metavar="DIR", help="Where the checkout of --repo is kept.")
@click.option("--listen", "listen_at", default="127.0.0.1:8420", show_default=True,
              metavar="HOST:PORT", help="Where to serve /healthz, /readyz, /metrics, the API, "
                                        "the webhook and the dashboard.")
@click.option("--interval", metavar="DURATION", help="Every environment's interval (30s, 5m, "
                                                     "1h), over the project's agent.interval "
                                                     "(default 5m).")
@click.option("--once", is_flag=True, help="One cycle of every environment, then exit: 0 all "
                                           "Synced, 2 some not, 1 an error.")
@click.option("--env", "env_names", multiple=True, metavar="NAME",
              help="Only this environment (repeatable; default: every one).")
@click.option("--endpoint", envvar=envvars.ENDPOINT, show_envvar=True, metavar="URL",
              help="API base URL, or `local`, where the project's environments name none.")
@click.option("--state", "state_url", envvar=envvars.STATE, show_envvar=True, metavar="URL",
              help="State store, where the project's environments name none.")
@click.option("--insecure-http", is_flag=True, envvar=envvars.INSECURE_HTTP, show_envvar=True,
              help="Allow a plain http:// endpoint on a non-loopback host.")
@click.option("--allow-sink-host", "sink_hosts", multiple=True, envvar=envvars.AGENT_SINK_HOSTS,
              show_envvar=True, metavar="HOST[:PORT]",
              help="A host that webhook and Slack sinks may send to (repeatable; the "
                   "variable: separated by spaces or commas). The project file cannot add "
                   "one: a sink elsewhere is refused.")
@click.option("--allow-endpoint", "allowed_endpoints", multiple=True,
              envvar=envvars.AGENT_ENDPOINTS, show_envvar=True, metavar="URL",
              help="An API endpoint the project's environments may name (repeatable; the "
                   "variable: separated by spaces or commas). Given, an environment whose "
                   "endpoint is another is sent nothing (its key included): a commit "
                   "cannot point one at a host of its choosing.")
@click.option("--github-api", envvar=envvars.AGENT_GITHUB_API, show_envvar=True, metavar="URL",
              help=f"The GitHub API that github sinks use (default {GITHUB_API}); a sink "
                   "whose apiUrl names another is refused.")
@click.pass_context
def agent_command(ctx: click.Context, project_file: str | None, repo: str | None,
                  branch: str | None, checkout_dir: str, listen_at: str, interval: str | None,
                  once: bool, env_names: tuple[str, ...], endpoint: str | None,
                  state_url: str | None, insecure_http: bool, sink_hosts: tuple[str, ...],
                  allowed_endpoints: tuple[str, ...], github_api: str | None) -> None:
    """Reconcile continuously: plan every environment each interval, apply where
    its agent.autoApply allows, keep each one's status, alert, serve metrics.

    Keeps a checkout of --repo at --branch current; each interval, and at once
    on a verified push (POST /hooks/git, X-Hub-Signature-256 checked with
    GOVSYNC_AGENT_WEBHOOK_SECRET), it plans each environment of the project
    and records its status (Synced, OutOfSync, Blocked, Uncertain, Locked,
    Paused, Error) in the workspace's history. An apply passes every check a
    person's does; a held lock, a pause or a freeze window only plans. Several
    agents may share one PostgreSQL state: one acts per environment, another
    takes over when it ends. SIGTERM finishes the calls in flight, records
    them and exits 0. The API and dashboard need GOVSYNC_UI_TOKEN beyond
    loopback; GOVSYNC_AGENT_URL is the address links in notifications use.
    Notifications go only where this command line allows (--allow-sink-host,
    --github-api), whatever the project file says; with --allow-endpoint, so do
    the API calls.

    \b
    Example:
      govsync agent --repo https://git.example.com/gov.git --branch main
      govsync agent --repo ../gov --allow-sink-host hooks.slack.com
      govsync agent --once --env staging
      govsync agent pause prod --reason "incident 4711"
      govsync agent accept prod-eu --reason "new region, change 812"
    """
    if ctx.invoked_subcommand is not None:
        return
    try:
        every = parse_duration(interval) if interval is not None else None
    except ValueError as exc:
        raise ConfigError(f"--interval: {exc}") from None
    try:
        sinks = SinkPolicy.of(sink_hosts, github_api, os.environ)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    host, port = parse_listen(listen_at)
    token = os.environ.get(UI_TOKEN) or None
    if token is None and not loopback(host) and not once:
        raise ConfigError(f"--listen {listen_at} is reachable beyond this machine: set "
                          f"{UI_TOKEN} to a token that the API and dashboard require")
    options = Options(
        project=project_file, repo=repo, branch=branch, checkout=checkout_dir, interval=every,
        environments=env_names,
        endpoint=given(ctx, "endpoint", endpoint, "--endpoint", envvars.ENDPOINT),
        state=given(ctx, "state_url", state_url, "--state", envvars.STATE),
        workspace=SettingValue(os.environ.get(envvars.WORKSPACE) or None,
                        "environment" if os.environ.get(envvars.WORKSPACE) else "default",
                        "--workspace", envvars.WORKSPACE),
        insecure_http=insecure_http,
        local_seed=os.environ.get(envvars.LOCAL_SEED) or None,
        url=os.environ.get(envvars.AGENT_URL) or None, sinks=sinks,
        endpoints=frozenset(normal_endpoint(e) for text in allowed_endpoints
                            for e in text.replace(",", " ").split()))
    secure = (options.url or "").lower().startswith("https://")
    serving()
    running = Agent(options, os.environ)
    # The entry point's: on SIGTERM (and Ctrl-C) the agent finishes what is in flight.
    signal.signal(signal.SIGTERM, lambda *_: running.stop("SIGTERM"))
    signal.signal(signal.SIGINT, lambda *_: running.stop("SIGINT"))
    served = None
    if not once:
        app = create_app(running, token=token,
                         webhook_secret=os.environ.get(envvars.AGENT_WEBHOOK_SECRET) or None,
                         secure=secure)
        served = Served(app, host, port)
        click.echo(f"govsync agent: listening on http://{listen_at.rsplit(':', 1)[0]}:"
                   f"{served.port}/", err=True)
    try:
        code = running.run(once=once)
    finally:
        if served is not None:
            served.stop()
    if once:
        for item in running.environments():
            click.echo(f"{item['name']}: {item['status']} ({item['reason']})")
        if running.problem and not running.known:  # it could not start: each problem, once
            for line in running.problems:
                click.echo(line, err=True)
            click.echo(f"error: the agent did not start ({len(running.problems)} problem(s) "
                       "above); nothing was planned", err=True)
    sys.exit(code)


def _environment_settings(environment: str) -> Settings:
    """The settings of a project environment named as an argument (as --env would)."""
    ctx = click.get_current_context()
    selection = select(ctx.params.get("project_file"), environment, [])
    return resolve(
        selection,
        endpoint=given(ctx, "endpoint", ctx.params.get("endpoint"), "--endpoint",
                       envvars.ENDPOINT),
        state=given(ctx, "state_url", ctx.params.get("state_url"), "--state", envvars.STATE),
        workspace=given(ctx, "workspace", ctx.params.get("workspace"), "--workspace",
                        envvars.WORKSPACE),
        environ=os.environ)


@agent_command.command("pause")
@global_options
@click.argument("environment", metavar="ENV")
@click.option("--reason", required=True, metavar="TEXT", help="Why (shown and kept).")
def agent_pause(settings: Settings, environment: str, reason: str) -> None:
    """Pause the agent's applies of an environment (it is still planned).

    Recorded in the environment's workspace: every agent sees it at its next
    cycle, and it stays until `govsync agent resume ENV`.

    \b
    Example:
      govsync agent pause prod --reason "incident 4711"
    """
    pause(_environment_settings(environment), reason)
    click.echo(f"paused {environment}: the agent plans it and applies nothing until "
               f"`govsync agent resume {environment}`")


@agent_command.command("resume")
@global_options
@click.argument("environment", metavar="ENV")
def agent_resume(settings: Settings, environment: str) -> None:
    """Resume the agent's applies of a paused environment.

    \b
    Example:
      govsync agent resume prod
    """
    lifted = resume(_environment_settings(environment))
    click.echo(f"resumed {environment}" if lifted is not None
               else f"{environment} was not paused")


@agent_command.command("accept")
@global_options
@click.argument("environment", metavar="ENV")
@click.option("--reason", required=True, metavar="TEXT", help="Why (shown and kept).")
def agent_accept(settings: Settings, environment: str, reason: str) -> None:
    """Let the agent take up an environment new on a governed endpoint.

    A commit that adds an environment, or renames a workspace, onto an endpoint
    another workspace of the state governs (records approvals for) is not
    planned by the agent until an operator, with the state's writer
    credentials, accepts it here; its first apply then still needs that
    workspace's recorded approvals.

    \b
    Example:
      govsync agent accept prod-eu --reason "new region, change 812"
    """
    click.echo(accept(_environment_settings(environment), reason))
