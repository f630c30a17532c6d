// heuresis view: the index's tables. Each reads its JSON blob from the page ({columns, rows, link,
// values}) and renders a filterable, sortable, paged table; only the rows of the page shown are in the
// DOM. Plain DOM code: no framework, nothing fetched.
//
// The filters and the sort of every table live in the address (index.html#family=lg&f1=%3E0.5&sort=-f1;
// the plays table's keys start "p.", the summaries' "s." and "ps."): a filtered view is a link, and the
// page opened again (Back from an episode, a reload, a shared link) shows it filtered. A filter that
// cannot match (no such column, no such value, not a number filter) is named above its table.
(function () {
  "use strict";
  var root = document.querySelector('link[rel="stylesheet"]').getAttribute("href").replace(/static\/view\.css$/, "");

  function text(v) { return v === null || v === undefined ? "" : String(v); }
  var NUM = /^\s*(?:(-?[\d.]+)\s*\.\.\s*(-?[\d.]+)|(<=|>=|<|>|=)?\s*(-?\d*\.?\d+))\s*$/;
  // a numeric filter: ">0.5", "<=3", "=2", "0.2..0.8", or a number (equal); null when it is none
  function numTest(f) {
    var m = f.match(NUM);
    if (!m || (m[1] !== undefined && (isNaN(+m[1]) || isNaN(+m[2])))) return null;
    if (m[1] !== undefined) { var lo = +m[1], hi = +m[2]; return function (v) { return v !== null && v >= lo && v <= hi; }; }
    var x = +m[4], op = m[3] || "=";
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

  // --- the address: [key, value] pairs, each part URI-encoded -------------------------------------
  function readHash() {
    var out = [];
    location.hash.replace(/^#/, "").split("&").forEach(function (part) {
      var eq = part.indexOf("=");
      if (eq < 0) return;
      var dec = function (s) { try { return decodeURIComponent(s.replace(/\+/g, " ")); } catch (e) { return s; } };
      out.push([dec(part.slice(0, eq)), dec(part.slice(eq + 1))]);
    });
    return out;
  }
  function writeHash(pairs) {
    var h = pairs.map(function (p) { return encodeURIComponent(p[0]) + "=" + encodeURIComponent(p[1]); }).join("&");
    var url = location.href.split("#")[0] + (h ? "#" + h : "");
    if (url === location.href) return;
    try { history.replaceState(history.state, "", url); } catch (e) { location.replace(url); }
  }
  var tables = [];
  function saveAll() {
    var pairs = [];
    tables.forEach(function (t) { pairs = pairs.concat(t.state()); });
    readHash().forEach(function (p) {      // what no table claims stays as it was (and is named)
      if (!tables.some(function (t) { return t.claims(p[0]); })) pairs.push(p);
    });
    writeHash(pairs);
  }

  // blob.values[key]: the distinct values of a categorical column, whose cells hold an index into them
  function table(blob, host, count, opts) {
    var cols = blob.columns, rows = blob.rows, link = blob.link ? cols.length : -1, values = blob.values || {};
    var dict = cols.map(function (c) { return values[c.key] || null; });
    var filters = cols.map(function () { return ""; });
    var sortCol = -1, sortDir = 1, page = 0, shown = rows, size = opts.page, prefix = opts.prefix;
    var noun = opts.noun || "row";
    var problems = [], addressProblems = [];

    function value(r, k) { var v = r[k]; return dict[k] && v !== null ? dict[k][v] : v; }
    function fmt(v, c) {
      if (v === null || v === undefined) return "–";
      if (c.kind === "num" && typeof v === "number" && !Number.isInteger(v)) return v.toFixed(c.digits || 3);
      return String(v);
    }
    function distinct(k) {
      if (dict[k]) return dict[k].map(text).sort();
      var seen = {};
      rows.forEach(function (r) { seen[text(r[k])] = true; });
      return Object.keys(seen).sort();
    }
    function apply(keepPage) {
      problems = addressProblems.slice();
      var tests = filters.map(function (f, k) {
        if (!f) return null;
        if (cols[k].kind === "num") {
          var t = numTest(f);
          if (!t) {
            problems.push(cols[k].label + ': "' + f + '" is not a number filter (use >0.5, <=3, =2, 0.2..0.8 or a number)');
            return function () { return false; };
          }
          return t;
        }
        var want = f.toLowerCase();
        var vals = distinct(k);
        if (!vals.some(function (v) { return v.toLowerCase() === want; })) {
          problems.push(cols[k].label + ': no ' + noun + ' has "' + f + '" (its values: ' +
                        vals.slice(0, 12).map(function (v) { return v === "" ? "(empty)" : v; }).join(", ") +
                        (vals.length > 12 ? ", …" : "") + ")");
        }
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
      if (!keepPage) page = 0;
      draw();
    }
    var tbl = el("table", { "class": "data", id: opts.id });
    // a categorical column with the same value in every row tells no row from another: collapsed (its
    // cells stay, so filters and sorts work as before) and named above the table, with a button to show it
    var same = cols.map(function (c, k) { return !!opts.collapse && rows.length > 1 && c.kind === "cat" && distinct(k).length === 1; });
    var group = el("colgroup");
    if (link >= 0) group.appendChild(el("col"));
    cols.forEach(function (c, k) { group.appendChild(el("col", same[k] ? { "class": "constant" } : {})); });
    tbl.appendChild(group);
    var constant = cols.filter(function (c, k) { return same[k]; }).map(function (c) {
      var v = distinct(cols.indexOf(c))[0];
      return c.label + " = " + (v === "" ? "(empty)" : v);
    });
    var toggle = el("button", { type: "button" }, ["show them"]);
    toggle.addEventListener("click", function () {
      toggle.textContent = tbl.classList.toggle("all-columns") ? "hide them" : "show them";
    });
    var sameNote = el("p", { "class": "hint constant-note" },
                      ["The same in every " + noun + ", so not shown as columns: " + constant.join(", ") + " ", toggle]);
    var thead = el("thead"), head = el("tr", { "class": "headings" }), filt = el("tr", { "class": "filters" });
    var inputs = [];
    if (link >= 0) { head.appendChild(el("th", {}, [opts.linkLabel])); filt.appendChild(el("th")); }
    function markSort() {
      head.querySelectorAll("th").forEach(function (h) { h.classList.remove("asc", "desc"); });
      if (sortCol >= 0) head.querySelector('th[data-key="' + cols[sortCol].key + '"]').classList.add(sortDir > 0 ? "asc" : "desc");
    }
    cols.forEach(function (c, k) {
      var th = el("th", { "class": "sortable", "data-key": c.key, title: "sort by " + c.label }, [c.label]);
      th.addEventListener("click", function () {
        sortDir = sortCol === k ? -sortDir : 1; sortCol = k;
        markSort(); apply(); saveAll();
      });
      head.appendChild(th);
      var opts_ = c.kind === "cat" ? distinct(k) : null;
      var input;
      if (opts_ && opts_.length <= 60) {
        input = el("select", { "data-key": c.key }, [el("option", { value: "" }, ["all"])]);
        opts_.forEach(function (o) { input.appendChild(el("option", { value: o }, [o === "" ? "(empty)" : o])); });
        input.addEventListener("change", function () { filters[k] = input.value; apply(); saveAll(); });
      } else {
        input = el("input", { "data-key": c.key, placeholder: c.kind === "num" ? ">0.5, 1..3" : "value" });
        input.addEventListener("input", function () { filters[k] = input.value.trim(); apply(); saveAll(); });
      }
      inputs.push(input);
      filt.appendChild(el("th", {}, [input]));
    });
    thead.appendChild(head); thead.appendChild(filt); tbl.appendChild(thead);
    var tbody = el("tbody"); tbl.appendChild(tbody);
    var pager = el("div", { "class": "pager" });
    var prev = el("button", { type: "button" }, ["‹ previous"]), next = el("button", { type: "button" }, ["next ›"]);
    var where = document.createTextNode("");
    var note = el("div", { "class": "problem filter-problem", role: "alert", hidden: "" });
    prev.addEventListener("click", function () { page--; draw(); });
    next.addEventListener("click", function () { page++; draw(); });
    pager.appendChild(prev); pager.appendChild(where); pager.appendChild(next);
    host.textContent = "";
    host.appendChild(note);
    if (constant.length) host.appendChild(sameNote);
    host.appendChild(pager); host.appendChild(tbl);

    // one page of rows, built as one string (escaped) and parsed once: far cheaper than a node per cell
    function esc(s) { return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;"); }
    // a value may wrap after "_", "/" and "-" (submitted_last_turn, a play id, a condition id), so a narrow window squeezes it, not the numbers
    function cell(v, c) { var t = esc(fmt(v, c)); return c.kind === "cat" ? t.replace(/[_\/-]/g, "$&<wbr>") : t; }
    function draw() {
      var html = [], end = Math.min(shown.length, (page + 1) * size);
      for (var n = page * size; n < end; n++) {
        var r = shown[n], cells = '<tr class="' + opts.rowClass + '">';
        if (link >= 0) cells += '<td><a href="' + esc(root + r[link]) + '">open</a></td>';
        for (var k = 0; k < cols.length; k++) cells += "<td>" + cell(value(r, k), cols[k]) + "</td>";
        html.push(cells + "</tr>");
      }
      tbody.innerHTML = html.join("");
      var pages = Math.max(1, Math.ceil(shown.length / size));
      if (count) count.textContent = "(" + shown.length + " of " + rows.length + ")";
      where.textContent = "page " + (page + 1) + " of " + pages;
      prev.disabled = page === 0; next.disabled = page >= pages - 1;
      note.textContent = "";
      problems.forEach(function (p) { note.appendChild(el("div", {}, [p])); });
      if (problems.length) note.removeAttribute("hidden"); else note.setAttribute("hidden", "");
    }

    // this table's part of the address
    function own(key) { return prefix ? key.slice(0, prefix.length) === prefix : key.indexOf(".") < 0; }
    function load() {
      filters = cols.map(function () { return ""; });
      sortCol = -1; sortDir = 1; addressProblems = [];
      readHash().forEach(function (p) {
        if (!own(p[0])) return;
        var key = p[0].slice(prefix.length), val = p[1];
        if (key === "sort") {
          var desc = val.charAt(0) === "-", name = desc ? val.slice(1) : val;
          var k = cols.map(function (c) { return c.key; }).indexOf(name);
          if (k < 0) addressProblems.push('the address sorts by "' + name + '", which is no column of this table');
          else { sortCol = k; sortDir = desc ? -1 : 1; }
          return;
        }
        var k2 = cols.map(function (c) { return c.key; }).indexOf(key);
        if (k2 < 0) {
          addressProblems.push('the address filters on "' + key + '", which is no column of this table (columns: ' +
                               cols.map(function (c) { return c.key; }).join(", ") + ")");
          return;
        }
        filters[k2] = val;
      });
      inputs.forEach(function (input, k) {
        var val = filters[k];
        if (input.tagName === "SELECT") {
          var match = Array.prototype.filter.call(input.options, function (o) {
            return o.value.toLowerCase() === val.toLowerCase();
          });
          if (!match.length) {   // a value from the address that no row has: shown as chosen, and named
            input.appendChild(el("option", { value: val, "class": "missing" }, [val + " (no such value)"]));
            input.value = val;
          } else input.value = match[0].value;
        } else input.value = val;
      });
      markSort();
      apply();
    }
    var me = {
      load: load,
      claims: function (key) { return own(key) && (key.slice(prefix.length) === "sort" ||
        cols.some(function (c) { return c.key === key.slice(prefix.length); })); },
      state: function () {
        var out = [];
        filters.forEach(function (f, k) { if (f) out.push([prefix + cols[k].key, f]); });
        if (sortCol >= 0) out.push([prefix + "sort", (sortDir < 0 ? "-" : "") + cols[sortCol].key]);
        return out;
      }
    };
    tables.push(me);
    load();
    return me;
  }

  function blob(id) { var e = document.getElementById(id); return e ? JSON.parse(e.textContent) : null; }
  var host = document.getElementById("episodes-table");
  var more = [["leaderboard-table", "leaderboard-data", "leaderboard-count", "leaderboard", 50, "lb.", "result",
               "episodes"],
              ["summary-table", "summary-data", "summary-count", "summary", 50, "s.", "agent × condition", "play"],
              ["plays-table", "plays-data", "play-count", "plays", 200, "p.", "play", "play"],
              ["plays-summary-table", "plays-summary-data", "plays-summary-count", "plays-summary", 50, "ps.",
               "agent × scenario", "play"]];
  function renderMore() {
    more.forEach(function (m) {
      var where = document.getElementById(m[0]), data = blob(m[1]);
      if (where && data) table(data, where, document.getElementById(m[2]),
                               { id: m[3], page: m[4], rowClass: m[3] === "plays" ? "play" : m[3], prefix: m[5],
                                 linkLabel: m[7], noun: m[6], collapse: m[3] === "plays" });
    });
  }
  function renderAll() {
    tables = [];
    host = document.getElementById("episodes-table");
    table(blob("episodes-data"), host, document.getElementById("episode-count"),
          { id: "episodes", page: 200, rowClass: "episode", linkLabel: "episode", prefix: "", noun: "episode",
            collapse: true });
    renderMore();
  }
  table(blob("episodes-data"), host, document.getElementById("episode-count"),
        { id: "episodes", page: 200, rowClass: "episode", linkLabel: "episode", prefix: "", noun: "episode",
            collapse: true });
  // when the table became usable, for benchmarks/view_scale.py: ms since the navigation started
  host.setAttribute("data-drawn-ms", Math.round(performance.now()));
  window.addEventListener("load", function () {
    host.setAttribute("data-load-ms", Math.round(performance.now()));
  });
  document.addEventListener("DOMContentLoaded", renderMore);
  // a served view of a running workflow (live.js) draws the tables again from the page's new content
  window.heuresisTables = renderAll;
  // the address changed (edited by hand, or a link to a filtered view): every table reads it again
  window.addEventListener("hashchange", function () { tables.forEach(function (t) { t.load(); }); });
})();
