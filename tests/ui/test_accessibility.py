"""The dashboard's accessibility, measured in a real browser on every page.

* axe-core (Deque's engine, as Lighthouse and the browsers' tools run it; its
  ``axe.min.js`` comes in the ``axe-playwright-python`` wheel, so it runs
  offline): zero violations of its WCAG 2.x A/AA and best-practice rules on
  every page (names, contrast of HTML text, landmarks, heading order, nested
  interactive controls, focusable scrolling regions, language, title...).
* What axe does not judge: the contrast of the graph's SVG labels against the
  shapes they sit on (WCAG 2.1, 1.4.3 AA: 4.5:1, or 3:1 for large text),
  checked here by hand on every piece of visible text.

The pages are those of a node selected in the graph (its highlighted colours
too), a node that has no links, and the plan file as CI publishes it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import browser, needs_browser
from uikit import Dashboard, gov

# Present whenever the test extra is (a wheel of pure data: axe.min.js).
axe_playwright = pytest.importorskip("axe_playwright_python.sync_playwright",
                                     reason="pip install -e '.[test]' brings axe-core")

pytestmark = [needs_browser, pytest.mark.slow]

PAGES = ("/", "/environments/staging", "/environments/prod", "/environments/prod/plan",
         "/environments/prod/history", "/environments/prod/graph?node=Space/analytics",
         "/environments/staging/graph")

# Runs in the page: [{text, ratio, needed, where}] for each text below its ratio.
CONTRAST = """() => {
  const parse = c => {
    const m = /rgba?\\(([^)]+)\\)/.exec(c || "");
    if (!m) return null;
    const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const over = (top, under) => {
    const a = top[3];
    return [0, 1, 2].map(i => top[i] * a + under[i] * (1 - a)).concat([1]);
  };
  const luminance = rgb => {
    const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(rgb[0]) + 0.7152 * f(rgb[1]) + 0.0722 * f(rgb[2]);
  };
  const backdrop = el => {  // the HTML backgrounds of el and its ancestors, composited
    const chain = [];
    for (let e = el; e; e = e.parentElement) chain.unshift(e);
    let bg = [255, 255, 255, 1];
    for (const e of chain) {
      if (e instanceof SVGElement) continue;
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) bg = over(c, bg);
    }
    return bg;
  };
  const where = el => {
    const parts = [];
    for (let e = el; e && parts.length < 4; e = e.parentElement)
      parts.unshift(e.tagName.toLowerCase() + (e.getAttribute("class")
        ? "." + e.getAttribute("class").trim().split(/\\s+/).join(".") : ""));
    return parts.join(" > ");
  };
  const bad = [], seen = new Set();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const el = walker.currentNode.parentElement;
    if (!walker.currentNode.textContent.trim() || seen.has(el)) continue;
    seen.add(el);
    if (el.closest("script, style, title")) continue;
    const style = getComputedStyle(el);
    const box = el.getBoundingClientRect();
    if (style.visibility !== "visible" || box.width === 0 || box.height === 0
        || box.right <= 0 || box.bottom <= 0) continue;  // hidden, or off-screen until focused
    let fg, bg;
    if (el instanceof SVGElement) {
      fg = parse(style.fill);
      const shape = el.previousElementSibling;
      const shapeFill = shape && shape.tagName === "rect" ? parse(getComputedStyle(shape).fill) : null;
      bg = backdrop(el.ownerSVGElement);
      if (shapeFill && shapeFill[3] > 0) bg = over(shapeFill, bg);
    } else {
      fg = parse(style.color);
      bg = backdrop(el);
    }
    if (!fg) continue;
    fg = over([fg[0], fg[1], fg[2], fg[3] * Number(style.opacity)], bg);
    const [hi, lo] = [luminance(fg), luminance(bg)].sort((a, b) => b - a);
    const ratio = (hi + 0.05) / (lo + 0.05);
    const size = parseFloat(style.fontSize), bold = Number(style.fontWeight) >= 700;
    const needed = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
    if (ratio < needed - 0.005)
      bad.push({text: walker.currentNode.textContent.trim().slice(0, 40),
                ratio: Math.round(ratio * 100) / 100, needed, where: where(el)});
  }
  return bad;
}"""

# The object of the graph with no dependency either way (its panel has no link).
ALONE = """() => {
  const data = JSON.parse(document.querySelector(".graph-data").textContent);
  const linked = new Set(data.edges.flat());
  return data.nodes.map(n => n[0]).find((_, i) => !linked.has(i));
}"""


def violations(page: Any) -> list[tuple[str, str, list[Any]]]:
    """axe-core's violations on the page as it is now: (rule, impact, elements)."""
    found = axe_playwright.Axe().run(page).response["violations"]
    return [(v["id"], v["impact"], [n["target"] for n in v["nodes"]][:5]) for v in found]


