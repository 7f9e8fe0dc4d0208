"""The folder a migration writes, written only when all of it is valid.

Files: the manifests (one file per kind, split where a file would grow
large), ``imports*.yaml`` (an ``Import`` per object), ``MIGRATION.md``,
``terraform-state-rm.sh``, and ``.govsync-migrate.json``, the record of
each file written and its digest.

``render`` makes every file in memory.  ``check`` reads each manifest file
back as govsync's loader reads it (the same data, or the file is written
again with every string quoted), then loads them all as ``govsync validate``
does; the one error allowed is the one left on purpose: a policy without an
owner, at its ``groupName``.  ``write`` then puts the files in place:

* a folder that does not exist, or is empty, is made whole in a temporary
  folder beside it and renamed into place;
* a folder this wrote before (its record is there) is brought up to date
  file by file (each written to a temporary file, then renamed over), the
  record last.  A file changed since it was written, or one that is not the
  record's and would be overwritten, is refused: nothing is written;
* any other non-empty folder is refused.

Running it again over its own output and the same state therefore changes
nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from govsync.errors import ManifestError, MigrateError
from govsync.manifests.documents import API_VERSION
from govsync.manifests.loader import load
from govsync.manifests.manifest import Context
from govsync.manifests.yamlio import MAX_FILE_BYTES, RawDocument, iter_documents
from govsync.migrate.convert import Conversion, Migrated
from govsync.migrate.report import IMPORTS_FILE, REPORT_FILE, SCRIPT_FILE, report, state_rm_script
from govsync.migrate.terraform import State
from govsync.migrate.yamlout import (
    Commented,
    Document,
    dump,
    dump_document,
    join,
    plain_data,
)

RECORD_FILE = ".govsync-migrate.json"
RECORD_FORMAT = "1.0"
HEADER = ("Migrated from Terraform by `govsync migrate terraform`: see MIGRATION.md.",)
# Documents per manifest file, and a size well under the loader's limit.
_PER_FILE = 1000
_MAX_BYTES = MAX_FILE_BYTES // 2
OWNER_COMMENT = ("the owner: Terraform's state has none (provider schema version 2 dropped "
                 "it): write a group's name here, or userEmail: instead")
_OWNER_ERROR = "spec.groupName: must not be empty"


@dataclass
class Output:
    """Every file of a migration, by name, and which are executable."""

    files: dict[str, str] = field(default_factory=dict)
    executable: set[str] = field(default_factory=set)
    # Documents of each manifest file, to read the file back against.
    documents: dict[str, list[Document]] = field(default_factory=dict)
    ownerless: int = 0
    # The command that writes the folder (in messages, and in full in its
    # record) and the comment heading each manifest file.
    tool: str = "govsync migrate"
    writer: str = "govsync migrate terraform"
    header: tuple[str, ...] = HEADER


@dataclass
class Written:
    """What ``write`` did."""

    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


def render(state: State, conversion: Conversion, shown_out: str) -> Output:
    """Every file of the migration, made in memory."""
    output = Output()
    by_kind: dict[str, list[Document]] = {}
    for m in conversion.migrated:
        by_kind.setdefault(m.kind.name, []).append(_document(m))
        output.ownerless += m.owner_missing
    for kind, documents in by_kind.items():
        files(output, file_stem(kind), documents)
    imports = [Document({"apiVersion": API_VERSION, "kind": "Import",
                         "metadata": {"name": m.instance.address},
                         "spec": {"to": m.address, "id": m.id}})
               for m in conversion.migrated]
    if imports:
        files(output, IMPORTS_FILE.removesuffix(".yaml"), imports)
    output.files[REPORT_FILE] = report(state, conversion, shown_out)
    output.files[SCRIPT_FILE] = state_rm_script(conversion.migrated)
    output.executable.add(SCRIPT_FILE)
    return output


def _document(m: Migrated) -> Document:
    spec = dict(m.spec)
    if m.owner_missing:
        spec["groupName"] = Commented("", OWNER_COMMENT)
    return Document({"apiVersion": API_VERSION, "kind": m.kind.name,
                     "metadata": {"name": m.name}, "spec": spec},
                    [f"Terraform: {m.instance.address}"])


def file_stem(kind: str) -> str:
    """``ConnectorAIProvider`` -> ``connector-ai-provider``."""
    out = ""
    for i, ch in enumerate(kind):
        if ch.isupper() and i and (kind[i - 1].islower()
                                   or (i + 1 < len(kind) and kind[i + 1].islower())):
            out += "-"
        out += ch.lower()
    return out


def files(output: Output, stem: str, documents: list[Document]) -> None:
    """``stem.yaml``, then ``stem-2.yaml``...: at most _PER_FILE documents and _MAX_BYTES."""
    part: list[Document] = []
    texts: list[str] = []
    size = 0
    number = 1
    for doc in documents:
        text = dump_document(doc)
        if part and (len(part) >= _PER_FILE or size + len(text) > _MAX_BYTES):
            _put(output, stem, number, part, texts)
            part, texts, size, number = [], [], 0, number + 1
        part.append(doc)
        texts.append(text)
        size += len(text) + 4
    if part:
        _put(output, stem, number, part, texts)


def _put(output: Output, stem: str, number: int, documents: list[Document],
         texts: list[str]) -> None:
    name = f"{stem}.yaml" if number == 1 else f"{stem}-{number}.yaml"
    output.files[name] = join(texts, output.header)
    output.documents[name] = documents


def check(output: Output) -> None:
    """Read every manifest back and load them all; MigrateError if anything is wrong
    but the owners left empty on purpose."""
    _exact(output)
    with tempfile.TemporaryDirectory(prefix="govsync-migrate-check-") as scratch:
        for name in output.documents:
            with open(os.path.join(scratch, name), "w", encoding="utf-8") as fh:
                fh.write(output.files[name])
        if not output.documents:
            return
        try:
            load([scratch])
        except ManifestError as exc:
            unexpected = [p for p in exc.problems if not _left_on_purpose(output, p.file,
                                                                           p.line, p.message)]
            owners = len(exc.problems) - len(unexpected)
            if unexpected or owners != output.ownerless:
                raise MigrateError([
                    f"{os.path.basename(p.file)}:{p.line}:{p.col}: {p.message}"
                    for p in unexpected] + ["the manifests it would write are not valid: "
                                            "nothing was written"]) from None


def check_with(outputs: list[Output], also: list[str], context: Context | None = None
               ) -> None:
    """Read every manifest of ``outputs`` back, then load them with the manifests under
    ``also`` (what they will be planned with: their references, the documents they
    patch, the addresses they must not define twice); MigrateError if anything is wrong
    in what ``outputs`` hold (a problem of the manifests already there is not theirs)."""
    for output in outputs:
        _exact(output)
    with tempfile.TemporaryDirectory(prefix="govsync-import-check-") as scratch:
        for i, output in enumerate(outputs):
            os.makedirs(os.path.join(scratch, str(i)))
            for name in output.documents:
                with open(os.path.join(scratch, str(i), name), "w", encoding="utf-8") as fh:
                    fh.write(output.files[name])
        try:
            load([*[p for p in also if os.path.exists(p)], scratch], context=context)
        except ManifestError as exc:
            # What is wrong in the documents written: those already there are the user's.
            new = [(os.path.relpath(p.file, scratch), p) for p in exc.problems]
            new = [(inside.split(os.sep, 1)[-1], p) for inside, p in new
                   if not inside.startswith("..")]
            if new:
                raise MigrateError([f"(new) {name}:{p.line}:{p.col}: {p.message}"
                                    for name, p in new] + [
                    "the manifests it would write are not valid with those they would be "
                    "planned with: nothing was written"]) from None


def _exact(output: Output) -> None:
    """Each manifest file reads back as its documents (else every string is quoted)."""
    for name, documents in output.documents.items():
        if _read_back(output.files[name], name) != [plain_data(d.data) for d in documents]:
            # A string the plain or block style did not keep: quote every string.
            output.files[name] = dump(documents, output.header, exact=True)
            if _read_back(output.files[name], name) != [plain_data(d.data) for d in documents]:
                raise MigrateError([f"{name}: the YAML written does not read back as the "
                                    f"objects it holds (a defect of {output.tool})"])


def _read_back(text: str, name: str) -> list[Any]:
    values: list[Any] = []
    for doc in iter_documents(text, name):
        values.append(doc.value if isinstance(doc, RawDocument) else doc)
    return values


def _left_on_purpose(output: Output, file: str, line: int, message: str) -> bool:
    text = output.files.get(os.path.basename(file))
    if message != _OWNER_ERROR or text is None:
        return False
    lines = text.split("\n")
    return 0 < line <= len(lines) and lines[line - 1].lstrip().startswith('groupName: ""  #')


# --- the folder ----------------------------------------------------------------------


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _record(files: Mapping[str, str], writer: str) -> str:
    return json.dumps({"formatVersion": RECORD_FORMAT, "writer": writer,
                       "files": {name: _digest(text) for name, text in sorted(files.items())}},
                      indent=2, sort_keys=True) + "\n"


def write(out: str, output: Output) -> Written:
    """Put the files in ``out`` (see the module's docstring); MigrateError when refused."""
    files = {**output.files}
    files[RECORD_FILE] = _record(output.files, output.writer)
    if os.path.lexists(out) and not os.path.isdir(out):
        raise MigrateError([f"{out}: exists and is not a folder: choose another --out"])
    if not os.path.isdir(out) or not os.listdir(out):
        _write_new(out, files, output.executable)
        return Written(changed=sorted(files))
    return _update(out, files, output.executable, output.tool)


def _write_new(out: str, files: Mapping[str, str], executable: set[str]) -> None:
    parent = os.path.dirname(os.path.abspath(out))
    try:
        os.makedirs(parent, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=f".{os.path.basename(os.path.abspath(out))}.",
                                   dir=parent)
    except OSError as exc:
        raise MigrateError([f"{out}: cannot write there: {exc.strerror}"]) from None
    try:
        for name, text in files.items():
            _write_file(os.path.join(staging, name), text, name in executable)
        os.chmod(staging, 0o755)
        if os.path.isdir(out):
            os.rmdir(out)  # empty, as checked
        os.rename(staging, out)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise MigrateError([f"{out}: cannot write there: {exc.strerror}"]) from None


def _write_file(path: str, text: str, executable: bool) -> None:
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.chmod(path, 0o755 if executable else 0o644)


def _update(out: str, files: Mapping[str, str], executable: set[str], tool: str) -> Written:
    recorded = _read_record(out, tool)
    present = {name: _read(os.path.join(out, name)) for name in sorted(os.listdir(out))}
    refused: list[str] = []
    for name, text in present.items():
        if name == RECORD_FILE:
            continue
        new = files.get(name)
        if name in recorded:
            if text is None or (_digest(text) != recorded[name] and text != new):
                refused.append(f"{os.path.join(out, name)}: changed since {tool} "
                               "wrote it: move your change elsewhere (or the file away), "
                               "then run this again")
        elif new is not None and text != new:
            refused.append(f"{os.path.join(out, name)}: not written by {tool}, and "
                           "it would be overwritten: move it away, or choose another --out")
    if refused:
        raise MigrateError([*refused, "nothing was written"])
    written = Written()
    try:
        for name, text in files.items():
            if name == RECORD_FILE or present.get(name) == text:
                continue
            _replace(os.path.join(out, name), text, name in executable)
            written.changed.append(name)
        for name in sorted(recorded):
            if name not in files and name in present:
                os.remove(os.path.join(out, name))
                written.removed.append(name)
        if written.changed or written.removed or present.get(RECORD_FILE) != files[RECORD_FILE]:
            _replace(os.path.join(out, RECORD_FILE), files[RECORD_FILE], False)
    except OSError as exc:
        raise MigrateError([f"{out}: cannot write there: {exc.strerror}"]) from None
    return written


def _read_record(out: str, tool: str) -> dict[str, str]:
    path = os.path.join(out, RECORD_FILE)
    refusal = MigrateError([f"{out}: not empty, and not a folder {tool} wrote (no "
                            f"valid {RECORD_FILE}): choose an empty or new folder with --out"])
    text = _read(path)
    if text is None:
        raise refusal
    try:
        data = json.loads(text)
    except ValueError:
        raise refusal from None
    files = data.get("files") if isinstance(data, dict) else None
    if (not isinstance(files, dict) or data.get("formatVersion") != RECORD_FORMAT
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items())):
        raise refusal
    return {k: v for k, v in files.items() if os.path.basename(k) == k}


