"""The agent's settings in the project file (contract section 9): ``agent:`` at the
top level (defaults for every environment) and in each environment (overriding
them, key by key).

```yaml
agent:
  interval: 5m                       # 30s, 5m, 1h, 1h30m
  autoApply: false
  partialApply: false                # true: a blocked change holds back only itself and
                                     # what depends on it; the rest is applied
  freeze: ["* 17-23 * * 5"]          # cron windows: no apply in a minute they match
  timezone: Europe/Paris             # of the freeze windows (default UTC)
  plans: approved/                   # approved saved plans (PLAN.json + PLAN.json.sig)
  notify:
    - type: webhook                  # webhook | slack | github
      url: {fromEnv: GOVSYNC_ALERT_URL}
      secret: {fromEnv: GOVSYNC_ALERT_SECRET}
      events: [outOfSync, applied, failed, blocked, uncertain]
```

Read with the project file, so a bad ``agent:`` is a validation error at its
line like any other.  Cron expressions are parsed by croniter, imported only
when a project has freeze windows.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime, tzinfo
from enum import StrEnum
from typing import Any

from govsync.envvars import OWN
from govsync.files import display_path
from govsync.manifests.wording import unknown, unknown_keys
from govsync.values import SecretRef

Report = Callable[..., None]

AGENT_KEYS = ("interval", "autoApply", "partialApply", "freeze", "timezone", "plans",
              "notify")
# The keys that are true or false: the field each sets.
FLAGS = {"autoApply": "auto_apply", "partialApply": "partial_apply"}
SINK_KEYS = ("type", "name", "url", "secret", "events", "repository", "token", "apiUrl")
DEFAULT_INTERVAL = 300.0
DEFAULT_TIMEZONE = "UTC"
GITHUB_API = "https://api.github.com"
SINK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")
REPOSITORY = re.compile(r"^[A-Za-z0-9_.\-]+/[A-Za-z0-9_.\-]+$")
VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?$")


class Event(StrEnum):
    """What a notification is about: an environment's status, or an apply's outcome."""

    SYNCED = "synced"
    OUT_OF_SYNC = "outOfSync"
    BLOCKED = "blocked"
    UNCERTAIN = "uncertain"
    DRIFTED = "drifted"  # changed outside govsync, or missing on the server
    LOCKED = "locked"
    PAUSED = "paused"
    ERROR = "error"
    APPLIED = "applied"
    FAILED = "failed"


# What a sink is sent when its ``events`` are not given: what a person acts on.
DEFAULT_EVENTS = frozenset({Event.OUT_OF_SYNC, Event.BLOCKED, Event.UNCERTAIN, Event.ERROR,
                            Event.DRIFTED, Event.APPLIED, Event.FAILED})


class SinkType(StrEnum):
    WEBHOOK = "webhook"
    SLACK = "slack"
    GITHUB = "github"


@dataclass(frozen=True)
class Sink:
    """Where notifications go.  ``url``, ``secret`` and ``token`` come from the
    environment (``{fromEnv: VAR}``); a plain ``url`` is allowed (a webhook URL that
    is no secret), a plain secret or token never is."""

    type: SinkType
    name: str
    events: frozenset[Event]
    url: str | SecretRef | None = None
    secret: SecretRef | None = None
    repository: str | None = None  # github: owner/name
    token: SecretRef | None = None  # github
    # github: the API's URL as the project file gives it (None: the one the agent's
    # operator gives, --github-api); it must be that one.
    api_url: str | None = None


@dataclass(frozen=True)
class AgentSettings:
    """One ``agent:`` mapping (None: not set here)."""

    interval: float | None = None  # seconds
    auto_apply: bool | None = None
    # With autoApply: apply what a blocked change does not hold back (agent/partial.py).
    partial_apply: bool | None = None
    freeze: tuple[str, ...] | None = None
    timezone: str | None = None
    plans: str | None = None  # a folder, relative to the current directory
    notify: tuple[Sink, ...] | None = None

    def over(self, base: AgentSettings | None) -> AgentSettings:
        """These settings, with what they leave unset taken from ``base``."""
        if base is None:
            return self
        return replace(base, **{f.name: getattr(self, f.name) for f in fields(self)
                                if getattr(self, f.name) is not None})


def parse_duration(text: str) -> float:
    """``30s``, ``5m``, ``1h``, ``1h30m`` (or a number of seconds) in seconds;
    ValueError when it is none of these, or not positive."""
    value = str(text).strip()
    if value.replace(".", "", 1).isdigit():
        seconds = float(value)
    else:
        match = DURATION.match(value)
        if not value or match is None:
            raise ValueError(f"{text!r} is not a duration: write 30s, 5m, 1h or 1h30m")
        hours, minutes, secs = match.groups()
        seconds = int(hours or 0) * 3600 + int(minutes or 0) * 60 + float(secs or 0)
    if seconds <= 0:
        raise ValueError(f"{text!r}: a duration is more than 0 seconds")
    return seconds


def parse(value: Any, at: tuple[Any, ...], base: str, report: Report) -> AgentSettings | None:
    """An ``agent:`` mapping at ``at`` of a project file; every problem to ``report``."""
    if value is None:
        return None
    if not isinstance(value, dict):
        report(at, "agent is a mapping with interval, autoApply, partialApply, freeze, "
                   "timezone, plans and notify")
        return None
    unknown_keys(value, at, AGENT_KEYS, report)
    found: dict[str, Any] = {}
    if "interval" in value:
        try:
            found["interval"] = parse_duration(value["interval"])
        except ValueError as exc:
            report((*at, "interval"), f"agent.interval: {exc}")
    for key, name in FLAGS.items():
        if key not in value:
            continue
        if isinstance(value[key], bool):
            found[name] = value[key]
        else:
            report((*at, key), f"agent.{key} must be true or false")
    if "timezone" in value:
        zone = value["timezone"]
        try:
            zone_of(zone if isinstance(zone, str) and zone else "?")
            found["timezone"] = zone
        except ValueError:
            report((*at, "timezone"), f"agent.timezone {zone!r} is not a time zone: write an "
                                      "IANA name such as UTC or Europe/Paris")
    if "freeze" in value:
        found["freeze"] = _freeze(value["freeze"], (*at, "freeze"), report)
    if "plans" in value:
        plans = value["plans"]
        if isinstance(plans, str) and plans:
            found["plans"] = plans if os.path.isabs(plans) else display_path(
                os.path.join(base, plans))
        else:
            report((*at, "plans"), "agent.plans must name the folder of approved saved plans")
    if "notify" in value:
        found["notify"] = _sinks(value["notify"], (*at, "notify"), report)
    return AgentSettings(**found)


def _freeze(value: Any, at: tuple[Any, ...], report: Report) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        report(at, "agent.freeze must be a list of cron expressions, such as "
                   "\"* 17-23 * * 5\" (Fridays from 17:00)")
        return ()
    for i, expression in enumerate(value):
        problem = cron_problem(expression)
        if problem:
            report((*at, i), f"agent.freeze: {problem}")
    return tuple(value)


def cron_problem(expression: str) -> str:
    """Why ``expression`` is not a 5-field cron expression ('' if it is one)."""
    from croniter import croniter  # only for projects with freeze windows

    if len(expression.split()) != 5:
        return (f"{expression!r} is not a cron expression of 5 fields (minute hour "
                "day-of-month month day-of-week)")
    if not croniter.is_valid(expression):
        return f"{expression!r} is not a valid cron expression"
    return ""


def frozen(windows: Sequence[str], timezone: str | None, when: datetime) -> str | None:
    """The first freeze window that ``when`` (aware) falls in, at minute precision
    (None: none)."""
    if not windows:
        return None
    from croniter import croniter

    local = when.astimezone(zone_of(timezone or DEFAULT_TIMEZONE)).replace(second=0,
                                                                           microsecond=0)
    return next((w for w in windows if croniter.match(w, local)), None)


def zone_of(name: str) -> tzinfo:
    """The time zone called ``name`` (UTC needs no time-zone database); ValueError
    when there is none of that name."""
    if name == "UTC":
        return UTC
    # The time-zone database's loader: 1.2 ms of every start-up, for a project that
    # names a zone.
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except ZoneInfoNotFoundError as exc:
        raise ValueError(f"no time zone {name!r}") from exc


def _secret(value: Any, at: tuple[Any, ...], report: Report, what: str, *,
            plain: bool = False) -> str | SecretRef | None:
    if isinstance(value, dict) and set(value) == {"fromEnv"}:
        variable = value["fromEnv"]
        if isinstance(variable, str) and variable in OWN:
            report((*at, "fromEnv"), f"{what}: {variable} is one of govsync's own settings, "
                                     "never given to a notification sink: name a variable "
                                     "that holds this sink's own value")
            return None
        if isinstance(variable, str) and VARIABLE.match(variable):
            return SecretRef(variable)
        report((*at, "fromEnv"), f"{what}: fromEnv names an environment variable")
        return None
    if plain and isinstance(value, str) and value:
        return value
    report(at, f"{what} must be {{fromEnv: VARIABLE}}" + (" or a URL" if plain else
                                                          " (never the value itself: the "
                                                          "project file is committed)"))
    return None


def _sinks(value: Any, at: tuple[Any, ...], report: Report) -> tuple[Sink, ...]:
    if not isinstance(value, list):
        report(at, "agent.notify must be a list of sinks (type: webhook, slack or github)")
        return ()
    sinks: list[Sink] = []
    names: set[str] = set()
    for i, body in enumerate(value):
        here = (*at, i)
        if not isinstance(body, dict):
            report(here, "a sink is a mapping with type and url (or repository, for github)")
            continue
        if unknown_keys(body, here, SINK_KEYS, report):
            continue
        try:
            kind = SinkType(str(body.get("type")))
        except ValueError:
            report((*here, "type") if "type" in body else here, unknown(
                f"sink type {body.get('type')!r}", str(body.get("type")), [t.value for t in SinkType],
                otherwise="write webhook, slack or github"))
            continue
        name = body.get("name", f"{kind}-{i + 1}")
        if not isinstance(name, str) or not SINK_NAME.match(name) or name in names:
            report((*here, "name"), f"sink name {name!r}: use letters, digits, '.', '_' and "
                                    "'-', once per list")
            continue
        names.add(name)
        events = _events(body.get("events"), (*here, "events"), report)
        if kind == SinkType.GITHUB and "events" not in body:
            events |= {Event.SYNCED}  # the commit status turns green, the issue closes
        url = secret = token = None
        repository = None
        api_url = None
        if kind == SinkType.GITHUB:
            repository = body.get("repository")
            if not isinstance(repository, str) or not REPOSITORY.match(repository):
                report((*here, "repository") if "repository" in body else here,
                       "a github sink names its repository: repository: owner/name")
                continue
            token = _secret(body.get("token"), (*here, "token"), report, "github token")
            if token is None:
                continue
            api = body.get("apiUrl", "")
            if "apiUrl" in body and (not isinstance(api, str)
                                     or not api.startswith(("https://", "http://"))):
                report((*here, "apiUrl"), "apiUrl must be the GitHub API's URL "
                                          f"(default {GITHUB_API})")
                continue
            api_url = api.rstrip("/") or None
        else:
            url = _secret(body.get("url"), (*here, "url"), report, f"a {kind} sink's url",
                          plain=True)
            if url is None:
                continue
            if "secret" in body:
                found = _secret(body["secret"], (*here, "secret"), report, "secret")
                if found is None:
                    continue
                assert isinstance(found, SecretRef)
                secret = found
        assert isinstance(token, SecretRef | None)
        sinks.append(Sink(kind, name, events, url, secret, repository, token, api_url))
    return tuple(sinks)


def _events(value: Any, at: tuple[Any, ...], report: Report) -> frozenset[Event]:
    if value is None:
        return DEFAULT_EVENTS
    if not isinstance(value, list) or not value:
        report(at, "events must be a list of: " + ", ".join(Event))
        return DEFAULT_EVENTS
    found = set()
    for i, name in enumerate(value):
        try:
            found.add(Event(name))
        except ValueError:
            report((*at, i), unknown(f"event {name!r}", str(name), [e.value for e in Event],
                                     otherwise="known: " + ", ".join(Event)))
    return frozenset(found)
