"""Where ``govsync import`` puts what it found, given what the folders already hold.

Contract 12 (Adopting) and issue 43.  Before writing, the import reads the
manifests it would be planned with (``scan``: the documents as written, without
loading or resolving them): an object that an ``Import`` document there already
adopts is not written again; one whose address a manifest there defines gets
only its ``Import`` document (a re-import after the manifests were written, or
another environment's import of the same organisation).

With an environment (``--env``), as a Kustomize base and overlay or a Terraform
module and its per-workspace variables:

* the **shared** folder (``--out``, read by every environment) holds the manifests;
  the first environment imported writes them; every later import writes the objects
  they lack to the environment's own folder;
* the environment's **own** folder (``--env-out``, read by it alone) holds its
  ``Import`` documents (ids differ per server), a ``Patch`` per object whose live
  fields differ from the shared manifest (so its plan right after sends nothing), and
  every secret of its objects as ``{fromEnv: <ENV>_...}`` set by a ``Patch``: one
  agent can hold every environment's values.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from govsync.api.kinds import BY_KIND
from govsync.errors import ConfigError
from govsync.files import manifest_files
from govsync.manifests.yamlio import RawDocument, iter_documents, read_text

_ENV_UNSAFE = re.compile(r"[^A-Z0-9]+")


@dataclass
class Known:
    """What the manifests an import is planned with already say."""

    # Address -> (file, spec as written).
    defined: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    # (kind, id) -> the file of the Import document that adopts it.
    adopted: dict[tuple[str, str], str] = field(default_factory=dict)


def scan(paths: Iterable[str]) -> Known:
    """The object documents and Import documents under ``paths`` that exist (a document
    that cannot be read is skipped: the check before writing reports it)."""
    known = Known()
    found, _ = manifest_files([p for p in paths if os.path.exists(p)])
    for disk, shown in found:
        text, _problem = read_text(disk, shown)
        for doc in iter_documents(text or "", shown):
            value = doc.value if isinstance(doc, RawDocument) else None
            if not isinstance(value, dict) or not isinstance(value.get("spec"), dict):
                continue
            kind, spec = value.get("kind"), value["spec"]
            metadata = value.get("metadata")
            name = metadata.get("name") if isinstance(metadata, dict) else None
            if kind == "Import" and isinstance(spec.get("to"), str) and "/" in spec["to"]:
                known.adopted[(spec["to"].split("/", 1)[0], str(spec.get("id")))] = shown
            elif kind in BY_KIND and isinstance(name, str):
                known.defined.setdefault(f"{kind}/{name}", (shown, spec))
    return known


@dataclass(frozen=True)
class Layout:
    """The folders one import writes: ``shared`` alone without an environment."""

    shared: str
    own: str | None = None
    environment: str | None = None
    # What the environment's plan reads (its paths): scanned, and loaded with the output.
    paths: tuple[str, ...] = ()

    @property
    def prefix(self) -> str:
        """What an environment's secret variables start with: ``PROD_``."""
        if self.environment is None:
            return ""
        return _ENV_UNSAFE.sub("_", self.environment.upper()).strip("_") + "_"


def layout(environment: str | None, env_paths: Sequence[str], every: Sequence[Sequence[str]],
           out: str | None, own: str | None) -> Layout:
    """The folders of an import: ``--out`` (default ``imported``; with an environment, a
    folder ``imported`` in the first of its paths every environment reads) and, with an
    environment, ``--env-out`` (default: ``imported`` in the first of its paths no other
    environment reads; none: one folder, as without an environment).  ConfigError when
    ``--out`` cannot be chosen, or ``--env-out`` lies outside what the environment reads
    (its plan would not see it)."""
    if environment is None:
        return Layout(out or "imported")
    shared_paths = [p for p in env_paths if all(_reads(o, p) for o in every)]
    own_paths = [p for p in env_paths if sum(_reads(o, p) for o in every) == 1]
    if out is None:
        if not shared_paths:
            raise ConfigError(f"environment {environment}: none of its paths is read by every "
                              "environment: pass --out DIR, the folder for the shared manifests")
        out = os.path.join(shared_paths[0], "imported")
    if own is None:
        if not own_paths:
            # No folder of its own: one folder, as without an environment (its secrets'
            # variables still named after it).
            return Layout(out, None, environment, tuple(env_paths))
        own = os.path.join(own_paths[0], "imported")
    if not any(_under(own, p) for p in env_paths):
        raise ConfigError(f"--env-out {own}: environment {environment} does not read it "
                          f"(its paths: {', '.join(env_paths)}): choose a folder under "
                          "them, or add it to its paths in govsync.yaml")
    if os.path.normpath(out) == os.path.normpath(own):
        raise ConfigError("--out and --env-out name the same folder: the shared manifests and "
                          "one environment's documents go to different folders")
    return Layout(out, own, environment, tuple(env_paths))


def _reads(paths: Sequence[str], path: str) -> bool:
    return any(os.path.normpath(p) == os.path.normpath(path) for p in paths)


def _under(folder: str, path: str) -> bool:
    folder, path = os.path.abspath(folder), os.path.abspath(path)
    return folder == path or folder.startswith(path.rstrip(os.sep) + os.sep)


def difference(found: Mapping[str, Any], written: Mapping[str, Any],
               secrets: Iterable[tuple[tuple[str, ...], str]]) -> dict[str, Any]:
    """The RFC 7386 merge patch that makes the spec ``written`` (a shared manifest's) what
    the server holds (``found``, its secrets as ``{fromEnv}`` of the environment's
    variables): every top-level field that differs, then each secret not already in it."""
    merge: dict[str, Any] = {}
    for key in sorted(found.keys() | written.keys(), key=str):
        if _masked(found.get(key)) != _masked(written.get(key)):
            merge[key] = found.get(key)  # None: removed
    for keys, variable in secrets:
        if keys[0] in merge:
            continue
        at = merge
        for key in keys[:-1]:
            at = at.setdefault(key, {})
        at[keys[-1]] = {"fromEnv": variable}
    return merge


def _masked(value: Any) -> Any:
    """A spec's value with every ``{fromEnv}`` alike (secrets are compared by where they
    are, not by which variable holds them)."""
    if isinstance(value, dict):
        if set(value) == {"fromEnv"}:
            return "{fromEnv}"
        return {k: _masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return value
