"""An endpoint without the reads of api-lifecycle.md (``govsync serve --operations
spec``) behaves exactly as before, plus one line in the plan naming the kinds it could
not read."""

from __future__ import annotations

import dataclasses
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
