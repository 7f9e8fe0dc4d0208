"""What a policy change would stop, measured over logged traffic (contract section 13,
"Impact"): the window it is measured over, and per created or code-changed policy the
counts of decisions by stage and action of the new code beside the recorded code's, with
a few examples.  ``change.impact`` on a plan; the renderers and rules read ``as_dict``."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, NamedTuple

# How many examples a policy's impact shows.
EXAMPLES = 5

# "7d", "36h", "90m", "3600s", "2w": a positive whole number and a unit.
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_WINDOW = re.compile(r"([0-9]+)([smhdw])")
# The longest window: ten years, more than logs are kept (a time that far back is one a
# clock and a date still hold).
LONGEST_WINDOW = 3650 * 86400


class Window(NamedTuple):
    """A window of logged traffic ending now: as written (``text``) and in seconds."""

    text: str
    seconds: int

    @property
    def evaluation_window(self) -> str:
        """What CreatePolicyReport takes: seconds with an ``s`` suffix (``"604800s"``)."""
        return f"{self.seconds}s"


def parse_window(text: str) -> Window:
    """``text`` as a window; ValueError saying what is accepted for anything else
    (``0s``, ``-1d``, ``7 days``)."""
    match = _WINDOW.fullmatch(text.strip())
    seconds = int(match.group(1)) * _UNITS[match.group(2)] if match else 0
    if seconds <= 0:
        raise ValueError(f"{text!r} is not a window: write a positive whole number and a "
                         "unit, s, m, h, d or w (for example 7d or 36h)")
    if seconds > LONGEST_WINDOW:
        raise ValueError(f"{text!r} is longer than a window can be: at most "
                         f"{LONGEST_WINDOW // 86400}d (ten years)")
    return Window(text.strip(), seconds)


class Source(StrEnum):
    """Where a policy's impact was measured."""

    REPORT = "report"   # the endpoint's impact reports (plan --impact)
    FILE = "file"       # recorded inputs replayed locally (plan --impact-from)


# stage -> action -> how many logged requests that code's decision is that action for
# (never "allow": an allowed request is not an impact).
Counts = dict[str, dict[str, int]]


class Target(NamedTuple):
    """A policy whose impact a plan measures: its address, its live id (None for one not
    yet created), its new code and the recorded code (None for a created policy)."""

    address: str
    policy_id: str | None
    code: str
    recorded: str | None


class Example(NamedTuple):
    """One logged request the new code would decide other than allow."""

    time: str
    stage: str
    decision: str
    user: str | None = None
    resource: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"time": self.time, "stage": self.stage, "decision": self.decision,
                "user": self.user, "resource": self.resource}


class Bucket(NamedTuple):
    """One stretch of the window (from ``start``, an RFC 3339 time): how many logged
    requests the new code, and the recorded code (None for a created policy), decide
    other than allow in it.  The plan page draws a policy's series as a chart."""

    start: str
    new: int
    recorded: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"start": self.start, "new": self.new, "recorded": self.recorded}


# A window is cut into buckets of the first of these lengths that makes at most
# BUCKETS of them: 7d in 7 days, 36h in 36 hours, 90m in 18 of five minutes.
_STEPS = (60, 300, 900, 3600, 86400, 7 * 86400, 30 * 86400)
BUCKETS = 48


