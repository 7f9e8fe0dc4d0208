"""The dashboard in a real browser: click through every page of two environments
applied for real, with the keyboard where it matters; no request leaves the page's
origin, no page shows a secret, and the plan file opens with the network off.

Screenshots of each page are written under the test's tmp dir (test artifacts).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from browser import browser, needs_browser
from uikit import API_KEY, CANARIES, Dashboard, gov

pytestmark = [needs_browser, pytest.mark.slow]


class Watch:
    """Every request a page makes; those outside ``origin`` are refused and kept."""

    def __init__(self, context: Any, origin: str) -> None:
        self.origin = origin
        self.requests: list[str] = []
        self.outside: list[str] = []
        self.errors: list[str] = []
        context.route("**/*", self._route)

    def _route(self, route: Any) -> None:
        url = route.request.url
        self.requests.append(url)
        if url == self.origin or url.startswith(self.origin + "/") or url.startswith("data:"):
            route.continue_()
        else:
            self.outside.append(url)
            route.abort()

    def page(self, context: Any) -> Any:
        page = context.new_page()
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        return page


def no_secret(page: Any, where: str) -> None:
    text = page.content()
    for value in (*CANARIES.values(), API_KEY):
        assert value not in text, (where, value)


def test_click_through_every_page(dashboard: Dashboard, tmp_path: Path) -> None:
    shots = tmp_path / "screenshots"
    shots.mkdir()
    with browser(tmp_path / "profile") as context:
        watch = Watch(context, dashboard.url)
        page = watch.page(context)

        def shot(name: str) -> None:
            no_secret(page, name)
            page.screenshot(path=str(shots / f"{name}.png"), full_page=True)

        page.goto(dashboard.url + "/")
        assert page.title() == "govsync: environments"
        rows = page.locator("table.overview tbody tr")
        assert rows.count() == 2
        assert rows.nth(0).locator(".status").inner_text() == "Uncertain"
        assert rows.nth(1).locator(".status").inner_text() == "Blocked"
        shot("overview")

        # The keyboard: skip to the content, then the first environment's link.
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.textContent") == "Skip to content"
        page.get_by_role("link", name="staging", exact=True).first.click()
        page.wait_for_url("**/environments/staging")
        assert page.get_by_role("heading", name="Blocked: 1 change(s) the API cannot make") \
            .is_visible()
        diff = page.locator("pre.linediff", has=page.locator("del")).first
        assert diff.locator("del").inner_text().strip() == \
            '-        "https://risk.northwind.internal/v1/score",'
        assert diff.locator("ins").inner_text().strip() == \
            '+        "https://risk.northwind.internal/v2/score",'
        shot("environment-staging")

        page.get_by_label("Kind").select_option("Hook")
        page.get_by_role("button", name="Filter").click()
        page.wait_for_url("**kind=Hook**")
        changes = page.locator("section", has=page.locator("h2#changes"))
        assert changes.locator("article.change").count() == 1
        shot("environment-staging-hooks")

        page.get_by_role("link", name="prod", exact=True).first.click()
        page.wait_for_url("**/environments/prod")
        copy = page.get_by_role("button", name="Copy").first
        assert copy.is_visible()  # the script shows the copy buttons
        assert page.locator(".copy code").first.inner_text() == \
            "govsync state resolve --env prod Hook/mask_pii --id ID"
        shot("environment-prod")

        page.get_by_role("link", name="Plan", exact=True).click()
        page.wait_for_url("**/environments/prod/plan")
        assert "0 of 2" in page.locator("p.approvals").inner_text()
        assert page.locator("figure.graph svg .nodes .n").count() == 2  # the two changes
        shot("plan-prod")

        page.get_by_role("link", name="History and audit").click()
        page.wait_for_url("**/environments/prod/history")
        page.get_by_label("Address contains").fill("Hook/risk_score")
        page.get_by_label("Outcome").select_option("ok")
        page.get_by_role("button", name="Filter").click()
        page.wait_for_url("**address=Hook**")
        page.locator("details summary").first.click()
        assert page.locator("details table tbody tr").count() == 1
        assert "alice@example.com, bob@example.com" in page.locator("tbody").first.inner_text()
        shot("history-prod")

        page.get_by_role("link", name="Graph", exact=True).click()
        page.wait_for_url("**/environments/prod/graph")
        assert page.locator("#svg-pan-zoom-controls").count() == 1  # pan and zoom are on
        viewport = page.locator("g.viewport")
        before = viewport.get_attribute("transform")
        page.locator(".graph-frame").focus()
        page.keyboard.press("+")
        page.keyboard.press("ArrowLeft")
        page.wait_for_function(  # drawn on the next animation frame
            "b => document.querySelector('g.viewport').getAttribute('transform') !== b",
            arg=before, timeout=5000)
        # Every label fits in its box (a long address is cut, and whole in its tooltip).
        overflowing = page.evaluate("""() => [...document.querySelectorAll('g.nodes rect')]
            .map(r => [r.getBBox(), r.nextElementSibling])
            .filter(([box, text]) => text && text.getBBox().x + text.getBBox().width
                                     > box.x + box.width)
            .map(([, text]) => text.textContent)""")
        assert page.locator("g.nodes rect").count() > 10 and overflowing == [], overflowing
        # Select a node by clicking it: what it depends on and what depends on it.
        page.locator('.nodes .n[data-i]', has_text="Space/analytics").click()
        panel = page.locator(".graph-panel")
        assert panel.locator("h2").inner_text() == "Space/analytics"
        assert "Connector/prod-eu" in panel.inner_text()
        assert page.locator("path.edges-lit").get_attribute("d")
        # Search by address, then follow a dependency from the panel.
        page.get_by_label("Find an address").fill("Policy/risk-based")
        page.get_by_label("Find an address").press("Enter")
        assert panel.locator("h2").inner_text() == "Policy/risk-based-access"
        panel.get_by_role("link", name="Hook/risk_score").click()
        assert panel.locator("h2").inner_text() == "Hook/risk_score"
        assert "node=Hook%2Frisk_score" in page.url
        shot("graph-prod")

        page.goto(dashboard.url + "/environments/staging/graph?node=Space/analytics")
        assert page.locator(".graph-panel h2").inner_text() == "Space/analytics"
        shot("graph-staging-selected")

        assert watch.outside == []
        assert all(r.startswith(dashboard.url) for r in watch.requests)
        assert watch.errors == []
    assert len(list(shots.glob("*.png"))) == 8


def test_the_plan_file_opens_with_the_network_off(repo: Path, tmp_path: Path) -> None:
    plan = tmp_path / "plan-prod.html"
    plan.write_text(gov(repo, "plan", "--env", "prod", "--format", "html").stdout)
    with browser(tmp_path / "profile", offline=True) as context:
        watch = Watch(context, plan.as_uri())
        page = watch.page(context)
        page.goto(plan.as_uri())
        assert page.get_by_role("heading", name="Approvals").is_visible()
        assert "0 of 2" in page.locator("p.approvals").inner_text()
        assert page.locator("#svg-pan-zoom-controls").count() == 1  # its script ran
        page.get_by_label("Find an address").fill("Hook/risk_score")
        page.get_by_label("Find an address").press("Enter")
        assert page.locator(".graph-panel h2").inner_text() == "Hook/risk_score"
        no_secret(page, "plan file")
        page.screenshot(path=str(tmp_path / "plan-file.png"), full_page=True)
        # Nothing but the file itself (if the browser routes a file: request at all).
        assert set(watch.requests) <= {plan.as_uri()}
        assert watch.outside == []
        assert watch.errors == []
