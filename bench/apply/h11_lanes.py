"""What a lighter HTTP stack would gain apply: govsync with h11 lanes (a what-if).

Runs the ``govsync`` command line with apply's lanes (one kept-alive connection per
call in flight) on h11 over asyncio streams, the refresh's ``api.lanes.StreamLane``,
in place of httpx's transport, httpcore and anyio: every transport that
``api.transport.open_transport`` makes for many calls is made as for many reads.
Everything else is govsync's own: the plan, the live check, the state writes, the
retry policy, the JSON.  The difference between this process and a plain ``govsync
apply`` on a fresh server is what moving apply's lanes to stream lanes would gain.

It replaces the factory (``open_transport``) for the process, so it follows that
code; the test of the benchmarks runs it, so a change that breaks it is seen.

    python bench/apply/h11_lanes.py [govsync arguments...]   # e.g. -q apply DIR --auto-approve
"""

from __future__ import annotations

import sys
from typing import Any

# As govsync's entry point does before httpx is imported: without it, httpx
# imports its own command line (rich, pygments), which govsync never pays.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

import httpx  # noqa: E402

import govsync.api.transport as transport  # noqa: E402


def patch() -> None:
    """Every transport made from now on for many calls has stream lanes."""
    make = transport.open_transport

    def open_transport(base_url: str, *, connections: int = 1, reads: bool = False,
                       **kw: Any) -> httpx.AsyncBaseTransport:
        return make(base_url, connections=connections, reads=reads or connections > 1, **kw)

    transport.open_transport = open_transport  # type: ignore[assignment]


if __name__ == "__main__":
    patch()
    from govsync.cli import main

    sys.argv[0] = "govsync"
    main()
