"""ui/dashboard.py and ui/app.py in-process: what each environment shows, and the agent's
word on its status when the agent plugs one in."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import Callable
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


def test_a_page_shows_the_agents_current_word_not_the_view_it_cached(repo: Path) -> None:
    """The agent's dashboard: a cycle ends (Blocked at a new revision) between two
    loads within the view's max_age: the second load shows it, not the cached view."""
    word = {"prod": AgentReport(Status.SYNCED, revision="aaaa1111", detail="all applied")}

    async def loads() -> list[str]:
        app = create_app(sources(repo), statuses=word.get, max_age=3600)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://127.0.0.1") as client:
            first = (await client.get("/environments/prod")).text
            word["prod"] = AgentReport(Status.BLOCKED, revision="bbbb2222",
                                       detail="1 blocked change(s)")
            return [first, (await client.get("/environments/prod")).text]

    with contextlib.chdir(repo):
        first, second = asyncio.run(loads())
    assert "aaaa1111" in first and "st-Synced" in first
    assert "bbbb2222" in second and "st-Blocked" in second and "aaaa1111" not in second


def test_a_view_long_out_of_date_is_not_served_while_a_new_one_is_made(
        repo: Path, tmp_path: Path) -> None:
    """``govsync ui``: the first load after a quiet while shows the project as it is
    now, not the plan cached before it changed."""
    copy = tmp_path / "copy"
    shutil.copytree(repo, copy, ignore=shutil.ignore_patterns("*.log"))

    async def loads(change: Callable[[], None]) -> list[str]:
        app = create_app(sources(copy), max_age=0)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://127.0.0.1") as client:
            first = (await client.get("/environments/staging")).text
            change()
            return [first, (await client.get("/environments/staging")).text]

    def break_a_manifest() -> None:
        found = sorted((copy / "manifests").rglob("*.yaml"))[0]
        found.write_text(found.read_text() + "\n  broken: [\n")

    with contextlib.chdir(copy):
        first, second = asyncio.run(loads(break_a_manifest))
    assert "st-Error" not in first
    assert "st-Error" in second
