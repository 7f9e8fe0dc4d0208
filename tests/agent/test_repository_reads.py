"""What the agent reads from the repository it follows (issue 30, findings 3 and 10):
a commit may not make it read files outside its checkout, nor keep its state
where a commit can replace it.  In process (``agent --once`` through click's
CliRunner) against a real git repository; the CLI warns when git tracks a
SQLite state."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from agentkit import Repo, git, hooks
from click.testing import CliRunner, Result

from govsync.cli import cli as main
from govsync.state import open_store

ONE = ("apiVersion: govsync/v1\nkind: Project\npaths: {paths}\n"
       "environments:\n  staging:\n    agent: {{autoApply: true}}\n")


def once(repo: Repo, run: Path, *extra: str) -> Result:
    return CliRunner().invoke(main, [
        "agent", "--once", "--repo", str(repo.root), "--checkout", str(run / "checkout"),
        "--endpoint", "local", "--state", str(run / "state.db"), *extra],
        catch_exceptions=False)


@pytest.fixture(autouse=True)
def _here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("GOVSYNC_")]:
        monkeypatch.delenv(name)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """YAML the attacker wants read, outside the checkout."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "hooks.yaml").write_text(hooks(["stolen"]))
    return folder


@pytest.mark.parametrize("paths", ["[../../outside/]", "[{outside}]"])
def test_manifest_paths_outside_the_checkout_are_refused(
        tmp_path: Path, outside: Path, paths: str) -> None:
    repo = Repo(tmp_path / "repo", ONE.format(paths=paths.format(outside=outside)))
    done = once(repo, tmp_path / "run")
    assert done.exit_code == 1, done.output
    assert "outside the agent's checkout" in done.output, done.output
    assert "outside" in done.output.split("staging: Error", 1)[1]
    assert "stolen" not in done.output


def test_symbolic_links_leading_out_are_refused(tmp_path: Path, outside: Path) -> None:
    """A ``govsync.yaml`` symlink, and a manifest folder that is a symlink."""
    repo = Repo(tmp_path / "repo", ONE.format(paths="[manifests/]"))
    os.symlink(outside, repo.root / "manifests")
    git("add", "-A", cwd=repo.root)
    git("commit", "-q", "-m", "a folder leading out", cwd=repo.root)
    done = once(repo, tmp_path / "run")
    assert done.exit_code == 1, done.output
    assert "manifests is outside the agent's checkout" in done.output, done.output
    (tmp_path / "elsewhere.yaml").write_text(ONE.format(paths="[x/]"))
    (repo.root / "govsync.yaml").unlink()
    os.symlink(tmp_path / "elsewhere.yaml", repo.root / "govsync.yaml")
    git("add", "-A", cwd=repo.root)
    git("commit", "-q", "-m", "the project file leading out", cwd=repo.root)
    done = once(repo, tmp_path / "run")
    assert done.exit_code == 1, done.output
    assert "govsync.yaml leads outside the agent's checkout" in done.output, done.output


@pytest.mark.parametrize(("entry", "named"), [
    ("approvals: {required: 1, allowedSigners: ../../signers}\n", "signers"),
    ("agent: {plans: ../../plans/}\n", "plans")])
def test_allowed_signers_and_plans_outside_the_checkout_are_refused(
        tmp_path: Path, entry: str, named: str) -> None:
    (tmp_path / "signers").write_text("")
    (tmp_path / "plans").mkdir()
    repo = Repo(tmp_path / "repo", ONE.format(paths="[manifests/]") + entry)
    repo.commit({"manifests/hooks.yaml": hooks(["a"])})
    done = once(repo, tmp_path / "run")
    assert done.exit_code == 1, done.output
    assert f"{named} is outside the agent's checkout" in done.output, done.output


