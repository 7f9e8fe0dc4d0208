"""The compiled request checks (govsync/api/_generated_checks.py) agree with the pydantic models.

A compiled check either returns exactly the model's
``model_validate(v).model_dump(mode="json", exclude_none=True)`` or says
``Unsure``; it never accepts what the model refuses.  Hypothesis builds
values near each kind's spec model: valid fields, wrong types, edge lengths,
pattern breakers, trailing newlines, bounds off by one, extra keys.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import annotated_types as at
import checkgen  # tools/checkgen.py (on sys.path: tests/unit/conftest.py)
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from govsync.api import _generated_checks as checks
from govsync.api.catalog import INT_MAX, INT_MIN
from govsync.api.kinds import KINDS, Kind
from govsync.api.modelbase import Int64Text

JUNK = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True),
                 st.text(max_size=3), st.lists(st.integers(0, 1), max_size=2),
                 st.dictionaries(st.text(max_size=2), st.integers(0, 1), max_size=2))


def _unwrap(annotation: Any, metadata: list[Any]) -> tuple[Any, list[Any], bool]:
    optional = False
    if get_origin(annotation) in (typing.Union, __import__("types").UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        optional = len(args) < len(get_args(annotation))
        annotation = args[0]
    if get_origin(annotation) is typing.Annotated:
        inner, *extra = get_args(annotation)
        for item in extra:
            metadata = metadata + (list(item.metadata) if isinstance(item, FieldInfo) else [item])
        annotation = inner
    return annotation, metadata, optional


def _text(metadata: list[Any], valid: bool) -> st.SearchStrategy[Any]:
    pattern = next((m.pattern for m in metadata if getattr(m, "pattern", None)), None)
    lo = next((m.min_length for m in metadata if isinstance(m, at.MinLen)), 0)
    hi = next((m.max_length for m in metadata if isinstance(m, at.MaxLen)), None)
    base = st.from_regex(re.compile(pattern.rstrip("$") + r"\Z"), fullmatch=True) if pattern \
        else st.text(min_size=lo, max_size=max(lo, 8))
    good = base.filter(lambda s: lo <= len(s) <= (hi or len(s)))
    if valid:
        return good
    near = [base.map(lambda s: s + "\n"), st.just(""), st.text(max_size=4)]
    if lo:
        near += [st.just("a" * (lo - 1)), st.just("a" * lo)]
    if hi:
        near += [st.just("a" * hi), st.just("a" * (hi + 1))]
    return st.one_of(good, *near)


def value_of(annotation: Any, metadata: list[Any], depth: int, valid: bool) -> st.SearchStrategy[Any]:
    annotation, metadata, optional = _unwrap(annotation, metadata)
    options: list[st.SearchStrategy[Any]] = [] if valid or depth >= 3 else [JUNK]
    if optional:
        options.append(st.none())
    if annotation is str:
        options.append(_text(metadata, valid))
    elif annotation is bool:
        options.append(st.booleans())
    elif annotation is int:
        lo = next((m.ge for m in metadata if isinstance(m, at.Ge)), -(2**70))
        hi = next((m.le for m in metadata if isinstance(m, at.Le)), 2**70)
        text = next((m for m in metadata if isinstance(m, Int64Text)), None)
        if text is not None:  # a 64-bit integer: a number, or its digits as a string
            lo, hi = max(lo, text.lo), min(hi, text.hi)
        number = st.integers(max(lo, INT_MIN), min(hi, INT_MAX)) if valid else st.one_of(
            st.integers(lo, hi), st.sampled_from([lo - 1, lo, hi, hi + 1, 2**64]),
            st.just(float(lo)))
        options.append(number)
        if text is not None:
            options.append(number.map(str) if valid else st.one_of(
                st.integers(lo - 1, hi + 1).map(str),
                st.sampled_from(["01", "+1", "1e3", "1.0", " 1", "1\n", "", "-", "x"])))
    elif get_origin(annotation) is Literal:
        values = st.sampled_from(get_args(annotation))
        options.append(values if valid else st.one_of(values, st.just("nope")))
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        options.append(model_value(annotation, depth + 1, valid))
    elif get_origin(annotation) is list:
        (item,) = get_args(annotation)
        options.append(st.lists(value_of(item, [], depth + 1, valid), max_size=3))
    elif get_origin(annotation) is dict:
        json_value = st.recursive(
            st.one_of(st.none(), st.booleans(), st.text(max_size=3),
                      st.integers(INT_MIN, INT_MAX) if valid else st.integers(-(2**65), 2**65),
                      st.floats(allow_nan=False, allow_infinity=False) if valid else st.floats()),
            lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=2), inner,
                                                                        max_size=2),
            max_leaves=6)
        options.append(st.dictionaries(st.text(max_size=3), json_value, max_size=3))
    return st.one_of(*options)


def model_value(model: type[BaseModel], depth: int = 0,
                valid: bool = False) -> st.SearchStrategy[dict[str, Any]]:
    """A value near ``model``'s; with ``valid``, one built only of valid parts
    (required fields present, no extra keys; variants may still clash)."""
    fields = {}
    for name, info in model.model_fields.items():
        value = value_of(info.annotation, list(info.metadata), depth, valid)
        fields[name] = value if valid and info.is_required() else st.one_of(st.just(_ABSENT), value)
    extra = st.dictionaries(st.sampled_from(["extra", "nme"]), st.integers(0, 1), max_size=1)

    def build(values: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in values.items() if v is not _ABSENT}
        return {**out, **more}

    return st.builds(build, st.fixed_dictionaries(fields),
                     st.just({}) if valid else st.one_of(st.just({}), st.just({}), extra))


_ABSENT = object()


def dumped(model: type[BaseModel], value: Any) -> Any:
    try:
        return model.model_validate(value).model_dump(mode="json", exclude_none=True)
    except ValidationError:
        return None


def _exotic(value: Any) -> bool:
    """Values the checks leave to the model on purpose: wide integers, inf and nan."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return not INT_MIN <= value <= INT_MAX
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, list):
        return any(_exotic(v) for v in value)
    if isinstance(value, dict):
        return any(_exotic(v) for v in value.values())
    return False


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_the_compiled_check_agrees_with_the_model(kind: Kind) -> None:
    model = kind.request_model
    check = checks.CHECKS[kind.name]
    seen = {"accepted": 0, "refused": 0}

    @settings(max_examples=150, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(st.one_of(model_value(model, valid=True), model_value(model)))
    def agree(value: dict[str, Any]) -> None:
        expected = dumped(model, value)
        try:
            got = check(value)
        except checks.Unsure:
            # Unsure is fine for what the model refuses; for what it accepts,
            # only for the exotic values the checks leave to it on purpose.
            assert expected is None or _exotic(value), f"Unsure of a valid spec: {value!r}"
            seen["refused"] += 1
            return
        assert expected is not None, f"the check accepted what the model refuses: {value!r}"
        # Same content and the same key order (the plan and the state print it).
        assert json.dumps(got) == json.dumps(expected), value
        seen["accepted"] += 1

    agree()
    assert seen["accepted"] > 0 and seen["refused"] > 0, seen


def test_every_kind_has_a_real_compiled_check() -> None:
    """No kind's spec model compiled to a bare ``raise Unsure`` (all would go to pydantic)."""
    source = checkgen.TARGET.read_text()
    for kind in KINDS:
        name = checks.KIND_MODELS[kind.name]
        body = source.split(f"\ndef {name}(", 1)[1].split("\n\n", 1)[0]
        assert "return o" in body, name


def test_the_compiled_facts_are_the_models() -> None:
    for kind in KINDS:
        assert checks.KIND_MODELS[kind.name] == kind.request_model.__name__
        assert kind.fields == tuple(kind.request_model.model_fields)


def test_the_committed_checks_are_current() -> None:
    assert checkgen.TARGET.read_text() == checkgen.generate(), (
        "src/govsync/api/_generated_checks.py is stale: run `python tools/checkgen.py`")


# Heavy packages that validate and an offline plan never load (issues 12 and 22).
HEAVY = ("pydantic", "httpx", "cel_expr_python", "cryptography", "networkx", "starlette",
         "uvicorn", "psycopg", "rich", "asyncio", "govsync.migrate", "govsync.server",
         "govsync.fmt", "govsync.init", "govsync.docs", "subprocess", "pathlib", "pickle")
PLAN_ONLY = ("govsync.cli.workflow", "govsync.commands", "govsync.render", "govsync.apply",
             "govsync.runtime", "govsync.cli.state", "govsync.cli.tools", "govsync.cli.service",
             "govsync.cli.apply", "govsync.cli.agent", "govsync.cli.dashboard",
             "govsync.plan", "govsync.state", "govsync.planfile", "govsync.governance",
             "zoneinfo", "signal")
# The project file's sections with a module of their own (project.SECTIONS, issue 31):
# loaded only for a file that has the section, so not for these manifests alone.
SECTIONS = ("govsync.rules", "govsync.ruleeval", "govsync.bounded", "govsync.approvals",
            "govsync.sshsig", "govsync.agentconfig")
# Apply's engine and the other review commands, which a plan does not run (issue 31).
APPLY_ONLY = ("govsync.cli.workflow", "govsync.cli.apply", "govsync.commands.applying", "govsync.commands.preflight",
              "govsync.commands.sources", "govsync.commands.state_commands", "govsync.apply",
              "urllib.parse")
# What a plan of a state not made yet, shown as text, does not need (issue 31).  (The
# line diffs' module is loaded by the renderers' lines, render/lines.py, since issue 42
# took the lazy package faces away; difflib, which only compares, is not.)
FRESH_PLAN = ("govsync.commands.saving", "govsync.planfile", "govsync.audit", "govsync.drift", "govsync.commands.drifting", "sqlite3", "govsync.state.sqlite", "socket", "getpass", "difflib", "csv",
              "govsync.render.markdown", "govsync.render.graph", "signal")
# Loaded where a log is asked for (GOVSYNC_LOG) or written (issue 31).
LOGGING = ("logging", "govsync.logs")
# Runs govsync's console entry and reports, as it exits, which of them were imported.
# (Without json: validate does not load it.)
PROBE = """
import ast, os, sys
from govsync.cli import main
heavy = ast.literal_eval(sys.argv[2])
sys.argv = ["govsync", *ast.literal_eval(sys.argv[1])]
real_exit = os._exit
def leave(code):
    loaded = ", ".join('"%s"' % h for h in sorted(h for h in heavy if h in sys.modules))
    sys.stderr.write("LOADED=[%s]\\n" % loaded)
    sys.stderr.flush()
    real_exit(code)
os._exit = leave
main()
"""


def test_validate_and_an_offline_plan_never_import_heavy_packages(tmp_path: Any) -> None:
    """Start-up: valid manifests are checked without pydantic, the HTTP client, the CEL
    runtime, cryptography, networkx or the server (issues 12 and 22)."""
    manifest = tmp_path / "m.yaml"
    manifest.write_text("apiVersion: govsync/v1\nkind: Space\nmetadata: {name: a}\n"
                        "---\napiVersion: govsync/v1\nkind: Connector\nmetadata: {name: c-1}\n"
                        "spec: {spaceRef: a}\n")
    lines = tmp_path / "lines.yaml"
    lines.write_text("apiVersion: govsync/v1\nkind: Policy\nmetadata: {name: p}\n"
                     "spec: {description: d, code: \"package p\\nallow := true\\n\","
                     " status: active, groupName: data-platform}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOVSYNC_")}
    # validate loads its own command's module only (govsync.cli.root.COMMANDS), not the
    # plan's and apply's (commands.py, the renderers, the plan, the state): the project
    # file's approvals and rules are read without them.
    for argv, heavy in (
            (["validate", str(manifest)], (*HEAVY, *PLAN_ONLY, *SECTIONS, *LOGGING, "json",
                                           "govsync.cli.envcheck")),
            (["plan", str(manifest), "--state", str(tmp_path / "s.db")],
             (*HEAVY, *SECTIONS, *APPLY_ONLY, *FRESH_PLAN, *LOGGING)),
            # A create shows a multi-line string as its lines without difflib, which
            # only compares two values.
            (["plan", str(lines), "--state", str(tmp_path / "l.db")], ("difflib",))):
        done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv), json.dumps(heavy)],
                              capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
        assert "LOADED=[]" in done.stderr, (argv, done.stderr)


