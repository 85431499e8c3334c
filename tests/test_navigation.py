"""A reader's editor finds ``wadiro_fleet.tasks`` and ``wadiro_fleet.flows`` in ``tasks/`` and ``flows/``.

At run time the editable install maps those names onto the folders with an import hook, which
static tools cannot follow. For them, ``typings/wadiro_fleet/`` holds two links, ``tasks`` and
``flows``, pointing at the real folders; ``typings`` is the stub path that pyright, basedpyright
and Pylance search first by default, so no configuration is needed. This test asks
basedpyright's language server for go-to-definition on a few imports, as an editor would.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sysconfig
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

ROOT = Path(__file__).resolve().parents[1]

# What a reader writes, and the file each name should lead to.
PROBE = """\
from wadiro_fleet.tasks.protocol.fitting import Fitter
from wadiro_fleet.flows.forecast import forecast_weeks
from wadiro_fleet.tasks.warehouse import schema
from wadiro_models import WaDiRoSCNN
"""
EXPECTED = {
    "Fitter": ROOT / "tasks" / "protocol" / "fitting.py",
    "forecast_weeks": ROOT / "flows" / "forecast.py",
    "schema": ROOT / "tasks" / "warehouse" / "schema.py",
    "WaDiRoSCNN": ROOT / "wadiro_models" / "_wadiro_scnn.py",
}


def test_the_links_lead_to_the_rooms():
    for room in ("tasks", "flows"):
        link = ROOT / "typings" / "wadiro_fleet" / room
        assert link.is_symlink() and link.resolve() == ROOT / room


def _langserver() -> str:
    scripts = Path(sysconfig.get_path("scripts"))
    found = shutil.which("basedpyright-langserver", path=str(scripts)) or shutil.which(
        "basedpyright-langserver")
    if found is None:
        pytest.skip("basedpyright is not installed (it comes with the 'test' extra)")
    return found


class _Server:
    """The least of the Language Server Protocol over stdio: requests, answered in order."""

    def __init__(self, command: list[str]) -> None:
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL)
        self._next_id = 0

    def notify(self, method: str, params: dict) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: dict):
        self._next_id += 1
        self._send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        while True:
            message = self._receive()
            if "method" not in message and message.get("id") == self._next_id:
                assert "error" not in message, message["error"]
                return message.get("result")
            if "method" in message and "id" in message:  # the server asks: answer "nothing"
                items = message.get("params", {}).get("items", [])
                answer = [None] * len(items) if message["method"] == "workspace/configuration" else None
                self._send({"jsonrpc": "2.0", "id": message["id"], "result": answer})

    def close(self) -> None:
        try:
            self.request("shutdown", {})
            self.notify("exit", {})
            self._process.wait(timeout=5)
        except Exception:
            pass
        finally:
            if self._process.poll() is None:
                self._process.kill()
                self._process.wait()

    def _send(self, message: dict) -> None:
        body = json.dumps(message).encode()
        self._process.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        self._process.stdin.flush()

    def _receive(self) -> dict:
        length = None
        while line := self._process.stdout.readline():
            if line in (b"\r\n", b"\n"):
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        if length is None:
            raise RuntimeError("the language server closed its output")
        return json.loads(self._process.stdout.read(length))


@pytest.mark.timeout(60)
def test_go_to_definition_finds_the_rooms_files():
    server = _Server([_langserver(), "--stdio"])
    try:
        server.request("initialize", {
            "processId": None, "rootUri": ROOT.as_uri(), "capabilities": {},
            "workspaceFolders": [{"uri": ROOT.as_uri(), "name": ROOT.name}],
        })
        server.notify("initialized", {})
        # An unsaved editor buffer inside the checkout: nothing is written to disk.
        probe = (ROOT / "tests" / "_navigation_probe.py").as_uri()
        server.notify("textDocument/didOpen", {"textDocument": {
            "uri": probe, "languageId": "python", "version": 1, "text": PROBE}})
        lines = PROBE.splitlines()
        found = {}
        for name in EXPECTED:
            line = next(i for i, text in enumerate(lines) if text.endswith(" " + name))
            answer = server.request("textDocument/definition", {
                "textDocument": {"uri": probe},
                "position": {"line": line, "character": len(lines[line]) - 1}}) or []
            found[name] = [Path(unquote(urlparse(a.get("targetUri", a.get("uri"))).path))
                           for a in answer]
    finally:
        server.close()
    # The editor opens the file through the link (typings/wadiro_fleet/tasks/...): the same file.
    assert {name: [p.resolve() for p in paths] for name, paths in found.items()} == {
        name: [path] for name, path in EXPECTED.items()}
