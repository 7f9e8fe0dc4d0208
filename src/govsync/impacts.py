"""A plan's impact (contract section 13, "Impact"): what ``plan --impact WINDOW``,
``plan --impact-from FILE`` or the project's ``impact:`` ask for (``Request``), measured
beside the plan's reads and put on each created or code-changed policy's change
(``change.impact``) with one line on the plan saying what it was measured over.

``start`` begins at once, in a thread of its own, with what the state shows (each
policy's recorded code in state, its id): the endpoint's reports created and waited for
(refresh/impact.py's ``measure``, with GOVSYNC_REPORT_API_KEY where it is set), or the
file's records replayed in the bounded workers (impactreplay.py), while the plan reads the
server.  ``Measuring.finish``, once the plan is decided, measures only what the plan
changed of that view: a policy whose live code differs from the state's, one the plan's
selection adds.  An impact that cannot be measured is unknown with why, never a block.
Used by ``plan`` and the agent, never by ``apply``.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from govsync import impactfile, runtime
from govsync.api.kinds import POLICY_KIND
from govsync.errors import ConfigError, GovsyncError
from govsync.impactconfig import DEFAULT_TIMEOUT, ImpactSettings
from govsync.manifests.manifest import ManifestSet
from govsync.plan import ENDING, Action, Check, CheckStatus, Plan
from govsync.planning.impact import Impact, Source, Target, Window, parse_window
from govsync.settings import Settings
from govsync.state import Entry

if TYPE_CHECKING:
    from govsync import impactreplay
    from govsync.api.resource import Offers

# The plan's line on impact.
IMPACT_CHECK = "impact"
# The unknown impacts named on the plan's line, at most.
NAMED = 5
WHOLE_FILE = "all recorded"

Measure = Callable[[Sequence[Target]], dict[str, Impact]]


class Kept:
    """Reports' impacts kept across an agent's cycles (one per environment, as its
    ``Offers``): a policy change the agent holds back (approvals, a freeze, a pause) is
    measured once, not with a new report every cycle; measured again once its code, its
    recorded code, the window or the log query changes, or after ``seconds``."""

    def __init__(self, seconds: float = 3600.0) -> None:
        self.seconds = seconds
        self._kept: dict[tuple[Target, str, str | None], tuple[float, Impact]] = {}

    def get(self, target: Target, window: str, log_query: str | None) -> Impact | None:
        found = self._kept.get((target, window, log_query))
        if found is None or time.monotonic() - found[0] > self.seconds:
            return None
        return found[1]

    def put(self, target: Target, window: str, log_query: str | None,
            impact: Impact) -> None:
        if impact.known:  # what could not be measured is asked again
            self._kept[(target, window, log_query)] = (time.monotonic(), impact)


class Request(NamedTuple):
    """What a plan measures: over ``window`` (None: a file's every record), with the
    endpoint's reports (``reports``) and, where they are not available, or alone, the
    file ``from_file``; ``origin`` names where it was asked (for messages)."""

    window: Window | None
    reports: bool
    from_file: str | None
    log_query: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    origin: str = ""
    # Reports' impacts kept from an earlier measurement (the agent's, per environment).
    kept: Kept | None = None

    @property
    def window_text(self) -> str:
        return self.window.text if self.window is not None else WHOLE_FILE


def requested(settings: ImpactSettings | None, window: str | None = None,
              from_file: str | None = None) -> Request | None:
    """The request of a plan: ``--impact WINDOW`` and ``--impact-from FILE`` over the
    project's ``impact:`` (``settings``: the environment's over the top level's); None
    where nothing asks.  ConfigError (exit 1) for a flag's window that is not one (the
    project file's was checked where it was read, at its line)."""
    given = None
    if window is not None:
        try:
            given = parse_window(window)
        except ValueError as exc:
            raise ConfigError(f"--impact: {exc}") from None
    configured = settings or ImpactSettings()
    if given is None and from_file is None and configured.window is None \
            and configured.from_file is None:
        return None
    chosen = given or configured.window
    # --impact asks the endpoint's reports, with a file to fall back on (--impact-from's,
    # else the project's); --impact-from alone replays its file, the window a filter.
    reports = given is not None or (from_file is None and chosen is not None)
    origin = ("--impact and --impact-from" if given is not None and from_file is not None
              else "--impact-from" if from_file is not None
              else "--impact" if given is not None else "the project's impact settings")
    return Request(chosen, reports, from_file or configured.from_file, configured.log_query,
                   configured.wait, origin)


def pre_targets(manifests: ManifestSet, entries: Mapping[str, Entry]) -> list[Target]:
    """What the state shows will be measured: each Policy of the manifests whose code the
    state does not record, with the recorded code and the id there."""
    out = []
    for address, manifest in manifests.objects.items():
        if manifest.kind.name != POLICY_KIND:
            continue
        code = manifest.template.get("code")
        if not isinstance(code, str):
            continue
        entry = entries.get(address)
        before = (entry.read_spec() or {}).get("code") if entry is not None else None
        before = before if isinstance(before, str) else None
        if before != code:
            out.append(Target(address, entry.id if entry is not None and entry.id else None,
                              code, before))
    return out


def targets(plan: Plan, manifests: ManifestSet, recorded: Mapping[str, str]) -> list[Target]:
    """The plan's created or code-changed policies (the selection policytests.annotate
    makes), each with its recorded code (``recorded``: the live code where it was read,
    else the state's)."""
    out = []
    for change in plan.changes:
        if change.kind != POLICY_KIND or change.action in (*ENDING, Action.ORPHAN,
                                                           Action.UNCERTAIN):
            continue
        manifest = manifests.objects.get(change.address)
        code = manifest.template.get("code") if manifest is not None else None
        if not isinstance(code, str) or code == recorded.get(change.address):
            continue
        policy_id = change.id if change.action != Action.CREATE else None
        out.append(Target(change.address, policy_id or None, code,
                          recorded.get(change.address)))
    return out


class Measuring:
    """A measurement under way (``start``), finished on the plan (``finish``)."""

    def __init__(self, request: Request, settings: Settings, first: Sequence[Target],
                 offers: Offers | None = None) -> None:
        self.request = request
        self._settings = settings
        self._offers = offers
        self._first = list(first)
        self._found: dict[str, Impact] = {}
        self._outcomes: dict[str, impactreplay.Outcome] = {}
        self._recorded: impactfile.Recorded | None = None
        self._thread = threading.Thread(target=self._run, name="impact", daemon=True)
        self._failure: BaseException | None = None

    def _run(self) -> None:
        try:
            self._found = self._measure(self._first)
        except BaseException as exc:  # said on the plan, never a traceback
            self._failure = exc

    def _measure(self, chosen: Sequence[Target]) -> dict[str, Impact]:
        if not chosen:
            return {}
        request = self.request
        found: dict[str, Impact] = {}
        if request.reports and request.window is not None:
            found = self._reported(chosen, request.window)
        if request.from_file is None:
            return found
        wanting = [t for t in chosen if t.address not in found
                   or not found[t.address].known]
        if not wanting:
            return found
        from govsync import impactreplay  # the bounded workers: only where a file is replayed

        recorded = self._file()
        missing = list(dict.fromkeys(c for t in wanting for c in (t.code, t.recorded)
                                     if c is not None and c not in self._outcomes))
        if missing and not recorded.error:
            self._outcomes.update(impactreplay.evaluate(missing, recorded.records))
        replayed = impactreplay.impacts(wanting, recorded, request.window_text,
                                        self._outcomes)
        for target in wanting:
            impact = replayed[target.address]
            before = found.get(target.address)
            if before is not None and before.why:
                impact = dataclasses.replace(impact, why="; ".join(filter(None, (
                    f"reports: {before.why}; replayed {recorded.path} instead", impact.why))))
            found[target.address] = impact
        return found

    def _file(self) -> impactfile.Recorded:
        if self._recorded is None:
            assert self.request.from_file is not None
            from govsync import impactreplay  # the bounded workers, started as it is read

            impactreplay.warm()
            self._recorded = impactfile.read(self.request.from_file, self.request.window)
        return self._recorded

    def _reported(self, chosen: Sequence[Target], window: Window) -> dict[str, Impact]:
        text = window.text
        if not self._settings.endpoint:
            return self._unknown(chosen, text, "no endpoint: impact reports are the "
                                               "endpoint's")
        kept, query = self.request.kept, self.request.log_query
        had = {t.address: i for t in chosen
               if kept is not None and (i := kept.get(t, text, query)) is not None}
        asking = [t for t in chosen if t.address not in had]
        if not asking:
            return had
        from govsync.refresh import impact as reports  # asyncio: where reports are asked

        async def ask() -> dict[str, Impact]:
            async with runtime.report_client(self._settings) as client:
                return await reports.measure(client, asking, window, log_query=query,
                                             timeout=self.request.timeout,
                                             offers=self._offers)

        try:
            found = runtime.run(ask())
        except GovsyncError as exc:
            return {**had, **self._unknown(asking, text, str(exc))}
        for target in asking:
            if kept is not None and target.address in found:
                kept.put(target, text, query, found[target.address])
        return {**had, **{t.address: found.get(t.address) or Impact.unknown(
            text, Source.REPORT, "no report was made for it") for t in asking}}

    @staticmethod
    def _unknown(chosen: Sequence[Target], window: str, why: str) -> dict[str, Impact]:
        return {t.address: Impact.unknown(window, Source.REPORT, why) for t in chosen}

    def finish(self, plan: Plan, manifests: ManifestSet, recorded: Mapping[str, str]) -> None:
        """Each target of the plan given its impact (measured now where the plan's view
        differs from the state's), and the plan's line on it."""
        self._thread.join()
        wanted = targets(plan, manifests, recorded)
        if self._failure is not None:
            why = f"it could not be measured ({_said(self._failure)})"
            found = {t.address: Impact.unknown(self.request.window_text,
                                               self._source(), why) for t in wanted}
        else:
            first = {t.address: t for t in self._first}
            again = [t for t in wanted if first.get(t.address) != t
                     or t.address not in self._found]
            try:
                found = {**self._found, **self._measure(again)}
            except Exception as exc:  # said on the plan, never a traceback
                found = {**self._found, **{t.address: Impact.unknown(
                    self.request.window_text, self._source(), _said(exc)) for t in again}}
        by_address = {c.address: c for c in plan.changes}
        for target in wanted:
            by_address[target.address].impact = found.get(target.address)
        note(plan, self.request, {t.address: found[t.address] for t in wanted
                                  if t.address in found}, self._recorded)

    def _source(self) -> Source:
        return Source.REPORT if self.request.reports else Source.FILE


def start(request: Request, settings: Settings, manifests: ManifestSet,
          entries: Mapping[str, Entry], offers: Offers | None = None) -> Measuring:
    """The measurement of ``request`` begun, from what the state shows (``offers``: what
    the endpoint was found to offer, an agent's kept from cycle to cycle: whether it has
    impact reports is learned once)."""
    measuring = Measuring(request, settings, pre_targets(manifests, entries), offers)
    measuring._thread.start()
    return measuring


def _said(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, GovsyncError) else f"{type(exc).__name__}: {text}"


def note(plan: Plan, request: Request, found: Mapping[str, Impact],
         recorded: impactfile.Recorded | None) -> None:
    """The plan's line: what impact was measured over, and which are unknown and why."""
    if not found:
        plan.checks.append(Check(IMPACT_CHECK, CheckStatus.SKIPPED, (
            f"asked by {request.origin}: no created or code-changed policy to measure")))
        return
    parts = [over(request, list(found.values()), recorded)]
    unknown = [(a, i) for a, i in found.items() if not i.known]
    if unknown:
        parts.append(f"unknown for {len(unknown)} of {len(found)} policies: " + "; ".join(
            f"{a} ({i.why})" for a, i in unknown[:NAMED])
            + (f"; and {len(unknown) - NAMED} more" if len(unknown) > NAMED else ""))
    if recorded is not None and recorded.skipped:
        lines = ", ".join(str(n) for n in recorded.skipped_lines[:20])
        more = "…" if recorded.skipped > 20 else ""
        parts.append(f"{recorded.skipped} line(s) of {recorded.path} skipped (lines "
                     f"{lines}{more}; {'; '.join(recorded.described)})")
    if recorded is not None and recorded.cut:
        parts.append(f"{recorded.path} was read in part: {recorded.cut}")
    status = CheckStatus.WARNING if unknown or (recorded is not None and (
        recorded.skipped or recorded.cut)) else CheckStatus.PASSED
    plan.checks.append(Check(IMPACT_CHECK, status, "; ".join(parts)))


def over(request: Request, found: Sequence[Impact], recorded: impactfile.Recorded | None
         ) -> str:
    """What was measured: ``over 7d of logged requests (impact reports)``."""
    sources = {i.source for i in found if i.known}
    said = []
    if Source.REPORT in sources:
        said.append(f"over {request.window_text} of logged requests (the endpoint's impact "
                    "reports)")
    if Source.FILE in sources or (not sources and request.from_file is not None):
        if recorded is not None and not recorded.error:
            span = (f" in the last {request.window.text} ({recorded.outside} older not "
                    "counted)" if request.window is not None else "")
            said.append(f"over {len(recorded.records):,} recorded input(s) of "
                        f"{recorded.path}{span}, replayed locally")
        elif recorded is not None:
            said.append(f"from {recorded.path}: {recorded.error}")
    if not said:
        said.append(f"over {request.window_text} of logged requests")
    return "measured " + " and ".join(said) + f" (asked by {request.origin})"
