"""What the long-running commands (`govsync ui`, dashboard.py, and `govsync agent`,
agent.py) set up for their process."""

from __future__ import annotations

import contextlib
import os

from govsync import logs
from govsync.envvars import API_KEY as API_KEY_ENV
from govsync.envvars import UI_TOKEN

# The open files a long-running command asks for (idle clients hold one each).
FILES = 65536


def serving() -> None:
    """What a long-running command sets up for its process: the soft limit of open
    files raised towards the hard one, where the system allows it, and logs
    rate-limited (a flood of failing connections must not flood stderr)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = FILES if hard == resource.RLIM_INFINITY else min(hard, FILES)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        # Not allowed here: the connection cap still holds.
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    logs.throttle([os.environ.get(API_KEY_ENV, ""), os.environ.get(UI_TOKEN, "")])
