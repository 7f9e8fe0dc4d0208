"""The dashboard's graph names and colours the actions of changing and removing objects
(issue 33): its legend has a badge for delete, replace and forget, a node of a delete or
a forget carries the action's class, and the served stylesheet colours each of them,
badge and node alike."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import httpx
import pytest
from uikit import Dashboard, build, start

from testkit import stop

REMOVED = """\
apiVersion: govsync/v1
kind: Removed
metadata: {name: drop-access-request}
spec: {from: Form/access-request, destroy: true}
---
apiVersion: govsync/v1
kind: Removed
metadata: {name: forget-break-glass}
spec: {from: Form/ledger-break-glass, destroy: false}
"""


@pytest.fixture(scope="module")
def removing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    """The dashboard's repository, with both forms' manifests replaced by Removed
    documents (one deletes, one forgets)."""
    root = build(tmp_path_factory.mktemp("repo"))
    workflow = root / "manifests" / "workflow.yaml"
    kept = [d for d in workflow.read_text().split("\n---\n") if "kind: Form\n" not in d]
    workflow.write_text("\n---\n".join(kept))
    (root / "manifests" / "removed.yaml").write_text(REMOVED)
    served = start(root, log=Path(root) / "ui.log")
    try:
        yield served
    finally:
        stop(served.process)


def test_the_legend_and_nodes_show_delete_replace_and_forget(removing: Dashboard) -> None:
    text = httpx.get(removing.url + "/environments/staging/graph", timeout=60).text
    legend = text.split('<p class="legend">', 1)[1].split("</p>", 1)[0]
    shown = re.findall(r'class="badge a-([a-z-]+)"', legend)
    assert {"delete", "replace", "forget"} <= set(shown), shown
    assert shown[:5] == ["create", "update", "replace", "delete", "forget"]
    by_address = {unquote(html.unescape(node)): action for action, node in re.findall(
        r'<a class="n a-([a-z-]+)[^"]*" href="[^"]*[?&;]node=([^"&]+)"', text)}
    assert by_address.get("Form/access-request") == "delete", by_address
    assert by_address.get("Form/ledger-break-glass") == "forget", by_address

    css = httpx.get(removing.url + "/static/app.css", timeout=60).text
    for action in ("delete", "replace", "forget"):
        badge = re.search(rf"^\.a-{action} \{{[^}}]*background: var\(--{action}-bg\)", css, re.M)
        node = re.search(rf"^g\.nodes \.a-{action} rect \{{[^}}]*fill: var\(--{action}-bg\)",
                         css, re.M)
        defined = re.search(rf"--{action}-bg: #[0-9a-f]{{6}}", css)
        assert badge and node and defined, action