def _read(path: str) -> str | None:
    """A regular file's text, or None (a folder, a link, unreadable, not UTF-8)."""
    if os.path.islink(path) or not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError):
        return None


def _replace(path: str, text: str, executable: bool) -> None:
    directory = os.path.dirname(path)
    fd, temporary = tempfile.mkstemp(prefix=".govsync-migrate-", dir=directory)
    os.close(fd)
    try:
        _write_file(temporary, text, executable)
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.remove(temporary)
        raise


# --- adding to a folder (govsync import) -------------------------------------------------

LENGTHS = "lengths"


def additions(out: str, output: Output, *, merge: bool = False) -> tuple[dict[str, str],
                                                                           list[str]]:
    """What adding ``output``'s documents to the folder ``out`` writes (name -> whole new
    text, the record included) and what refuses it.  Nothing written before is rewritten
    or removed: a file the record says was written, unedited or only added to at its end,
    gets the new documents appended; a missing one is written anew; an edited one (or one
    not written by the tool) is refused, naming it and the ways out, unless ``merge``:
    then the new documents go to a new file beside it."""
    if os.path.lexists(out) and not os.path.isdir(out):
        return {}, [f"{out}: exists and is not a folder: choose another --out"]
    present = sorted(os.listdir(out)) if os.path.isdir(out) else []
    recorded, lengths = ({}, {}) if not present else _lengths(out, output.tool, merge)
    if recorded is None:
        return {}, [f"{out}: not empty, and not a folder {output.tool} wrote (no valid "
                    f"{RECORD_FILE}): choose an empty or new folder with --out, or pass "
                    "--merge to add new files beside what it holds"]
    top = "".join(f"# {line}\n" for line in output.header)
    files: dict[str, str] = {}
    refused: list[str] = []
    for name, text in output.files.items():
        path = os.path.join(out, name)
        if not os.path.lexists(path):
            files[name] = text
            continue
        current = _read(path)
        mine = current is not None and name in recorded and (
            _digest(current) == recorded[name]
            or (0 < lengths.get(name, 0) <= len(current)
                and _digest(current[:lengths[name]]) == recorded[name]))
        if mine and current is not None:
            body = text[len(top):] if text.startswith(top) else text
            files[name] = current + ("" if current.endswith("\n") else "\n") + "---\n" + body
        elif merge:
            files[_free(name, present, files)] = text
        else:
            why = (f"edited since {output.tool} wrote it (not only added to at its end)"
                   if name in recorded else f"not written by {output.tool}")
            refused.append(f"{path}: {why}, and the new objects would go in it: run it again "
                           "with --out NEW_FOLDER (plan reads both folders), or with --merge "
                           "to write them in new files beside it")
    if refused:
        return {}, [*refused, "nothing was written"]
    merged = {**recorded, **{n: _digest(t) for n, t in files.items()}}
    sizes = {**{n: v for n, v in lengths.items() if n in recorded},
             **{n: len(t) for n, t in files.items()}}
    files[RECORD_FILE] = json.dumps({"formatVersion": RECORD_FORMAT, "writer": output.writer,
                                     "files": dict(sorted(merged.items())),
                                     LENGTHS: dict(sorted(sizes.items()))},
                                    indent=2, sort_keys=True) + "\n"
    return files, []


