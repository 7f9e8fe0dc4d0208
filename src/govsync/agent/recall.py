"""What the agent recalls of an environment when it starts: the status its last
cycle recorded (the agent's ``cycle`` value) and the last apply its history
records, so the API and the dashboard show them from the first moment, not
``null`` until a cycle ends.  Nothing is created: a state that is not there yet,
or one a commit could replace (``files.exposed_state``), is not opened.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from govsync.agent.applied import Applied, LastApply
from govsync.agent.cycle import Cycle, Target
from govsync.errors import StateError
from govsync.files import exposed_state
from govsync.settings import Settings
from govsync.state import StateStore, exists
from govsync.state.records import AGENT_CYCLE
from govsync.statuses import RecordType

log = logging.getLogger(__name__)

# How many history records are read for the last apply.
SEARCHED = 200


def last_apply(records: Iterable[Mapping[str, Any]]) -> LastApply | None:
    """The newest apply an agent's cycle recorded (its ``applied``, with the revision)."""
    for record in records:
        applied = Applied.from_dict(record.get("applied"))
        if record.get("type") == RecordType.DRIFT and applied is not None:
            revision = record.get("revision")
            return LastApply(applied, revision if isinstance(revision, str) else None)
    return None


def recall(target: Target, store_of: Callable[[Settings], StateStore]
           ) -> tuple[Cycle | None, LastApply | None]:
    """The environment's last recorded cycle and last apply (None, None: none kept, or
    the state is not to be opened)."""
    settings = target.settings
    if exposed_state(settings.state, target.root) or not exists(settings.state):
        return None, None
    try:
        store = store_of(settings)
        recorded = store.agent(target.workspace).get(AGENT_CYCLE)
        records = store.history(target.workspace, SEARCHED)
    except StateError as exc:
        log.warning("agent: %s: its last status was not read: %s", target.name, exc)
        return None, None
    found = (Cycle.from_record(recorded, target.name, target.workspace)
             if isinstance(recorded, dict) else None)
    return found, last_apply(records)
