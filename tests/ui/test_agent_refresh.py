"""The environment page shows what the agent's last cycle read on the server (the
dashboard itself plans without the API): its record in history, the app called in
process through httpx's ASGITransport (what Starlette's TestClient wraps; its import
warns of a deprecation in this Starlette), no browser."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from pathlib import Path

import httpx

REFRESH_TESTS = str(Path(__file__).resolve().parents[1] / "refresh")
if REFRESH_TESTS not in sys.path:  # the refresh tests' kit, as tests/change uses it
    sys.path.insert(0, REFRESH_TESTS)
from refreshkit import Gov, console_edit, copy_examples, sqlite_gov, write  # noqa: E402

from govsync import project  # noqa: E402
from govsync.agent.cycle import Target, run  # noqa: E402
from govsync.agentconfig import AgentSettings  # noqa: E402
from govsync.project import Selection  # noqa: E402
from govsync.settings import Settings  # noqa: E402
from govsync.state import open_store  # noqa: E402
from govsync.ui.app import create_app  # noqa: E402
from govsync.ui.dashboard import Status  # noqa: E402

PROJECT = """\
    apiVersion: govsync/v1
    kind: Project
    paths: [manifests/]
    """


__all__ = ["sqlite_gov"]  # the fixture: a folder of its own, a SQLite state


def settings_of(gov: Gov) -> Settings:
    loaded = project.load(str(gov.folder / "govsync.yaml"))
    return Settings(endpoint="local", state=gov.state, workspace=gov.workspace,
                    local_db=str(gov.folder / ".govsync" / "local-api.db"),
                    environ=gov.env, selection=Selection(loaded, None))


def page(settings: Settings) -> str:
    # The dashboard's own settings: no endpoint (it never calls the API).
    app = create_app({"default": dataclasses.replace(settings, endpoint=None)})

    async def get() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://127.0.0.1") as client:
            return await client.get("/environments/default")

    answer = asyncio.run(get())
    assert answer.status_code == 200, answer.text
    return answer.text


def test_the_environment_page_shows_the_agents_last_refresh(sqlite_gov: Gov) -> None:
    gov = sqlite_gov
    copy_examples(gov.folder)
    write(gov.folder, "govsync.yaml", PROJECT)
    gov.ok("apply", "--auto-approve")
    settings = settings_of(gov)
    before = page(settings)
    assert "No agent cycle is recorded" in before
    hook = next(e for e in gov.entries().values() if e["address"] == "Hook/risk_score")
    console_edit(gov, "Hook", hook["id"])
    cycle = run(Target("default", settings, AgentSettings()), revision="r7", paused=None,
                frozen=None)
    assert cycle.status == Status.DRIFTED, cycle.reason
    with open_store(gov.state) as store:  # as the agent's loop records each cycle
        store.add_cycle(gov.workspace, cycle.record())
    after = page(settings)
    section = after[after.index('<h2 id="server">'):]
    section = section[:section.index("</section>")]
    assert "last cycle read the server" in section
    assert "<code>r7</code>" in section
    assert 'st-Drifted">Drifted</span>' in section
    assert "1 object(s) changed outside govsync, 0 missing on the server" in section
    assert "1 object(s) changed outside govsync or missing on the server" in section
