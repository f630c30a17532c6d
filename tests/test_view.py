"""heuresis view: pages built from the shared tiny workflow run, checked against its tables and truth.

The run (fixture ``tiny_run``) is copied, never modified; the expected content is read here
independently of the view (pyarrow on the episodes, calls and truth tables), the served pages are
fetched over a real loopback socket, and the index's script is run in a real browser (Debian's
chromium, headless) to check that it renders every row and filters by the address.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path

import markupsafe
import pyarrow.parquet as pq
import pytest

from heuresis.io import write_table
from heuresis.schemas import GAME_JUDGEMENTS
from heuresis.view import Site, export_site, make_server
from heuresis.view.transcripts import TranscriptProblem, read_episode_transcript

pytestmark = pytest.mark.slow


def _rows(results: Path, pattern: str) -> list[dict]:
    return [r for p in sorted(results.glob(pattern)) if not p.name.endswith((".calls.parquet", ".requests.parquet"))
            for r in pq.read_table(p).to_pylist()]


def _plays(results: Path) -> list[dict]:
    return _rows(results, "games/plays/*/*/*.parquet")


@pytest.fixture(scope="module")
def run(tiny_run, tmp_path_factory) -> Path:
    """A copy of the tiny run's results with one judgement added (the tiny config has no judge)."""
    results = tmp_path_factory.mktemp("view") / "results"
    shutil.copytree(tiny_run / "results", results)
    play = _plays(results)[0]
    row = {"judge": "j_test", "model": "openai/scripted", "play_id": play["play_id"], "agent": play["agent"],
           "mode": play["mode"], "scenario": play["scenario"], "family": play["family"], "repeat": play["repeat"],
           "status": "ok", "error": "", "cr1": 3.0, "cr2": 2.0, "cr3": 2.0, "ed": 1.0, "rq": 2.0, "du": 1.0,
           "cr1_reason": "names the zone <b>confounder</b> but not the filter",
           **{f"{c}_reason": "" for c in ("cr2", "cr3", "ed", "rq", "du")}, "cr": 7.0, "total": 11.0,
           "failure_mode": "missed_confounder",
           "answer": "{}", "tokens_in": 10, "tokens_out": 5, "cost": None, "latency_s": 0.1}
    write_table({k: [v] for k, v in row.items()},
                results / "games/judgements/j_test" / play["agent"] / play["mode"] / f"{play['scenario']}.parquet",
                GAME_JUDGEMENTS)
    return results


def _episodes(results: Path) -> list[dict]:
    return _rows(results, "episodes/*/*/*/*/shard-*[0-9].parquet")


def _calls(results: Path) -> list[dict]:
    return [r for p in sorted(results.glob("episodes/*/*/*/*/shard-*.calls.parquet")) for r in pq.read_table(p).to_pylist()]


def test_index_lists_every_episode(run):
    eps = _episodes(run)
    assert len(eps) == 20   # the tiny config's grids: 4 + 4 + 8 + 2 + 2 shortcut/merge/evidence episodes
    site = Site(run)
    data = site.index_data()
    keys = [c["key"] for c in data["columns"]]
    assert {"agent", "family", "split", "status", "termination", "f1", "turns", "tokens", "cost", "budget"} <= set(keys)
    links = {r[-1] for r in data["rows"]}
    assert links == {f"episodes/{e['episode_id']}.html" for e in eps}
    by_link = {r[-1]: dict(zip(keys, r)) for r in data["rows"]}
    for e in eps:
        shown = by_link[f"episodes/{e['episode_id']}.html"]
        assert shown["f1"] == pytest.approx(e["f1"]) and shown["termination"] == e["termination"]
        assert shown["gain_pc"] == pytest.approx(e["f1"] - e["pc_kci_f1"])
    page = site.page("index.html").body.decode()
    blob = json.loads(re.search(r'<script type="application/json" id="episodes-data">(.*?)</script>', page, re.S)[1])
    assert len(blob["rows"]) == len(eps)
    # one summary row per agent x condition, with its episode count
    groups = {(e["agent"], e["condition_id"]) for e in eps}
    assert len(site.summary()) == len(groups) and sum(s["n"] for s in site.summary()) == len(eps)
    for p in _plays(run):
        assert f"plays/{p['play_id']}.html" in page