SERVER_SIDE = ("govsync.server", "starlette", "uvicorn", "govsync.fmt", "govsync.init",
               "govsync.docs", "govsync.migrate")


def test_a_plan_against_an_endpoint_never_imports_the_server(tmp_path: Any) -> None:
    """Start-up of the pull-request job: a plan against a served API loads the HTTP
    client but not the reference server's modules (87 ms, once loaded by every
    connection), nor any other command's."""
    from testkit import EXAMPLES, serve, stop

    manifest = tmp_path / "m.yaml"
    manifest.write_text("apiVersion: govsync/v1\nkind: Policy\nmetadata: {name: p}\n"
                        "spec: {description: d, code: 'package p', status: active,"
                        " groupName: data-platform}\n")  # a live reference: ListGroups
    proc, url = serve(["--api-key", "k", "--db", str(tmp_path / "srv.db"),
                       "--seed", str(EXAMPLES / "server-seed.yaml")], key="k")
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GOVSYNC_")}
        env.update(GOVSYNC_ENDPOINT=url, GOVSYNC_API_KEY="k")
        argv = ["plan", str(manifest), "--state", str(tmp_path / "s.db")]
        done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv),
                               json.dumps([*SERVER_SIDE, "httpx"])],
                              capture_output=True, text=True, env=env)
    finally:
        stop(proc)
    assert done.returncode == 0, done.stderr
    assert "Check groups: passed" in done.stdout, done.stdout
    assert 'LOADED=["httpx"]' in done.stderr, done.stderr


