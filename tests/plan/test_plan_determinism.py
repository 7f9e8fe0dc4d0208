"""Plan is a function of (manifests, state): the same input gives the same
bytes, and how the documents are spread over files, in which order, with
which key order, does not matter."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from plan_helpers import Gov

from govsync.manifests import load as validate
from govsync.manifests.yamlio import STR, core_tag
from govsync.state import Entry
from govsync.state.sqlite import SqliteStore
from govsync.values import Ref

SPACES = ("analytics", "payments", "ml", "sandbox")
CONNECTORS = ("prod-eu", "prod-us", "edge-1", "lab")
HOOKS = ("risk", "mask_pii", "ticket_check", "vault", "_private")
FILE_NAMES = ("a.yaml", "b.yml", "z.yaml", "sub/c.yaml", "sub/deeper/a.yaml", "0.yaml")
TEXT = st.text(alphabet=st.sampled_from("abcXYZ 019_-:#'\"{}[]\n\u00e9\u2713"), max_size=30)
# What the state holds for an address: nothing, the manifest's own spec, a
# different spec, or an unsettled create.
RECORDS = ("absent", "same", "modified", "pending")


def document(kind: str, name: str, spec: dict[str, Any], depends: list[str]) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if depends:
        metadata["dependsOn"] = depends
    return {"apiVersion": "govsync/v1", "kind": kind, "metadata": metadata, "spec": spec}


@st.composite
def worlds(draw: st.DrawFn) -> dict[str, Any]:
    """Manifests (hooks, spaces, connectors with spaceRef) and what state records."""
    docs: list[dict[str, Any]] = []
    spaces = draw(st.lists(st.sampled_from(SPACES), unique=True, max_size=len(SPACES)))
    for name in spaces:
        docs.append(document("Space", name, {
            "description": draw(TEXT),
            "terminationProtection": draw(st.booleans()),
        }, []))
    for name in draw(st.lists(st.sampled_from(CONNECTORS), unique=True, max_size=4)):
        spec: dict[str, Any] = {"terminationProtection": draw(st.booleans())}
        if spaces and draw(st.booleans()):
            spec["spaceRef"] = draw(st.sampled_from(spaces))
        docs.append(document("Connector", name, spec, []))
    for name in draw(st.lists(st.sampled_from(HOOKS), unique=True, max_size=5)):
        spec = {
            "code": "def handler(event):\n    return " + repr(draw(TEXT)) + "\n",
            "timeoutMs": draw(st.integers(0, 59_999)),
            "status": draw(st.sampled_from(["draft", "active"])),
            "allowlistedEnvironmentVariables": draw(
                st.lists(st.sampled_from(["TOKEN", "REGION", "A_B"]), unique=True, max_size=3)),
        }
        if draw(st.booleans()):
            spec["description"] = draw(TEXT)
        depends = draw(st.lists(st.sampled_from([f"Space/{s}" for s in spaces]),
                                unique=True, max_size=2)) if spaces else []
        docs.append(document("Hook", name, spec, depends))
    # Key order inside each spec is the author's choice, not the plan's.
    for doc in docs:
        keys = draw(st.permutations(list(doc["spec"])))
        doc["spec"] = {k: doc["spec"][k] for k in keys}
    records = {f"{d['kind']}/{d['metadata']['name']}": draw(st.sampled_from(RECORDS))
               for d in docs}
    gone = draw(st.lists(st.sampled_from(["Hook/old_hook", "Space/old-space", "Connector/old"]),
                         unique=True, max_size=3))
    return {"docs": docs, "records": records,
            "gone": {a: draw(st.sampled_from(["applied", "uncertain"])) for a in gone}}


def layout(draw: st.DrawFn, docs: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The documents in some order, split over some files."""
    ordered = draw(st.permutations(docs))
    names = draw(st.lists(st.sampled_from(FILE_NAMES), unique=True, min_size=1,
                          max_size=len(FILE_NAMES)))
    cuts = sorted(draw(st.lists(st.integers(0, len(ordered)), min_size=len(names) - 1,
                                max_size=len(names) - 1)))
    bounds = [0, *cuts, len(ordered)]
    return [(name, ordered[bounds[i]:bounds[i + 1]]) for i, name in enumerate(names)]


