"""``govsync plan --format html``: the plan page as one self-contained file."""

from __future__ import annotations

import html
import re
from pathlib import Path

from uikit import API_KEY, CANARIES, gov


def test_the_plan_file_stands_alone_and_shows_what_will_change(repo: Path) -> None:
    text = gov(repo, "plan", "--env", "prod", "--format", "html").stdout
    assert text.startswith("<!DOCTYPE html>")
    # Nothing to load: styles and scripts inside, and a policy that forbids loading.
    assert re.findall(r'(?:src|href)="([^"]*)"', text) == ["data:,", "#main"]
    assert "default-src 'none'" in html.unescape(text) and "<script src" not in text
    assert "svgPanZoom" in text and "</script>" in text
    assert "<strong>0 of 2</strong> required approval(s) collected" in text
    assert "Uncertain: 1 create(s) sent without an answer" in text
    assert "govsync state resolve --env prod Hook/mask_pii --absent" in text
    removed = re.findall(r"<del>(.*?)</del>", text, re.S)
    assert removed == ["-        &quot;https://risk.northwind.internal/v1/score&quot;,\n"]
    for value in (*CANARIES.values(), API_KEY):
        assert value not in text


def test_a_blocked_plan_file_is_written_and_says_why(repo: Path) -> None:
    result = gov(repo, "plan", "--env", "staging", "--format", "html", code=1)
    assert "Blocked: 1 change(s) the API cannot make" in result.stdout
    assert "cannot change satelliteType" in result.stdout


def test_the_file_of_1000_changes_is_under_2_mb(tmp_path: Path) -> None:
    manifests = tmp_path / "m"
    manifests.mkdir()
    code = "".join(f"    line_{i} = event.get('k{i}')\\n" for i in range(12))
    (manifests / "hooks.yaml").write_text("---\n".join(
        f"apiVersion: govsync/v1\nkind: Hook\nmetadata:\n  name: hook_{i:04d}\nspec:\n"
        f"  code: \"def handler(event):\\n{code}    return {i}\\n\"\n  timeoutMs: 1000\n"
        for i in range(1000)))
    text = gov(tmp_path, "plan", str(manifests), "--format", "html").stdout
    assert text.count('class="change"') == 1000
    assert len(text.encode()) < 2_000_000, len(text.encode())


def test_a_saved_plan_shows_whose_approvals_count(repo: Path) -> None:
    text = gov(repo, "show", "prod.json", "--format", "html").stdout
    assert "<strong>2 of 2</strong> required approval(s) collected." in text
    assert re.search(r"<li>alice@example.com <span class=muted>\(ssh-ed25519 SHA256:", text)
    assert "<dt>review digest</dt><dd>sha256:" in text
    # Applied since: apply would refuse it, and the page says so.
    assert "stale: the state changed since it was made" in text
    for value in (*CANARIES.values(), API_KEY):
        assert value not in text
