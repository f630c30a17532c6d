// heuresis view: the index's tables. Each reads its JSON blob from the page ({columns, rows, link,
// values}) and renders a filterable, sortable, paged table; only the rows of the page shown are in the
// DOM. Plain DOM code: no framework, nothing fetched.
(function () {
  "use strict";
  var root = document.querySelector('link[rel="stylesheet"]').getAttribute("href").replace(/static\/view\.css$/, "");

  function text(v) { return v === null || v === undefined ? "" : String(v); }
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
  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (kids) for (var i = 0; i < kids.length; i++) {
      e.appendChild(typeof kids[i] === "string" ? document.createTextNode(kids[i]) : kids[i]);
    }
    return e;
  }

  // blob.values[key]: the distinct values of a categorical column, whose cells hold an index into them
  function table(blob, host, count, opts) {
    var cols = blob.columns, rows = blob.rows, link = blob.link ? cols.length : -1, values = blob.values || {};
    var dict = cols.map(function (c) { return values[c.key] || null; });
    var filters = cols.map(function () { return ""; });
    var sortCol = -1, sortDir = 1, page = 0, shown = rows, size = opts.page;

    function value(r, k) { var v = r[k]; return dict[k] && v !== null ? dict[k][v] : v; }
    function fmt(v, c) {
      if (v === null || v === undefined) return "–";
      if (c.kind === "num" && typeof v === "number" && !Number.isInteger(v)) return v.toFixed(c.digits || 3);
      return String(v);
    }
    function apply() {
      var tests = filters.map(function (f, k) {
        if (!f) return null;
        if (cols[k].kind === "num") return numTest(f);
        var want = f.toLowerCase();
        if (dict[k]) {   // compare indices: the values that match, once
          var ok = {};
          dict[k].forEach(function (v, i) { if (text(v).toLowerCase() === want) ok[i] = true; });
          return function (v) { return ok[v] === true; };
        }
        return function (v) { return text(v).toLowerCase() === want; };
      });
      var active = [];
      tests.forEach(function (t, k) { if (t) active.push([k, t]); });
      shown = active.length ? rows.filter(function (r) {
        for (var a = 0; a < active.length; a++) if (!active[a][1](r[active[a][0]])) return false;
        return true;
      }) : rows;
      if (sortCol >= 0) {
        var k = sortCol;
        shown = shown.slice().sort(function (a, b) {
          var x = value(a, k), y = value(b, k);
          if (x === y) return 0;
          if (x === null) return 1;
          if (y === null) return -1;
          return (x < y ? -1 : 1) * sortDir;
        });
      }
      page = 0;
      draw();
    }
    var tbl = el("table", { "class": "data", id: opts.id });
    var thead = el("thead"), head = el("tr"), filt = el("tr", { "class": "filters" });
    if (link >= 0) { head.appendChild(el("th", {}, [opts.linkLabel])); filt.appendChild(el("th")); }
    cols.forEach(function (c, k) {
      var th = el("th", { "class": "sortable", "data-key": c.key, title: "sort by " + c.label }, [c.label]);
      th.addEventListener("click", function () {
        sortDir = sortCol === k ? -sortDir : 1; sortCol = k;
        head.querySelectorAll("th").forEach(function (h) { h.classList.remove("asc", "desc"); });
        th.classList.add(sortDir > 0 ? "asc" : "desc");
        apply();
      });
      head.appendChild(th);
      var opts_ = null;
      if (c.kind === "cat") {
        if (dict[k]) opts_ = dict[k].map(text).sort();
        else {
          var seen = {};
          rows.forEach(function (r) { seen[text(r[k])] = true; });
          opts_ = Object.keys(seen).sort();
        }
      }
      var input;
      if (opts_ && opts_.length <= 60) {
        input = el("select", { "data-key": c.key }, [el("option", { value: "" }, ["all"])]);
        opts_.forEach(function (o) { input.appendChild(el("option", { value: o }, [o === "" ? "(empty)" : o])); });
        input.addEventListener("change", function () { filters[k] = input.value; apply(); });
      } else {
        input = el("input", { "data-key": c.key, placeholder: c.kind === "num" ? ">0.5, 1..3" : "value" });
        input.addEventListener("input", function () { filters[k] = input.value.trim(); apply(); });
      }
      filt.appendChild(el("th", {}, [input]));
    });
    thead.appendChild(head); thead.appendChild(filt); tbl.appendChild(thead);
    var tbody = el("tbody"); tbl.appendChild(tbody);
    var pager = el("div", { "class": "pager" });
    var prev = el("button", { type: "button" }, ["‹ previous"]), next = el("button", { type: "button" }, ["next ›"]);
    var where = document.createTextNode("");
    prev.addEventListener("click", function () { page--; draw(); });
    next.addEventListener("click", function () { page++; draw(); });
    pager.appendChild(prev); pager.appendChild(where); pager.appendChild(next);
    host.textContent = "";
    host.appendChild(pager); host.appendChild(tbl);

    // one page of rows, built as one string (escaped) and parsed once: far cheaper than a node per cell
    function esc(s) { return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;"); }
    function draw() {
      var html = [], end = Math.min(shown.length, (page + 1) * size);
      for (var n = page * size; n < end; n++) {
        var r = shown[n], cells = '<tr class="' + opts.rowClass + '">';
        if (link >= 0) cells += '<td><a href="' + esc(root + r[link]) + '">open</a></td>';
        for (var k = 0; k < cols.length; k++) cells += "<td>" + esc(fmt(value(r, k), cols[k])) + "</td>";
        html.push(cells + "</tr>");
      }
      tbody.innerHTML = html.join("");
      var pages = Math.max(1, Math.ceil(shown.length / size));
      if (count) count.textContent = "(" + shown.length + " of " + rows.length + ")";
      where.textContent = "page " + (page + 1) + " of " + pages;
      prev.disabled = page === 0; next.disabled = page >= pages - 1;
    }
    // filters from the address: index.html#family=lg&f1=>0.5 (a link that opens the table filtered)
    if (opts.hash) {
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
    }
    apply();
  }

  function blob(id) { return JSON.parse(document.getElementById(id).textContent); }
  var host = document.getElementById("episodes-table");
  table(blob("episodes-data"), host, document.getElementById("episode-count"),
        { id: "episodes", page: 200, rowClass: "episode", linkLabel: "episode", hash: true });
  // when the table became usable, for benchmarks/view_scale.py: ms since the navigation started
  host.setAttribute("data-drawn-ms", Math.round(performance.now()));
  window.addEventListener("load", function () {
    host.setAttribute("data-load-ms", Math.round(performance.now()));
  });
  document.addEventListener("DOMContentLoaded", function () {
    var sum = document.getElementById("summary-table");
    if (sum) table(blob("summary-data"), sum, document.getElementById("summary-count"),
                   { id: "summary", page: 50, rowClass: "summary", hash: false });
  });
})();
