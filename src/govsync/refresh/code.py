"""The service's own check of policies' code before a plan decides (contract section
13): GetPolicyCodeValidity for each created or code-changed policy, asked beside the
refresh's reads, its answers an input of the planner (``Observation.invalid_code``:
such a change is blocked with the service's error, ``Why.CODE_INVALID``), and one line
on the plan saying what was asked and what was not."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from govsync.api.client import AsyncClient
from govsync.codevalidity import OPERATION, code_validity
from govsync.errors import ApiError
from govsync.plan import CODE_CHECK, Check, CheckStatus, Observation, Plan
from govsync.policycode import Validity


@dataclass
class Verdicts:
    """What the service said of each policy's code asked about (by address); ``offered``
    False where the endpoint does not serve the operation, ``failed`` why asking failed."""

    answers: dict[str, Validity] = field(default_factory=dict)
    offered: bool = True
    failed: str = ""

    def merged(self, other: Verdicts) -> Verdicts:
        return Verdicts({**self.answers, **other.answers}, self.offered and other.offered,
                        self.failed or other.failed)

    def observed(self, seen: Observation) -> Observation:
        """``seen`` with the service's answers (what the planner decides from)."""
        return dataclasses.replace(
            seen, invalid_code={a: v.error or "the code does not compile"
                                for a, v in self.answers.items() if not v.valid},
            valid_code=frozenset(a for a, v in self.answers.items() if v.valid))


async def ask(client: AsyncClient, codes: Mapping[str, str]) -> Verdicts:
    """GetPolicyCodeValidity for each distinct code of ``codes`` (address -> code)."""
    if not codes:
        return Verdicts()
    try:
        found = await code_validity(client, codes.values())
    except ApiError as exc:
        return Verdicts(failed=exc.message if hasattr(exc, "message") else str(exc))
    if found is None:
        return Verdicts(offered=False)
    return Verdicts({address: found[code] for address, code in codes.items()})


def note(plan: Plan, verdicts: Verdicts, asked: int) -> None:
    """The plan's line on the service's check of ``asked`` policies' code."""
    if not asked:
        return
    if not verdicts.offered:
        plan.checks.append(Check(CODE_CHECK, CheckStatus.SKIPPED, (
            f"this endpoint does not offer {OPERATION}: the service's check of {asked} "
            "policies' code was not made (govsync validate compiles it offline)")))
        return
    if verdicts.failed:
        plan.checks.append(Check(CODE_CHECK, CheckStatus.WARNING, (
            f"{OPERATION} failed ({verdicts.failed}): the service checks the code of "
            f"{asked} policies when it is sent")))
        return
    invalid = sorted(a for a, v in verdicts.answers.items() if not v.valid)
    if invalid:
        plan.checks.append(Check(CODE_CHECK, CheckStatus.FAILED, (
            f"{OPERATION}: the service says the code of {', '.join(invalid)} does not "
            f"compile ({len(verdicts.answers) - len(invalid)} of {asked} compile)")))
        return
    plan.checks.append(Check(CODE_CHECK, CheckStatus.PASSED, (
        f"{OPERATION}: the service compiles the code of {', '.join(sorted(verdicts.answers))}")))


def skipped(plan: Plan, asked: int, why: str) -> None:
    """The plan's line for a check not made (``--refresh=false``, no endpoint)."""
    if asked:
        plan.checks.append(Check(CODE_CHECK, CheckStatus.SKIPPED, (
            f"{OPERATION} not asked ({why}): the service's check of {asked} policies' code "
            "was not made (govsync validate compiles it offline)")))