def test_the_entry_sets_the_collector_before_the_command_lines_imports() -> None:
    """Issue 31: with the default thresholds the imports alone ran about 34 collections;
    ``python -m govsync`` and the ``govsync`` script set main()'s thresholds first."""
    probe = ("import gc, sys\n"
             "import govsync.__main__\n"
             "print(gc.get_threshold()[0], 'govsync.cli.root' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    threshold, loaded = done.stdout.split()
    assert (threshold, loaded) == ("50000", "True"), done.stdout
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert 'govsync = "govsync.__main__:main"' in pyproject


def test_only_the_commands_that_evaluate_rules_start_their_evaluator(tmp_path: Any) -> None:
    """A project with rules: validate starts the rules' evaluator (a process: the
    caller imports subprocess to start it) as it reads the manifests; environments and
    test read the same project file and start none (each CI job's first step)."""
    (tmp_path / "m.yaml").write_text("apiVersion: govsync/v1\nkind: Space\n"
                                     "metadata: {name: a}\n")
    (tmp_path / "govsync.yaml").write_text(
        "apiVersion: govsync/v1\nkind: Project\npaths: [m.yaml]\n"
        "environments:\n  staging: {}\n"
        "rules:\n  - name: named\n    expression: \"object.name != ''\"\n"
        "    message: every object is named\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOVSYNC_")}
    for argv, starts in ((["validate"], True), (["environments", "--format", "json"], False),
                         (["test"], False)):
        done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv),
                               json.dumps(["subprocess"])], cwd=tmp_path,
                              capture_output=True, text=True, env=env)
        assert done.returncode == 0, (argv, done.stdout, done.stderr)
        assert ('LOADED=["subprocess"]' if starts else "LOADED=[]") in done.stderr, (
            argv, done.stderr)