def add(out: str, files: Mapping[str, str]) -> Written:
    """Write what ``additions`` made (each file replaced whole, the record last)."""
    if not os.path.isdir(out) or not os.listdir(out):
        _write_new(out, files, set())
        return Written(changed=sorted(n for n in files if n != RECORD_FILE))
    written = Written()
    try:
        for name, text in files.items():
            if name != RECORD_FILE:
                _replace(os.path.join(out, name), text, False)
                written.changed.append(name)
        _replace(os.path.join(out, RECORD_FILE), files[RECORD_FILE], False)
    except OSError as exc:
        raise MigrateError([f"{out}: cannot write there: {exc.strerror}"]) from None
    return written


def _lengths(out: str, tool: str, merge: bool) -> tuple[Any, dict[str, int]]:
    """The record's digests and lengths; (None, {}) when there is no valid record, or
    ({}, {}) with ``merge``."""
    try:
        recorded = _read_record(out, tool)
    except MigrateError:
        return ({} if merge else None), {}
    data = json.loads(_read(os.path.join(out, RECORD_FILE)) or "{}")
    found = data.get(LENGTHS) if isinstance(data, dict) else None
    lengths = {k: v for k, v in (found or {}).items()
               if isinstance(k, str) and isinstance(v, int)} if isinstance(found, dict) else {}
    return recorded, lengths


def _free(name: str, present: list[str], chosen: Mapping[str, str]) -> str:
    """``hook.yaml`` -> ``hook-2.yaml`` (or the next number no file has)."""
    stem = name.removesuffix(".yaml")
    number = 2
    while f"{stem}-{number}.yaml" in present or f"{stem}-{number}.yaml" in chosen:
        number += 1
    return f"{stem}-{number}.yaml"
