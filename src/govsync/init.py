"""``govsync init``: scaffold a repository of manifests.

The files come from ``govsync/templates/`` (package data): one commented
example manifest per family of kinds, a README, a ``.gitignore`` and the CI
pipeline of ``examples/ci/``; the manifests' JSON Schema is generated, so that
editors check the manifests offline against the installed govsync.

CI installs govsync with ``pip install -r requirements-govsync.txt``: that
file pins the very govsync that ran ``init`` (see ``installed_spec``), never a
bare name that the package index may resolve to someone else's code.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from govsync import envvars
from govsync.errors import ConfigError

if TYPE_CHECKING:
    from importlib import metadata

SCHEMA_PATH = "schemas/manifest.schema.json"
# The editor's mapping of the schema to the manifest folders (VS Code's YAML
# extension, and every editor that runs yaml-language-server with these
# settings).  A file's `# yaml-language-server: $schema=` modeline covers only
# its first document; the mapping covers every document of every file.
EDITOR_SETTINGS = ".vscode/settings.json"
MANIFEST_GLOBS = ("manifests/**/*.yaml", "manifests/**/*.yml", "envs/**/*.yaml",
                  "envs/**/*.yml")
CI_FILES = {
    "github": ("ci/github-actions.yml", ".github/workflows/govsync.yml"),
    "gitlab": ("ci/gitlab-ci.yml", ".gitlab-ci.yml"),
}
GITIGNORE = ".gitignore"
# Where the README that init writes describes the CI file's settings.
CI_SETTINGS_MARK = "<!-- govsync init: the CI file's own description of its settings -->\n"
REQUIREMENTS = "requirements-govsync.txt"
# What the user passes when init cannot tell how govsync was installed.
INSTALL_SPEC_OPTION = "--install-spec"
INSTALL_SPEC_ENV = envvars.INSTALL_SPEC
# CI keeps its state in PostgreSQL.
EXTRAS = "[postgres]"
# The versions of govsync published on the package index (PyPI).  A release
# adds its version here in the commit it tags (the release workflow refuses a
# tag whose version is missing), so that a govsync installed from the index by
# version knows that this version can be installed again from there.  Any
# other installation without a recorded origin (``pip install --find-links``,
# a distribution's package) is not assumed to come from the index: a package
# of the same name there could be anybody's.
INDEX_RELEASES: frozenset[str] = frozenset()
# A line that no pip accepts as a requirement (it cannot be a name, a URL or
# an option), so that ``pip install -r`` stops on it, quoting it, before it
# asks any index for anything.
MISSING_SPEC_LINE = (f"<no govsync install spec: read the comments at the top of {REQUIREMENTS}>")


@dataclass(frozen=True)
class InstallSpec:
    """How to install the govsync that is running, again, elsewhere.

    ``requirement`` is one line of a pip requirements file, or None when it
    cannot be told (``origin`` then says why); ``note`` is a caveat worth
    printing (a repository only this machine can reach).
    """

    requirement: str | None
    origin: str
    note: str = ""


@dataclass
class InitResult:
    directory: str
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    install: InstallSpec | None = None


def installed_spec(dist: metadata.Distribution | None = None) -> InstallSpec:
    """The exact requirement that installs this govsync (``dist``) again.

    Read from the installation's ``direct_url.json`` (PEP 610), which pip
    writes for everything not installed from an index by name:

    - a VCS URL: ``govsync[postgres] @ git+URL@COMMIT`` (the commit, never the
      branch or tag that was asked for, which may move);
    - a remote archive: ``govsync[postgres] @ URL#sha256=...``;
    - a local folder (editable or not) or a local file: unknown, since CI
      cannot reach either.

    Without ``direct_url.json``: ``govsync[postgres]==VERSION`` only for a
    version in INDEX_RELEASES, otherwise unknown.
    """
    if dist is None:
        try:
            from importlib import metadata  # 11 ms: only `govsync init` asks

            dist = metadata.distribution("govsync")
        except metadata.PackageNotFoundError:
            return InstallSpec(None, "govsync is not installed as a package "
                                     "(it runs from a source folder)")
    version = dist.version
    raw = dist.read_text("direct_url.json")
    if raw is None:
        if version in INDEX_RELEASES:
            return InstallSpec(f"govsync{EXTRAS}=={version}",
                               f"govsync {version}, a release on the package index")
        return InstallSpec(None, f"govsync {version} was installed without a record of "
                                 "where from, and is not a release on the package index")
    try:
        direct = json.loads(raw)
        url = str(direct["url"])
    except (ValueError, KeyError, TypeError):
        return InstallSpec(None, f"the record of where govsync {version} was installed from "
                                 "(direct_url.json) is unreadable")
    local = urlsplit(url).scheme == "file"
    if isinstance(direct.get("vcs_info"), dict):
        vcs = direct["vcs_info"]
        commit = vcs.get("commit_id")
        if not commit:
            return InstallSpec(None, f"govsync was installed from {url} without a recorded commit")
        # file:///x as file://localhost/x: pips before 23.3 reject a PEP 508
        # URL without a host, and git reads both the same.
        where = f"file://localhost{urlsplit(url).path}" if local and not urlsplit(url).netloc \
            else url
        requirement = f"govsync{EXTRAS} @ {vcs.get('vcs', 'git')}+{where}@{commit}"
        if direct.get("subdirectory"):
            requirement += f"#subdirectory={direct['subdirectory']}"
        note = (f"{url} is a repository on this machine: CI runners cannot reach it. "
                f"Give the repository's shared URL with {INSTALL_SPEC_OPTION}."
                if local else "")
        return InstallSpec(requirement, f"govsync {version} from {url} at commit {commit}",
                           note)
    if local:
        path = unquote(urlsplit(url).path)
        if isinstance(direct.get("dir_info"), dict):
            editable = " (editable)" if direct["dir_info"].get("editable") else ""
            return InstallSpec(None, f"govsync was installed from the local folder "
                                     f"{path}{editable}")
        return InstallSpec(None, f"govsync was installed from the local file {path}")
    if isinstance(direct.get("archive_info"), dict):
        info = direct["archive_info"]
        hashes = info.get("hashes") or {}
        if not hashes and "=" in str(info.get("hash", "")):
            name, _, value = str(info["hash"]).partition("=")
            hashes = {name: value}
        requirement = f"govsync{EXTRAS} @ {url.split('#', 1)[0]}"
        if "sha256" in hashes:
            requirement += f"#sha256={hashes['sha256']}"
        return InstallSpec(requirement, f"govsync {version} from {url}")
    return InstallSpec(None, f"govsync was installed from {url}, in a way init does not know")


def given_spec(spec: str) -> InstallSpec:
    """The install spec the user gave (``--install-spec`` / GOVSYNC_INSTALL_SPEC)."""
    line = spec.strip()
    if not line or "\n" in line or line.startswith("#"):
        raise ConfigError(f"{INSTALL_SPEC_OPTION} takes one requirement line, such as "
                          f"'govsync{EXTRAS} @ git+https://github.com/OWNER/govsync@COMMIT'")
    return InstallSpec(line, f"given with {INSTALL_SPEC_OPTION}")


def requirements_file(install: InstallSpec) -> str:
    """The content of requirements-govsync.txt."""
    head = (f"# The govsync that CI installs (`pip install -r {REQUIREMENTS}`): the one\n"
            "# that wrote this repository with `govsync init`, pinned, so that CI runs\n"
            "# exactly the code you reviewed. To upgrade, change the line below (then\n"
            "# refresh the schema: `govsync schema --out schemas`).\n")
    if install.requirement is not None:
        return f"{head}# Origin: {install.origin}.\n{install.requirement}\n"
    return (
        f"{head}#\n"
        "# NOT SET: `govsync init` could not tell how to install the govsync that\n"
        f"# wrote it: {install.origin}.\n"
        "# CI stops here until the last line is replaced by the exact govsync to\n"
        "# install, one of:\n"
        f"#   govsync{EXTRAS} @ git+https://github.com/OWNER/govsync@COMMIT\n"
        f"#   govsync{EXTRAS} @ https://HOST/govsync-VERSION-py3-none-any.whl#sha256=HASH\n"
        f"#   govsync{EXTRAS}==VERSION   (only a version published on the package index)\n"
        f"# (`govsync init {INSTALL_SPEC_OPTION} SPEC` writes it when it scaffolds.)\n"
        f"{MISSING_SPEC_LINE}\n"
    )


def resolve_install_spec(spec: str | None = None) -> InstallSpec:
    """The given spec (``--install-spec`` / GOVSYNC_INSTALL_SPEC), else what the
    installation records."""
    return given_spec(spec) if spec else installed_spec()


def install_warning(install: InstallSpec) -> str:
    """What to tell the user about the install spec init wrote; empty when all is well."""
    if install.requirement is None:
        return (
            f"Warning: CI will not run yet: {install.origin}, where CI cannot install it "
            f"from.\n  {REQUIREMENTS} holds a placeholder that stops CI with instructions.\n"
            f"  Write the exact govsync to install there, or run init with "
            f"`{INSTALL_SPEC_OPTION} SPEC` (or {INSTALL_SPEC_ENV}=SPEC), e.g.\n"
            f"  {INSTALL_SPEC_OPTION} 'govsync{EXTRAS} @ "
            "git+https://github.com/OWNER/govsync@COMMIT'\n")
    if install.note:
        return f"Warning: {install.note}\n"
    return ""


def editor_settings(schema: str = "./" + SCHEMA_PATH,
                    globs: tuple[str, ...] = MANIFEST_GLOBS) -> str:
    """The content of .vscode/settings.json: ``schema`` for the manifests' ``globs``
    (both relative to the folder the editor opens)."""
    return json.dumps({"yaml.schemas": {schema: list(globs)}}, indent=2) + "\n"


def scaffold(ci: str = "github", install: InstallSpec | None = None) -> dict[str, str]:
    """Every file of a new repository: relative path -> content."""
    from importlib import resources

    from govsync.schema import MANIFEST_SCHEMA, rendered

    templates = resources.files("govsync") / "templates"
    files: dict[str, str] = {}
    manifests = templates / "manifests"
    for entry in sorted(manifests.iterdir(), key=lambda e: e.name):
        if entry.name.endswith((".yaml", ".yml")):
            files[f"manifests/{entry.name}"] = entry.read_text(encoding="utf-8")
    files[SCHEMA_PATH] = rendered()[MANIFEST_SCHEMA]
    files[EDITOR_SETTINGS] = editor_settings()
    for name in ("README.md", "local-seed.yaml", "govsync.yaml"):
        files[name] = (templates / name).read_text(encoding="utf-8")
    files[GITIGNORE] = (templates / "gitignore").read_text(encoding="utf-8")
    files[REQUIREMENTS] = requirements_file(install or resolve_install_spec())
    described = "No CI file was written (`govsync init --ci github` or `--ci gitlab` writes one).\n"
    if ci != "none":
        source, target = CI_FILES[ci]
        files[target] = (templates / source).read_text(encoding="utf-8")
        described = ci_settings(target, files[target])
    files["README.md"] = files["README.md"].replace(CI_SETTINGS_MARK, described)
    return files


def ci_settings(path: str, workflow: str) -> str:
    """The README's description of what the CI file needs: the CI file's own opening
    comment, quoted (one description, so the two never disagree)."""
    header = []
    for line in workflow.splitlines():
        if not line.startswith("#"):
            break
        header.append(line[2:] if line.startswith("# ") else line[1:])
    return (f"What `{path}` does and the settings it needs, as its opening comment "
            "says:\n\n```text\n" + "\n".join(header).strip("\n") + "\n```\n")


def init(directory: str = ".", *, force: bool = False, ci: str = "github",
         install_spec: str | None = None) -> InitResult:
    """Write the scaffold into ``directory``.

    Existing files are not overwritten (ConfigError listing them, nothing
    written) unless ``force``; an existing ``.gitignore`` only gets the
    missing lines appended.  ``install_spec`` (else GOVSYNC_INSTALL_SPEC)
    overrides the requirement found by ``installed_spec``; when neither
    knows one, everything is still written and requirements-govsync.txt
    holds a placeholder on which CI stops (``result.install`` says why).
    """
    if ci != "none" and ci not in CI_FILES:
        raise ConfigError(f"unknown CI {ci!r}: use one of {', '.join([*CI_FILES, 'none'])}")
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise ConfigError(f"{directory} exists and is not a directory")
    install = resolve_install_spec(install_spec)
    files = scaffold(ci, install)
    existing = [rel for rel in files
                if rel != GITIGNORE and os.path.exists(os.path.join(directory, rel))]
    if existing and not force:
        raise ConfigError(
            f"refusing to overwrite {len(existing)} existing file(s) in {directory}:\n  "
            + "\n  ".join(existing) + "\n(pass --force to overwrite them)")
    result = InitResult(directory, install=install)
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
    warning = install_warning(result.install) if result.install else ""
    return (
        (f"{warning}\n" if warning else "")
        + "Next steps:\n"
        f"{cd}"
        "  govsync validate manifests/     # check the example manifests offline\n"
        "  # try them on the embedded reference server, preloaded with the example\n"
        "  # policy's owner group (local-seed.yaml); dummy secrets will do:\n"
        "  # (govsync.yaml defines staging and prod: pick one with GOVSYNC_ENV or --env)\n"
        f"  export {envvars.ENDPOINT}=local {envvars.ENV}=staging "
        f"{envvars.LOCAL_SEED}=local-seed.yaml\n"
        "  export GOVSYNC_LOGSTORE_API_KEY=demo GOVSYNC_AI_PROVIDER_API_KEY=demo\n"
        "  govsync plan manifests/\n"
        "  govsync apply manifests/        # answer yes\n"
        "  # then make them yours (owner groups, keys, hosts), commit and push;\n"
        f"  # CI installs the govsync of {REQUIREMENTS}; it needs {envvars.ENDPOINT},\n"
        "  # the state and API keys and the {fromEnv: ...} secrets: see README.md,\n"
        "  # section CI.\n"
    )
