"""Field-level diffs of a change (secrets and unknown ids shown as such), and what a
recorded spec shows: the planner's and the refresh's comparisons."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from govsync import paths
from govsync.api.kinds import Kind
from govsync.planning.changes import FieldChange
from govsync.state import Entry
from govsync.state.records import FINGERPRINT_PREFIX
from govsync.values import KNOWN_AFTER_APPLY, KNOWN_AFTER_APPLY_TEXT, SENSITIVE


def top_field(path: str) -> str:
    """The top-level spec field of a change's dotted path (``hosts[1]`` -> ``hosts``)."""
    return path.split(".", 1)[0].split("[", 1)[0]


def recorded_shown(entry: Entry) -> dict[str, Any]:
    """A recorded spec as rules and people may see it: secrets' fingerprints hidden."""
    shown: dict[str, Any] = _fingerprints_hidden(entry.read_spec() or {})
    return shown


def field_diff(kind: Kind, before: dict[str, Any], after: dict[str, Any],
               secrets: Sequence[paths.Path] = ()) -> tuple[FieldChange, ...]:
    """Leaf-level changes (deepdiff below the top level), secrets and unknown ids shown
    as such.

    Secrets are the kind's secret fields and ``secrets``, the manifest's own (a
    ``{fromEnv}`` inside an open variant); a fingerprint anywhere (a secret the
    manifest no longer has) is shown as sensitive too."""

    secret_paths = [*(paths.split(s) for s in kind.secrets), *secrets]
    out: list[FieldChange] = []

    def change(parts: paths.Path, t1: Any, t2: Any) -> None:
        hidden = any(paths.under(parts, s) for s in secret_paths)
        # A whole object that appears or goes may hold secrets below it.
        inner = [s[len(parts):] for s in secret_paths if len(s) > len(parts) and paths.under(s, parts)]
        old = _masked(_shown(t1, hidden), inner)
        new = _masked(_shown(t2, hidden), inner)
        out.append(FieldChange(paths.text(parts), old, new))

    # A top-level field whose values are both leaves, or that is on one side only, is
    # one change: no DeepDiff for it (its set-up costs a plan of 1,000 updates about a
    # second).  DeepDiff compares the others, under the keys both sides have.
    nested: list[str] = []
    for key in sorted(before.keys() | after.keys(), key=str):
        t1, t2 = before.get(key, _ABSENT), after.get(key, _ABSENT)
        if _same(t1, t2):
            continue
        if t1 is not _ABSENT and t2 is not _ABSENT and (isinstance(t1, dict | list)
                                                       or isinstance(t2, dict | list)):
            nested.append(key)
        else:
            change((key,), t1, t2)
    if nested:
        from deepdiff import DeepDiff
        from deepdiff.helper import NotPresent

        tree = DeepDiff({k: before[k] for k in nested}, {k: after[k] for k in nested},
                        verbose_level=2, view="tree")
        for items in tree.values():
            for item in items:
                t1, t2 = (_ABSENT if isinstance(t, NotPresent) else t
                          for t in (item.t1, item.t2))
                change(tuple(item.path(output_format="list")), t1, t2)
    out.sort(key=lambda d: d.path)
    return tuple(out)


_ABSENT = object()


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same types throughout (as DeepDiff sees it: 1 and 1.0 differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _masked(value: Any, inner: list[paths.Path]) -> Any:
    """``value`` with every secret at the ``inner`` paths shown as sensitive."""
    for path in inner:
        if paths.has(value, path):
            value = paths.replace(value, path, SENSITIVE)
    return value


def _shown(value: Any, hidden: bool) -> Any:
    if value is _ABSENT:
        return None
    if hidden:
        return SENSITIVE
    if value is KNOWN_AFTER_APPLY:
        return KNOWN_AFTER_APPLY_TEXT
    return _fingerprints_hidden(value)


def _fingerprints_hidden(value: Any) -> Any:
    """``value`` with every recorded secret's fingerprint shown as sensitive."""
    if isinstance(value, str):
        return SENSITIVE if value.startswith(FINGERPRINT_PREFIX) else value
    if isinstance(value, dict):
        return {k: _fingerprints_hidden(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_fingerprints_hidden(v) for v in value]
    return value
