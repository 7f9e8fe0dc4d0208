"""The pull-request workflow: ``govsync fmt``, ``govsync init`` and the CI templates."""

from __future__ import annotations

import io
import json
import os
import random
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from govsync.cli import cli
from govsync.fmt import format_paths, format_text
from govsync.init import SCHEMA_PATH, scaffold

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "manifests"
CI = ROOT / "examples" / "ci"
TEMPLATES = ROOT / "src" / "govsync" / "templates"

# A comment: "#" at the start of a line or after a space.  Lines of block
# scalars that look like comments count the same before and after, so a
# comment lost or duplicated by fmt always shows in the difference.
COMMENT = re.compile(r"(?:^|\s)(#.*)$")


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args])


def comments(text: str) -> Counter[str]:
    found: Counter[str] = Counter()
    for line in text.splitlines():
        m = COMMENT.search(line)
        if m:
            found[m.group(1).strip()] += 1
    return found


def full_line_comments(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.lstrip().startswith("#"))


def data(text: str) -> list[object]:
    return [d for d in yaml.safe_load_all(text) if d is not None]


@pytest.fixture
def examples(tmp_path: Path) -> Path:
    target = tmp_path / "manifests"
    shutil.copytree(EXAMPLES, target)
    return target


def disturb(text: str, seed: int) -> str:
    """The same documents, re-indented and with their keys shuffled (ruamel keeps comments)."""
    from ruamel.yaml import YAML

    rng = random.Random(seed)
    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.width = 4096
    mapping, sequence, offset = rng.choice([(4, 4, 2), (4, 6, 4), (2, 2, 0), (3, 5, 2)])
    y.indent(mapping=mapping, sequence=sequence, offset=offset)
    docs = list(y.load_all(text))
    for doc in docs:
        for m in (doc, doc["metadata"]):
            keys = list(m)
            rng.shuffle(keys)
            for key in keys:
                m.move_to_end(key)
    out = io.StringIO()
    y.dump_all(docs, out)
    return out.getvalue()


# -- fmt --------------------------------------------------------------------------


def test_examples_are_canonical() -> None:
    result = run("fmt", "--check", EXAMPLES)
    assert result.exit_code == 0, result.output
    assert result.stdout == ""


def test_fmt_keeps_every_comment_of_the_examples(examples: Path) -> None:
    for path in sorted(examples.glob("*.yaml")):
        path.write_text(disturb(path.read_text(), seed=len(path.name)))
    before = {p.name: p.read_text() for p in examples.glob("*.yaml")}

    result = run("fmt", examples)

    assert result.exit_code == 0, result.output
    for name, text in before.items():
        after = (examples / name).read_text()
        assert comments(after) == comments(text), name
        assert full_line_comments(after) == full_line_comments(text), name
        assert data(after) == data(text), name
        original = (EXAMPLES / name).read_text()
        assert comments(after) == comments(original), name


def test_fmt_restores_the_layout_of_the_examples(examples: Path) -> None:
    # Re-indented only (key order kept): every line but end-of-line comment
    # spacing comes back as it was (those keep their column).
    for path in sorted(examples.glob("*.yaml")):
        from ruamel.yaml import YAML

        y = YAML(typ="rt")
        y.preserve_quotes = True
        y.width = 4096
        y.indent(mapping=4, sequence=6, offset=4)
        out = io.StringIO()
        y.dump_all(list(y.load_all(path.read_text())), out)
        path.write_text(out.getvalue())
    assert run("fmt", examples).exit_code == 0
    for path in sorted(examples.glob("*.yaml")):
        squeeze = re.compile(r"\s+#")
        got = [squeeze.sub(" #", line) for line in path.read_text().splitlines()]
        want = [squeeze.sub(" #", line) for line in (EXAMPLES / path.name).read_text().splitlines()]
        assert got == want, path.name


@pytest.mark.parametrize("seed", range(4))
def test_fmt_is_idempotent(examples: Path, seed: int) -> None:
    for path in sorted(examples.glob("*.yaml")):
        path.write_text(disturb(path.read_text(), seed))
    first = format_paths([str(examples)])
    assert not first.problems
    snapshot = {p.name: p.read_text() for p in examples.glob("*.yaml")}

    second = format_paths([str(examples)])

    assert second.changed == [] and not second.problems
    assert {p.name: p.read_text() for p in examples.glob("*.yaml")} == snapshot
    assert run("fmt", "--check", examples).exit_code == 0


