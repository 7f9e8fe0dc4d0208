"""``govsync agent``: continuous reconciliation (contract section 9).

=============  ====================================================================
``loop``       ``Agent``: rounds of cycles, leadership per workspace, statuses,
               notifications' ledger; ``Options`` from the command line
``cycle``      one environment's cycle: plan, apply when it may, its status
``checkout``   the git checkout of ``--repo``
``notify``     webhook, Slack and GitHub sinks; one thread and queue per sink
``reach``      where sinks may send (the operator's SinkPolicy), proxies, and one
               deadline for a whole attempt
``metrics``    the Prometheus metrics
``web``        the HTTP side: probes, metrics, the JSON API, the push webhook,
               the dashboard at ``/``
``control``    ``pause``, ``resume`` and ``accept``, recorded in the workspace
=============  ====================================================================
"""

from __future__ import annotations

from govsync.agent.control import accept, pause, resume
from govsync.agent.loop import Agent, Options
from govsync.agent.reach import SinkPolicy
from govsync.agent.web import Served, create_app

__all__ = ["Agent", "Options", "Served", "SinkPolicy", "accept", "create_app", "pause",
           "resume"]
