"""The dashboard: ``govsync ui``, the agent's ``/``, and ``plan --format html``.

    dashboard.py what an environment shows (status, plan, history, approvals),
                 read from the project and the state without writing either,
                 without secrets and without the API; ``Dashboard`` keeps them
    pages.py     the pages as HTML (server-rendered; the plan's sections are
                 ``render/html.py``'s)
    app.py       the ASGI app (Starlette): GET only, the token, the headers;
                 ``serve`` for the command line
    static/      the styles and scripts, and the vendored svg-pan-zoom (no CDN)

The agent mounts ``app.create_app(sources, token=..., statuses=...)`` with a
``StatusProvider`` of its own.  This package's face imports no web framework:
``plan --format html`` needs none.
"""

from govsync.statuses import AgentReport, Status, StatusProvider
from govsync.ui.dashboard import (
    Dashboard,
    EnvironmentView,
    environments,
    plan_file,
    read_environment,
    saved_plan_file,
)

__all__ = ["AgentReport", "Dashboard", "EnvironmentView", "Status", "StatusProvider",
           "environments", "plan_file", "read_environment", "saved_plan_file"]
