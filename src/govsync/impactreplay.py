"""Impact measured locally (``plan --impact-from FILE``): the recorded inputs of a file
(impactfile.py) replayed through each policy's new code and its recorded code, with the
engine ``validate`` and ``govsync test`` use, in the bounded worker (policycode/replay.py).

The records are shared out among the workers, one a core, each share evaluated by every
distinct code in one call: 100,000 records by two codes take a few seconds on two cores
(BENCHMARKS.md).  A code whose evaluation does not end has its worker stopped after
``STEP_SECONDS`` on one chunk of inputs: that code's impact is unknown, with why,
and the share is evaluated again without it.  A code that does not compile is unknown
too.  Nothing here blocks a plan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from govsync import bounded
from govsync.bounded import BudgetExceeded, prestart, run_bounded
from govsync.impactfile import Record, Recorded
from govsync.planning.impact import (
    EXAMPLES,
    Bucket,
    Counts,
    Example,
    Impact,
    Source,
    Target,
    bucket,
    parse_window,
)
from govsync.policycode import replay
from govsync.policycode.checks import too_large

# The worker processes: their own, so that the plan's other checks of code (its tests, the
# service's validity) do not wait behind a replay.
WORKER = "impact"
PRELOAD = ("govsync.policycode.checks", "regopy.rego_shared")
# What a share may take beyond its inputs, and per input and code; its memory.
BUDGET_SECONDS = 30.0
PER_EVALUATION = 0.002
BUDGET_BYTES = 1 << 30
# What a chunk of replay.CHUNK inputs may take, one code: a code that loops is stopped then.
STEP_SECONDS = 10.0
# Below this many records a second worker costs more than it saves.
SHARE = 2000


class Outcome(NamedTuple):
    """One code over all the records: why it has no counts (``error``), else the index
    and action of each decision that is not allow, and the inputs that failed."""

    error: str | None
    hits: tuple[tuple[int, str], ...] = ()
    failed: int = 0
    first_failure: str = ""


def warm() -> None:
    """Start the workers now (the file is read meanwhile)."""
    for name in bounded.workers(WORKER, bounded.cores(), 1):
        prestart(PRELOAD, worker=name)


def evaluate(codes: Sequence[str], records: Sequence[Record]) -> dict[str, Outcome]:
    """Each distinct code of ``codes`` over every record, by code."""
    distinct = list(dict.fromkeys(codes))
    out: dict[str, Outcome] = {}
    runnable = []
    for code in distinct:
        large = too_large(code)
        if large is not None:
            out[code] = Outcome(large.message)
        else:
            runnable.append(code)
    if not runnable:
        return out
    items = [(r.stage, r.input, r.now_ns, r.line) for r in records]
    shares = bounded.shares(items, SHARE) or [[]]
    names = bounded.workers(WORKER, len(items), SHARE)
    found: list[list[Outcome]] = [[] for _ in shares]

    def run(i: int) -> None:
        found[i] = _share(runnable, shares[i], names[i])

    bounded.side_by_side(len(shares), run, "impact")
    offsets = [sum(len(s) for s in shares[:i]) for i in range(len(shares))]
    for number, code in enumerate(runnable):
        parts = [share[number] for share in found]
        error = next((p.error for p in parts if p.error is not None), None)
        if error is not None:
            out[code] = Outcome(error)
            continue
        hits = tuple((offset + index, action) for part, offset in zip(parts, offsets,
                                                                      strict=True)
                     for index, action in part.hits)
        out[code] = Outcome(None, hits, sum(p.failed for p in parts),
                            next((p.first_failure for p in parts if p.first_failure), ""))
    return out


def _share(codes: list[str], items: list[replay.Item], worker: str) -> list[Outcome]:
    """Every code over one share, in one worker call; where the worker is stopped, the
    code it was in is named: alone in its step (compiling, or the only code of a chunk),
    it fails and the others go on; else each code of that step is run alone."""
    done: dict[int, Outcome] = {}
    groups = [list(range(len(codes)))]
    while groups:
        group = groups.pop()
        seconds = BUDGET_SECONDS + len(items) * len(group) * PER_EVALUATION
        try:
            got = run_bounded(replay.replay, codes, items,
                              frozenset(range(len(codes))) - set(group), STEP_SECONDS,
                              seconds=seconds, memory=BUDGET_BYTES, worker=worker)
        except BudgetExceeded as exc:
            named, line = _step(exc.last)
            named = [n for n in named if n in group]
            if len(named) == 1:
                done[named[0]] = Outcome(_stopped(exc, line))
                rest = [n for n in group if n != named[0]]
                if rest:
                    groups.append(rest)
            elif named:
                groups += [[n] for n in named]
                rest = [n for n in group if n not in named]
                if rest:
                    groups.append(rest)
            else:  # nothing to name: every code of the call
                for n in group:
                    done[n] = Outcome(_stopped(exc, None))
            continue
        for n in group:
            done[n] = _outcome(got[n])
    return [done[i] for i in range(len(codes))]


def _outcome(found: replay.Replayed | None) -> Outcome:
    if found is None:
        return Outcome("not evaluated")
    return Outcome(found.error, found.hits, found.failed, found.first_failure)


def _step(last: str) -> tuple[list[int], int | None]:
    """(the codes, the line) of a step ``code 0,1: line L`` or ``code N: compile``."""
    head, _, what = last.partition(": ")
    numbers = head.removeprefix("code ").split(",")
    if not head.startswith("code ") or not all(n.isdigit() for n in numbers):
        return [], None
    line = what.removeprefix("line ")
    return [int(n) for n in numbers], int(line) if what.startswith("line ") and \
        line.isdigit() else None


def _stopped(exc: BudgetExceeded, line: int | None) -> str:
    where = f" on the recorded inputs from line {line}" if line is not None else ""
    return (f"the Rego engine was stopped{where}: the code loops, crashed it or went over "
            f"govsync's budget ({exc.why})")


# -- per policy -----------------------------------------------------------------------


def impacts(targets: Sequence[Target], recorded: Recorded, window: str,
            known: Mapping[str, Outcome] | None = None) -> dict[str, Impact]:
    """The impact of each target over the records of a file (``known``: outcomes of
    codes evaluated before, by code; each other code is evaluated now)."""
    if recorded.error:
        return {t.address: Impact.unknown(window, Source.FILE, recorded.error)
                for t in targets}
    codes = [c for t in targets for c in (t.code, t.recorded) if c is not None]
    have = dict(known or {})
    missing = [c for c in dict.fromkeys(codes) if c not in have]
    if missing:
        have.update(evaluate(missing, recorded.records))
    return {t.address: one(t, have, recorded, window) for t in targets}


def one(target: Target, outcomes: Mapping[str, Outcome], recorded: Recorded,
        window: str) -> Impact:
    new = outcomes[target.code]
    before = outcomes[target.recorded] if target.recorded is not None else None
    if new.error is not None:
        return _unknown(target, recorded, window, f"the new code: {new.error}")
    if before is not None and before.error is not None:
        return _unknown(target, recorded, window, f"the recorded code: {before.error}")
    if new.failed and not new.hits:  # "none" would read as measured, and as harmless
        return _unknown(target, recorded, window, (
            f"the new code failed on {new.failed:,} recorded request(s) and decided none "
            f"other than allow (first: {new.first_failure})"))
    records = recorded.records
    why = ""
    failed = new.failed + (before.failed if before is not None else 0)
    if failed:
        why = (f"{failed} evaluation(s) failed and are not counted (first: "
               f"{new.first_failure or (before.first_failure if before else '')})")
    return Impact(True, window, Source.FILE, why, counts(new.hits, records),
                  counts(before.hits, records) if before is not None else None,
                  examples(new.hits, before.hits if before is not None else (), records),
                  len(records), recorded.skipped_lines,
                  _series(window, new.hits, before.hits if before is not None else None,
                          records))


def _series(window: str, new: Sequence[tuple[int, str]],
            before: Sequence[tuple[int, str]] | None, records: Sequence[Record]
            ) -> tuple[Bucket, ...]:
    """The new and the recorded code's hits over the window ending now (the plan page's
    chart); none where the whole file was replayed (no window)."""
    try:
        over = parse_window(window)
    except ValueError:
        return ()
    return bucket(over, datetime.now(UTC), (records[i].time for i, _ in new),
                  None if before is None else (records[i].time for i, _ in before))


def _unknown(target: Target, recorded: Recorded, window: str, why: str) -> Impact:
    return Impact(False, window, Source.FILE, why, evaluated=len(recorded.records),
                  skipped=recorded.skipped_lines)


def counts(hits: Sequence[tuple[int, str]], records: Sequence[Record]) -> Counts:
    out: Counts = {}
    for index, action in hits:
        stage = out.setdefault(records[index].stage, {})
        stage[action] = stage.get(action, 0) + 1
    return out


def examples(new: Sequence[tuple[int, str]], before: Sequence[tuple[int, str]],
             records: Sequence[Record]) -> tuple[Example, ...]:
    """Up to EXAMPLES of the new code's decisions: those the recorded code did not make
    first, then the others, in the file's order."""
    was = dict(before)
    changed = [(i, a) for i, a in new if was.get(i) != a]
    same = [(i, a) for i, a in new if was.get(i) == a]
    return tuple(example(records[i], a) for i, a in (changed + same)[:EXAMPLES])


def example(record: Record, action: str) -> Example:
    item = record.input
    return Example(record.time, record.stage, action, _user(item), _text(item, "resource",
                                                                           "name"))


def _user(item: Mapping[str, Any]) -> str | None:
    for who in ("user", "end_user"):
        for key in ("username", "email"):
            found = _text(item, who, key)
            if found:
                return found
    return None


def _text(item: Mapping[str, Any], outer: str, key: str) -> str | None:
    inner = item.get(outer)
    value = inner.get(key) if isinstance(inner, dict) else None
    return value[:200] if isinstance(value, str) else None
