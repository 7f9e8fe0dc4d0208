"""ui/reading.py and ui/app.py in-process: what each environment shows, and the agent's
word on its status when the agent plugs one in."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import httpx
from uikit import CANARIES

from govsync.project import select
from govsync.settings import Settings
from govsync.ui import AgentReport, Status, environments, read_environment
from govsync.ui.app import create_app


def sources(repo: Path) -> dict[str, Settings]:
    return environments(Settings(selection=select(None, None, []), environ=dict(CANARIES)))


def test_each_environment_is_read_with_its_own_workspace(repo: Path) -> None:
    with contextlib.chdir(repo):
        found = sources(repo)
        assert list(found) == ["prod", "staging"]
        assert [s.workspace for s in found.values()] == ["prod", "staging"]
        assert all(s.endpoint is None for s in found.values())  # the API is never called
        prod = read_environment("prod", found["prod"])
        only = environments(Settings(selection=select(None, "staging", [])))
    assert prod.status == Status.UNCERTAIN and prod.plan is not None
    assert prod.approvals.required == 2 and prod.approvals.missing == 2
    assert prod.approvals.signers == ("alice@example.com", "bob@example.com")
    assert [r["approvers"][0]["principal"] for r in prod.history] == ["alice@example.com"]
    assert ("Hook/risk_score", "Policy/risk-based-access") in prod.graph.edges
    assert list(only) == ["staging"]


def test_the_agent_status_is_shown_as_the_agent_gives_it(repo: Path) -> None:
    def agent(name: str) -> AgentReport | None:
        if name == "prod":
            return AgentReport(Status.PAUSED, revision="0123abcd", last_cycle="2026-01-01T00:00:00Z",
                               detail="paused by alice: release freeze")
        return None

    async def overview() -> str:
        app = create_app(sources(repo), statuses=agent)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            answer = await client.get("/")
            assert answer.status_code == 200
            return answer.text

    with contextlib.chdir(repo):
        text = asyncio.run(overview())
    prod, staging = text.split("<tr><th scope=row>")[1:]
    assert 'st-Paused">Paused' in prod and "paused by alice: release freeze" in prod
    assert "<code>0123abcd</code>" in prod and 'datetime="2026-01-01T00:00:00+00:00"' in prod
    assert 'st-Blocked">Blocked' in staging
