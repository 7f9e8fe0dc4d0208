"""``govsync ui`` over HTTP: every page of two environments applied for real, read-only,
no secret anywhere, and the token when there is one.  (tests/ui/test_browser.py
clicks through the same pages in Chromium.)"""

from __future__ import annotations

import hashlib
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx
import pytest
from uikit import API_KEY, CANARIES, Dashboard, gov, start

from testkit import LOOPBACK_TLS, examples, stop

EXAMPLE = examples()
N = EXAMPLE.objects  # the example organisation's objects


def get(dashboard: Dashboard, path: str, **kw: object) -> httpx.Response:
    return httpx.get(dashboard.url + path, timeout=60, verify=LOOPBACK_TLS,
                     **kw)  # type: ignore[arg-type]


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("href", "src", "action") and value:
                self.found.append(value)


def crawl(dashboard: Dashboard, limit: int = 400) -> dict[str, str]:
    """Every page reachable from the overview by links (query strings included)."""
    seen: dict[str, str] = {}
    todo = ["/"]
    while todo and len(seen) < limit:
        path = todo.pop()
        if path in seen:
            continue
        answer = get(dashboard, path)
        assert answer.status_code == 200, (path, answer.status_code)
        seen[path] = answer.text
        if not answer.headers["content-type"].startswith("text/html"):
            continue
        parser = Links()
        parser.feed(answer.text)
        for link in parser.found:
            if link.startswith(("#", "data:")):
                continue
            target = urlsplit(urljoin(dashboard.url + path, link))
            assert f"{target.scheme}://{target.netloc}" == dashboard.url, link
            todo.append(target.path + (f"?{target.query}" if target.query else ""))
    return seen


def test_the_overview_shows_each_environments_status_and_who_approved_it(
        dashboard: Dashboard) -> None:
    text = get(dashboard, "/").text
    rows = re.findall(r"<tr><th scope=row>.*?</tr>", text)
    assert len(rows) == 2
    prod, staging = rows
    assert "prod" in prod and 'st-Uncertain">Uncertain' in prod
    assert "alice@example.com, bob@example.com" in prod
    assert "1 update, 1 uncertain" in prod
    assert 'st-Blocked">Blocked' in staging and "1 blocked change(s)" in staging
    assert "no approvals recorded" in staging
    assert "none recorded" in staging  # no drift check in the history yet


def test_an_environment_shows_its_changes_field_by_field_and_what_to_do(
        dashboard: Dashboard) -> None:
    staging = get(dashboard, "/environments/staging").text
    assert "Blocked: 1 change(s) the API cannot make" in staging
    assert "cannot change satelliteType: UpdateSatelliteV2 can change only" in staging
    assert ("<td><code>&quot;data_discovery&quot;</code></td><td><code>&quot;ai&quot;</code>"
            ) in staging
    # The hook's code as a line diff: one line removed, one added, context around.
    [diff] = re.findall(r'<pre class="linediff">(<span class="hunk">.*?)</pre>', staging,
                        re.S)
    assert diff.splitlines() == [
        '<span class="hunk">@@ -2,7 +2,7 @@</span>', " // for the session&#x27;s user.",
        " export default async function hook(input, env) {",
        "     const res = await fetch(",
        "<del>-        &quot;https://risk.northwind.internal/v1/score&quot;,",
        "</del><ins>+        &quot;https://risk.northwind.internal/v2/score&quot;,",
        "</ins>         {",
        "             method: &quot;POST&quot;,",
        "             headers: {&quot;Authorization&quot;: `Bearer ${env.RISK_API_TOKEN}`, "
        "&quot;X-Region&quot;: env.RISK_API_REGION},"]
    assert "hooks should time out within 5 s" in staging  # the warning rule's result

    prod = get(dashboard, "/environments/prod").text
    assert "Uncertain: 1 create(s) sent without an answer" in prod
    for command in ("govsync state resolve --env prod Hook/mask_pii --id ID",
                    "govsync state resolve --env prod Hook/mask_pii --absent"):
        assert f'data-copy="{command}"' in prod


def test_the_plan_page_shows_the_approvals_collected_and_missing(dashboard: Dashboard) -> None:
    prod = get(dashboard, "/environments/prod/plan").text
    assert "<strong>0 of 2</strong> required approval(s) collected; <strong>2 missing" in prod
    assert "<li>alice@example.com</li><li>bob@example.com</li>" in prod
    staging = get(dashboard, "/environments/staging/plan").text
    assert "None required for this workspace." in staging
    # Filters: one kind, one page.
    only = get(dashboard, "/environments/staging/plan?kind=Satellite").text
    assert "Satellite/discovery-analytics" in only and 'id="c-Hook/risk_score"' not in only


