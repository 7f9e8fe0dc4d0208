"""An endpoint without the reads of api-lifecycle.md (``govsync serve --operations
spec``) behaves exactly as before, plus one line in the plan naming the kinds it could
not read."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from refreshkit import Gov, copy_examples, write

from govsync import project
from govsync.agent.cycle import Target, run
from govsync.agentconfig import AgentSettings
from govsync.project import Selection
from govsync.settings import Settings
from govsync.statuses import Status
from testkit import EXAMPLE_SEED, serve, stop

KEY = "spec-only-key"


@pytest.fixture
def spec_only(gov: Gov) -> Iterator[Gov]:
    proc, url = serve(["--operations", "spec", "--api-key", KEY, "--seed", str(EXAMPLE_SEED),
                       "--db", str(gov.folder / "spec-only.db")], key=KEY)
    try:
        yield dataclasses.replace(gov, env={**gov.env, "GOVSYNC_ENDPOINT": url,
                                            "GOVSYNC_API_KEY": KEY})
    finally:
        stop(proc)


def test_plan_apply_and_drift_as_before(spec_only: Gov) -> None:
    gov = spec_only
    manifests = str(copy_examples(gov.folder))
    first = gov.ok("plan", manifests, "--format", "json").json()
    assert first["summary"]["create"] == len(first["changes"])  # nothing blocked
    gov.ok("apply", manifests, "--auto-approve")
    plan = gov.ok("plan", manifests, "--detailed-exitcode")
    assert "No changes" in plan.out
    (line,) = [li for li in plan.out.splitlines() if li.startswith("Check refresh:")]
    assert "not read (the endpoint does not offer these reads)" in line
    assert "Hook" in line and "Space" in line
    drift = gov.ok("drift", manifests, "--format", "json")
    assert drift.json()["inSync"] is True and drift.json()["drift"] == []
    # A second state is not protected here: no read can find the objects (as before).
    lost = dataclasses.replace(gov, workspace=gov.workspace + "-lost")
    again = lost.ok("plan", manifests, "--format", "json").json()
    assert again["summary"]["blocked"] == 0


def test_the_gets_sent_beside_the_probe_reach_it_once_an_environment(gov: Gov) -> None:
    """A refresh sends the Gets of the kinds without a List beside the probe; an endpoint
    without the reads answers each 404.  Whoever reads the endpoint again keeps what it
    found (``api.resource.Offers``): an agent, per environment, so its next cycles send
    them only after the probe: none.  A new environment's (or a command's), once."""
    log = gov.folder / "spec-only.log"
    proc, url = serve(["--operations", "spec", "--api-key", KEY, "--seed", str(EXAMPLE_SEED),
                       "--db", str(gov.folder / "spec-only.db"), "-v"], key=KEY, output=log)
    try:
        at = dataclasses.replace(gov, env={**gov.env, "GOVSYNC_ENDPOINT": url,
                                           "GOVSYNC_API_KEY": KEY})
        copy_examples(gov.folder)
        write(gov.folder, "govsync.yaml", """\
            apiVersion: govsync/v1
            kind: Project
            paths: [manifests/]
            """)
        at.ok("apply", "--auto-approve")

        def gets() -> int:
            return sum("/Get" in line for line in log.read_text().splitlines())

        def environment() -> Target:
            settings = Settings(endpoint=url, api_key=KEY, state=gov.state,
                                workspace=gov.workspace, environ=gov.env,
                                selection=Selection(project.load(
                                    str(gov.folder / "govsync.yaml")), None))
            return Target("default", settings, AgentSettings())

        before = gets()
        target = environment()
        first = run(target, revision="r1", paused=None, frozen=None)
        assert first.status == Status.SYNCED, first.reason
        assert gets() > before  # its first cycle sends them beside its probe
        assert target.offers.reads is False
        before = gets()
        again = run(target, revision="r1", paused=None, frozen=None)
        assert again.status == Status.SYNCED, again.reason
        assert gets() == before  # it knows: the probe first, then nothing
        run(environment(), revision="r1", paused=None, frozen=None)
        assert gets() > before  # another environment's first cycle, once
    finally:
        stop(proc)