class Dumper(yaml.SafeDumper):
    """PyYAML's writer (YAML 1.1), quoting a string that YAML 1.2's core schema, as
    govsync reads manifests, takes for another type: ``09`` is a string in 1.1 (no
    octal) and the integer 9 in 1.2."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        tag = super().resolve(kind, value, implicit)
        if kind is yaml.ScalarNode and implicit[0] and tag == STR:
            return core_tag(value)
        return tag


def write(root: Path, files: list[tuple[str, list[dict[str, Any]]]]) -> Path:
    root.mkdir()
    for name, docs in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = "---\n".join(yaml.dump(d, Dumper=Dumper, sort_keys=False, allow_unicode=True) for d in docs)
        path.write_text("# generated\n" + text, encoding="utf-8")
    return root


def resolved(template: dict[str, Any], ids: dict[str, str]) -> dict[str, Any]:
    return {k: ids.get(v.address, "id-unknown") if isinstance(v, Ref) else v
            for k, v in template.items()}


def modified(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    changed = dict(spec)
    if kind == "Hook":
        changed["timeoutMs"] = spec["timeoutMs"] + 1
    elif kind == "Space":
        changed["description"] = spec["description"] + " (old)"
    else:
        changed["terminationProtection"] = not spec["terminationProtection"]
    return changed


def prepare_state(path: Path, manifests: Path, world: dict[str, Any]) -> dict[str, str]:
    """Record the world's state; return the action each address should get."""
    records = world["records"]
    objects = validate([str(manifests)]).objects
    ids = {a: f"id-{a}" for a, r in records.items() if r in ("same", "modified")}
    expected: dict[str, str] = {}
    with SqliteStore(str(path)) as store:
        for address, record in records.items():
            manifest = objects[address]
            kind = manifest.kind.name
            spec = resolved(manifest.template, ids)
            refs_known = all(target in ids for _, target in manifest.refs)
            if record == "absent":
                expected[address] = "create"
                continue
            if record == "pending":
                store.put("default", Entry(address, kind, None, "pending", spec))
                expected[address] = "uncertain"
                continue
            if record == "modified":
                spec = modified(kind, spec)
            store.put("default", Entry(address, kind, ids[address], "applied", spec))
            if record == "same" and refs_known:
                expected[address] = "no-op"
            else:  # every field of these kinds' updates (contract section 12), spaceId too
                expected[address] = "update"
        for address, status in world["gone"].items():
            store.put("default", Entry(address, address.split("/")[0],
                                       f"id-{address}" if status == "applied" else None,
                                       status, {"name": address.split("/")[1]}))
            expected[address] = "orphan" if status == "applied" else "uncertain"
    return expected


def _without_id(data: bytes) -> bytes:
    """A saved plan less what is new in every plan: its random id (which its review
    digest and authentication code cover)."""
    body = json.loads(data)
    for key in ("planId", "reviewDigest", "mac"):
        body.pop(key)
    return json.dumps(body, sort_keys=True).encode()


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(world=worlds(), data=st.data())
def test_plan_json_is_deterministic_and_independent_of_layout(
        world: dict[str, Any], data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        gov = Gov(root)
        first = write(root / "first", layout(data.draw, world["docs"]))
        second = write(root / "second", layout(data.draw, world["docs"]))
        state = root / "state.db"
        expected = prepare_state(state, first, world)
        code = 1 if "blocked" in expected.values() else 0

        def plan(manifests: Path) -> bytes:
            result = gov.run("plan", manifests, "--state", state, "--format", "json", code=code)
            return result.stdout_bytes

        once = plan(first)
        assert plan(first) == once, "the same input gave other bytes"
        assert plan(second) == once, "another file layout gave another plan"
        saved = []
        for name in ("p1.json", "p2.json"):
            gov.run("plan", first, "--state", state, "--out", root / name, code=code)
            saved.append(_without_id((root / name).read_bytes()))
        assert saved[0] == saved[1], "the same input saved another plan file"

        parsed = json.loads(once)
        assert {c["address"]: c["action"] for c in parsed["changes"]} == expected
        assert sum(parsed["summary"].values()) == len(expected)
