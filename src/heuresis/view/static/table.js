// heuresis view: the episode index. Reads the JSON blob of the page, renders a filterable, sortable,
// paged table. Plain DOM code: no framework, nothing fetched.
(function () {
  "use strict";
  var PAGE = 200;
  var blob = JSON.parse(document.getElementById("episodes-data").textContent);
  var cols = blob.columns, rows = blob.rows, link = cols.length;
  var host = document.getElementById("episodes-table");
  var root = document.querySelector('link[rel="stylesheet"]').getAttribute("href").replace(/static\/view\.css$/, "");
  var filters = cols.map(function () { return ""; });
  var sortCol = -1, sortDir = 1, page = 0, shown = rows;

  function text(v) { return v === null || v === undefined ? "" : String(v); }
  function fmt(v, c) {
    if (v === null || v === undefined) return "–";
    if (c.kind === "num" && typeof v === "number" && !Number.isInteger(v)) return v.toFixed(c.key === "cost" ? 4 : 3);
    return String(v);
  }
  // a numeric filter: ">0.5", "<=3", "=2", "0.2..0.8", or a number (equal)
  function numTest(f) {
    var m = f.match(/^\s*(-?[\d.]+)\s*\.\.\s*(-?[\d.]+)\s*$/);
    if (m) { var lo = +m[1], hi = +m[2]; return function (v) { return v !== null && v >= lo && v <= hi; }; }
    m = f.match(/^\s*(<=|>=|<|>|=)?\s*(-?[\d.]+)\s*$/);
    if (!m) return function () { return false; };
    var x = +m[2], op = m[1] || "=";
    return function (v) {
      if (v === null) return false;
      return op === "<" ? v < x : op === ">" ? v > x : op === "<=" ? v <= x : op === ">=" ? v >= x : v === x;
    };
  }
  function apply() {
    var tests = filters.map(function (f, k) {
      if (!f) return null;
      if (cols[k].kind === "num") return numTest(f);
      var want = f.toLowerCase();
      return function (v) { return text(v).toLowerCase() === want; };
    });
    shown = rows.filter(function (r) {
      for (var k = 0; k < tests.length; k++) if (tests[k] && !tests[k](r[k])) return false;
      return true;
    });
    if (sortCol >= 0) {
      shown = shown.slice().sort(function (a, b) {
        var x = a[sortCol], y = b[sortCol];
        if (x === y) return 0;
        if (x === null) return 1;
        if (y === null) return -1;
        return (x < y ? -1 : 1) * sortDir;
      });
    }
    page = 0;
    draw();
  }
  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    (kids || []).forEach(function (c) { e.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return e;
  }
  var table = el("table", { "class": "data", id: "episodes" });
  var thead = el("thead"), head = el("tr"), filt = el("tr", { "class": "filters" });
  head.appendChild(el("th", {}, ["episode"]));
  filt.appendChild(el("th"));
  cols.forEach(function (c, k) {
    var th = el("th", { "class": "sortable", "data-key": c.key, title: "sort by " + c.label }, [c.label]);
    th.addEventListener("click", function () {
      sortDir = sortCol === k ? -sortDir : 1; sortCol = k;
      head.querySelectorAll("th").forEach(function (h) { h.classList.remove("asc", "desc"); });
      th.classList.add(sortDir > 0 ? "asc" : "desc");
      apply();
    });
    head.appendChild(th);
    var opts = null;
    if (c.kind === "cat") {
      var seen = {};
      rows.forEach(function (r) { seen[text(r[k])] = true; });
      opts = Object.keys(seen).sort();
    }
    var input;
    if (opts && opts.length <= 60) {
      input = el("select", { "data-key": c.key }, [el("option", { value: "" }, ["all"])]);
      opts.forEach(function (o) { input.appendChild(el("option", { value: o }, [o === "" ? "(empty)" : o])); });
      input.addEventListener("change", function () { filters[k] = input.value; apply(); });
    } else {
      input = el("input", { "data-key": c.key, placeholder: c.kind === "num" ? ">0.5, 1..3" : "value" });
      input.addEventListener("input", function () { filters[k] = input.value.trim(); apply(); });
    }
    filt.appendChild(el("th", {}, [input]));
  });
  thead.appendChild(head); thead.appendChild(filt); table.appendChild(thead);
  var tbody = el("tbody"); table.appendChild(tbody);
  var pager = el("div", { "class": "pager" });
  var count = document.getElementById("episode-count");
  host.textContent = "";
  host.appendChild(pager); host.appendChild(table);

  function draw() {
    var frag = document.createDocumentFragment();
    shown.slice(page * PAGE, (page + 1) * PAGE).forEach(function (r) {
      var tr = el("tr", { "class": "episode" });
      tr.appendChild(el("td", {}, [el("a", { href: root + r[link] }, ["open"])]));
      cols.forEach(function (c, k) { tr.appendChild(el("td", {}, [fmt(r[k], c)])); });
      frag.appendChild(tr);
    });
    tbody.textContent = "";
    tbody.appendChild(frag);
    var pages = Math.max(1, Math.ceil(shown.length / PAGE));
    count.textContent = "(" + shown.length + " of " + rows.length + ")";
    pager.textContent = "";
    var prev = el("button", { type: "button" }, ["‹ previous"]), next = el("button", { type: "button" }, ["next ›"]);
    prev.disabled = page === 0; next.disabled = page >= pages - 1;
    prev.addEventListener("click", function () { page--; draw(); });
    next.addEventListener("click", function () { page++; draw(); });
    pager.appendChild(prev);
    pager.appendChild(document.createTextNode("page " + (page + 1) + " of " + pages));
    pager.appendChild(next);
  }
  // filters from the address: index.html#family=lg&f1=>0.5 (a link that opens the table filtered)
  decodeURIComponent(location.hash.replace(/^#/, "")).split("&").forEach(function (part) {
    var eq = part.indexOf("=");
    if (eq < 0) return;
    var key = part.slice(0, eq), val = part.slice(eq + 1);
    cols.forEach(function (c, k) {
      if (c.key !== key) return;
      filters[k] = val;
      var input = filt.querySelector('[data-key="' + key + '"]');
      if (input) input.value = val;
    });
  });
  apply();
})();
