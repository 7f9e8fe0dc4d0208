"""The corpus of broken manifests: every user error class, one case each.

Each directory under ``broken/`` holds one or more manifest files and
``expected.txt``: one line per error that ``govsync validate`` must print,
``RELPATH:LINE:COL: <part of the message>``, RELPATH relative to the case.
Every case must exit 1 without a traceback, print exactly those errors (no
spurious extra ones), and ``govsync plan`` on it must fail the same way
without sending a request or writing state.

A case with ``expected-plan.txt`` instead is valid offline (``validate``
exits 0) and fails only at plan time (a secret's variable not set).

Inputs that should not be committed (a file over 10 MiB, bytes that are not
UTF-8, a control character, a document nested deep enough to crash libyaml)
are generated in ``tmp_path`` by the tests at the end.
"""

from __future__ import annotations

import http.server
import os
import re
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from govsync.cli import cli

BROKEN = Path(__file__).parent / "broken"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "manifests"
CASES = sorted(p.name for p in BROKEN.iterdir() if (p / "expected.txt").is_file())
PLAN_CASES = sorted(p.name for p in BROKEN.iterdir() if (p / "expected-plan.txt").is_file())

ERROR_LINE = re.compile(r"^(?P<where>.+?:\d+:\d+): (?P<message>.*)$")
# The variables that case 89 reads: never set while the tests run.
UNSET_VARIABLES = ("GOVSYNC_BROKEN_CORPUS_UNSET_KEY", "GOVSYNC_BROKEN_CORPUS_UNSET_LOG_KEY")


# --- a loopback API that must never be called ----------------------------------


@dataclass
class Tripwire:
    """An HTTP server on loopback that records every request it gets."""

    url: str
    requests: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def _tripwire_server() -> Iterator[Tripwire]:
    wire = Tripwire("")

    class Handler(http.server.BaseHTTPRequestHandler):
        def _any(self) -> None:
            wire.requests.append(f"{self.command} {self.path}")
            self.send_response(500)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _any

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    wire.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield wire
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def tripwire(_tripwire_server: Tripwire) -> Tripwire:
    """The loopback server, with no request recorded yet."""
    _tripwire_server.requests.clear()
    return _tripwire_server


