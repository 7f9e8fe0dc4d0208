"""`govsync ui`: the dashboard, served read-only."""

from __future__ import annotations

import os

import click

from govsync.cli.root import global_options
from govsync.cli.service import serving
from govsync.envvars import UI_TOKEN
from govsync.settings import Settings
from govsync.ui.app import serve as serve_ui


@click.command("ui")
@global_options
@click.option("--listen", "listen_at", default="127.0.0.1:8421", show_default=True,
              metavar="HOST:PORT", help="Where to serve the dashboard (beyond loopback only "
                                        "with GOVSYNC_UI_TOKEN set).")
def ui_command(settings: Settings, listen_at: str) -> None:
    """Serve the dashboard, read-only: every environment's status, plan and history.

    Every environment of the project (or the one --env names) is planned
    against its recorded state without reading secrets or calling the API,
    and shown with its pending changes field by field, blocked changes and
    their reasons, rule results, uncertain entries with the command that
    settles them, history and audit, and the dependency graph. Nothing is
    ever written, and no page shows a secret (--endpoint is not used). With GOVSYNC_UI_TOKEN set,
    every request must carry it (a browser: open any page once with
    ?token=TOKEN).

    \b
    Example:
      govsync ui                          # http://127.0.0.1:8421/
      GOVSYNC_UI_TOKEN=... govsync ui --listen 0.0.0.0:8421
    """
    serving()
    serve_ui(settings, listen_at, os.environ.get(UI_TOKEN) or None)