def audit(page: Any, where: str) -> None:
    assert violations(page) == [], where
    low = page.evaluate(CONTRAST)
    assert low == [], (where, low)


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One browser for the module's pages and the plan file."""
    with browser(tmp_path_factory.mktemp("profile")) as opened:
        yield opened


def test_axe_finds_nothing_on_any_page(dashboard: Dashboard, context: Any) -> None:
    page = context.new_page()
    for path in PAGES:
        page.goto(dashboard.url + path)
        audit(page, path)
    # What the keyboard and a click light up: the focused control, the selected node.
    page.goto(dashboard.url + "/environments/prod/graph")
    page.locator('.nodes .n[data-i]', has_text="Hook/risk_score").click()
    assert page.locator(".graph-panel h2").inner_text() == "Hook/risk_score"
    audit(page, "graph, a node selected")
    alone = page.evaluate(ALONE)
    assert alone, "the examples have an object with no dependency either way"
    page.goto(dashboard.url + "/environments/prod/graph?node=" + alone)
    assert page.locator(".graph-panel a").count() == 0
    audit(page, "graph, a node without links")
    page.goto(dashboard.url + "/environments/prod/graph?q=Hook")
    audit(page, "graph, a search")


def test_axe_finds_nothing_in_the_plan_file(repo: Path, tmp_path: Path, context: Any) -> None:
    plan = tmp_path / "plan-prod.html"
    plan.write_text(gov(repo, "plan", "--env", "prod", "--format", "html").stdout)
    context.set_offline(True)  # the file as CI publishes it: self-contained
    try:
        page = context.new_page()
        page.goto(plan.as_uri())
        audit(page, "plan file")
    finally:
        context.set_offline(False)


# A policy's impact as `plan --impact` keeps it in a saved plan: counts, examples, a series.
IMPACT = {"known": True, "why": "", "window": "7d", "source": "report",
          "new": {"session": {"block": 42}, "pre_request": {"rewrite": 3}},
          "recorded": {"session": {"block": 10}}, "evaluated": 1204,
          "examples": [{"time": f"2026-11-27T0{n}:00:00Z", "stage": "session",
                        "decision": "block", "user": f"user{n}", "resource": "dwh"}
                       for n in range(5)],
          "series": [{"start": f"2026-11-{21 + d}T00:00:00Z", "new": 6 * d, "recorded": d}
                     for d in range(7)]}


def test_axe_finds_nothing_in_a_plan_file_that_shows_impact(repo: Path, tmp_path: Path,
                                                             context: Any) -> None:
    """The impact section (its tables and charts, with and without a series, and an
    unknown one) as `govsync show --format html` writes it."""
    data = json.loads((repo / "prod.json").read_text())
    first, second, third = data["changes"][:3]
    first["impact"] = IMPACT
    second["impact"] = {**IMPACT, "recorded": None, "series": []}
    third["impact"] = {"known": False, "why": "the report failed", "window": "7d",
                       "source": "report"}
    (repo / "impact.json").write_text(json.dumps(data))
    plan = tmp_path / "impact.html"
    plan.write_text(gov(repo, "show", "impact.json", "--format", "html").stdout)
    assert plan.read_text().count('<figure class="chart">') == 2
    context.set_offline(True)
    try:
        page = context.new_page()
        page.goto(plan.as_uri())
        audit(page, "plan file with impact")
    finally:
        context.set_offline(False)


def test_axe_and_the_audit_find_low_contrast_and_an_unnamed_control(
        dashboard: Dashboard, context: Any) -> None:
    """The checks themselves: text made too faint, a field without a label, two
    landmarks of one role without names, and an image holding a link are found."""
    page = context.new_page()
    page.goto(dashboard.url + "/")
    page.evaluate("""() => {
      const main = document.querySelector("main");
      const p = document.createElement("p");
      p.textContent = "faint words"; p.style.color = "#c0c0c0";
      main.appendChild(p);
      main.appendChild(document.createElement("input"));
      for (const n of [1, 2]) {
        const nav = document.createElement("nav");
        nav.innerHTML = '<a href="/">page ' + n + '</a>';
        main.appendChild(nav);
      }
      const image = document.createElement("div");
      image.setAttribute("role", "img"); image.setAttribute("aria-label", "picture");
      image.innerHTML = '<a href="/">home</a>';
      main.appendChild(image);
    }""")
    assert {rule for rule, _, _ in violations(page)} >= {
        "color-contrast", "label", "landmark-unique", "nested-interactive"}
    low = page.evaluate(CONTRAST)
    assert [(x["text"], x["needed"]) for x in low] == [("faint words", 4.5)], low
    assert low[0]["ratio"] < 2