def test_episode_page_holds_its_calls_and_the_truth(run):
    site = Site(run)
    calls = _calls(run)
    truth = {(r["family"], r["split"], r["instance"]): r for r in _rows(run, "truth/*/*/graphs.parquet")}
    for e in _episodes(run):
        page = site.page(f"episodes/{e['episode_id']}.html").body.decode()
        mine = [c for c in calls if c["episode_id"] == e["episode_id"]]
        assert mine, e["episode_id"]
        amap = json.loads(e["algorithm_map"])

        def shown(text: str) -> str:   # as the page shows agent-visible text: escaped, each masked name unmasked
            text = html.escape(text, quote=False)
            for k, v in amap.items():
                text = text.replace(k, f'{k}<span class="real" title="real algorithm">[{v}]</span>')
            return text

        for c in mine:
            if c["call_id"]:
                assert f'id="call-{c["turn"]}-{c["index"]}"' in page, (e["episode_id"], c)
            assert c["tool"] == "(text)" or shown(c["result"]) in page, c   # the result as the agent saw it
        # masked names with the real algorithm beside them
        for c in mine:
            if c["tool"] == "run_algorithm":
                masked = json.loads(c["arguments"])["algorithm"]
                assert f'{masked}<span class="real" title="real algorithm">[{amap[masked]}]</span>' in page
        # adjacencies marked against the truth: correct = recall x true edges, extra = edges - correct
        t = truth[(e["family"], e["split"], e["instance"])]
        d = t["d"]
        n_true = sum(1 for i in range(d) for j in range(i + 1, d) if t["dag"][i * d + j] or t["dag"][j * d + i])
        correct = round(e["recall"] * n_true)
        assert f"{correct} correct, {n_true - correct} missing, {e['n_edges'] - correct} extra" in page
        assert page.count('<tr class="correct"') == correct and page.count('<tr class="extra"') == e["n_edges"] - correct
        assert "cannot be shown" not in page


def test_an_edge_lists_the_calls_that_bore_on_it(run):
    site = Site(run)
    e = next(e for e in _episodes(run) if e["agent"] == "evidence")
    calls = [c for c in _calls(run) if c["episode_id"] == e["episode_id"]]
    sub = next(c for c in calls if c["tool"] == "submit")
    edge = json.loads(sub["arguments"])["edges"][0]            # e.g. "X1 -- X5"
    a, b = re.split(r" -- | -> ", edge)
    pair = " – ".join(sorted([a, b], key=lambda n: int(n[1:])))
    page = site.page(f"episodes/{e['episode_id']}.html").body.decode()
    row = re.search(rf'<tr class="\w*" data-pair="{pair}">(.*?)</tr>', page, re.S)[1]
    assert f'href="#call-{sub["turn"]}-{sub["index"]}"' in row


