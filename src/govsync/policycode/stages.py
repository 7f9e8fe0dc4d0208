"""What the service runs, as data (shared/policy-code.md): the kinds of code, the
stages a policy decides at and the actions each stage allows.  Written once; the
checks, the engines, the JSON Schema's words and the docs read it."""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple


class Role(StrEnum):
    """What a manifest's code is, and so how it is checked."""

    POLICY = "policy"          # Rego, package formal.v2, decisions at the stages below
    PERMISSION = "permission"  # Rego, package formal.app
    HOOK = "hook"              # a JavaScript module whose default export is a function

    @property
    def language(self) -> str:
        return "JavaScript" if self is Role.HOOK else "Rego"


class Stage(StrEnum):
    """A rule a policy module defines: the service evaluates it at that moment."""

    SESSION = "session"
    PRE_REQUEST = "pre_request"
    POST_REQUEST = "post_request"


class StageRow(NamedTuple):
    stage: Stage
    when: str
    actions: tuple[str, ...]


# policy-code.md, "Policies are Rego": one row a stage.
STAGES: tuple[StageRow, ...] = (
    StageRow(Stage.SESSION, "a connection is established", ("allow", "block", "mfa")),
    StageRow(Stage.PRE_REQUEST, "before a query reaches the resource",
             ("allow", "block", "rewrite")),
    StageRow(Stage.POST_REQUEST, "when data comes back",
             ("allow", "filter", "mask", "decrypt")),
)
ACTIONS: dict[str, tuple[str, ...]] = {row.stage.value: row.actions for row in STAGES}

# The packages the service evaluates each kind of Rego in.
PACKAGES: dict[Role, str] = {Role.POLICY: "formal.v2", Role.PERMISSION: "formal.app"}

# Keys govsync adds to a decision's input to evaluate it (a test case's time, the
# loaders' data): a case's input may not hold them.
NOW_KEY = "__now"
DATA_KEY = "__data"
RESERVED_INPUT_KEYS = (NOW_KEY, DATA_KEY)
