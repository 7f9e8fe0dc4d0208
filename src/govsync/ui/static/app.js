/* govsync dashboard: what the pages do with a script. Everything works without it;
   it adds copy buttons, and pan, zoom, select and search to the dependency graph.
   It loads nothing and sends nothing: no request leaves the page. */
(function () {
  "use strict";

  function copyButtons() {
    document.querySelectorAll("button.copy-button").forEach(function (button) {
      button.hidden = false;
      button.addEventListener("click", function () {
        var text = button.getAttribute("data-copy") || "";
        var done = function () { button.textContent = "Copied"; };
        if (navigator.clipboard && window.isSecureContext) {
          navigator.clipboard.writeText(text).then(done, function () {});
        } else {
          var range = document.createRange();
          range.selectNodeContents(button.previousElementSibling);
          var selection = window.getSelection();
          selection.removeAllRanges();
          selection.addRange(range);
        }
      });
    });
  }

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) { node.textContent = text; }
    return node;
  }

  function Graph(figure) {
    var data = JSON.parse(figure.querySelector("script.graph-data").textContent);
    var svg = figure.querySelector("svg");
    var frame = figure.querySelector(".graph-frame");
    var lit = svg.querySelector("path.edges-lit");
    var elements = svg.querySelectorAll(".nodes .n");
    var nodes = data.nodes, count = nodes.length;
    var byAddress = {}, deps = [], users = [];
    for (var i = 0; i < count; i++) { byAddress[nodes[i][0]] = i; deps.push([]); users.push([]); }
    data.edges.forEach(function (e) { deps[e[1]].push(e[0]); users[e[0]].push(e[1]); });
    var nodeUrl = figure.getAttribute("data-node-url");
    var scope = figure.closest("main") || document;
    var panel = scope.querySelector(".graph-panel");
    if (!panel) {
      panel = el("aside", {"class": "graph-panel", "aria-live": "polite", "tabindex": "0",
                           "aria-label": "the selected object"});
      figure.appendChild(panel);
    }
    var zoomer = null;
    frame.style.overflow = "hidden";
    // A small graph gets a frame of its size, not a screenful.
    var natural = svg.viewBox.baseVal.height;
    frame.style.height = Math.max(220, Math.min(window.innerHeight * 0.72, natural + 40)) + "px";
    if (window.svgPanZoom) {
      zoomer = window.svgPanZoom(svg, {
        viewportSelector: ".viewport", fit: true, center: true, minZoom: 0.02,
        maxZoom: 40, zoomScaleSensitivity: 0.25, controlIconsEnabled: true,
        dblClickZoomEnabled: false
      });
      var fitted = zoomer.getSizes();
      if (fitted.realZoom > 1) {  // never larger than life
        zoomer.zoom(zoomer.getZoom() / fitted.realZoom);
        zoomer.center();
      }
    }
    var marked = [];

    function edgePath(a, b) {
      var x1 = nodes[a][2] + data.width, y1 = nodes[a][3] + data.height / 2;
      var x2 = nodes[b][2], y2 = nodes[b][3] + data.height / 2;
      var bend = Math.max(30, (x2 - x1) / 2);
      return "M" + x1 + " " + y1 + "C" + (x1 + bend) + " " + y1 + " " + (x2 - bend) + " " +
        y2 + " " + x2 + " " + y2;
    }

    function link(i) {
      var a = el("a", {href: nodeUrl ? nodeUrl + (nodeUrl.indexOf("?") < 0 ? "?" : "&") +
        "node=" + encodeURIComponent(nodes[i][0]) : "#"}, nodes[i][0]);
      a.addEventListener("click", function (event) { event.preventDefault(); select(i, true); });
      var li = el("li");
      li.appendChild(a);
      if (nodes[i][1]) { li.appendChild(document.createTextNode(" (" + nodes[i][1] + ")")); }
      return li;
    }

    function list(title, items) {
      var box = el("div");
      box.appendChild(el("h3", {}, title + " (" + items.length + ")"));
      var ul = el("ul");
      items.slice(0, 500).forEach(function (j) { ul.appendChild(link(j)); });
      if (items.length > 500) { ul.appendChild(el("li", {}, "and " + (items.length - 500) + " more")); }
      if (!items.length) { ul.appendChild(el("li", {}, "nothing")); }
      box.appendChild(ul);
      return box;
    }

    function center(i) {
      if (!zoomer) { return; }
      var sizes = zoomer.getSizes();
      if (sizes.realZoom < 0.6) { zoomer.zoom(zoomer.getZoom() * 0.8 / sizes.realZoom); sizes = zoomer.getSizes(); }
      var cx = nodes[i][2] + data.width / 2, cy = nodes[i][3] + data.height / 2;
      var vb = sizes.viewBox;
      zoomer.pan({x: sizes.width / 2 - (cx - vb.x) * sizes.realZoom,
                  y: sizes.height / 2 - (cy - vb.y) * sizes.realZoom});
    }

    function select(i, move) {
      marked.forEach(function (e) { e.classList.remove("selected", "near"); });
      marked = [];
      var mark = function (j, cls) { var e = elements[j]; if (e) { e.classList.add(cls); marked.push(e); } };
      var d = "";
      deps[i].forEach(function (j) { mark(j, "near"); d += edgePath(j, i); });
      users[i].forEach(function (j) { mark(j, "near"); d += edgePath(i, j); });
      mark(i, "selected");
      lit.setAttribute("d", d);
      panel.textContent = "";
      panel.appendChild(el("h2", {}, nodes[i][0]));
      if (nodes[i][1]) { panel.appendChild(el("p", {}, "Plan: " + nodes[i][1])); }
      panel.appendChild(list("Depends on", deps[i]));
      panel.appendChild(list("Depended on by", users[i]));
      if (move) { center(i); }
      if (nodeUrl && window.history && window.history.replaceState) {
        var url = new URL(window.location.href);
        url.searchParams.set("node", nodes[i][0]);
        window.history.replaceState(null, "", url.toString());
      }
    }

    svg.addEventListener("click", function (event) {
      var target = event.target.closest ? event.target.closest(".n") : null;
      if (!target) { return; }
      event.preventDefault();
      select(parseInt(target.getAttribute("data-i"), 10), false);
    });

    frame.addEventListener("keydown", function (event) {
      if (!zoomer) { return; }
      var step = 80, handled = true;
      switch (event.key) {
        case "ArrowLeft": zoomer.panBy({x: step, y: 0}); break;
        case "ArrowRight": zoomer.panBy({x: -step, y: 0}); break;
        case "ArrowUp": zoomer.panBy({x: 0, y: step}); break;
        case "ArrowDown": zoomer.panBy({x: 0, y: -step}); break;
        case "+": case "=": zoomer.zoomIn(); break;
        case "-": zoomer.zoomOut(); break;
        case "0": zoomer.fit(); zoomer.center(); break;
        default: handled = false;
      }
      if (handled) { event.preventDefault(); }
    });

    var form = scope.querySelector("form.graph-search");
    if (!form) {
      form = el("form", {"class": "graph-search", role: "search"});
      var label = el("label", {}, "Find an address");
      label.appendChild(el("input", {name: "q", autocomplete: "off"}));
      form.appendChild(label);
      form.appendChild(el("button", {type: "submit"}, "Find"));
      figure.insertBefore(form, figure.firstChild);
    }
    var results = el("ul", {"class": "graph-results", "aria-live": "polite"});
    form.parentNode.insertBefore(results, form.nextSibling);
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var text = (form.querySelector("input[name=q]").value || "").trim().toLowerCase();
      results.textContent = "";
      if (!text) { return; }
      var found = [];
      if (byAddress[text] !== undefined) { found.push(byAddress[text]); }
      for (var j = 0; j < count && found.length < 20; j++) {
        if (nodes[j][0].toLowerCase().indexOf(text) >= 0 && found.indexOf(j) < 0) { found.push(j); }
      }
      if (!found.length) { results.appendChild(el("li", {}, "No address contains \u201c" + text + "\u201d.")); return; }
      found.forEach(function (j) { results.appendChild(link(j)); });
      select(found[0], true);
    });

    var chosen = figure.getAttribute("data-selected");
    if (chosen && byAddress[chosen] !== undefined) { select(byAddress[chosen], true); }
  }

  function start() {
    copyButtons();
    document.querySelectorAll("figure.graph").forEach(function (figure) { Graph(figure); });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
}());
