"""``govsync agent``: continuous reconciliation (contract section 9).

=================  ================================================================
``loop``           ``Agent``: rounds of cycles, each environment's once it is due,
                   by the agent that leads it; ``Options`` from the command line
``cycle``          one environment's cycle: plan, apply when it may, its status
                   (``statuses.status_of``); ``applied``: what its apply did
``views``          what the agent knows of an environment (``Known``), as the JSON
                   API and the dashboard show it
``leadership``     which workspaces this agent leads (``StateStore.lead``)
``notifications``  each environment's sinks, ledger and deliveries
``ledger``         what was sent, per sink, revision and event (in the state)
``notify``         ``Notifier``: one thread and queue per sink, backoff
``sinks``          webhook, Slack and GitHub: one class each (``SINKS``), over an
                   injectable transport (``SinkTransport``: the deadline, a size)
``message``        ``Message``, ``Delivery`` and ``Result``: what they pass
``checkout``       the git checkout of ``--repo``
``reach``          where sinks may send (the operator's SinkPolicy), proxies, and
                   one deadline for a whole attempt
``metrics``        the Prometheus metrics
``control``        ``pause``, ``resume`` and ``accept``, recorded in the workspace
=================  ================================================================

The agent's HTTP side (probes, metrics, the JSON API, the push webhook and the
dashboard at ``/``) is ``govsync.agentweb``, above both this package and ``govsync.ui``:
nothing here imports the dashboard.
"""

from __future__ import annotations

from govsync.agent.control import accept, pause, resume
from govsync.agent.loop import Agent, Options
from govsync.agent.reach import SinkPolicy

__all__ = ["Agent", "Options", "SinkPolicy", "accept", "pause", "resume"]