OUT_OF_ORDER = """\
# yaml-language-server: $schema=../schemas/manifest.schema.json

# The analytics space.
kind: Space
spec:
    # Shown in the console.
    description: Orders and clickstream.
    terminationProtection: true   # many connectors hang off it
metadata:
    dependsOn:
    - Hook/x
    name: analytics
# The version goes first.
apiVersion: govsync/v1
"""

CANONICAL = """\
# yaml-language-server: $schema=../schemas/manifest.schema.json

# The analytics space.
# The version goes first.
apiVersion: govsync/v1
kind: Space
metadata:
  name: analytics
  dependsOn:
    - Hook/x
spec:
  # Shown in the console.
  description: Orders and clickstream.
  terminationProtection: true # many connectors hang off it
"""


def test_fmt_orders_keys_and_indents(tmp_path: Path) -> None:
    path = tmp_path / "space.yaml"
    path.write_text(OUT_OF_ORDER)

    result = run("fmt", path)

    assert result.exit_code == 0, result.output
    assert result.stdout == f"{path}\n"
    got = re.sub(r"\s+#", " #", path.read_text())
    assert got == re.sub(r"\s+#", " #", CANONICAL)


def test_a_comment_above_a_key_moves_with_it() -> None:
    text = "kind: Space\n# about metadata\nmetadata:\n  name: a\napiVersion: govsync/v1\n"
    assert format_text(text) == (
        "apiVersion: govsync/v1\nkind: Space\n# about metadata\nmetadata:\n  name: a\n"
    )


def test_flow_mappings_are_ordered_too() -> None:
    text = "{kind: Space, metadata: {dependsOn: [], name: a}, apiVersion: govsync/v1}\n"
    assert format_text(text) == (
        "{apiVersion: govsync/v1, kind: Space, metadata: {name: a, dependsOn: []}}\n"
    )


def test_documents_are_separated_by_markers_and_comment_only_documents_kept() -> None:
    text = ("---\n# header\n---\napiVersion: v\nkind: A\n...\n---\n# between\n---\n"
            "apiVersion: v\nkind: B\n---\n# the end\n")
    assert format_text(text) == (
        "# header\napiVersion: v\nkind: A\n---\n# between\napiVersion: v\nkind: B\n# the end\n"
    )


def test_keys_keep_their_order_when_moving_them_would_break_an_alias() -> None:
    text = "spec:\n  a: &x 1\nkind: K\napiVersion: v\nmetadata:\n  name: *x\n"
    out = format_text(text)
    assert data(out) == data(text)
    assert out.index("spec:") < out.index("metadata:")


def test_recursive_aliases_are_an_error_not_a_change() -> None:
    from govsync.errors import ManifestError

    with pytest.raises(ManifestError, match="without changing what it means"):
        format_text("a: &a [1, *a]\n", "r.yaml")


def test_top_level_sequences_start_at_column_zero() -> None:
    text = "# hooks\n- id: a\n  args:\n  - x\n- id: b\n"
    assert format_text(text) == "# hooks\n- id: a\n  args:\n    - x\n- id: b\n"


def test_comment_only_file_is_kept() -> None:
    assert format_text("# nothing yet\n\n") == "# nothing yet\n"


def test_values_are_kept_exactly() -> None:
    text = ("spec:\n    code: |+\n        keep\n\n    q: 'single'\n    d: \"double\"\n"
            "    yes_: yes\n    octal: 017\n    long: " + "x " * 200 + "\n"
            "kind: K\napiVersion: v\n")
    out = format_text(text)
    assert data(out) == data(text)
    assert "'single'" in out and '"double"' in out and "octal: 017" in out
    assert "long: " + "x " * 199 + "x\n" in out  # not folded
    assert format_text(out) == out


def test_fmt_check_reports_and_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(OUT_OF_ORDER)
    good = tmp_path / "good.yaml"
    good.write_text(format_text(OUT_OF_ORDER))
    stamp = bad.stat().st_mtime_ns

    result = run("fmt", "--check", tmp_path)

    assert result.exit_code == 1
    assert result.stdout == f"{bad}\n"
    assert bad.read_text() == OUT_OF_ORDER and bad.stat().st_mtime_ns == stamp
    assert run("fmt", "--check", good).exit_code == 0