def bucket(window: Window, end: datetime, new: Iterable[str],
           recorded: Iterable[str] | None = None) -> tuple[Bucket, ...]:
    """The buckets of ``window`` ending at ``end`` (aware), counting the times (RFC 3339
    texts, as logs carry them) of the requests each code triggers; a time that does not
    parse or lies outside the window is not counted.  For whoever measures impact (a
    report's logs, a replayed file): ``Impact.series``."""
    step = next((s for s in _STEPS if window.seconds / s <= BUCKETS),  # else months
                _STEPS[-1] * -(-window.seconds // (BUCKETS * _STEPS[-1])))
    count = -(-window.seconds // step)
    start = end - timedelta(seconds=count * step)

    def tally(times: Iterable[str]) -> list[int]:
        counts = [0] * count
        for text in times:
            try:
                when = datetime.fromisoformat(text)
            except (TypeError, ValueError):
                continue
            if when.tzinfo is None:
                continue
            index = int((when - start).total_seconds() // step)
            if 0 <= index < count:
                counts[index] += 1
        return counts

    fresh = tally(new)
    before = tally(recorded) if recorded is not None else None
    return tuple(Bucket((start + timedelta(seconds=i * step)).isoformat()
                        .replace("+00:00", "Z"), fresh[i],
                        before[i] if before is not None else None)
                 for i in range(count))


@dataclass(frozen=True)
class Impact:
    """One policy's impact.  ``known`` False: it could not be measured, and ``why`` says
    why (a report failed, timed out, is not offered; a file could not be read); it never
    blocks by itself.  ``recorded`` is None for a created policy (no code before).
    ``evaluated``: how many logged requests were evaluated (None where the source does
    not say)."""

    known: bool
    window: str
    source: Source
    why: str = ""
    new: Counts | None = None
    recorded: Counts | None = None
    examples: tuple[Example, ...] = ()
    evaluated: int | None = None
    # Lines of a file of recorded inputs that could not be read (their line numbers).
    skipped: tuple[int, ...] = ()
    # Triggers over the window, oldest first (``bucket``); empty where not measured.
    series: tuple[Bucket, ...] = ()

    @classmethod
    def unknown(cls, window: str, source: Source, why: str) -> Impact:
        return cls(False, window, source, why)

    @staticmethod
    def total(counts: Counts | None) -> int:
        return sum(n for actions in (counts or {}).values() for n in actions.values())

    def as_dict(self) -> dict[str, Any]:
        """``"impact"`` of a change in JSON, what rules see as ``change.impact``, and what
        a saved plan keeps (``from_dict`` reads it back)."""
        return {"known": self.known, "why": self.why, "window": self.window,
                "source": self.source, "new": self.new, "recorded": self.recorded,
                "newTotal": self.total(self.new), "recordedTotal": self.total(self.recorded),
                "evaluated": self.evaluated,
                "examples": [e.as_dict() for e in self.examples],
                "skippedLines": list(self.skipped),
                "series": [b.as_dict() for b in self.series]}

    @classmethod
    def from_dict(cls, data: Any) -> Impact:
        """What ``as_dict`` wrote; TypeError or ValueError for anything else (a saved plan
        may be hostile)."""
        if not isinstance(data, dict):
            raise TypeError("impact must be an object")
        known, window, why = data.get("known"), data.get("window"), data.get("why", "")
        if not isinstance(known, bool) or not isinstance(window, str) \
                or not isinstance(why, str):
            raise TypeError("impact's known is a boolean, window and why texts")
        evaluated = data.get("evaluated")
        if evaluated is not None and (not isinstance(evaluated, int)
                                      or isinstance(evaluated, bool)):
            raise TypeError("impact's evaluated is a count")
        examples = []
        for item in data.get("examples") or []:
            if not isinstance(item, dict) or not all(
                    isinstance(item.get(k), str) for k in ("time", "stage", "decision")) \
                    or not all(item.get(k) is None or isinstance(item.get(k), str)
                               for k in ("user", "resource")):
                raise TypeError("an impact example is {time, stage, decision, user, "
                                "resource}")
            examples.append(Example(item["time"], item["stage"], item["decision"],
                                    item.get("user"), item.get("resource")))
        skipped = data.get("skippedLines") or []
        if not isinstance(skipped, list) or not all(
                isinstance(n, int) and not isinstance(n, bool) for n in skipped):
            raise TypeError("impact's skippedLines are line numbers")
        return cls(known, window, Source(str(data.get("source"))), why,
                   _counts(data.get("new")), _counts(data.get("recorded")),
                   tuple(examples), evaluated, tuple(skipped), _buckets(data.get("series")))


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _buckets(data: Any) -> tuple[Bucket, ...]:
    if data is None:
        return ()
    if not isinstance(data, list) or not all(
            isinstance(b, dict) and isinstance(b.get("start"), str) and _count(b.get("new"))
            and (b.get("recorded") is None or _count(b.get("recorded"))) for b in data):
        raise TypeError("impact's series is [{start, new, recorded}]")
    return tuple(Bucket(b["start"], b["new"], b.get("recorded")) for b in data)


def _counts(data: Any) -> Counts | None:
    if data is None:
        return None
    if not isinstance(data, dict) or not all(
            isinstance(stage, str) and isinstance(actions, dict)
            and all(isinstance(a, str) and isinstance(n, int) and not isinstance(n, bool)
                    and n >= 0 for a, n in actions.items())
            for stage, actions in data.items()):
        raise TypeError("impact counts are {stage: {action: count}}")
    return {stage: dict(actions) for stage, actions in data.items()}