@pytest.fixture(autouse=True)
def _no_govsync_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing from the developer's shell changes what the cases do; an API
    key is set, so that a plan that wanted to call the API could."""
    for name in list(os.environ):
        if name.startswith("GOVSYNC_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("GOVSYNC_API_KEY", "broken-corpus-dummy-key")


# --- helpers ---------------------------------------------------------------------


def read_expected(path: Path) -> list[tuple[str, str]]:
    """(``RELPATH:LINE:COL``, message part) for each line of an expected file."""
    expected = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        match = ERROR_LINE.match(line)
        assert match, f"{path}: not RELPATH:LINE:COL: message: {line!r}"
        expected.append((match["where"], match["message"]))
    assert expected, f"{path} lists no error"
    return expected


def invoke(args: list[str]) -> Result:
    return CliRunner().invoke(cli, args, catch_exceptions=True)


def assert_errors(result: Result, expected: list[tuple[str, str]]) -> None:
    """Exit 1, no traceback, and exactly the expected FILE:LINE:COL errors."""
    shown = f"exit {result.exit_code}; output:\n{result.output}"
    assert result.exit_code == 1, shown
    # An exception other than the exit would be a crash that click swallowed.
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{result.exception!r}\n{shown}"
    )
    assert "Traceback" not in result.output, shown
    errors = [line for line in result.stderr.splitlines() if ERROR_LINE.match(line)]
    unmatched = list(errors)
    for where, message in expected:
        hit = next(
            (e for e in unmatched if e.startswith(f"{where}: ") and message in e), None
        )
        assert hit is not None, f"expected `{where}: ...{message}...` among:\n" + "\n".join(errors)
        unmatched.remove(hit)
    assert not unmatched, "unexpected errors:\n" + "\n".join(unmatched)
    assert len(errors) == len(expected)


def validate(where: Path) -> Result:
    return invoke(["validate", str(where)])


def plan(where: Path, state: Path, endpoint: str) -> Result:
    return invoke(["plan", str(where), "--state", str(state), "--endpoint", endpoint])


def assert_plan_refused(
    where: Path,
    expected: list[tuple[str, str]],
    tmp_path: Path,
    tripwire: Tripwire,
    *,
    check_state: bool = True,
) -> None:
    state = tmp_path / "state" / "state.db"
    assert_errors(plan(where, state, tripwire.url), expected)
    assert tripwire.requests == [], "plan sent requests for broken manifests"
    if check_state:
        assert not state.exists(), "plan wrote the state for broken manifests"
        assert not state.parent.exists(), "plan created the state directory"


# --- the committed corpus ----------------------------------------------------------


def test_corpus_is_large_enough() -> None:
    assert len(CASES) + len(PLAN_CASES) >= 40
    for name in CASES + PLAN_CASES:
        assert re.fullmatch(r"\d\d-[a-z0-9-]+", name), name
        assert any(p.suffix in (".yaml", ".yml") for p in (BROKEN / name).rglob("*")), name


@pytest.mark.parametrize("case", CASES)
def test_validate_reports_every_error(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    here = BROKEN / case
    monkeypatch.chdir(here)
    assert_errors(validate(Path(".")), read_expected(here / "expected.txt"))


@pytest.mark.parametrize("case", CASES)
def test_plan_refuses_without_request_or_state(
    case: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tripwire: Tripwire
) -> None:
    here = BROKEN / case
    monkeypatch.chdir(here)
    assert_plan_refused(Path("."), read_expected(here / "expected.txt"), tmp_path, tripwire)


@pytest.mark.parametrize("case", PLAN_CASES)
def test_plan_only_case_is_valid_offline(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(BROKEN / case)
    result = validate(Path("."))
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("case", PLAN_CASES)
def test_plan_reports_unset_secret_variable(
    case: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tripwire: Tripwire
) -> None:
    here = BROKEN / case
    monkeypatch.chdir(here)
    for name in UNSET_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert_plan_refused(
        Path("."), read_expected(here / "expected-plan.txt"), tmp_path, tripwire,
        check_state=False,
    )


@pytest.mark.parametrize("case", PLAN_CASES)
def test_plan_with_unset_secret_variable_writes_no_state(
    case: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tripwire: Tripwire
) -> None:
    monkeypatch.chdir(BROKEN / case)
    for name in UNSET_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    state = tmp_path / "state" / "state.db"
    assert plan(Path("."), state, tripwire.url).exit_code == 1
    assert not state.exists()


def test_examples_stay_valid() -> None:
    """The checks that the corpus exercises do not reject valid manifests."""
    result = validate(EXAMPLES)
    assert result.exit_code == 0, result.output


# --- generated inputs --------------------------------------------------------------

VALID = "apiVersion: govsync/v1\nkind: Space\nmetadata:\n  name: analytics\n"


def write(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.write_bytes(data)
    return path


def padded(size: int) -> bytes:
    """A valid manifest followed by comment lines, exactly ``size`` bytes long."""
    head = VALID.encode()
    line = b"# " + b"x" * 77 + b"\n"  # 80 bytes
    body = line * ((size - len(head)) // len(line))
    rest = size - len(head) - len(body)
    tail = (b"#" + b"y" * (rest - 2) + b"\n") if rest >= 2 else b"\n" * rest
    data = head + body + tail
    assert len(data) == size
    return data


def test_file_over_10_mib_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tripwire: Tripwire
) -> None:
    case = tmp_path / "case"
    write(case / "ok.yaml", VALID.replace("analytics", "payments"))
    write(case / "big.yaml", padded(10 * 1024 * 1024 + 1))
    monkeypatch.chdir(case)
    expected = [("big.yaml:1:1", "file is larger than 10 MiB: split it")]
    started = time.perf_counter()
    assert_errors(validate(Path(".")), expected)
    assert time.perf_counter() - started < 5
    assert_plan_refused(Path("."), expected, tmp_path, tripwire)


def test_file_of_exactly_10_mib_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "big.yaml", padded(10 * 1024 * 1024))
    monkeypatch.chdir(tmp_path)
    result = validate(Path("."))
    assert result.exit_code == 0, result.output


def test_file_not_utf8_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tripwire: Tripwire
) -> None:
    case = tmp_path / "case"
    # "café" in latin-1: 0xe9 is not valid UTF-8 here.
    write(case / "latin1.yaml", VALID.replace("analytics", "caf\xe9").encode("latin-1"))
    monkeypatch.chdir(case)
    expected = [("latin1.yaml:4:12", "file is not UTF-8 (byte 0xe9): save it as UTF-8")]
    assert_errors(validate(Path(".")), expected)
    assert_plan_refused(Path("."), expected, tmp_path, tripwire)


def test_control_character_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tripwire: Tripwire
) -> None:
    case = tmp_path / "case"
    write(case / "ctl.yaml", VALID.replace("analytics", "\u00e9t\x01e"))
    monkeypatch.chdir(case)
    expected = [("ctl.yaml:4:11", "character U+0001 is not allowed in YAML: remove it")]
    assert_errors(validate(Path(".")), expected)
    assert_plan_refused(Path("."), expected, tmp_path, tripwire)


def test_duplicate_keys_spelt_differently(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `true` and `True` are the same YAML key (once a crash: StopIteration).
    write(tmp_path / "dup.yaml", VALID + "spec:\n  true: 1\n  True: 2\n")
    monkeypatch.chdir(tmp_path)
    assert_errors(validate(Path(".")), [("dup.yaml:7:3", "duplicate key 'True' (first at line 6, column 3)")])


def bomb(levels: int, width: int) -> str:
    lines = [VALID, f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    lines.append(f"spec:\n  description: *l{levels - 1}\n")
    return "\n".join(lines)


def merge_bomb(levels: int, width: int) -> str:
    lines = [VALID, "m0: &m0 {a: 1, b: 2}"]
    for i in range(1, levels):
        refs = ", ".join(f"k{j}: *m{i - 1}" for j in range(width))
        lines.append(f"m{i}: &m{i} {{<<: *m{i - 1}, {refs}}}")
    lines.append(f"spec: *m{levels - 1}\n")
    return "\n".join(lines)


@pytest.mark.parametrize(
    "text",
    [bomb(9, 9), bomb(30, 2), bomb(4, 1000), merge_bomb(12, 10)],
    ids=["9x9", "30x2", "4x1000", "merge-keys"],
)
def test_alias_bomb_is_refused_quickly_in_bounded_memory(
    text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tripwire: Tripwire
) -> None:
    case = tmp_path / "case"
    write(case / "bomb.yaml", text)
    monkeypatch.chdir(case)
    expected = [("bomb.yaml:1:1", "expands to more than 100,000 values through aliases")]
    started = time.perf_counter()
    result = validate(Path("."))
    elapsed = time.perf_counter() - started
    # Memory on a second run, the modules being imported by the first.
    tracemalloc.start()
    try:
        validate(Path("."))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Fully expanded, these documents hold from 10^6 to 10^12 values.
    assert elapsed < 3, f"took {elapsed:.1f} s"
    assert peak < 32 * 1024 * 1024, f"peak {peak / 2**20:.0f} MiB"
    assert_errors(result, expected)
    assert_plan_refused(Path("."), expected, tmp_path, tripwire)


def nested(depth: int, *, long_line: bool) -> str:
    """A Form whose free-form ``input`` nests ``depth`` flow lists."""
    text = (
        VALID.replace("Space", "Form")
        + "spec:\n  fields:\n    - name: x\n      type: text\n      config:\n"
        + "        optionsSource:\n          input: {a: " + "[" * depth + "]" * depth + "}\n"
    )
    if long_line:  # forces the event-by-event depth check before composing
        text += "# " + "z" * 2000 + "\n"
    return text


@pytest.mark.parametrize("long_line", [False, True], ids=["composed", "events-first"])
def test_deep_nesting_is_refused_at_the_101st_level(
    long_line: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Levels: document, spec, fields, item, config, optionsSource, input: the
    # 94th '[' is the 101st level, at column 21 + 94.
    write(tmp_path / "deep.yaml", nested(150, long_line=long_line))
    monkeypatch.chdir(tmp_path)
    assert_errors(validate(Path(".")), [("deep.yaml:11:115", "nested more than 100 levels deep")])


def test_nesting_just_under_the_limit_is_fine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "deep.yaml", nested(93, long_line=True))
    monkeypatch.chdir(tmp_path)
    result = validate(Path("."))
    assert result.exit_code == 0, result.output


LABEL = ("apiVersion: govsync/v1\nkind: DataLabel\nmetadata:\n  name: ok\nspec:\n"
         "  classifierType: regex\n  classifierData: '[0-9]{4}'\n")


@pytest.mark.parametrize(("text", "line"), [
    # Short enough to be composed without the events counted first: libyaml
    # (its own limit, 1,000 levels, in PyYAML 6.0.4 and later) or govsync's
    # builder refuses it, worded the same either way.
    ("input: " + "[" * 1_500 + "1" + "]" * 1_500 + "\n", 1),
    # Long enough to be counted first; the deep document is the second, and the
    # refusal is its own: the first document is read and valid.
    (LABEL + "---\ninput: " + "[" * 20_000 + "1" + "]" * 20_000 + "\n", 9),
], ids=["composed", "counted-second-document"])
def test_nesting_is_refused_in_the_document_that_nests(
        text: str, line: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "deep.yaml", text)
    monkeypatch.chdir(tmp_path)
    result = validate(Path("deep.yaml"))
    assert result.exit_code == 1, result.output
    problems = [ln for ln in result.output.splitlines() if ln.startswith("deep.yaml:")]
    assert len(problems) == 1, result.output
    assert re.match(rf"deep\.yaml:{line}:\d+: document is nested more than 100 levels deep",
                    problems[0]), result.output


@pytest.mark.parametrize("opener", ["[", "{a: ", "- "], ids=["flow-list", "flow-map", "block-list"])
def test_nesting_that_would_overflow_the_c_stack_is_refused(opener: str, tmp_path: Path) -> None:
    """libyaml's composer recurses in C: ~30,000 levels crashed the process.

    Run in a subprocess, so that a regression is a failed test, not a
    crashed test session.
    """
    if opener == "- ":  # one level per line, each indented two more columns
        text = "".join(" " * (2 * i) + "-\n" for i in range(3_000))
    else:
        n = 2_000_000
        closer = "]" if opener == "[" else "}"
        text = "input: " + opener * n + "1" + closer * n + "\n"
    assert len(text.encode()) <= 10 * 1024 * 1024
    write(tmp_path / "deep.yaml", text)
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "govsync", "validate", "deep.yaml"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("GOVSYNC_")},
    )
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    assert re.search(r"^deep\.yaml:\d+:\d+: document is nested more than 100 levels deep",
                     proc.stderr, re.M), proc.stderr[-2000:]
    assert time.perf_counter() - started < 30


def test_tripwire_sees_a_plan_that_calls_the_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tripwire: Tripwire
) -> None:
    """The "no request" checks above can fail: a valid plan does call the API."""
    write(tmp_path / "case" / "policy.yaml", VALID.replace("Space", "Policy").replace(
        "analytics", "mask-pii") + "spec:\n  code: package x\n  groupName: data-platform\n")
    monkeypatch.chdir(tmp_path / "case")
    plan(Path("."), tmp_path / "state.db", tripwire.url)
    assert tripwire.requests, "plan of a policy owned by a group did not call ListGroups"


# --- files that are not manifests: refused by name, never read (contract section 7) ----------


def test_a_symlink_that_leaves_the_paths_is_refused_unread(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    secret = write(tmp_path / "netrc", "machine api login me password HUNTER2-CANARY\n")
    write(tmp_path / "manifests" / "space.yaml", VALID)
    (tmp_path / "manifests" / "x.yaml").symlink_to(secret)
    (tmp_path / "manifests" / "inside.yml").symlink_to(tmp_path / "manifests" / "space.yaml")
    (tmp_path / "elsewhere").mkdir()
    write(tmp_path / "elsewhere" / "other.yaml", VALID.replace("analytics", "other"))
    (tmp_path / "manifests" / "linked-dir").symlink_to(tmp_path / "elsewhere")
    monkeypatch.chdir(tmp_path)
    result = validate(Path("manifests"))
    assert "HUNTER2-CANARY" not in result.output
    assert_errors(result, [
        ("manifests/linked-dir:1:1", "a symbolic link that leads outside manifests"),
        # a link inside the tree is read: it duplicates the file it points at
        ("manifests/space.yaml:4:9", "duplicate address Space/analytics"),
        ("manifests/x.yaml:1:1", "a symbolic link that leads outside manifests"),
    ])


@pytest.mark.parametrize("special", ["fifo", "device"])
def test_fifos_and_devices_are_refused_without_hanging(tmp_path: Path, special: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "manifests" / "space.yaml", VALID)
    target = tmp_path / "manifests" / "odd.yaml"
    if special == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to("/dev/zero")  # given by name below: followed, and refused
    monkeypatch.chdir(tmp_path)
    started = time.monotonic()
    what = "a FIFO (named pipe)" if special == "fifo" else "a device"
    where = Path("manifests") if special == "fifo" else Path("manifests/odd.yaml")
    result = validate(where)
    assert time.monotonic() - started < 10
    assert_errors(result, [("manifests/odd.yaml:1:1", f"is {what}, not a regular file")])


def test_an_integer_of_thousands_of_digits_is_one_error(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # Python refuses int() of over 4,300 digits: once a traceback.
    write(tmp_path / "big.yaml", VALID + "spec:\n  description: ok\nextra: " + "9" * 5000 + "\n")
    monkeypatch.chdir(tmp_path)
    assert_errors(validate(Path(".")), [
        ("big.yaml:7:8", "integer of 5,000 characters is out of the API's 64-bit range")])


def test_a_request_over_the_apis_body_limit_is_an_error_before_apply(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hook = ("apiVersion: govsync/v1\nkind: Hook\nmetadata: {name: big_hook}\nspec:\n"
            "  code: &c \"" + "x" * 400_000 + "\"\n  allowlistedEnvironmentVariables: [*c, *c]\n")
    write(tmp_path / "big.yaml", hook)
    monkeypatch.chdir(tmp_path)
    assert_errors(validate(Path(".")), [
        ("big.yaml:1:1", "this object's request would be 1,200,")])


def test_a_long_plain_list_is_not_called_an_alias_bomb(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    items = ", ".join(["h"] * 100_001)
    write(tmp_path / "long.yaml", VALID + f"spec:\n  description: [{items}]\n")
    monkeypatch.chdir(tmp_path)
    result = validate(Path("."))
    assert_errors(result, [("long.yaml:1:1", "document has more than 100,000 values")])
    assert "alias" not in result.output