@pytest.mark.parametrize("damage, message", [
    (lambda t: t[: len(t) // 2], "is not valid JSON (truncated or damaged)"),
    (lambda t: "", "is empty (truncated or damaged)"),
    (lambda t: json.dumps({k: v for k, v in json.loads(t).items() if k != "transcript_version"}),
     "has no transcript_version: it was written by an older heuresis"),
    (lambda t: json.dumps({**json.loads(t), "transcript_version": 99}), "is of layout version 99"),
    (lambda t: json.dumps({k: v for k, v in json.loads(t).items() if k != "calls"}),
     "is damaged: at the top level: 'calls' is a required property"),
    (lambda t: json.dumps({**json.loads(t), "messages": [{"content": "x"}]}),
     "is damaged: at messages/0: 'role' is a required property"),
])
def test_a_damaged_transcript_shows_its_message(run, tmp_path, damage, message):
    results = tmp_path / "results"
    shutil.copytree(run, results)
    e = _episodes(results)[0]
    path = results / "transcripts" / e["agent"] / e["condition_id"] / e["family"] / e["split"] / f"{e['instance']:04d}.json"
    path.write_text(damage(path.read_text()))
    with pytest.raises(TranscriptProblem, match=re.escape(message)):
        read_episode_transcript(path)
    page = Site(results).page(f"episodes/{e['episode_id']}.html").body.decode()
    assert 'id="transcript-problem"' in page and str(markupsafe.escape(message)) in page
    assert e["episode_id"] in page and html.escape(e["edges"]) in page    # the row and its score are still shown


def test_missing_transcript_is_named(run, tmp_path):
    results = tmp_path / "results"
    shutil.copytree(run, results)
    e = _episodes(results)[0]
    shutil.rmtree(results / "transcripts")
    page = Site(results).page(f"episodes/{e['episode_id']}.html").body.decode()
    assert "does not exist (not written, or moved)" in page


def test_play_page_shows_deployments_report_and_judges(run):
    site = Site(run)
    judged = _rows(run, "games/judgements/*/*/*/*.parquet")[0]
    for p in _plays(run):
        page = site.page(f"plays/{p['play_id']}.html").body.decode()
        assert page.count('<rect class="bar"') == p["deployments"] == len(json.loads(p["designs_deployed"]))
        assert html.escape(p["report"], quote=False) in page
        assert f"threshold {p['threshold']:.3f}" in page and f"optimum {p['optimum']:.3f}" in page
        if p["play_id"] == judged["play_id"]:
            assert "j_test (openai/scripted)" in page and "CR1 true mechanism (0–4)" in page and "missed_confounder" in page
            assert "names the zone &lt;b&gt;confounder&lt;/b&gt; but not the filter" in page   # escaped, shown
        else:
            assert "No judge scored this play." in page


def test_export_writes_the_same_pages(run, tmp_path):
    out = tmp_path / "site"
    n = export_site(run, out, log=lambda m: None)
    site = Site(run)
    paths = list(site.paths())
    assert n == len(paths)
    for path in paths:
        assert (out / path).read_bytes() == site.page(path).body, path
    assert len(list(out.rglob("*.html"))) == 1 + len(_episodes(run)) + len(_plays(run))
    assert (out / "files/tables/table4.md").is_file()   # the run's tables are linked from the index


def _get(url: str, **headers) -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@pytest.fixture(scope="module")
def served(run):
    srv = make_server(run, 0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/"
    srv.shutdown()
    srv.server_close()


def test_served_pages_are_the_site_pages(run, served):
    site = Site(run)
    assert served.startswith("http://127.0.0.1:")
    e = _episodes(run)[0]
    for path in ["index.html", "static/table.js", f"episodes/{e['episode_id']}.html", "files/tables/table4.md"]:
        status, body = _get(served + path)
        assert status == 200 and body == site.page(path).body, path
    assert _get(served)[1] == site.page("index.html").body
    # read-only, nothing but the pages: no other file, no traversal, no other method, loopback Host only
    assert _get(served + "truth/lg/test/graphs.parquet")[0] == 404
    assert _get(served + "files/../truth/lg/test/graphs.parquet")[0] == 404
    assert _get(served + "files/%2E%2E/truth/lg/test/graphs.parquet")[0] == 404
    assert _get(served + "index.html", Host="attacker.example:80")[0] == 421
    req = urllib.request.Request(served + "index.html", data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(req, timeout=30)
    assert exc.value.code == 501


def test_cli_exports(run, tmp_path):
    from heuresis.cli import main

    assert main(["view", "--export", str(tmp_path / "x"), str(run)]) == 0
    assert (tmp_path / "x/index.html").is_file()
    assert main(["view", "--export", str(tmp_path / "y"), str(tmp_path / "nowhere")]) == 2


# --- a real browser ---------------------------------------------------------------------------------
def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed (.ci/run installs it)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return path


def _dump_dom(url: str, tmp_path: Path) -> tuple[str, str]:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000",
           "--dump-dom", url]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, proc.stderr


@pytest.mark.parametrize("where", ["served", "exported"])
def test_index_renders_in_a_browser(run, served, tmp_path, where):
    if where == "served":
        base = served
    else:
        export_site(run, tmp_path / "site", log=lambda m: None)
        base = (tmp_path / "site").as_uri() + "/"
    eps = _episodes(run)
    dom, log = _dump_dom(base + "index.html", tmp_path)
    assert dom.count('<tr class="episode">') == len(eps)
    assert f"({len(eps)} of {len(eps)})" in dom
    assert "Uncaught" not in log and "Refused to" not in log, log[-2000:]   # no script error, nothing blocked
    merge = sum(e["agent"] == "merge" for e in eps)
    dom, _ = _dump_dom(base + "index.html#agent=merge", tmp_path)
    assert dom.count('<tr class="episode">') == merge == 4
    dom, _ = _dump_dom(base + "index.html#family=nosuchfamily", tmp_path)
    assert dom.count('<tr class="episode">') == 0 and f"(0 of {len(eps)})" in dom
    high = sum(e["f1"] > 0.7 for e in eps)
    dom, _ = _dump_dom(base + "index.html#f1=%3E0.7", tmp_path)
    assert dom.count('<tr class="episode">') == high
    # a link of a row opens its episode page
    link = re.search(r'<tr class="episode"><td><a href="([^"]+)">open</a>', dom)[1]
    page, _ = _dump_dom(link if "://" in link else base + link, tmp_path)
    assert "Final graph against the truth" in page


def test_every_transcript_of_the_run_reads(run):
    paths = sorted((run / "transcripts").rglob("*.json"))
    assert len(paths) == len(_episodes(run))
    for p in paths:
        tr = read_episode_transcript(p)
        assert tr.data["transcript_version"] == 1 and tr.calls and tr.messages


def test_an_agent_failure_is_shown_with_its_reason(run, tmp_path):
    results = tmp_path / "results"
    shutil.copytree(run, results)
    e = _episodes(results)[0]
    path = results / "transcripts" / e["agent"] / e["condition_id"] / e["family"] / e["split"] / f"{e['instance']:04d}.json"
    t = json.loads(path.read_text())
    t["error"] = {"error": "RuntimeError: the model server went away", "traceback": "Traceback ..."}
    path.write_text(json.dumps(t))
    page = Site(results).page(f"episodes/{e['episode_id']}.html").body.decode()
    assert "agent failure (transcript)" in page and "RuntimeError: the model server went away" in page
    assert 'id="transcript-problem"' not in page