def test_history_and_audit_filter_by_outcome_address_and_who(dashboard: Dashboard) -> None:
    base = "/environments/prod/history"
    assert "1 of the last 1 record(s)" in get(dashboard, base).text
    assert "0 of the last 1 record(s)" in get(dashboard, base + "?outcome=failed").text
    one = get(dashboard, base + "?address=Hook/risk_score").text
    assert "<summary>1 change(s)</summary>" in one
    assert "0 of the last" in get(dashboard, base + "?who=nobody-of-that-name").text
    assert "0 of the last" in get(dashboard, base + "?since=2999-01-01").text


def test_the_graph_says_what_an_object_depends_on_and_what_depends_on_it(
        dashboard: Dashboard) -> None:
    text = get(dashboard, "/environments/staging/graph?node=Space/analytics").text
    assert f"{N} objects, {EXAMPLE.dependencies} dependencies" in text
    panel = text.split('<aside class="graph-panel"', 1)[1]
    assert "<h3>Depends on (0)</h3>" in panel
    assert re.search(r"<h3>Depended on by \((\d+)\)</h3>", panel)
    assert "Connector/prod-eu" in panel
    found = get(dashboard, "/environments/staging/graph?q=risk").text
    assert "Hook/risk_score" in found.split('class="graph-found"', 1)[1].split("</ul>", 1)[0]


def files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_no_page_shows_a_secret_or_the_key_and_nothing_but_get_is_answered(
        dashboard: Dashboard, repo: Path) -> None:
    before = files(repo / ".govsync")
    pages = crawl(dashboard)
    assert files(repo / ".govsync") == before  # read-only: not a byte written
    assert len(pages) > 20
    for path, text in pages.items():
        for value in (*CANARIES.values(), API_KEY):
            assert value not in text, (path, value)
    answer = httpx.post(dashboard.url + "/", timeout=30)
    assert answer.status_code == 405
    head = get(dashboard, "/")
    assert "default-src 'none'" in head.headers["content-security-policy"]
    assert head.headers["cache-control"] == "no-store"
    assert get(dashboard, "/environments/nowhere").status_code == 404
    assert get(dashboard, "/static/README.md").status_code == 404


def test_a_token_guards_every_page(repo: Path) -> None:
    token = "ui-token-3f9a"
    served = start(repo, token=token)
    try:
        refused = httpx.get(served.url + "/environments/prod", timeout=60)
        assert refused.status_code == 401
        assert "Hook/" not in refused.text and "prod" not in refused.text.split("<main", 1)[1]
        assert httpx.get(served.url + "/static/app.js", timeout=30).status_code == 401
        ok = httpx.get(served.url + "/environments/prod", timeout=60,
                       headers={"authorization": f"Bearer {token}"})
        assert ok.status_code == 200
        wrong = httpx.get(served.url + "/", headers={"authorization": "Bearer nope"},
                          timeout=30)
        assert wrong.status_code == 401
        # A browser: once with ?token=, then the cookie; the token leaves the address.
        with httpx.Client(base_url=served.url, timeout=60) as browser:
            first = browser.get(f"/environments/prod?kind=Hook&token={token}")
            assert first.status_code == 303
            assert first.headers["location"] == "/environments/prod?kind=Hook"
            assert "httponly" in first.headers["set-cookie"].lower()
            assert browser.get("/environments/prod?kind=Hook").status_code == 200
    finally:
        stop(served.process)


def test_listening_beyond_loopback_needs_a_token(repo: Path) -> None:
    refused = gov(repo, "ui", "--listen", "0.0.0.0:8421", code=1)
    assert "set GOVSYNC_UI_TOKEN" in refused.output
    bad = gov(repo, "ui", "--listen", "nowhere", code=1)
    assert "write HOST:PORT" in bad.output


@pytest.mark.parametrize("path", ["/environments/staging/graph", "/environments/prod/plan"])
def test_pages_load_only_their_own_files(dashboard: Dashboard, path: str) -> None:
    text = get(dashboard, path).text
    sources = re.findall(r'(?:src|href)="([^"#][^"]*)"', text)
    assert sources and all(s.startswith(("/", "?", "data:")) for s in sources), sources
