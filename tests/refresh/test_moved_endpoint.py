"""Nothing is sent to an endpoint the workspace's state does not record: a commit (or a
pull request) that points an environment at another host gets a plan that reads
nothing there, neither the refresh nor the live checks, so its key never reaches
that host (apply, which refuses a change there without --allow-endpoint-change, sends
nothing either when it has nothing to do)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
from refreshkit import Gov, copy_examples


class Listener:
    """A loopback port that counts the connections made to it (and answers none)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def elsewhere() -> Iterator[Listener]:
    listener = Listener()
    yield listener
    listener.close()


def test_a_moved_endpoint_is_sent_nothing_by_plan_or_drift(gov: Gov,
                                                          elsewhere: Listener) -> None:
    manifests = str(copy_examples(gov.folder))
    gov.ok("apply", manifests, "--auto-approve")
    moved = {"GOVSYNC_ENDPOINT": elsewhere.url, "GOVSYNC_API_KEY": "the-key"}
    # The examples' policies name owner groups: checking them would read the new
    # endpoint, so plan and drift fail instead, having sent nothing.
    for command in ("plan", "drift"):
        run = gov.run(command, manifests, env=moved)
        assert run.code == 1, run
        assert "nothing is sent to an endpoint the workspace's state does not record" \
            in run.err, run
    # Without live references, the plan says the endpoint changed, and reads nothing.
    hooks = gov.run("plan", manifests, "--target", "Hook/*", env=moved)
    assert hooks.code == 0, hooks
    assert "apply will refuse without --allow-endpoint-change" in hooks.out
    assert elsewhere.connections == 0
    # Said on purpose (the objects are there now), the new endpoint is read.
    allowed = gov.run("plan", manifests, "--allow-endpoint-change", env=moved)
    assert allowed.code == 1 and "cannot run the live checks" in allowed.err, allowed
    assert elsewhere.connections > 0
    elsewhere.connections = 0
    applied = gov.run("apply", manifests, "--auto-approve", env=moved)
    assert applied.code == 0 and "No changes" in applied.out, applied
    assert elsewhere.connections == 0
