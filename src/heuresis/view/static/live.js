// heuresis view: a served index follows its run. Every few seconds it asks live.json for the results
// folder's stamp; when the stamp changed (a job finished, the ledger moved), it fetches the index again
// and puts the new content in place of the old (the run header, every table, the lists), keeping the
// address and so every filter and sort. Only a served page does this (body data-live); an export is a
// snapshot.
(function () {
  "use strict";
  var body = document.body;
  if (!body || body.getAttribute("data-live") !== "1") return;
  var every = +(body.getAttribute("data-live-ms") || 3000);
  var busy = false;
  function update(stamp) {
    return fetch(location.pathname, { cache: "no-store", credentials: "same-origin" })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.querySelector("main"), old = document.querySelector("main");
        if (!fresh || !old) return;
        old.innerHTML = fresh.innerHTML;
        body.setAttribute("data-stamp", stamp);
        if (window.heuresisTables) window.heuresisTables();
      });
  }
  function poll() {
    if (busy) return;
    busy = true;
    fetch("live.json", { cache: "no-store", credentials: "same-origin" })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); })
      .then(function (live) {
        var shown = document.getElementById("live-state");
        if (shown) shown.textContent = "live: checked " + new Date().toLocaleTimeString();
        if (live.stamp !== body.getAttribute("data-stamp")) return update(live.stamp);
      })
      .catch(function () {
        var shown = document.getElementById("live-state");
        if (shown) shown.textContent = "live: the server does not answer (stopped?)";
      })
      .then(function () { busy = false; });
  }
  setInterval(poll, every);
})();
