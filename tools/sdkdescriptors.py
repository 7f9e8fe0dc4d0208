"""Writes ``tests/server/connect/core-v1.binpb``: the service's own schema, as its Go SDK
embeds it.

Every ``core/v1/*.pb.go`` file of the service's Go SDK (formalco/go-sdk)
holds its ``.proto`` file's descriptor, a serialized ``FileDescriptorProto``,
written as a Go string constant (``file_core_v1_<name>_proto_rawDesc``).  Those
bytes, unchanged, make the ``FileDescriptorSet`` that the reference server's
client tests decode its answers with (``tests/server/connectkit.py``): what a
generated client of the service (connect-es, connect-go) is built from.

    python tools/sdkdescriptors.py GO_SDK_GIT_DIR [REVISION]

reads the SDK from a git directory (a clone, or a bare mirror: nothing is
checked out) at REVISION (default HEAD) and writes the set, sorted by file
name; the SDK's commit is the first line of ``tests/server/connect/SOURCE``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "tests" / "server" / "connect" / "core-v1.binpb"
SOURCE = TARGET.with_name("SOURCE")

# The descriptor constant of a generated file: "" + "..." + "..." (protoc-gen-go 1.36).
_RAW = re.compile(r'_rawDesc = ("" \+\n.*?)\n\n', re.S)
_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')
_ESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92, '"': 34,
            "'": 39}


def go_bytes(source: str) -> bytes:
    """The bytes of a Go string constant made of interpreted literals joined by ``+``."""
    out = bytearray()
    for literal in _LITERAL.findall(source):
        i = 0
        while i < len(literal):
            c = literal[i]
            if c != "\\":
                out += c.encode()
                i += 1
                continue
            e = literal[i + 1]
            if e in _ESCAPES:
                out.append(_ESCAPES[e])
                i += 2
            elif e == "x":
                out.append(int(literal[i + 2:i + 4], 16))
                i += 4
            elif e in "01234567":
                out.append(int(literal[i + 1:i + 4], 8))
                i += 4
            elif e in "uU":
                width = 4 if e == "u" else 8
                out += chr(int(literal[i + 2:i + 2 + width], 16)).encode()
                i += 2 + width
            else:
                raise ValueError(f"unknown escape \\{e}")
    return bytes(out)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def descriptor_set(files: list[bytes]) -> bytes:
    """A ``FileDescriptorSet``: field 1 (``file``), length-delimited, once per file."""
    return b"".join(b"\x0a" + _varint(len(f)) + f for f in files)


def _git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, *args], capture_output=True,
                          text=True, check=True).stdout


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    git_dir, revision = argv[0], argv[1] if len(argv) > 1 else "HEAD"
    commit = _git(git_dir, "rev-parse", revision).strip()
    names = sorted(n for n in _git(git_dir, "ls-tree", "-r", "--name-only", commit,
                                   "core/v1/").split() if n.endswith(".pb.go"))
    files = []
    for name in names:
        found = _RAW.search(_git(git_dir, "show", f"{commit}:{name}"))
        if found is None:
            raise SystemExit(f"{name}: no rawDesc constant")
        files.append(go_bytes(found.group(1)))
    TARGET.parent.mkdir(parents=True, exist_ok=True)
    TARGET.write_bytes(descriptor_set(files))
    SOURCE.write_text(f"{commit}\nformalco/go-sdk, core/v1/*.pb.go "
                      f"({len(files)} files): written by tools/sdkdescriptors.py\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
