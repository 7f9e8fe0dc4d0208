"""The version of every JSON document govsync prints or writes (contract section 3):
plans, drift reports, saved plans, state exports, audit records.  Additions keep the
major number; a change that breaks a reader bumps it."""

from __future__ import annotations

from typing import Final

FORMAT_VERSION: Final = "1.0"


def same_major(version: object) -> bool:
    """Whether a document of ``version`` can be read by this govsync."""
    return str(version).split(".")[0] == FORMAT_VERSION.split(".")[0]
