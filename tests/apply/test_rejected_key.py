"""A key the API rejects stops apply at once, with one message saying what to do."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from applykit import Govsync, Server, write_hooks


@pytest.mark.parametrize(("key", "status"), [("viewer-key", "403 forbidden"),
                                             ("nobody-knows-this-key", "401 unauthorized")])
def test_apply_with_a_rejected_key_stops_sending(
        serve: Callable[..., Server], make_govsync: Callable[..., Govsync],
        sqlite_state: str, tmp_path: Path, key: str, status: str) -> None:
    server = serve("--viewer-key", "viewer-key")
    gov = make_govsync(sqlite_state, server.url)
    manifests = tmp_path / "m"
    write_hooks(manifests, (f"h{i}" for i in range(40)))

    result = gov.run("apply", str(manifests), "--auto-approve", "--parallelism", "2",
                     env={"GOVSYNC_API_KEY": key})

    assert result.code == 1
    assert "GOVSYNC_API_KEY" in result.err and key not in result.out + result.err
    if status.startswith("401"):
        # The refresh's first read (the creates looked up by name) is refused:
        # nothing is sent at all.
        assert "Error: the API rejected the key (401)" in result.err
        assert "CreateHook" not in result.out + result.err
    else:
        # A viewer key may read: the first creates are what it is refused.
        assert f"Error: apply stopped: the API answered {status} for CreateHook" in result.err
        sent = int(result.out.split(" requests in ")[0].rsplit("(", 1)[1])
        assert 1 <= sent <= 2  # what was in flight when the first answer came; no more
        assert "not sent: the API rejected the key" in result.out
    assert server.objects()["Hook"] == []
    assert json.loads(gov.run("state", "list", "--format", "json").out)["entries"] == []


def test_a_saved_plan_refused_by_the_key_stays_valid(
        serve: Callable[..., Server], make_govsync: Callable[..., Govsync],
        sqlite_state: str, tmp_path: Path) -> None:
    # Issue 11: a viewer key's 403 changed nothing, yet the plan was "stale".
    server = serve("--viewer-key", "viewer-key")
    gov = make_govsync(sqlite_state, server.url)
    manifests = tmp_path / "m"
    write_hooks(manifests, (f"k{i}" for i in range(3)))
    plan = tmp_path / "plan.json"
    assert gov.run("plan", str(manifests), "--out", str(plan)).code == 0
    refused = gov.run("apply", str(plan), env={"GOVSYNC_API_KEY": "viewer-key"})
    assert refused.code == 1 and "403 forbidden" in refused.err
    applied = gov.run("apply", str(plan))
    assert applied.code == 0, applied
    assert len(server.objects()["Hook"]) == 3