def test_a_state_tracked_by_git_is_refused_by_the_agent_and_warned_by_the_cli(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Finding 3 without --repo: the agent in the repository refuses the state git
    tracks; the CLI warns (one line) and goes on."""
    repo = Repo(tmp_path / "repo", ONE.format(paths="[manifests/]"))
    state = repo.root / ".govsync" / "state.db"
    with open_store(str(state)) as store:
        store.snapshot("staging")
    git("add", "--force", ".govsync/state.db", cwd=repo.root)
    repo.commit({"manifests/hooks.yaml": hooks(["a"])}, "the state committed")
    monkeypatch.chdir(repo.root)
    done = CliRunner().invoke(main, ["agent", "--once", "--endpoint", "local"],
                              catch_exceptions=False)
    assert done.exit_code == 1, done.output
    assert "is tracked by git" in done.output and "git rm --cached" in done.output
    planned = CliRunner().invoke(main, ["plan", "--env", "staging", "--endpoint", "local"],
                                 catch_exceptions=False)
    assert planned.exit_code == 0, planned.output
    warnings = [line for line in planned.stderr.splitlines() if "tracked by git" in line]
    assert len(warnings) == 1 and os.path.join(".govsync", "state.db") in warnings[0]


def test_accept_says_when_there_is_nothing_to_accept(tmp_path: Path) -> None:
    """``agent accept`` records nothing where no other workspace governs the endpoint,
    and wants a reason."""
    (tmp_path / "govsync.yaml").write_text(ONE.format(paths="[manifests/]"))
    state = str(tmp_path / "state.db")
    with open_store(state) as store:
        store.snapshot("staging")
    args = ["agent", "accept", "staging", "--endpoint", "https://api.example.com/",
            "--state", state]
    done = CliRunner().invoke(main, [*args, "--reason", "new region"], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    assert "nothing to accept: no other workspace governs https://api.example.com" in done.output
    with open_store(state) as store:
        assert "accepted" not in store.agent("staging")
    blank = CliRunner().invoke(main, [*args, "--reason", " "], catch_exceptions=False)
    assert blank.exit_code == 1 and "give the reason" in blank.output, blank.output


def dashboard(repo: Repo, run: Path) -> list[str]:
    """The agent's pages of environment staging, after one round (in process: the
    agent's own objects, its HTTP side through httpx's ASGITransport)."""
    import asyncio

    import httpx

    from govsync.agent import Agent, Options
    from govsync.agentweb import create_app
    from govsync.project import SettingValue

    agent = Agent(Options(
        repo=str(repo.root), checkout=str(run / "checkout"),
        endpoint=SettingValue("local", "option", "--endpoint", ""),
        state=SettingValue(str(run / "state.db"), "option", "--state", "")), {})
    agent.run(once=True)
    app = create_app(agent, token="t", webhook_secret=None)

    async def pages() -> list[str]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://127.0.0.1:8420",
                                     headers={"authorization": "Bearer t"}) as web:
            found = []
            for path in ("/", "/environments/staging", "/environments/staging/plan",
                         "/environments/staging/graph"):
                answer = await web.get(path)
                assert answer.status_code == 200, (path, answer.text[:500])
                found.append(answer.text)
            return found

    return asyncio.run(pages())


@pytest.mark.parametrize("paths", ["[../../outside/]", "[{outside}]"])
def test_the_dashboard_reads_nothing_outside_the_checkout(
        tmp_path: Path, outside: Path, paths: str) -> None:
    """Issue 41, finding 12: an environment whose paths lie outside the checkout is
    neither planned by the agent nor shown by its dashboard: the pages say why, and
    list nothing of those files."""
    repo = Repo(tmp_path / "repo", ONE.format(paths=paths.format(outside=outside)))
    for text in dashboard(repo, tmp_path / "run"):
        assert "stolen" not in text
    assert any("outside the agent&#x27;s checkout" in t or "outside the agent's checkout" in t
               for t in dashboard(repo, tmp_path / "run2"))


def test_the_dashboard_shows_no_allowed_signers_from_outside_the_checkout(
        tmp_path: Path) -> None:
    """Issue 41, finding 12: nor an allowed-signers file outside the checkout."""
    (tmp_path / "signers").write_text(
        "outsider@example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsa"
        "bgH5C9okWi0dh2l9GKJl\n")
    repo = Repo(tmp_path / "repo", ONE.format(paths="[manifests/]")
                + "approvals: {required: 1, allowedSigners: ../../signers}\n")
    repo.commit({"manifests/hooks.yaml": hooks(["a"])})
    for text in dashboard(repo, tmp_path / "run"):
        assert "outsider@example.com" not in text


@pytest.mark.parametrize("recorded", ["../../outside/recorded.jsonl", "{outside}/recorded.jsonl"])
def test_an_impact_file_outside_the_checkout_is_refused(
        tmp_path: Path, outside: Path, recorded: str) -> None:
    """``impact: {from: ...}`` is read by the agent's plan: a commit may not point it out
    of the checkout."""
    (outside / "recorded.jsonl").write_text('{"time": "2026-11-20T09:00:00Z", '
                                            '"stage": "session", "input": {}}\n')
    project = ONE.format(paths="[manifests/]").replace(
        "    agent: {autoApply: true}\n",
        "    agent: {autoApply: true}\n    impact: {from: "
        + recorded.format(outside=outside) + "}\n")
    repo = Repo(tmp_path / "repo", project)
    repo.commit({"manifests/hooks.yaml": hooks(["h1"])})
    done = once(repo, tmp_path / "run")
    assert done.exit_code == 1, done.output
    assert "outside the agent's checkout" in done.output, done.output
    assert "recorded.jsonl" in done.output.split("staging: Error", 1)[1]