def test_fmt_check_fails_on_four_space_indentation(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("apiVersion: govsync/v1\nkind: Space\nmetadata:\n    name: a\n")
    assert run("fmt", "--check", path).exit_code == 1
    assert run("fmt", path).exit_code == 0
    assert path.read_text() == "apiVersion: govsync/v1\nkind: Space\nmetadata:\n  name: a\n"
    assert run("fmt", "--check", path).exit_code == 0


def test_yaml_errors_are_reported_and_the_file_left_alone(tmp_path: Path) -> None:
    broken = tmp_path / "a-broken.yaml"
    text = "apiVersion: govsync/v1\nkind: Hook\n---\nkind: Hook\nspec:\n  hosts: [a, b\n"
    broken.write_text(text)
    other = tmp_path / "b-other.yaml"
    other.write_text(OUT_OF_ORDER)

    result = run("fmt", tmp_path)

    assert result.exit_code == 1
    # The same message at the same place as validate's (govsync's reader, not ruamel's).
    validated = run("validate", broken)
    assert validated.exit_code == 1
    error = next(line for line in validated.stderr.splitlines() if "YAML syntax" in line)
    assert error.startswith(f"{broken}:6:"), error
    assert result.stderr.splitlines()[0] == error
    assert broken.read_text() == text
    assert other.read_text() != OUT_OF_ORDER  # the other files are still formatted
    assert run("fmt", "--check", other).exit_code == 0


def test_duplicate_keys_are_an_error(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text("apiVersion: v\nkind: A\nkind: B\n")
    result = run("fmt", "--check", path)
    assert result.exit_code == 1
    assert f"{path}:3:1: duplicate key 'kind'" in result.stderr
    assert result.stderr.splitlines()[0] == run("validate", path).stderr.splitlines()[0]


def test_missing_path_is_an_error(tmp_path: Path) -> None:
    result = run("fmt", tmp_path / "nope")
    assert result.exit_code == 1
    assert "no such file or directory" in result.stderr


def test_crlf_files_keep_their_line_endings(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_bytes(b"kind: A\r\napiVersion: v\r\n")
    assert run("fmt", path).exit_code == 0
    assert path.read_bytes() == b"apiVersion: v\r\nkind: A\r\n"
    assert run("fmt", "--check", path).exit_code == 0


# -- init -----------------------------------------------------------------------------


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    target = tmp_path / "governance"
    result = run("init", target)
    assert result.exit_code == 0, result.output
    return target


def test_init_writes_a_repository(repo: Path) -> None:
    files = {str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file()}
    assert files == {
        ".github/workflows/govsync.yml", ".gitignore", ".vscode/settings.json", "README.md",
        "local-seed.yaml",
        "govsync.yaml", "schemas/manifest.schema.json", "requirements-govsync.txt",
        "manifests/spaces-and-connectors.yaml", "manifests/hooks-and-policies.yaml",
        "manifests/integrations.yaml", "manifests/keys-and-labels.yaml",
        "manifests/workflow.yaml",
    }
    assert ".govsync/" in (repo / ".gitignore").read_text().splitlines()
    assert (repo / "schemas/manifest.schema.json").read_text() == (
        ROOT / "schemas/manifest.schema.json").read_text()


def test_init_prints_next_steps(tmp_path: Path) -> None:
    result = run("init", tmp_path / "g")
    assert "created " in result.stdout and "Next steps:" in result.stdout
    assert "govsync validate manifests/" in result.stdout


def test_init_manifests_are_valid(repo: Path) -> None:
    result = run("validate", repo / "manifests")
    assert result.exit_code == 0, result.output
    assert "10 objects in 5 files: valid." in result.stdout


def test_init_manifests_cover_every_family(repo: Path) -> None:
    kinds = {d["kind"] for p in (repo / "manifests").glob("*.yaml") for d in data(p.read_text())}
    assert {"Space", "Connector", "Hook", "Policy", "LogIntegration", "SigningKey",
            "DataLabel", "Form", "LogQuery"} <= kinds
    secrets = (repo / "manifests/integrations.yaml").read_text()
    assert "{fromEnv: " in secrets


def test_init_files_are_formatted(repo: Path) -> None:
    result = run("fmt", "--check", repo, repo / ".github/workflows/govsync.yml")
    assert result.exit_code == 0, result.output


def test_init_manifests_point_editors_at_the_schema(repo: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    for path in sorted((repo / "manifests").glob("*.yaml")):
        first = path.read_text().splitlines()[0]
        # The modeline that editors (yaml-language-server) read: the schema init writes.
        assert first == "# yaml-language-server: $schema=../" + SCHEMA_PATH, path.name
        schema_path = path.parent / first.split("$schema=", 1)[1]
        validator = jsonschema.Draft202012Validator(json.loads(schema_path.read_text()))
        for doc in data(path.read_text()):
            validator.validate(doc)


def test_init_refuses_to_overwrite(repo: Path) -> None:
    readme = repo / "README.md"
    readme.write_text("ours\n")

    result = run("init", repo)

    assert result.exit_code == 1
    assert "refusing to overwrite" in result.stderr
    assert "README.md" in result.stderr and "manifests/workflow.yaml" in result.stderr
    assert "--force" in result.stderr
    assert readme.read_text() == "ours\n"


def test_init_force_overwrites(repo: Path) -> None:
    (repo / "README.md").write_text("ours\n")
    result = run("init", repo, "--force")
    assert result.exit_code == 0, result.output
    assert (repo / "README.md").read_text() != "ours\n"


def test_init_adds_to_an_existing_gitignore(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("*.pyc")
    assert run("init", tmp_path).exit_code == 0
    lines = (tmp_path / ".gitignore").read_text().splitlines()
    assert lines[0] == "*.pyc" and ".govsync/" in lines
    assert run("init", tmp_path, "--force").exit_code == 0
    assert (tmp_path / ".gitignore").read_text().splitlines() == lines  # nothing added twice


def test_init_gitlab(tmp_path: Path) -> None:
    assert run("init", tmp_path, "--ci", "gitlab").exit_code == 0
    assert (tmp_path / ".gitlab-ci.yml").read_text() == (CI / "gitlab-ci.yml").read_text()
    assert not (tmp_path / ".github").exists()


# -- CI templates ------------------------------------------------------------------


def test_init_ci_files_are_the_examples() -> None:
    files = scaffold("github")
    assert files[".github/workflows/govsync.yml"] == (CI / "github-actions.yml").read_text()
    assert (TEMPLATES / "ci/github-actions.yml").read_text() == (CI / "github-actions.yml").read_text()
    assert (TEMPLATES / "ci/gitlab-ci.yml").read_text() == (CI / "gitlab-ci.yml").read_text()


def test_ci_examples_are_formatted() -> None:
    result = run("fmt", "--check", CI, ROOT / ".pre-commit-hooks.yaml")
    assert result.exit_code == 0, result.output


def _steps_text(job: dict[str, object]) -> str:
    return json.dumps(job)


def test_github_workflow() -> None:
    """Issue 23: built around the project file (no path, workspace or environment named),
    every environment planned in one comment, applied per environment with its own
    credentials and the reviewed plan as evidence, checked for drift per environment."""
    text = (CI / "github-actions.yml").read_text()
    wf = yaml.safe_load(text)
    on = wf.get("on", wf.get(True))  # PyYAML reads the key `on` as a boolean
    assert "pull_request" in on and "push" in on  # the jobs keep to the default branch
    assert "main" not in json.dumps(on)
    assert on["schedule"][0]["cron"]
    jobs = wf["jobs"]
    assert set(jobs) == {"environments", "plan", "apply", "drift"}
    for banned in ("MANIFESTS", "GOVSYNC_WORKSPACE", "manifests/", "vars.GOVSYNC_ENV"):
        assert banned not in text, banned

    plan = _steps_text(jobs["plan"])
    assert "govsync validate" in plan and "govsync environments" in plan
    assert "--without-secrets" in plan and '--out \\"plans/$1.json\\"' in plan
    assert "<!-- govsync-plan -->" in plan and "updateComment" in plan and "createComment" in plan
    comment = next(s for s in jobs["plan"]["steps"] if s.get("name") == "Comment the plans")
    assert comment["if"] == "always()"  # a failing Validate still posts the comment
    upload = next(s for s in jobs["plan"]["steps"] if "upload-artifact" in s.get("uses", ""))
    assert upload["with"]["path"] == "plans/*.json"
    assert "secrets.GOVSYNC_STATE_READONLY" in jobs["plan"]["env"]["GOVSYNC_STATE"]
    assert "GOVSYNC_LOGSTORE_API_KEY" not in jobs["plan"]["env"]  # no manifest secret

    apply = jobs["apply"]
    assert "push" in apply["if"] and apply["needs"] == "environments"
    assert apply["strategy"]["max-parallel"] == 1
    assert "matrix.env" in apply["environment"] and "matrix.env" in apply["env"]["GOVSYNC_ENV"]
    download = next(s for s in apply["steps"] if "download-artifact" in s.get("uses", ""))
    assert download["with"]["name"] == upload["with"]["name"]
    assert "run-id" in download["with"]  # the pull request's run: evidence only
    runs = [s.get("run", "") for s in apply["steps"]]
    assert any('govsync apply --reviewed "plans/$name.json"' in r for r in runs)
    assert "secrets.GOVSYNC_API_KEY" in apply["env"]["GOVSYNC_API_KEY"]
    assert apply["env"]["GOVSYNC_STATE"] == "${{ secrets.GOVSYNC_STATE }}"

    drift = jobs["drift"]
    assert "schedule" in drift["if"] and "matrix" in drift["strategy"]
    script = next(s["run"] for s in drift["steps"] if "govsync drift" in s.get("run", ""))
    assert "--format markdown" in script and 'exit "$status"' in script
    assert "pip install -r requirements-govsync.txt" in text


def test_gitlab_pipeline() -> None:
    text = (CI / "gitlab-ci.yml").read_text()
    pipeline = yaml.safe_load(text)
    plan = pipeline["plan"]
    assert "merge_request_event" in json.dumps(plan["rules"])
    for banned in ("MANIFESTS", "GOVSYNC_WORKSPACE", "manifests/"):
        assert banned not in text, banned
    assert pipeline["default"]["image"] == "python:3.11"  # with git, for a git+https spec
    plan_script = "\n".join(plan["script"])
    assert "govsync environments" in plan_script and "--without-secrets" in plan_script
    assert "<!-- govsync-plan -->" in plan_script and '"PUT"' in plan_script
    assert "plans/" in plan["artifacts"]["paths"] and plan["artifacts"]["when"] == "always"
    assert "govsync validate" in json.dumps(pipeline["validate"])

    template = pipeline[".apply"]
    assert "$CI_DEFAULT_BRANCH" in json.dumps(template["rules"])
    apply_script = "\n".join(template["script"])
    assert '/artifacts/plans/{env}.json' in apply_script
    assert 'govsync apply --reviewed "plans/$GOVSYNC_ENV.json"' in apply_script
    for env in ("staging", "prod"):
        job = pipeline[f"apply:{env}"]
        assert job["extends"] == ".apply" and job["variables"]["GOVSYNC_ENV"] == env
        assert job["resource_group"] == f"govsync-apply-{env}"
        assert pipeline[f"drift:{env}"]["variables"]["GOVSYNC_ENV"] == env
    assert pipeline["apply:prod"]["needs"] == ["apply:staging"]

    assert "schedule" in json.dumps(pipeline[".drift"]["rules"])
    assert "govsync drift --without-secrets" in "\n".join(pipeline[".drift"]["script"])
    assert "pip install --quiet -r requirements-govsync.txt" in text


def test_gitlab_embedded_scripts_compile() -> None:
    pipeline = yaml.safe_load((CI / "gitlab-ci.yml").read_text())
    for job in ("plan", ".apply"):
        script = "\n".join(pipeline[job]["script"])
        body = re.search(r"<<'PY'\n(.*?)\nPY\n", script, re.S)
        assert body, job
        compile(body.group(1), f"{job} script", "exec")


def test_pre_commit_hooks() -> None:
    hooks = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert hooks["govsync-validate"]["entry"] == "govsync validate"
    assert hooks["govsync-fmt"]["entry"] == "govsync fmt --check"
    assert hooks["govsync-fmt"]["pass_filenames"] is True
    for hook in hooks.values():
        assert re.search(hook["files"], "manifests/a.yaml")
        assert re.search(hook["files"], "b.yml")
        assert not re.search(hook["files"], "README.md")
        assert hook["language"] == "python"


def test_template_manifests_are_canonical() -> None:
    result = run("fmt", "--check", TEMPLATES)
    assert result.exit_code == 0, result.output
    assert os.path.isfile(TEMPLATES / "gitignore")


@pytest.mark.parametrize(("ci", "path"), [("github", ".github/workflows/govsync.yml"),
                                          ("gitlab", ".gitlab-ci.yml")])
def test_the_readme_init_writes_describes_its_own_ci_file(ci: str, path: str) -> None:
    """Issue 34: the README said to keep secrets in a GitHub environment `production`
    and to set GOVSYNC_ENDPOINT, while the workflow applied in `staging` and `prod`
    and wanted GOVSYNC_ENDPOINT only where an environment has none.  Now the README
    quotes the CI file's own opening comment: one description."""
    files = scaffold(ci)
    readme, workflow = files["README.md"], files[path]
    header = [line[2:] for line in workflow.splitlines()
              if line.startswith("# ")][:40]
    assert all(line in readme for line in header if line.strip()), readme
    assert "as secrets of the `production` environment" not in readme
    assert "<!--" not in readme
