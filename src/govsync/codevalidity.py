"""What the service says of policies' code: ``GetPolicyCodeValidity`` for a batch of
codes (contract section 13), as plan asks it for every created policy and every
policy whose code changes.

Each distinct code is asked once, a few at a time.  An endpoint that does not
serve the operation answers 404 (an unknown operation): that is learned from the
first call and the answer is None, "not offered", for the caller to say so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from govsync.api.client import AsyncClient
from govsync.errors import NotFoundError
from govsync.policycode import Validity

OPERATION = "GetPolicyCodeValidity"
# Calls in flight at once: the service compiles each; a plan changes a few policies.
CONCURRENCY = 8


async def code_validity(client: AsyncClient, codes: Iterable[str], *,
                        concurrency: int = CONCURRENCY) -> dict[str, Validity] | None:
    """The service's answer for each distinct code, by code; None when the endpoint does
    not offer GetPolicyCodeValidity.  Any other failure (ApiError) is raised."""
    distinct = list(dict.fromkeys(codes))
    if not distinct:
        return {}
    try:
        first = await _ask(client, distinct[0])
    except NotFoundError:
        return None
    answers = {distinct[0]: first}
    limit = asyncio.Semaphore(concurrency)

    async def one(code: str) -> None:
        async with limit:
            answers[code] = await _ask(client, code)

    await asyncio.gather(*(one(code) for code in distinct[1:]))
    return {code: answers[code] for code in distinct}


async def _ask(client: AsyncClient, code: str) -> Validity:
    answer = await client.call(OPERATION, {"code": code})
    return Validity(bool(answer.get("valid")), str(answer.get("ast") or ""),
                    str(answer.get("error") or ""))
