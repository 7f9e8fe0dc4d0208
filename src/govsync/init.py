"""``govsync init``: scaffold a repository of manifests.

The files come from ``govsync/templates/`` (package data): one commented
example manifest per family of kinds, a README, a ``.gitignore`` and the CI
pipeline of ``examples/ci/``; the manifests' JSON Schema is generated, so that
editors check the manifests offline against the installed govsync.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from importlib import resources

from govsync.errors import ConfigError

SCHEMA_PATH = "schemas/manifest.schema.json"
# The modeline every template manifest starts with (they live in manifests/).
MODELINE = "# yaml-language-server: $schema=../" + SCHEMA_PATH
CI_FILES = {
    "github": ("ci/github-actions.yml", ".github/workflows/govsync.yml"),
    "gitlab": ("ci/gitlab-ci.yml", ".gitlab-ci.yml"),
}
GITIGNORE = ".gitignore"


@dataclass
class InitResult:
    directory: str
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)


def scaffold(ci: str = "github") -> dict[str, str]:
    """Every file of a new repository: relative path -> content."""
    from govsync.schema import MANIFEST_SCHEMA, rendered

    templates = resources.files("govsync") / "templates"
    files: dict[str, str] = {}
    manifests = templates / "manifests"
    for entry in sorted(manifests.iterdir(), key=lambda e: e.name):
        if entry.name.endswith((".yaml", ".yml")):
            files[f"manifests/{entry.name}"] = entry.read_text(encoding="utf-8")
    files[SCHEMA_PATH] = rendered()[MANIFEST_SCHEMA]
    for name in ("README.md", "local-seed.yaml"):
        files[name] = (templates / name).read_text(encoding="utf-8")
    files[GITIGNORE] = (templates / "gitignore").read_text(encoding="utf-8")
    if ci != "none":
        source, target = CI_FILES[ci]
        files[target] = (templates / source).read_text(encoding="utf-8")
    return files


def init(directory: str = ".", *, force: bool = False, ci: str = "github") -> InitResult:
    """Write the scaffold into ``directory``.

    Existing files are not overwritten (ConfigError listing them, nothing
    written) unless ``force``; an existing ``.gitignore`` only gets the
    missing lines appended.
    """
    if ci != "none" and ci not in CI_FILES:
        raise ConfigError(f"unknown CI {ci!r}: use one of {', '.join([*CI_FILES, 'none'])}")
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise ConfigError(f"{directory} exists and is not a directory")
    files = scaffold(ci)
    existing = [rel for rel in files
                if rel != GITIGNORE and os.path.exists(os.path.join(directory, rel))]
    if existing and not force:
        raise ConfigError(
            f"refusing to overwrite {len(existing)} existing file(s) in {directory}:\n  "
            + "\n  ".join(existing) + "\n(pass --force to overwrite them)")
    result = InitResult(directory)
    for rel, content in files.items():
        path = os.path.join(directory, rel)
        if rel == GITIGNORE and os.path.exists(path):
            if _merge_lines(path, content):
                result.updated.append(rel)
            continue
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(content)
        (result.updated if rel in existing else result.created).append(rel)
    return result


def _merge_lines(path: str, content: str) -> bool:
    """Append to ``path`` the pattern lines of ``content`` it lacks; whether it changed."""
    with open(path, encoding="utf-8") as fh:
        current = fh.read()
    have = {line.strip() for line in current.splitlines()}
    missing = [line for line in content.splitlines()
               if line.strip() and not line.startswith("#") and line.strip() not in have]
    if not missing:
        return False
    with open(path, "a", encoding="utf-8", newline="\n") as fh:
        if current and not current.endswith("\n"):
            fh.write("\n")
        fh.write("# govsync\n" + "\n".join(missing) + "\n")
    return True


def next_steps(result: InitResult) -> str:
    """What to do after ``govsync init``, for the terminal."""
    cd = "" if os.path.abspath(result.directory) == os.path.abspath(".") else (
        f"  cd {result.directory}\n")
    return (
        "Next steps:\n"
        f"{cd}"
        "  govsync validate manifests/     # check the example manifests offline\n"
        "  # try them on the embedded reference server (dummy secrets will do):\n"
        "  export GOVSYNC_LOGSTORE_API_KEY=demo GOVSYNC_AI_PROVIDER_API_KEY=demo\n"
        "  govsync plan manifests/ --endpoint local --local-seed local-seed.yaml\n"
        "  # then make them yours (owner groups, keys, hosts), commit and push;\n"
        "  # CI needs GOVSYNC_ENDPOINT, GOVSYNC_STATE, GOVSYNC_API_KEY and the\n"
        "  # {fromEnv: ...} secrets: see README.md, section CI.\n"
    )
