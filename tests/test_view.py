"""heuresis view: pages built from the shared tiny workflow run, checked against its tables and truth.

The run (fixture ``tiny_run``) is copied, never modified; the expected content is read here
independently of the view (pyarrow on the episodes, calls and truth tables), the served pages are
fetched over a real loopback socket, and the index's script is run in a real browser (Debian's
chromium, headless) to check that it renders every row and filters by the address.
"""

from __future__ import annotations

import html
import json
import math
import os
import re
import shutil
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import unquote

import markupsafe
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from heuresis.artifacts.io import write_table
from heuresis.artifacts.schemas import GAME_JUDGEMENTS
from heuresis.artifacts.transcripts import TranscriptProblem, read_episode_transcript
from heuresis.view import Site, export_site, make_server
from heuresis.view.pages import INDEX_COLUMNS

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
    row = {"judge": "j_test", "protocol": "committed", "model": "openai/scripted", "play_id": play["play_id"],
           "agent": play["agent"],
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


def _shared_instances(results: Path) -> dict[tuple, list[dict]]:
    """The instances played by two or more episodes, and those episodes."""
    groups: dict[tuple, list[dict]] = {}
    for e in _episodes(results):
        groups.setdefault((e["family"], e["split"], e["instance"]), []).append(e)
    return {k: v for k, v in groups.items() if len(v) >= 2}


def test_index_lists_every_episode(run):
    eps = _episodes(run)
    assert len(eps) == 20   # the tiny config's grids: 4 + 4 + 8 + 2 + 2 shortcut/merge/evidence episodes
    site = Site(run)
    data = site.index_data()
    keys = [c["key"] for c in data["columns"]]
    assert {"agent", "family", "split", "status", "termination", "f1", "turns", "tokens", "cost", "budget"} <= set(keys)
    links = {r[-1] for r in data["rows"]}
    assert links == {f"episodes/{e['episode_id']}.html" for e in eps}
    values = data["values"]     # categorical cells are indices into their column's distinct values
    assert set(values) == {c["key"] for c in data["columns"] if c["kind"] == "cat"}
    by_link = {r[-1]: {k: values[k][v] if k in values else v for k, v in zip(keys, r)} for r in data["rows"]}
    assert {v["agent"] for v in by_link.values()} == {e["agent"] for e in eps}
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
            numeric = [f for f in GAME_JUDGEMENTS.schema if f.type == pa.float64() and f.name not in ("cost", "latency_s")]
            assert page.count('<tr data-criterion="') == len(numeric)    # every score column of the table
            assert "names the zone &lt;b&gt;confounder&lt;/b&gt; but not the filter" in page   # escaped, shown
        else:
            assert "No judge scored this play." in page


def test_the_survival_chart_has_a_labelled_axis_and_no_label_over_another(run, served):
    """In chromium, on every play page: the chart's y-axis has its ticks labelled 0 to 1, and no two of
    its texts (ticks, axis titles, the lines' labels: the optimum and threshold lie close) overlap; with
    many deployments only every few are numbered, far enough apart."""
    from itertools import pairwise

    from browser import Browser

    from heuresis.view.pages import CHART_TICK_GAP, _survival_chart

    _chromium()
    boxes = ("[...document.querySelectorAll('svg.chart text')].map(t => { const r = t.getBoundingClientRect();"
             " return [t.textContent, r.left, r.top, r.right, r.bottom]; })")
    with Browser(size=(1100, 700)) as b:
        for p in _plays(run):
            b.open(served + f"plays/{p['play_id']}.html")
            assert b.eval("[...document.querySelectorAll('svg.chart text.ytick')].map(t => t.textContent)") == \
                ["0", "0.25", "0.5", "0.75", "1"]
            texts = b.eval(boxes)
            assert f"threshold {p['threshold']:.3f}" in [t[0] for t in texts]
            for k, (a, *ra) in enumerate(texts):
                for c, *rc in texts[k + 1:]:
                    assert ra[2] <= rc[0] or rc[2] <= ra[0] or ra[3] <= rc[1] or rc[3] <= ra[1], (p["play_id"], a, c)
        assert b.errors == [], b.errors
    chart = _survival_chart([{"n": k + 1, "rate": 0.5} for k in range(60)], {"optimum": 0.8, "threshold": 0.79}, None)
    xs = [bar["x"] for bar in chart["bars"] if bar["tick"]]
    assert xs[0] == chart["bars"][0]["x"] and min(b - a for a, b in pairwise(xs)) >= CHART_TICK_GAP


def test_judge_criteria_are_read_from_whatever_columns_the_table_has():
    """The play page's criteria come from the judgements table's columns: the current table and a
    per-criterion table (scores with a reason each, a total, a label) render alike."""
    from heuresis.view.pages import JUDGEMENT_KEYS, judge_criteria

    # the judgements table of this version: every score column is a criterion, in the table's order
    numeric = [f.name for f in GAME_JUDGEMENTS.schema if f.name not in JUDGEMENT_KEYS and f.type == pa.float64()]
    crit, _ = judge_criteria({}, GAME_JUDGEMENTS.schema, GAME_JUDGEMENTS.doc)
    assert [c["column"] for c in crit] == numeric and len(numeric) >= 5
    # a table of single scores and one rationale
    cols = [("judge", pa.string(), "judge"), ("causal_reasoning", pa.float64(), "0-11: names the true mechanism"),
            ("reflection", pa.float64(), "0-2: says which patterns misled"), ("total", pa.float64(), "sum, 0-13"),
            ("rationale", pa.string(), "the judge's justification")]
    crit, texts = judge_criteria({"judge": "j", "causal_reasoning": 7.0, "reflection": None, "total": 7.0,
                                  "rationale": "why"}, pa.schema([(c, t) for c, t, _ in cols]),
                                 {c: d for c, _, d in cols})
    assert [(c["label"], c["score"], c["reason"]) for c in crit] == [
        ("causal reasoning (0–11)", 7.0, None), ("reflection (0–2)", None, None), ("total: sum (0–13)", 7.0, None)]
    assert [(t["label"], t["text"]) for t in texts] == [("rationale", "why")]
    # a table whose criteria each carry a reason, in the table's own order
    cols = [("judge", pa.string(), "judge"), ("status", pa.string(), "ok"),
            ("cr1", pa.float64(), "CR1 true mechanism, 0-4: names the causes"),
            ("ed", pa.float64(), "ED experimental design, 0-2: informative deployments"),
            ("cr1_reason", pa.string(), "reason for CR1"), ("ed_reason", pa.string(), "reason for ED"),
            ("total", pa.float64(), "sum of the criteria, 0-6"), ("failure_mode", pa.string(), "a label")]
    schema = pa.schema([(c, t) for c, t, _ in cols])
    row = {"judge": "j", "status": "ok", "cr1": 3.0, "ed": 1.0, "cr1_reason": "names <b>zone</b>", "ed_reason": "",
           "total": 4.0, "failure_mode": "missed_confounder"}
    crit, texts = judge_criteria(row, schema, {c: d for c, _, d in cols})
    assert [(c["label"], c["score"], c["reason"]) for c in crit] == [
        ("CR1 true mechanism (0–4)", 3.0, "names <b>zone</b>"), ("ED experimental design (0–2)", 1.0, ""),
        ("total: sum of the criteria (0–6)", 4.0, None)]
    assert [(t["label"], t["text"]) for t in texts] == [("failure mode", "missed_confounder")]


def test_export_writes_the_same_pages(run, tmp_path):
    out = tmp_path / "site"
    n = export_site(run, out, log=lambda m: None)
    site = Site(run)
    paths = list(site.paths())
    assert n == len(paths)
    for path in paths:
        assert (out / path).read_bytes() == site.page(path).body, path
    assert len(list(out.rglob("*.html"))) == 1 + len(_episodes(run)) + len(_plays(run)) + len(_shared_instances(run))
    assert (out / "files/tables/table4.md").is_file()   # the run's tables are linked from the index


def test_the_workflow_target_writes_the_export(tiny_run, tmp_path, monkeypatch):
    """``snakemake view`` on the finished tiny run: only the export job runs, and it writes the site's pages."""
    from tinyflow import CONFIG, run_snakemake

    wd = tmp_path / "wd"
    shutil.copytree(tiny_run, wd, symlinks=True)   # modification times kept: nothing else is out of date
    proc = run_snakemake(wd, "view", "--profile", "workflow/profiles/local", "--cores", "1", *CONFIG)
    jobs = re.search(r"Job stats:\n(.*?)\n\n", proc.stdout + proc.stderr, re.S)[1]
    assert re.findall(r"^(\w+)\s+(\d+)$", jobs, re.M) == [("view", "1"), ("total", "1")], jobs
    monkeypatch.chdir(wd)
    site = Site("results")                          # as the rule names it (the index shows the name)
    out = wd / "results/view"
    written = [str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and p.name != ".snakemake_timestamp"]
    assert sorted(written) == sorted(map(unquote, site.paths()))
    header = re.compile(rb'<section class="run-header".*?</section>', re.S)   # the run as it was: the view job running
    for path in site.paths():
        written, now = (out / unquote(path)).read_bytes(), site.page(path).body
        if path == "index.html":
            assert b"<strong>0 of 1</strong> planned jobs done" in written   # the plan: the view job, not yet done
            written, now = header.sub(b"", written), header.sub(b"", now)
        assert written == now, path
    assert "wrote" in (wd / "logs/view.log").read_text()


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
    yield f"http://127.0.0.1:{srv.server_address[1]}/{srv.token}/"
    srv.shutdown()
    srv.server_close()


def test_served_pages_are_the_site_pages(run, served):
    site = Site(run, live=True)     # served, the index follows the run
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
    # without its token (the unguessable first segment) nothing is served: not the index, not a page
    root = served.rsplit("/", 2)[0] + "/"
    token = served.rsplit("/", 2)[1]
    assert len(token) >= 22
    for path in ["", "index.html", "live.json", f"episodes/{e['episode_id']}.html", "AAAAAAAAAAAAAAAAAAAAAA/index.html",
                 token[:-1] + "/index.html"]:
        assert _get(root + path)[0] == 404, path
    assert _get(root + token)[0] == 200      # /TOKEN redirects to /TOKEN/
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
    from browser import chromium

    path = chromium()
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed (.ci/run installs it)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return path


@pytest.fixture(scope="module")
def browser():
    """One chromium for the tests that read pages as drawn (:func:`_dump_dom`)."""
    from browser import Browser

    _chromium()
    with Browser(size=(1100, 760)) as b:
        yield b


def _dump_dom(browser, url: str) -> tuple[str, str]:
    """The document at ``url`` once loaded (its scripts have drawn it), and the console errors it logged."""
    browser.open("about:blank")          # a new document every time, also for an address that differs by its hash
    browser.errors.clear()
    browser.open(url)
    return browser.html(), "\n".join(browser.errors)


@pytest.mark.parametrize("where", ["served", "exported"])
def test_index_renders_in_a_browser(run, served, tmp_path, where, browser):
    if where == "served":
        base = served
    else:
        export_site(run, tmp_path / "site", log=lambda m: None)
        base = (tmp_path / "site").as_uri() + "/"
    eps = _episodes(run)
    dom, log = _dump_dom(browser, base + "index.html")
    assert dom.count('<tr class="episode">') == len(eps)
    assert f"({len(eps)} of {len(eps)})" in dom
    assert "Uncaught" not in log and "Refused to" not in log, log[-2000:]   # no script error, nothing blocked
    groups = {(e["agent"], e["condition_id"]) for e in eps}                  # the summary: one row each
    assert dom.count('<tr class="summary">') == len(groups) and f"({len(groups)} of {len(groups)})" in dom
    assert re.search(r'id="episodes-table" data-rows="\d+" data-drawn-ms="\d+" data-load-ms="\d+"', dom)
    merge = sum(e["agent"] == "merge" for e in eps)
    dom, _ = _dump_dom(browser, base + "index.html#agent=merge")
    assert dom.count('<tr class="episode">') == merge == 4
    dom, _ = _dump_dom(browser, base + "index.html#family=nosuchfamily")
    assert dom.count('<tr class="episode">') == 0 and f"(0 of {len(eps)})" in dom
    high = sum(e["f1"] > 0.7 for e in eps)
    dom, _ = _dump_dom(browser, base + "index.html#f1=%3E0.7")
    assert dom.count('<tr class="episode">') == high
    # a link of a row opens its episode page
    link = re.search(r'<tr class="episode"><td><a href="([^"]+)">open</a>', dom)[1]
    page, _ = _dump_dom(browser, link if "://" in link else base + link)
    assert "Final graph against the truth" in page


def test_every_transcript_of_the_run_reads(run):
    paths = sorted((run / "transcripts").rglob("*.json"))
    assert len(paths) == len(_episodes(run))
    for p in paths:
        tr = read_episode_transcript(p)
        assert tr.version == 1 and tr.calls and tr.messages


# --- the working graph after every turn --------------------------------------------------------------
#: An LLM agent's episode (a scripted server on 127.0.0.1) that edits the working graph: pairs set and
#: removed, a failed edit, an algorithm's output adopted, views of the graph, the working graph submitted.
EDITS = [
    [("set_edges", {"changes": [{"x": "X1", "y": "X2", "relation": "none"}, {"x": "X3", "y": "X4", "relation": "none"}]})],
    [("view_graph", {}), ("set_edges", {"changes": [{"x": "X1", "y": "X9", "relation": "->"}]})],
    [("run_algorithm", {"algorithm": "algorithm_A", "adopt": True})],
    [("set_edges", {"changes": [{"x": "X1", "y": "X5", "relation": "->"}, {"x": "X2", "y": "X3", "relation": "<-"}]}),
     ("ci_test", {"x": "X1", "y": "X2", "given": [], "test": "fisherz"})],
    [("view_graph", {})],
    [("set_edges", {"changes": [{"x": "X4", "y": "X5", "relation": "--"}, {"x": "X1", "y": "X5", "relation": "none"}]})],
    [("submit", {})],
]
EDIT_CONDITIONS = ["full-unguided-p1-none-standard-none-r0", "full-guided-p1-none-standard-none-r0"]


@pytest.fixture(scope="module")
def edited(tiny_run, run, tmp_path_factory) -> Path:
    """A copy of the run with two episodes of agent ``editor`` (unguided, guided) that play :data:`EDITS`."""
    from heuresis.preflight import load_config

    results = tmp_path_factory.mktemp("edited") / "results"
    shutil.copytree(run, results)
    cfg = load_config(*(tiny_run / "config" / f for f in ("config.yaml", "quick.yaml", "tiny.yaml")))
    here = os.getcwd()
    os.chdir(results.parent)             # the paths recorded relative to the run folder, as the workflow's are
    try:
        _play_edits(Path("results"), cfg)
    finally:
        os.chdir(here)
    return results


def _play_edits(results: Path, cfg: dict) -> None:
    from llm_server import ScriptedLLMServer

    from heuresis.stages.episodes import run_episode_shard

    for cond in EDIT_CONDITIONS:
        script = [{"tool_calls": step, "usage": (1000 + 100 * k, 40)} for k, step in enumerate(EDITS)]
        out = results / "episodes/editor" / cond / "lg/test/shard-000.parquet"
        with ScriptedLLMServer(script) as server:
            spec = {"kind": "llm", "model": "openai/scripted-model", "api_base": server.url + "/v1",
                    "requires_key": False, "timeout_s": 20, "retries": {"max_retries": 1, "base_s": 0.01, "max_s": 0.05}}
            run_episode_shard("editor", spec, cond, "lg", "test", [0], data_dir=results / "instances/lg/test",
                              truth_dir=results / "truth/lg/test",
                              pc_kci_paths=sorted((results / "references/pc_kci/lg/test").glob("shard-*.parquet")),
                              episodes_cfg=cfg["episodes"], menu=cfg["references"]["algorithms"], grades=cfg["grades"],
                              seed=cfg["seed"], out=out, calls_out=out.with_name("shard-000.calls.parquet"),
                              requests_out=out.with_name("shard-000.requests.parquet"),
                              transcripts_dir=results / "transcripts/editor" / cond / "lg/test")


def _lines(rel: dict) -> set[str]:
    """Edge lines ("Xi -> Xj", "Xi -- Xj") of pair -> relation ("--", "->" from the first to the second)."""
    return {f"{a} -- {b}" if r == "--" else f"{a} -> {b}" if r == "->" else f"{b} -> {a}" for (a, b), r in rel.items()}


def _expected_after_turns(start_lines: list[str], calls: list[dict]) -> dict[int, set[str]]:
    """The working graph after each turn, from the calls table alone: this test's own reading of the edits."""
    def pair(a, b):
        return (a, b) if int(a[1:]) < int(b[1:]) else (b, a)

    def parse(line):
        a, op, b = re.match(r"(X\d+) (->|--) (X\d+)", line).groups()
        p = pair(a, b)
        return p, "--" if op == "--" else ("->" if p == (a, b) else "<-")

    rel = dict(parse(x) for x in start_lines)
    out = {0: _lines(rel)}
    for c in sorted(calls, key=lambda c: (c["turn"], c["index"])):
        args = json.loads(c["arguments"] or "{}")
        if c["ok"] and c["tool"] == "set_edges":
            for ch in args["changes"]:
                p = pair(ch["x"], ch["y"])
                r = {"->": "->", "<-": "<-", "--": "--", "none": None}[ch["relation"]]
                if r in ("->", "<-") and p != (ch["x"], ch["y"]):
                    r = "<-" if r == "->" else "->"
                rel.pop(p, None) if r is None else rel.__setitem__(p, r)
        elif c["ok"] and c["tool"] == "run_algorithm" and args.get("adopt"):   # the output the agent was shown
            rel = dict(parse(x) for x in c["result"].splitlines()[1:] if re.match(r"X\d+ (->|--) X\d+$", x))
        out[c["turn"]] = _lines(rel)
    return out


def _figures(page: str) -> dict[int, tuple[set[str], int]]:
    """Each turn's drawing on a page: its edge lines and the number of segments drawn."""
    out = {}
    for m in re.finditer(r'<figure class="working" data-turn="(\d+)" data-edges="([^"]*)">(.*?)</figure>', page, re.S):
        lines = {x for x in html.unescape(m[2]).split("; ") if x}
        out[int(m[1])] = (lines, m[3].count('<line class="edge'))
    return out


@pytest.mark.parametrize("cond", EDIT_CONDITIONS)
def test_the_working_graph_is_drawn_after_every_turn(edited, cond):
    site = Site(edited)
    e = next(r for r in _rows(edited, f"episodes/editor/{cond}/lg/test/shard-000.parquet"))
    assert e["status"] == "ok" and e["termination"] == "submitted" and e["turns"] == len(EDITS), e["error"]
    calls = pq.read_table(edited / f"episodes/editor/{cond}/lg/test/shard-000.calls.parquet").to_pylist()
    assert [c["ok"] for c in calls] == [True, True, False, True, True, True, True, True, True]
    if "unguided" in cond:
        start = [f"X{i} -- X{j}" for i in range(1, 6) for j in range(i + 1, 6)]   # the complete graph
    else:
        ref = _rows(edited, "references/pc_kci/lg/test/shard-*.parquet")
        start = [x for x in next(r for r in ref if r["instance"] == e["instance"])["edges"].split("; ") if x]
    expected = _expected_after_turns(start, calls)
    page = site.page(f"episodes/{e['episode_id']}.html").body.decode()
    figs = _figures(page)
    assert sorted(figs) == list(range(len(EDITS) + 1))          # the start, then one drawing per turn
    for t, (lines, segments) in figs.items():
        assert lines == expected[t], t
        assert segments == len(lines), t                        # every edge drawn, nothing else
    # and as the harness itself reported the graph: view_graph's listing, set_edges' count, the submission
    for c in calls:
        if c["tool"] == "view_graph":
            assert figs[c["turn"]][0] == set(re.findall(r"^(X\d+ (?:->|--) X\d+)$", c["result"], re.M))
        if c["tool"] == "set_edges" and c["ok"]:
            assert f"the working graph has {len(figs[c['turn']][0])} edges" in c["result"]
    assert figs[len(EDITS)][0] == set(e["edges"].split("; "))   # submit without edges: the working graph
    assert expected[3] != expected[2] and expected[1] != expected[0]   # the script did change the graph
    assert "changed in this turn" in page and 'id="graph-note"' not in page


def test_a_working_graph_that_cannot_be_replayed_is_named(edited, tmp_path):
    results = tmp_path / "results"
    shutil.copytree(edited, results, symlinks=True)
    unguided, guided = (_rows(results, f"episodes/editor/{c}/lg/test/shard-000.parquet")[0] for c in EDIT_CONDITIONS)
    path = tmp_path / unguided["transcript"]                          # recorded relative to the run folder
    t = json.loads(path.read_text())
    bad = next(c for c in t["calls"] if c["turn"] == 4 and c["tool"] == "set_edges")
    bad["arguments"] = '{"changes": [{"x": "X1", "y": "X99", "relation": "->"}]}'   # not what the harness applied
    path.write_text(json.dumps(t))
    shutil.rmtree(results / "references/pc_kci")
    site = Site(results)
    page = site.page(f"episodes/{unguided['episode_id']}.html").body.decode()
    assert "turn 4, call 0 (set_edges) cannot be replayed: unknown variable" in page and 'id="graph-note"' in page
    assert sorted(_figures(page)) == [0, 1, 2, 3]                  # up to the turn before, nothing after
    page = site.page(f"episodes/{guided['episode_id']}.html").body.decode()
    assert "started from PC-KCI&#39;s output, which is not under results/references" in page and not _figures(page)


def test_the_working_graph_drawings_render_in_a_browser(edited, tmp_path, browser):
    out = tmp_path / "site"
    export_site(edited, out, log=lambda m: None)
    e = _rows(edited, f"episodes/editor/{EDIT_CONDITIONS[0]}/lg/test/shard-000.parquet")[0]
    dom, log = _dump_dom(browser, (out / f"episodes/{e['episode_id']}.html").as_uri())
    assert "Uncaught" not in log and "Refused to" not in log, log[-2000:]
    figs = _figures(dom)
    assert sorted(figs) == list(range(len(EDITS) + 1))
    assert all(dom.count(f'<section class="turn" id="turn-{t}">') == 1 for t in figs)


#: Where test_screenshots writes the pictures of docs/viewer.md (default: a temporary folder):
#: HEURESIS_VIEW_SCREENSHOTS=docs/img python -m pytest tests/test_view.py -k screenshots
SCREENSHOTS = os.environ.get("HEURESIS_VIEW_SCREENSHOTS")


def test_screenshots(edited, tmp_path, monkeypatch):
    """The pictures of docs/viewer.md: the index, an episode's turns with the working graph, a play's judges
    and its survival chart, the comparison of the episodes of the instance played most."""
    from browser import Browser
    from PIL import Image

    _chromium()
    dest = Path(SCREENSHOTS).resolve() if SCREENSHOTS else tmp_path / "img"
    dest.mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(edited.parent)
    export_site("results", tmp_path / "site", log=lambda m: None)     # the index names the folder as given
    e = _rows(edited, f"episodes/editor/{EDIT_CONDITIONS[0]}/lg/test/shard-000.parquet")[0]
    judged = _rows(edited, "games/judgements/*/*/*/*.parquet")[0]
    shots = {"view-index.png": ("index.html", None), "view-episode.png": (f"episodes/{e['episode_id']}.html", "turn-3"),
             "view-play.png": (f"plays/{judged['play_id']}.html", "judges"),
             "view-survival.png": (f"plays/{judged['play_id']}.html", "deployments-heading")}
    shared = Site(edited).instances()
    shots["view-compare.png"] = (Site.compare_path(max(shared, key=lambda k: len(shared[k]))), None)
    with Browser(size=(1280, 800)) as b:
        for name, (rel, element) in shots.items():
            b.open((tmp_path / "site" / rel).as_uri())
            raw = tmp_path / name
            b.screenshot(raw, element)
            Image.open(raw).convert("RGB").quantize(colors=64).save(dest / name, optimize=True)   # a small PNG
            img = Image.open(dest / name)
            assert img.size == (1280, 800), name
            assert len(img.getcolors(256) or []) > 8, f"{name} looks blank"      # a page, not an empty window
            assert (dest / name).stat().st_size < 150_000, name
        assert b.errors == [], b.errors                                           # no console error on any page


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


# --- headers, the hidden truth labelled ----------------------------------------------------------------
def _head(url: str) -> tuple[int, dict, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()


def test_served_text_is_utf8_and_robots_and_icon_are_answered(run, tmp_path):
    """Every text file served says charset=utf-8 (a table's "−" and "×" read right); robots.txt forbids
    every path, served at the root and under the token and exported; the icon is no 404."""
    results = tmp_path / "results"
    shutil.copytree(run, results)
    (results / "tables/extra.csv").write_text("agent,F1 − PC\nx,0.5\n", encoding="utf-8")
    (results / "tables/extra.txt").write_text("agent × condition\n", encoding="utf-8")
    srv = make_server(results, 0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{srv.server_address[1]}/"
    served = f"{base}{srv.token}/"
    try:
        files = [p.relative_to(results).as_posix() for p in sorted((results / "tables").iterdir())
                 if p.suffix in (".md", ".tex", ".txt", ".csv")]
        assert {Path(f).suffix for f in files} == {".md", ".tex", ".txt", ".csv"}
        for f in files:
            status, headers, body = _head(served + "files/" + f)
            assert status == 200 and body == (results / f).read_bytes(), f
            assert headers["content-type"].startswith("text/") and "charset=utf-8" in headers["content-type"], (f, headers)
            assert headers["x-robots-tag"].startswith("noindex")
        for path in ["index.html", "static/table.js", "static/view.css", "static/page.js"]:
            assert "charset=utf-8" in _head(served + path)[1]["content-type"], path
        for url in (base + "robots.txt", served + "robots.txt"):
            status, headers, body = _head(url)
            assert status == 200 and headers["content-type"] == "text/plain; charset=utf-8"
            assert body.decode().splitlines() == ["User-agent: *", "Disallow: /"]
        for url in (base + "favicon.ico", served + "favicon.ico"):
            assert _head(url)[0] == 200, url
        assert _head(base + "index.html")[0] == 404        # nothing else without the token
    finally:
        srv.shutdown()
        srv.server_close()
    out = tmp_path / "site"
    export_site(results, out, log=lambda m: None)
    assert (out / "robots.txt").read_text().splitlines() == ["User-agent: *", "Disallow: /"]


def test_every_page_says_it_holds_the_hidden_truth(run):
    """A banner and a noindex robots meta on every page; on a play page the optimum, the trap and the
    intended mechanism (from the scenario's references) are each marked as never shown to the player."""
    site = Site(run)
    pages = [p for p in site.paths() if p.endswith(".html")]
    assert len(pages) == 1 + len(_episodes(run)) + len(_plays(run)) + len(_shared_instances(run))
    for path in pages:
        page = site.page(path).body.decode()
        assert page.count("This page contains the hidden truth: never show this to an agent.") == 1, path
        assert '<meta name="robots" content="noindex, nofollow">' in page, path
        assert '<link rel="icon" href="data:,">' in page, path
    refs = {r["scenario"]: r for r in _rows(run, "games/references/*.parquet")}
    plays = _plays(run)
    assert plays and all(p["scenario"] in refs for p in plays)
    for p in plays:
        page = site.page(f"plays/{p['play_id']}.html").body.decode()
        ref = refs[p["scenario"]]
        marked = dict(re.findall(r'class="hidden-truth" data-hidden="(\w+)">(.*?)</(?:tr|p)>', page, re.S))
        assert set(marked) == {"optimum", "optimum_design", "trap_design", "mechanism"}, p["play_id"]
        assert all("never shown to the player" in v for v in marked.values())
        assert str(markupsafe.escape(ref["optimum_design"])) in marked["optimum_design"]
        assert str(markupsafe.escape(ref["trap_design"])) in marked["trap_design"]
        assert str(markupsafe.escape(ref["intended_mechanism"])) in marked["mechanism"]
        assert f"{p['optimum']:.3f}" in marked["optimum"]


# --- the plays, first-class ----------------------------------------------------------------------------
def _follows(pattern: list[dict], design: dict) -> bool:
    """This test's own reading of a trap pattern: every condition's sum within its bound, or its choice in its set."""
    for cond in pattern:
        if "in" in cond:
            if design.get(cond["of"][0]) not in cond["in"]:
                return False
            continue
        total = sum(int(design.get(f) or 0) for f in cond["of"])
        if total < cond.get("at_least", -math.inf) or total > cond.get("at_most", math.inf):
            return False
    return True


def test_the_plays_summary_is_the_plays_table_grouped(run):
    """The agent × scenario summary against pandas over the plays and references tables."""
    import pandas as pd

    site = Site(run)
    plays = pd.DataFrame(_plays(run))
    refs = {r["scenario"]: json.loads(r["trap_pattern"]) for r in _rows(run, "games/references/*.parquet")}
    plays["fell"] = [None if not s or d in (None, "null") else _follows(refs[sc], json.loads(d))
                     for s, d, sc in zip(plays.submitted, plays.design, plays.scenario)]
    assert plays.fell.notna().any() and plays.fell.dropna().astype(bool).any()   # the trap follower falls in
    ok = plays[plays.status != "failed"]
    want = ok.groupby(["agent", "mode", "scenario"]).agg(
        survival=("survival", "mean"), win_rate=("won", "mean"), gap=("gap", "mean"),
        trap_fall=("fell", lambda s: s.dropna().astype(float).mean()), submitted=("submitted", "sum"))
    want["plays"] = plays.groupby(["agent", "mode", "scenario"]).size()
    got = site.plays_summary()
    assert len(got) == len(want) == plays.groupby(["agent", "mode", "scenario"]).ngroups
    for g in got:
        w = want.loc[(g["agent"], g["mode"], g["scenario"])]
        assert g["plays"] == w.plays and g["submitted"] == w.submitted
        for k in ("survival", "win_rate", "gap", "trap_fall"):
            assert (g[k] is None and pd.isna(w[k])) or g[k] == pytest.approx(w[k]), (g, k)
    # the page's blobs: the summary's rows, and one row per play with its trap fall
    page = site.page("index.html").body.decode()
    blob = json.loads(re.search(r'id="plays-summary-data">(.*?)</script>', page, re.S)[1])
    keys = [c["key"] for c in blob["columns"]]
    assert [dict(zip(keys, r))["plays"] for r in blob["rows"]] == [g["plays"] for g in got]
    table = json.loads(re.search(r'id="plays-data">(.*?)</script>', page, re.S)[1])
    keys = [c["key"] for c in table["columns"]]
    rows = {r[-1]: dict(zip(keys, r)) for r in table["rows"]}
    for _, p in plays.iterrows():
        row = rows[f"plays/{p.play_id}.html"]
        assert row["survival"] == pytest.approx(p.survival) and row["trap_fall"] == p.fell


# --- a transcript as a story ---------------------------------------------------------------------------
def test_a_transcript_reads_as_a_story(run):
    """Each tool result right after its call (the transcript's own order), long ones folded, run_code's
    source as code with real newlines, a link to every turn, and the previous and next episode."""
    site = Site(run)
    eps = sorted(_episodes(run), key=lambda e: e["episode_id"])
    ids = [e["episode_id"] for e in eps]
    seen_code = seen_long = 0
    for k, e in enumerate(eps):
        path = run / "transcripts" / e["agent"] / e["condition_id"] / e["family"] / e["split"] / f"{e['instance']:04d}.json"
        t = json.loads(path.read_text())
        where = {c["call_id"]: f'{c["turn"]}-{c["index"]}' for c in t["calls"] if c["call_id"]}
        answer = {m["tool_call_id"]: m["content"] for m in t["messages"] if m["role"] == "tool"}
        expected = []
        for m in t["messages"]:
            for tc in m.get("tool_calls") or []:
                expected += [f"call {where[tc['id']]}", f"result {tc['id']}"]
        page = site.page(f"episodes/{e['episode_id']}.html").body.decode()
        order = [f"call {m[1]}" if m[1] else f"result {m[2]}"
                 for m in re.finditer(r'<div class="call[^"]*" id="call-(\d+-\d+)"|data-result-of="([^"]+)"', page)]
        order = [o for o in order if not o.startswith("call ") or o in expected]   # (text) submissions aside
        assert order == expected, e["episode_id"]
        amap = t["algorithm_map"]
        for cid, text in answer.items():
            lines = text.count("\n") + 1
            tag = "details" if lines > 20 or len(text) > 2000 else "div"
            body = re.search(rf'<{tag} class="result" data-result-of="{re.escape(cid)}">(.*?)</pre>', page, re.S)
            assert body, (e["episode_id"], cid, tag)
            shown = html.escape(text, quote=False)
            for a, b in amap.items():
                shown = shown.replace(a, f'{a}<span class="real" title="real algorithm">[{b}]</span>')
            assert shown in body[1]
            seen_long += tag == "details"
        for m in t["messages"]:
            for tc in m.get("tool_calls") or []:
                if tc["function"]["name"] == "run_code":
                    code = json.loads(tc["function"]["arguments"])["code"]
                    assert "\n" in code
                    block = f'<pre class="code"><code class="language-python">{markupsafe.escape(code)}</code></pre>'
                    assert block in page
                    seen_code += 1
        turns = sorted({(m.get("meta") or {}).get("turn", 0) for m in t["messages"]})
        nav = re.search(r'<nav class="turns" id="turn-nav".*?</nav>', page, re.S)[0]
        assert re.findall(r'href="#turn-(\d+)"', nav) == [str(x) for x in turns]
        assert all(f'<section class="turn" id="turn-{x}">' in page for x in turns)
        prev = re.search(r'id="prev-link" rel="prev" href="([^"]+)"', page)
        nxt = re.search(r'id="next-link" rel="next" href="([^"]+)"', page)
        depth = e["episode_id"].count("/") + 1
        assert (prev and prev[1] == "../" * depth + f"episodes/{ids[k - 1]}.html") if k else prev is None
        assert (nxt and nxt[1] == "../" * depth + f"episodes/{ids[k + 1]}.html") if k + 1 < len(ids) else nxt is None
    assert seen_code >= 1   # the evidence agent's code


# --- in a browser: the address, the sticky head, Back, the keys ---------------------------------------
def test_the_tables_keep_their_filters_in_the_address(run, served, tmp_path):
    """In chromium: the head of a scrolled table shows the headings above the filters; a filter chosen
    goes into the address and comes back after opening an episode and going Back (the export); a bad
    filter is named on the page; the plays table filters and sorts from the address; j / k step
    through an episode's turns; no page logs an error (no icon 404 either, served)."""
    from browser import Browser

    _chromium()
    out = tmp_path / "site"
    export_site(run, out, log=lambda m: None)
    eps, plays = _episodes(run), _plays(run)
    index = (out / "index.html").as_uri()
    with Browser(size=(1100, 500)) as b:
        b.open(served + "index.html")
        b.page.wait_for_load_state("networkidle")      # every request the page made (the icon too) answered
        assert b.errors == [], b.errors
        b.open(index)
        # scrolled into the table: its head sticks at the top, the headings above the filters, not under them
        b.eval("window.scrollTo(0, document.getElementById('episodes').getBoundingClientRect().top + scrollY + 300)")
        rows = b.eval("[...document.querySelectorAll('#episodes thead tr')].map(r => "
                      "{var q = r.querySelector('th').getBoundingClientRect(); return [q.top, q.bottom];})")
        (h_top, h_bottom), (f_top, f_bottom) = rows
        assert abs(h_top) < 1 and h_bottom <= f_top + 0.5 and f_bottom > f_top, rows
        assert b.eval("document.getElementById('episodes').getBoundingClientRect().top") < -100   # it did scroll
        # 1100 px wide: a categorical column with one value in every episode is collapsed and named above the
        # table, so the score columns are inside the window; "show them" brings the collapsed ones back
        same = [(k, lab) for k, lab, kind in INDEX_COLUMNS if kind == "cat" and len({str(e[k]) for e in eps}) == 1]
        assert same, "the tiny run has constant columns"
        def box(key):
            return b.eval(f"document.querySelector('#episodes th[data-key={key}]').getBoundingClientRect().toJSON()")

        note = b.eval("document.querySelector('#episodes-table .constant-note').textContent")
        for k, lab in same:
            assert f"{lab} = " in note and box(k)["width"] == 0, k
        for k in ("f1", "gain_pc", "delta_r", "turns", "tokens", "cost"):
            assert 0 < box(k)["right"] <= b.eval("innerWidth"), k
        b.eval("document.querySelector('#episodes-table .constant-note button').click()")
        assert all(box(k)["width"] > 0 for k, _ in same)
        # a filter chosen: in the address, kept over an episode and Back
        merge = sum(e["agent"] == "merge" for e in eps)
        b.eval("(function () { var s = document.querySelector('#episodes select[data-key=agent]');"
               " s.value = 'merge'; s.dispatchEvent(new Event('change')); })()")
        assert b.eval("location.hash") == "#agent=merge"
        assert b.eval("document.querySelectorAll('tr.episode').length") == merge
        b.eval("document.querySelector('#episodes th.sortable[data-key=f1]').click()")
        assert b.eval("location.hash") == "#agent=merge&sort=f1"
        href = b.eval("document.querySelector('tr.episode a').href")
        b.open(href)
        b.back()
        b.wait_for(f"document.readyState === 'complete' && location.href === {json.dumps(index + '#agent=merge&sort=f1')}")
        assert b.eval("document.querySelectorAll('tr.episode').length") == merge
        assert b.eval("document.querySelector('#episodes select[data-key=agent]').value") == "merge"
        f1_col = 1 + [c[0] for c in INDEX_COLUMNS].index("f1")
        f1 = b.eval(f"[...document.querySelectorAll('tr.episode')].map(r => r.cells[{f1_col}].textContent)")
        assert f1 == sorted(f1, key=float)
        # a filter that cannot match is named, visibly
        b.open(index + "#family=nosuchfamily&f1=%3Eabc&bogus=1")
        note = b.eval("(function () { var n = document.querySelector('#episodes-table .filter-problem');"
                      " return [n.offsetHeight, n.textContent]; })()")
        assert note[0] > 0, note
        assert 'family: no episode has "nosuchfamily"' in note[1] and 'F1: ">abc" is not a number filter' in note[1]
        assert 'the address filters on "bogus"' in note[1]
        assert b.eval("document.querySelectorAll('tr.episode').length") == 0
        b.open(index + "#agent=merge")
        assert b.eval("document.querySelector('#episodes-table .filter-problem').offsetHeight") == 0
        # the plays table, from the address
        agent = plays[0]["agent"]
        b.open(index + "#p.agent=" + agent + "&p.sort=-survival")
        mine = sorted((p["survival"] for p in plays if p["agent"] == agent), reverse=True)
        col = 1 + [c["key"] for c in Site(run).plays_data()["columns"]].index("survival")
        got = b.eval(f"[...document.querySelectorAll('tr.play')].map(r => +r.cells[{col}].textContent)")
        assert got == pytest.approx(mine, abs=5e-4)
        assert b.eval("document.querySelectorAll('tr.episode').length") == len(eps)   # the other tables unfiltered
        assert b.eval("document.querySelectorAll('tr.plays-summary').length") == len(Site(run).plays_summary())
        # j / k through an episode's turns
        e = next(e for e in eps if e["agent"] == "evidence")
        b.open((out / f"episodes/{e['episode_id']}.html").as_uri())
        turns = b.eval("[...document.querySelectorAll('section.turn')].map(s => s.id)")
        assert len(turns) >= 2
        for k, want in zip("jjk", [turns[0], turns[1], turns[0]]):
            b.press(k)
            assert b.eval("location.hash") == f"#{want}"
            top = b.eval(f"document.getElementById('{want}').getBoundingClientRect().top")
            nav = b.eval("document.getElementById('turn-nav').getBoundingClientRect().bottom")
            assert nav - 1 <= top < nav + 40, (want, top, nav)     # just under the turn bar, not under it
        assert b.errors == [], b.errors


# --- side by side ----------------------------------------------------------------------------------------
def test_the_episodes_of_an_instance_side_by_side(run):
    """Each instance played by several episodes has a page, linked from the index and from each of its
    episodes: one column per episode (sorted by id), every pair marked against the truth as this test
    reads the graphs, the pairwise differences of the final graphs, and each turn's calls from the calls table."""
    site = Site(run)
    shared = _shared_instances(run)
    assert shared and all(len(v) >= 2 for v in shared.values())
    calls = _calls(run)
    truth = {(r["family"], r["split"], r["instance"]): r for r in _rows(run, "truth/*/*/graphs.parquet")}
    index = site.page("index.html").body.decode()
    for (family, split, instance), eps in shared.items():
        rel = f"compare/{family}/{split}/{instance:04d}.html"
        assert f'href="{rel}"' in index
        eps = sorted(eps, key=lambda e: e["episode_id"])
        page = site.page(rel).body.decode()
        for e in eps:
            assert 'id="compare-link" href="' + "../" * (e["episode_id"].count("/") + 1) + rel + '"' in \
                site.page(f"episodes/{e['episode_id']}.html").body.decode()
        head = re.search(r'<table class="data" id="compare-episodes"><thead>(.*?)</thead>', page, re.S)[1]
        assert re.findall(r'data-episode="([^"]+)"', head) == [e["episode_id"] for e in eps]
        t = truth[(family, split, instance)]
        d = t["d"]

        def rel_of(g, i, j):
            return (g[i * d + j], g[j * d + i])

        rows = dict(re.findall(r'<tr data-pair="([^"]+)" class="[^"]*">(.*?)</tr>', page, re.S))
        want_pairs = set()
        for i in range(d):
            for j in range(i + 1, d):
                true_adj = bool(t["dag"][i * d + j] or t["dag"][j * d + i])
                adj = [rel_of(e["graph"], i, j) != (0, 0) for e in eps]
                if not (true_adj or any(adj)):
                    continue
                pair = f"X{i + 1} – X{j + 1}"
                want_pairs.add(pair)
                marks = re.findall(r'data-mark="(\w*)"', rows[pair])
                want = ["correct" if a and true_adj else "missing" if true_adj else "extra" if a else "" for a in adj]
                assert marks == want, pair
        assert set(rows) == want_pairs
        # correct · missing · extra per episode, from its recall and edge count as the episode page's test reads them
        n_true = sum(1 for i in range(d) for j in range(i + 1, d) if t["dag"][i * d + j] or t["dag"][j * d + i])
        counts = re.findall(r'<td class="counts">(\d+) · (\d+) · (\d+)</td>', page)
        for e, (c, m, x) in zip(eps, counts, strict=True):
            correct = round(e["recall"] * n_true)
            assert (int(c), int(m), int(x)) == (correct, n_true - correct, e["n_edges"] - correct)
        # the final graphs against each other: pairs whose relation differs
        differ = re.search(r'id="compare-differ">.*?<tbody>(.*?)</tbody>', page, re.S)[1]
        got = [[int(n) for n in re.findall(r"<td>(\d+)</td>", r)] for r in re.findall(r"<tr>(.*?)</tr>", differ, re.S)]
        assert got == [[sum(rel_of(a["graph"], i, j) != rel_of(b["graph"], i, j) for i in range(d)
                             for j in range(i + 1, d)) for b in eps] for a in eps]
        # turn by turn: each episode's calls of that turn, in order, linked to the call on its page
        turns = re.findall(r'<tr data-turn="(\d+)">(.*?)</tr>', page, re.S)
        assert turns
        for turn, body in turns:
            cells = re.findall(r'<td data-episode="([^"]+)">(.*?)</td>', body, re.S)
            assert [c[0] for c in cells] == [e["episode_id"] for e in eps]
            for e, (_, cell) in zip(eps, cells):
                mine = sorted((c for c in calls if c["episode_id"] == e["episode_id"] and c["turn"] == int(turn)),
                              key=lambda c: c["index"])
                assert re.findall(r'<a class="step[^"]*" href="[^"#]+#call-\d+-\d+">([^<]+)</a>', cell) == \
                    [html.escape(c["tool"]) for c in mine], (e["episode_id"], turn)


def test_a_comparison_of_more_episodes_than_a_page_holds_is_paged(run, tmp_path):
    """An instance played by 2 × COMPARE_COLUMNS + 1 episodes (one played in the run, copied under other
    condition ids): three pages, each of at most COMPARE_COLUMNS columns (the differences between those
    final graphs only), saying how many more there are and linking to the other pages; each episode
    links to the page that shows it."""
    from heuresis.artifacts.schemas import EPISODES
    from heuresis.view.pages import COMPARE_COLUMNS, NotFound

    results = tmp_path / "results"
    shutil.copytree(run, results)
    (family, split, instance), eps = next(iter(_shared_instances(results).items()))
    fields = [f for f in EPISODES.schema.names if f in eps[0]]
    copies = [{**e, "condition_id": f"{e['condition_id']}-x{k}", "episode_id": f"{e['episode_id']}-x{k}"}
              for k in range(2 * COMPARE_COLUMNS + 1 - len(eps)) for e in eps[:1]]
    write_table({f: [r[f] for r in copies] for f in fields}, results / "episodes/copies/shard-000.parquet", EPISODES)
    ids = sorted(e["episode_id"] for e in eps + copies)
    site = Site(results)
    base = f"compare/{family}/{split}/{instance:04d}"
    rels = [f"{base}.html", f"{base}-2.html", f"{base}-3.html"]
    assert [p for p in site.paths() if p.startswith(base)] == rels
    for page_no, rel in enumerate(rels, 1):
        page = site.page(rel).body.decode()
        shown = ids[(page_no - 1) * COMPARE_COLUMNS:page_no * COMPARE_COLUMNS]
        head = re.search(r'<table class="data" id="compare-episodes"><thead>(.*?)</thead>', page, re.S)[1]
        assert re.findall(r'data-episode="([^"]+)"', head) == shown
        differ = re.search(r'id="compare-differ">.*?<tbody>(.*?)</tbody>', page, re.S)[1]
        assert [len(re.findall(r"<td>", r)) for r in re.findall(r"<tr>(.*?)</tr>", differ, re.S)] == [len(shown)] * len(shown)
        pager = re.search(r'<p class="pager" id="compare-pages">(.*?)</p>', page, re.S)[1]
        first = (page_no - 1) * COMPARE_COLUMNS + 1
        assert f"Episodes {first}–{first + len(shown) - 1} of {len(ids)}" in pager
        assert f"{len(ids) - len(shown)} more" in pager
        assert sorted(re.findall(r'href="\.\./\.\./\.\./([^"]+)"', pager)) == sorted(r for r in rels if r != rel)
    for k, eid in enumerate(ids):
        assert f'id="compare-link" href="{"../" * (eid.count("/") + 1)}{rels[k // COMPARE_COLUMNS]}"' in \
            site.page(f"episodes/{eid}.html").body.decode()
    for missing in (f"{base}-1.html", f"{base}-4.html", f"{base}-02.html"):
        with pytest.raises(NotFound):
            site.page(missing)
    # a full page of columns fits a 1,400 px window: nothing scrolls sideways, every condition in words
    from browser import Browser

    _chromium()
    export_site(results, tmp_path / "site", log=lambda m: None)
    with Browser(size=(1400, 800)) as b:
        b.open((tmp_path / "site" / rels[0]).as_uri())
        assert b.errors == [], b.errors
        widths = b.eval("[document.documentElement.scrollWidth, window.innerWidth]")
        assert widths[0] <= widths[1] == 1400, widths
        settings = b.eval("[...document.querySelectorAll('#compare-episodes td.condition .why')].map(e => e.textContent)")
        assert len(settings) == COMPARE_COLUMNS and all("toolbox" in t and "budget" in t for t in settings), settings


def _episode_shards(results: Path, agent: str = "*") -> list[Path]:
    """The episodes' shard files (not their calls and requests) of ``agent``."""
    return [p for p in sorted(results.glob(f"episodes/{agent}/*/*/*/shard-*.parquet"))
            if not p.name.endswith((".calls.parquet", ".requests.parquet"))]


# --- live ------------------------------------------------------------------------------------------------
def test_a_served_index_follows_the_run(run, tmp_path):
    """In chromium, on a served copy of the run with one episode shard not yet written: the run header
    counts the plan's jobs (done when their outputs exist) and each agent's ledger against its cap; the
    shard written into results/ appears in the open page without a reload, the address's filter kept,
    and the header moves (one more job done, the episodes counted, a ledger's settled dollars)."""
    from browser import Browser

    from heuresis.agents.spend import SpendLedger
    from heuresis.view.live import write_plan

    _chromium()
    results = tmp_path / "results"
    shutil.copytree(run, results)
    eps = _episodes(results)
    shard = _episode_shards(results, "shortcut")[0]
    held = tmp_path / "held.parquet"
    shard.rename(held)
    n_shard = pq.read_table(held).num_rows
    outs = [str(p.relative_to(tmp_path)) for p in _episode_shards(results)]
    plan_outputs = [*outs, str(shard.relative_to(tmp_path))]
    write_plan(results / "run/plan.json", [("episodes", [o]) for o in plan_outputs], {"shortcut": 5.0})
    srv = make_server(results, 0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{srv.server_address[1]}/{srv.token}/"
    try:
        status, live = _get(base + "live.json")
        assert status == 200
        header = json.loads(live)["header"]
        assert (header["jobs_done"], header["jobs_planned"]) == (len(outs), len(outs) + 1)
        short = next(a for a in header["agents"] if a["agent"] == "shortcut")
        assert short["episodes"] == sum(e["agent"] == "shortcut" for e in eps) - n_shard and short["cap"] == 5.0
        shortcut = sum(e["agent"] == "shortcut" for e in eps)
        with Browser(size=(1100, 700)) as b:
            b.open(base + "index.html#agent=shortcut")
            assert b.eval("document.querySelectorAll('tr.episode').length") == shortcut - n_shard
            assert f"{len(outs)} of {len(outs) + 1}" in b.eval("document.getElementById('run-header').textContent")
            held.rename(shard)                                   # the job finished
            ledger = SpendLedger(results / "spend", "shortcut", 5.0)
            ledger.settle(ledger.reserve(0.5, "a request"), 0.25)
            b.wait_for(f"document.querySelectorAll('tr.episode').length === {shortcut}",
                       state="document.getElementById('run-header').textContent")
            text = b.eval("document.getElementById('run-header').textContent")
            assert f"{len(outs) + 1} of {len(outs) + 1}" in text
            assert b.eval("location.hash") == "#agent=shortcut"                       # the filter kept
            assert b.eval("document.querySelector('#episodes select[data-key=agent]').value") == "shortcut"
            row = b.eval("[...document.querySelectorAll('#run-agents tr')].map(r => r.textContent)"
                         ".find(t => t.startsWith('shortcut'))")
            assert "0.250" in row and "5.000" in row, row
            assert b.errors == [], b.errors
        _, exported = _get(base + "index.html")
        assert b'data-live="1"' in exported
    finally:
        srv.shutdown()
        srv.server_close()
    export_site(results, tmp_path / "site", log=lambda m: None)        # an export is a snapshot: no polling
    page = (tmp_path / "site/index.html").read_text()
    assert "data-live" not in page and "live.js" not in page and not (tmp_path / "site/live.json").exists()


# --- two runs ------------------------------------------------------------------------------------------
def test_two_runs_side_by_side_pair_their_episodes(run, tmp_path):
    """`heuresis view A B`: run B is run A with the F1 of one shard's episodes lowered by 0.1, one of
    them failed (no F1), and another shard missing. The pairs, the per-condition means and deltas,
    the failed and unpaired counts are recomputed with pandas; each pair's page shows both
    episodes; the export writes both runs' pages under a/ and b/."""
    import numpy as np
    import pandas as pd

    from heuresis.artifacts.io import read_table
    from heuresis.artifacts.schemas import EPISODES
    from heuresis.view.diff import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, PAIR_KEY, RunDiff

    b = tmp_path / "b" / "results"
    shutil.copytree(run, b)
    shards = _episode_shards(b)
    changed, dropped = shards[0], next(s for s in shards[1:] if s.parent.parent.parent != shards[0].parent.parent.parent)
    t = read_table(changed, EPISODES).to_pylist()
    for k, r in enumerate(t):
        r["f1"] = None if k == 0 else r["f1"] - 0.1
        if k == 0:
            r["status"] = "failed"
    write_table({c: [r[c] for r in t] for c in t[0]}, changed, EPISODES)
    dropped.unlink()
    a_df, b_df = (pd.DataFrame(_episodes(x)) for x in (run, b))
    m = a_df.merge(b_df, on=list(PAIR_KEY), suffixes=("_a", "_b"))
    ok = (m.status_a == "ok") & (m.status_b == "ok") & m.f1_a.notna() & m.f1_b.notna()
    m["delta"] = np.where(ok, m.f1_b - m.f1_a, np.nan)

    diff = RunDiff(run, b)
    pairs = diff.pairs()
    assert len(pairs) == len(m) == len(a_df) - pq.read_table(run / dropped.relative_to(b)).num_rows
    summary = {(r["agent"], r["condition_id"]): r for r in diff.summary()}
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    for (agent, cond), g in m.groupby(["agent", "condition_id"]):
        r, d = summary[(agent, cond)], g.delta.dropna().to_numpy()
        assert r["pairs"] == len(g) and r["scored"] == len(d)
        assert r["failed_b"] == int((g.status_b != "ok").sum()) and r["failed_a"] == int((g.status_a != "ok").sum())
        assert r["delta"] == pytest.approx(d.mean()) and r["f1_a"] == pytest.approx(g.f1_a[g.delta.notna()].mean())
        assert (r["wins"], r["losses"], r["ties"]) == (int((d > 0).sum()), int((d < 0).sum()), int((d == 0).sum()))
        if len(d) >= 2:
            means = d[rng.integers(0, len(d), size=(BOOTSTRAP_RESAMPLES, len(d)))].mean(axis=1)
            assert (r["lo"], r["hi"]) == pytest.approx(tuple(np.percentile(means, [2.5, 97.5])))
    lowered = {(x["agent"], x["condition_id"]) for x in t}
    assert any(summary[k]["delta"] == pytest.approx(-0.1) for k in lowered)
    gone = pd.DataFrame(_episodes(run)).merge(b_df, on=list(PAIR_KEY), how="left", indicator=True)
    only_a = gone[gone._merge == "left_only"].groupby(["agent", "condition_id"]).size()
    assert {k: v["only_a"] for k, v in summary.items() if v["only_a"]} == only_a.to_dict()

    out = tmp_path / "site"
    export_site([run, b], out, log=lambda m: None)
    index = (out / "index.html").read_text()
    assert index.count('<tr class="pair">') == len(m) and index.count('<tr class="diff-summary">') == len(summary)
    p = next(x for x in pairs if x["delta"] is not None)
    page = (out / p["url"]).read_text()
    assert f"a/episodes/{p['eid_a']}.html" in page and f"b/episodes/{p['eid_b']}.html" in page
    for f in re.findall(r'href="(?!data:)([^"#]+)', page):     # every link of a pair's page resolves in the export
        assert (out / p["url"]).parent.joinpath(unquote(f)).resolve().is_file(), f
    assert (out / "a/index.html").is_file() and (out / "b/index.html").is_file()

def test_the_comparison_and_the_two_run_pages_render_in_a_browser(run, tmp_path, browser):
    """In chromium, from the export: an instance's comparison page shows one column per episode of that
    instance (as the episodes table lists them), the view of the run against a copy of itself one pair
    row per episode, and a pair's page both episodes; no script error, nothing blocked."""
    export_site(run, tmp_path / "one", log=lambda m: None)
    (family, split, instance), eps = max(_shared_instances(run).items(), key=lambda kv: len(kv[1]))
    assert len(eps) >= 3                                   # three or more columns side by side
    dom, log = _dump_dom(browser, (tmp_path / "one" / f"compare/{family}/{split}/{instance:04d}.html").as_uri())
    head = re.search(r'<table class="data" id="compare-episodes"><thead>(.*?)</thead>', dom, re.S)[1]
    assert re.findall(r'data-episode="([^"]+)"', head) == sorted(e["episode_id"] for e in eps)
    assert "Uncaught" not in log and "Refused to" not in log, log[-2000:]
    b = tmp_path / "b" / "results"
    shutil.copytree(run, b)
    export_site([run, b], tmp_path / "two", log=lambda m: None)
    dom, log = _dump_dom(browser, (tmp_path / "two" / "index.html").as_uri())
    assert dom.count('<tr class="pair">') == len(_episodes(run))
    assert "Uncaught" not in log and "Refused to" not in log, log[-2000:]
    link = re.search(r'<tr class="pair">.*?<a href="([^"]+)"', dom, re.S)[1]
    page, log = _dump_dom(browser, (tmp_path / "two" / unquote(link)).as_uri())
    shown = {side: re.findall(rf'href="[^"]*\b{side}/episodes/([^"#]+)\.html"', page) for side in "ab"}
    assert shown["a"] and set(shown["a"]) == set(shown["b"]), (link, shown)
    assert {unquote(x) for x in shown["a"]} <= {e["episode_id"] for e in _episodes(run)}
    assert "Uncaught" not in log and "Refused to" not in log, log[-2000:]


def test_three_folders_are_refused_by_name(run, capsys):
    from heuresis.cli import main

    assert main(["view", "--export", "/nonexistent/x", str(run), str(run), "elsewhere"]) == 2
    assert "one results folder or compares two, not 3" in capsys.readouterr().err


def test_the_workflow_writes_its_plan_when_it_starts(tiny_run):
    """The tiny run's plan (written at onstart) names, per rule, the jobs Snakemake's own job stats of that
    run list; after the run every planned job is done."""
    from heuresis.view.live import read_plan, run_header

    plan = read_plan(tiny_run / "results")
    assert plan is not None
    planned: dict[str, int] = {}
    for job in plan["jobs"]:
        planned[job["rule"]] = planned.get(job["rule"], 0) + 1
    stats = re.search(r"Job stats:\n(.*?)\n\n", (tiny_run / "snakemake.log").read_text(), re.S)[1]
    ran = {rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)$", stats, re.M) if rule != "total"}
    assert planned == ran
    header = run_header(tiny_run / "results", [], [])
    assert header["jobs_done"] == header["jobs_planned"] == sum(ran.values())


def test_no_event_loop_outlives_the_browsers():
    """Playwright's sync driver makes its thread count as inside an event loop while it runs: once the last
    browser closes it is stopped, so the tests that a worker runs after these (anyio, asyncio) can run theirs.
    Checked in a process of its own (this module's shared browser is open here)."""
    _chromium()
    script = ("import asyncio, sys\nsys.path.insert(0, sys.argv[1])\nfrom browser import Browser\n"
              "with Browser() as outer:\n    with Browser() as inner:\n        inner.open('data:text/html,<p>i</p>')\n"
              "    outer.open('data:text/html,<p>outer</p>')\n    assert outer.eval('document.body.textContent') == 'outer'\n"
              "print(asyncio.run(asyncio.sleep(0, result='ran')))\n")
    import sys

    out = subprocess.run([sys.executable, "-c", script, str(Path(__file__).parent)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ran", out.stderr[-2000:]


def test_the_front_page_ranks_the_results_and_a_row_opens_its_episodes(run, tmp_path):
    """The leaderboard heads the index: sortable (the sort in the address), and a row's link filters the
    episodes table to that agent and condition."""
    from browser import Browser

    _chromium()
    out = tmp_path / "site"
    export_site(run, out, log=lambda m: None)
    eps = _episodes(run)
    board = pq.read_table(run / "tables/leaderboard.parquet").to_pandas()
    ours = board[(board.block == "this run") & (board.family == "all")]
    with Browser(size=(1400, 800)) as b:
        b.open((out / "index.html").as_uri())
        assert b.errors == [], b.errors
        assert b.eval("document.querySelectorAll('#leaderboard-table tr.leaderboard').length") == len(ours)
        assert b.eval("document.querySelector('figure.board img').naturalWidth") > 0
        b.eval("document.querySelector('#leaderboard-table th.sortable[data-key=delta_r]').click()")
        b.eval("document.querySelector('#leaderboard-table th.sortable[data-key=delta_r]').click()")
        assert b.eval("location.hash") == "#lb.sort=-delta_r"
        best = ours.sort_values("delta_r", ascending=False).iloc[0]
        first = b.eval("[...document.querySelectorAll('#leaderboard-table tr.leaderboard')[0].cells].map(c => c.textContent)")
        assert best.agent in first and best.condition_id.replace("-", "") in "".join(first).replace("-", "")
        b.eval("document.querySelector('#leaderboard-table tr.leaderboard a').click()")
        b.wait_for(f"location.hash.startsWith('#agent={best.agent}&toolbox={best.toolbox}')")
        want = sum(e["agent"] == best.agent and e["condition_id"] == best.condition_id for e in eps)
        b.wait_for(f"document.querySelectorAll('tr.episode').length === {want}")
        assert b.errors == [], b.errors
