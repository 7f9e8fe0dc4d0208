"""The dashboard's accessibility, measured in a real browser on every page.

* Contrast (WCAG 2.1, 1.4.3 AA): every visible piece of text, HTML or SVG, against
  the background it is drawn on (the backgrounds of its ancestors composited, or
  the shape an SVG label sits on), at least 4.5:1, or 3:1 for large text.
* Names (4.1.2): every form control, link and button has an accessible name a
  screen reader would read; the page has a language, one ``h1`` and a title.

The pages are those of a node selected in the graph (its highlighted colours
too) and the plan file as CI publishes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from browser import browser, needs_browser
from uikit import Dashboard, gov

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

# Runs in the page: what a screen reader could not name, and the page's outline.
NAMES = """() => {
  const named = el => {
    if ((el.getAttribute("aria-label") || "").trim()) return true;
    const by = el.getAttribute("aria-labelledby");
    if (by && by.split(/\\s+/).some(id => (document.getElementById(id)?.textContent || "").trim()))
      return true;
    if (el.labels && Array.from(el.labels).some(l => l.textContent.trim())) return true;
    if ((el.getAttribute("title") || "").trim()) return true;
    if (el.matches("a, button, summary") && el.textContent.trim()) return true;
    if (el.matches("input[type=submit], input[type=button]") && el.value.trim()) return true;
    return Array.from(el.querySelectorAll("img[alt], svg title"))
      .some(e => (e.getAttribute("alt") || e.textContent).trim());
  };
  const controls = document.querySelectorAll(
    "a[href], button, input:not([type=hidden]), select, textarea, summary, [role=button], "
    + '[tabindex]:not([tabindex="-1"])');
  const unnamed = Array.from(controls).filter(el => !named(el))
    .map(el => el.outerHTML.slice(0, 100));
  const images = Array.from(document.querySelectorAll("img:not([alt])")).map(e => e.outerHTML);
  return {unnamed, images, lang: document.documentElement.lang, title: document.title,
          h1: document.querySelectorAll("h1").length};
}"""


def audit(page: Any, where: str) -> None:
    low = page.evaluate(CONTRAST)
    assert low == [], (where, low)
    names = page.evaluate(NAMES)
    assert names["unnamed"] == [] and names["images"] == [], (where, names)
    assert names["lang"] == "en" and names["title"].strip(), (where, names)
    assert names["h1"] == 1, (where, names)


def test_every_page_has_enough_contrast_and_names_every_control(
        dashboard: Dashboard, tmp_path: Path) -> None:
    with browser(tmp_path / "profile") as context:
        page = context.new_page()
        for path in PAGES:
            page.goto(dashboard.url + path)
            audit(page, path)
        # What the keyboard and a click light up: the focused control, the selected node.
        page.goto(dashboard.url + "/environments/prod/graph")
        page.locator('.nodes .n[data-i]', has_text="Hook/risk_score").click()
        assert page.locator(".graph-panel h2").inner_text() == "Hook/risk_score"
        audit(page, "graph, a node selected")


def test_the_plan_file_has_enough_contrast_and_names_every_control(
        repo: Path, tmp_path: Path) -> None:
    plan = tmp_path / "plan-prod.html"
    plan.write_text(gov(repo, "plan", "--env", "prod", "--format", "html").stdout)
    with browser(tmp_path / "profile", offline=True) as context:
        page = context.new_page()
        page.goto(plan.as_uri())
        audit(page, "plan file")


def test_the_audit_finds_low_contrast_and_an_unnamed_control(
        dashboard: Dashboard, tmp_path: Path) -> None:
    """The audit itself: text made too faint, and a field without a label, are found."""
    with browser(tmp_path / "profile") as context:
        page = context.new_page()
        page.goto(dashboard.url + "/")
        page.evaluate("""() => {
          const p = document.createElement("p");
          p.textContent = "faint words"; p.style.color = "#c0c0c0";
          document.querySelector("main").appendChild(p);
          document.querySelector("main").appendChild(document.createElement("input"));
        }""")
        low = page.evaluate(CONTRAST)
        assert [(x["text"], x["needed"]) for x in low] == [("faint words", 4.5)], low
        assert low[0]["ratio"] < 2
        assert len(page.evaluate(NAMES)["unnamed"]) == 1
