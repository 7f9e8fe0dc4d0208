"""An endpoint without the reads of api-lifecycle.md (``govsync serve --operations
spec``) behaves exactly as before, plus one line in the plan naming the kinds it could
not read."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from refreshkit import Gov, copy_examples

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


def test_the_gets_sent_beside_the_probe_reach_it_once_a_process(gov: Gov) -> None:
    """A refresh sends the Gets of the kinds without a List beside the probe; an endpoint
    without the reads answers each 404.  A process that has found it so (an agent
    refreshes every cycle) sends them only after the probe from then on: none.  Here
    the in-process apply's duplicate lookup finds it so; a new process, once."""
    log = gov.folder / "spec-only.log"
    proc, url = serve(["--operations", "spec", "--api-key", KEY, "--seed", str(EXAMPLE_SEED),
                       "--db", str(gov.folder / "spec-only.db"), "-v"], key=KEY, output=log)
    try:
        at = dataclasses.replace(gov, env={**gov.env, "GOVSYNC_ENDPOINT": url,
                                           "GOVSYNC_API_KEY": KEY})
        manifests = str(copy_examples(gov.folder))
        at.ok("apply", manifests, "--auto-approve")

        def gets() -> int:
            return sum("/Get" in line for line in log.read_text().splitlines())

        before = gets()
        at.ok("plan", manifests, "--detailed-exitcode")
        assert gets() == before  # this process knows: the probe first, then nothing
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("GOVSYNC_")},
               "GOVSYNC_STATE": at.state, "GOVSYNC_WORKSPACE": at.workspace, **at.env}
        fresh = subprocess.run([sys.executable, "-m", "govsync", "plan", manifests,
                                "--detailed-exitcode"], env=env, capture_output=True,
                               text=True, timeout=120)
        assert fresh.returncode == 0, fresh.stdout + fresh.stderr
        assert gets() > before  # a new process sends them beside its probe, once
    finally:
        stop(proc)
