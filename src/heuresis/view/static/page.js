// heuresis view: the episode and play pages' turn navigator. j / k (or the links of the bar above the
// conversation) step to the next / previous turn; the turn reached is named in the address
// (#turn-N), so Back and a shared link come back to it. Plain DOM code, nothing fetched.
(function () {
  "use strict";
  var turns = Array.prototype.slice.call(document.querySelectorAll("section.turn"));
  var nav = document.getElementById("turn-nav");
  if (!turns.length) return;
  function current() {
    var id = location.hash.replace(/^#/, "");
    for (var k = 0; k < turns.length; k++) if (turns[k].id === id) return k;
    // no turn named: the last one whose top has scrolled past the top of the window
    var at = -1;
    turns.forEach(function (t, k) { if (t.getBoundingClientRect().top <= 60) at = k; });
    return at;
  }
  function mark(k) {
    if (!nav) return;
    nav.querySelectorAll("a").forEach(function (a) { a.classList.remove("current"); });
    var a = nav.querySelector('a[href="#' + turns[k].id + '"]');
    if (a) a.classList.add("current");
  }
  function go(k) {
    k = Math.max(0, Math.min(turns.length - 1, k));
    var url = location.href.split("#")[0] + "#" + turns[k].id;
    try { history.replaceState(history.state, "", url); } catch (e) { location.replace(url); return; }
    turns[k].scrollIntoView();
    mark(k);
  }
  document.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    var tag = (ev.target && ev.target.tagName) || "";
    if (/^(INPUT|SELECT|TEXTAREA)$/.test(tag) || (ev.target && ev.target.isContentEditable)) return;
    if (ev.key === "j") { go(current() + 1); ev.preventDefault(); }
    else if (ev.key === "k") { go(current() - 1); ev.preventDefault(); }
  });
  var k0 = current();
  if (k0 >= 0 && location.hash) mark(k0);
})();
