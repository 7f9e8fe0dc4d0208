"""Impact's settings in the project file (contract section 13, "Impact"): ``impact:`` at
the top level (defaults for every environment) and in each environment (overriding
them, key by key).  Used by ``plan`` and the agent, never by ``apply``.

```yaml
impact:
  window: 7d                  # the logged traffic measured: 36h, 7d, 2w
  logQuery: "resource.name = 'dwh'"   # only the logged requests it selects (reports only)
  timeout: 120s               # how long a report is waited for (default 120 s)
  from: logs/recorded.jsonl   # recorded inputs replayed where reports are not available
```

Read with the project file, so a bad window is an error at its line like any other.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

from govsync.files import display_path
from govsync.manifests.wording import unknown_keys
from govsync.planning.impact import Window, parse_window

Report = Callable[..., None]

IMPACT_KEYS = ("window", "logQuery", "timeout", "from")
# How long a report is waited for where ``timeout`` is not given.
DEFAULT_TIMEOUT = 120.0
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class ImpactSettings:
    """``impact:`` of a project or an environment (None: not set here)."""

    window: Window | None = None
    log_query: str | None = None
    timeout: float | None = None
    # A file of recorded inputs (JSON lines {time, stage, input}), relative to the
    # current directory: replayed where the endpoint's reports are not available.
    from_file: str | None = None

    def over(self, base: ImpactSettings | None) -> ImpactSettings:
        """These settings, with what they leave unset taken from ``base``."""
        if base is None:
            return self
        return replace(base, **{f.name: getattr(self, f.name) for f in fields(self)
                                if getattr(self, f.name) is not None})

    @property
    def wait(self) -> float:
        """How long a report is waited for."""
        return self.timeout if self.timeout is not None else DEFAULT_TIMEOUT


def parse_timeout(text: Any) -> float:
    """``120``, ``120s``, ``2m``, ``1h`` in seconds; ValueError otherwise (or not positive)."""
    value = str(text).strip()
    unit = value[-1:] if value[-1:] in _UNITS else ""
    number = value[:-1] if unit else value
    try:
        seconds = float(number) * _UNITS.get(unit, 1.0)
    except ValueError:
        raise ValueError(f"{text!r} is not a timeout: write seconds (120 or 120s), "
                         "minutes (2m) or hours (1h)") from None
    if not seconds > 0 or seconds == float("inf"):
        raise ValueError(f"{text!r}: a timeout is more than 0 seconds")
    return seconds


def parse(value: Any, at: tuple[Any, ...], base: str, report: Report) -> ImpactSettings | None:
    """An ``impact:`` mapping at ``at`` of a project file; every problem to ``report``."""
    if value is None:
        return None
    if not isinstance(value, dict):
        report(at, "impact is a mapping with window (7d), logQuery, timeout (120s) and from "
                   "(a file of recorded inputs)")
        return None
    unknown_keys(value, at, IMPACT_KEYS, report)
    found: dict[str, Any] = {}
    if "window" in value:
        try:
            found["window"] = parse_window(str(value["window"]))
        except ValueError as exc:
            report((*at, "window"), f"impact.window: {exc}")
    if "logQuery" in value:
        query = value["logQuery"]
        if isinstance(query, str):
            found["log_query"] = query
        else:
            report((*at, "logQuery"), "impact.logQuery must be a string (a log query)")
    if "timeout" in value:
        try:
            found["timeout"] = parse_timeout(value["timeout"])
        except ValueError as exc:
            report((*at, "timeout"), f"impact.timeout: {exc}")
    if "from" in value:
        path = value["from"]
        if isinstance(path, str) and path.strip():
            found["from_file"] = display_path(os.path.join(base, path))
        else:
            report((*at, "from"), "impact.from must be a file of recorded inputs (JSON lines "
                                  "{time, stage, input})")
    return ImpactSettings(**found)
