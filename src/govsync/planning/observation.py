"""What the server showed, as the planner's input (contract section 12): the refresh runs
first, and the plan decides each address's action once, from the manifests, the state
and this (as Terraform refreshes, then plans).  An offline plan observes nothing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from govsync.planning.changes import Drifted


@dataclass
class Observation:
    """The server as read before a plan."""

    # Whether the server was read at all.
    read: bool = False
    # Each recorded address read: its live object, or None where two independent reads
    # found none (missing).
    live: Mapping[str, dict[str, Any] | None] = field(default_factory=dict)
    # What changed outside govsync, by address.
    changed: Mapping[str, Drifted] = field(default_factory=dict)
    # Each address looked up by the fields that identify it (its name ...): the ids of
    # the live objects found (none: looked up, none found).
    found: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Each Import document's object as read (None: the server has none); an import
    # not read (no read, or none at this endpoint) is absent.
    imports: Mapping[str, dict[str, Any] | None] = field(default_factory=dict)
    # The read that found or verified an address's object (an operation's name).
    read_with: Mapping[str, str] = field(default_factory=dict)
    # Live ids another workspace of this state records: id -> (workspace, address).
    owners: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    # The operations of api-lifecycle.md that this endpoint was found not to serve.
    lacks_writes: bool = False
    # An apply holds the workspace's lock: the creates it has in flight are its own,
    # not to be settled by a read meanwhile.
    running: bool = False
    # Policies whose code the service says does not compile: address -> its error.
    invalid_code: Mapping[str, str] = field(default_factory=dict)
    # Policies whose code the service says compiles.
    valid_code: frozenset[str] = frozenset()

    @property
    def missing(self) -> frozenset[str]:
        return frozenset(a for a, live in self.live.items() if live is None)
