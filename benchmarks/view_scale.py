"""Load times of `heuresis view` on a synthetic run of many episodes, built from a finished run.

The episodes of RESULTS are copied N / len times over into one ``episodes`` table of a new results
folder (each copy under another condition id, its transcript, truth and references those of the
original); one more copy gets a long transcript: the original's conversation followed by TURNS
turns each setting a pair of the working graph (a page with a drawing per turn). Then: the time
to read the run and render the index, the index's size, the time to render an episode page and
the long one, the first comparison page of the instance played by the most episodes, and the view of
the run compared with itself (every episode paired: ``heuresis view A B``); in headless
chromium (the exported pages, median of REPEATS loads), the times the index's script records in
the page itself (``data-drawn-ms``: the episode table drawn and usable;
``data-load-ms``: the page loaded, the summary table drawn too; both from the navigation's start)
and the wall time of loading an episode page less that of an empty page (the browser's start).

    PYTHONPATH=src python benchmarks/view_scale.py RESULTS --episodes 5000 --turns 40
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from heuresis.artifacts.io import read_table, write_table
from heuresis.artifacts.schemas import EPISODES
from heuresis.view import Site, export_site
from heuresis.view.diff import RunDiff

LONG = "long"   # the condition id suffix of the long episode


def synthetic(results: Path, n: int, out: Path, turns: int = 0) -> int:
    """A results folder under ``out`` with ``n`` episodes copied from ``results`` (one of them
    ``turns`` turns longer, when ``turns``); returns the count."""
    for sub in ("truth", "references"):
        (out / sub).symlink_to((results / sub).resolve())
    rows = [r for p in sorted(results.glob("episodes/*/*/*/*/shard-*[0-9].parquet"))
            for r in read_table(p, EPISODES).to_pylist()]
    big = []
    for k in range(n):
        r = dict(rows[k % len(rows)])
        copy = k // len(rows)
        r["transcript"] = str((results.parent / r["transcript"]).resolve())
        r["condition_id"] = f"{r['condition_id']}-x{copy}"
        r["episode_id"] = f"{r['agent']}/{r['condition_id']}/{r['instance_id']}"
        big.append(r)
    if turns:
        r = dict(big[-1])
        r["condition_id"] = f"{r['condition_id']}-{LONG}"
        r["episode_id"] = f"{r['agent']}/{r['condition_id']}/{r['instance_id']}"
        path = out / "transcripts" / f"{LONG}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(_longer(json.loads(Path(r["transcript"]).read_text()), turns)))
        r["transcript"] = str(path)
        big[-1] = r
    write_table({c: [r[c] for r in big] for c in EPISODES.schema.names}, out / "episodes/all/shard-000.parquet", EPISODES)
    return len(big)


def _longer(t: dict, turns: int) -> dict:
    """A transcript with ``turns`` more turns: each an assistant reply with a set_edges call and its result."""
    names = [f"X{k + 1}" for k in range(int(round(len(t["episode"]["graph"]) ** 0.5)))]
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
    last = max((int((m.get("meta") or {}).get("turn", 0)) for m in t["messages"]), default=0)
    for k in range(turns):
        turn, (x, y) = last + 1 + k, pairs[k % len(pairs)]
        args = json.dumps({"changes": [{"x": x, "y": y, "relation": ["none", "->", "--"][k % 3]}]})
        cid = f"long-{k}"
        t["messages"].append({"role": "assistant", "content": f"Turn {turn}: setting {x}, {y}.", "meta": {"turn": turn},
                              "tool_calls": [{"id": cid, "type": "function",
                                              "function": {"name": "set_edges", "arguments": args}}]})
        t["messages"].append({"role": "tool", "tool_call_id": cid, "content": "set 1 pair(s)", "meta": {"turn": turn}})
        t["calls"].append({"turn": turn, "index": 0, "call_id": cid, "tool": "set_edges", "arguments": args,
                           "result": "set 1 pair(s)", "ok": True, "error": "", "details": "{}"})
    return t


def _chromium(url: str, prof: str, dump: bool) -> tuple[float, str]:
    t = time.perf_counter()
    out = subprocess.run([shutil.which("chromium"), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          "--disable-background-networking", "--disable-component-update", "--disable-sync",
                          f"--user-data-dir={prof}", "--virtual-time-budget=10000", "--dump-dom", url],
                         capture_output=True, text=True, check=True, timeout=300).stdout
    return time.perf_counter() - t, out if dump else ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--episodes", type=int, default=5000)
    ap.add_argument("--turns", type=int, default=40, help="turns added to the long episode (0: none)")
    ap.add_argument("--repeats", type=int, default=5, help="browser loads of each page (the median is shown)")
    args = ap.parse_args()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        res = Path(tmp) / "results"
        res.mkdir()
        n = synthetic(args.results, args.episodes, res, args.turns)
        t = time.perf_counter()
        site = Site(res)
        index = site.page("index.html").body
        t_index = time.perf_counter() - t
        eids = list(site.run.episodes)[:: max(1, n // 20)]
        t = time.perf_counter()
        for eid in eids:
            site.page(f"episodes/{eid}.html")
        t_page = (time.perf_counter() - t) / len(eids)
        print(f"{n:,} episodes: read the run and render the index {t_index:.2f} s ({len(index) / 1e6:.2f} MB); "
              f"an episode page {t_page * 1000:.0f} ms (mean of {len(eids)})")
        long = next((e for e in site.run.episodes if e.split("/")[1].endswith(LONG)), None)
        if long:
            t = time.perf_counter()
            body = site.page(f"episodes/{long}.html").body.decode()
            drawings = body.count('<figure class="working"')
            print(f"the episode of {drawings - 1} turns ({drawings} drawings of the working graph): rendered in "
                  f"{(time.perf_counter() - t) * 1000:.0f} ms ({len(body) / 1e6:.2f} MB)")
        groups = site.instances()
        if groups:
            key = max(groups, key=lambda k: len(groups[k]))
            t = time.perf_counter()
            body = site.page(site.compare_path(key)).body
            print(f"the comparison page of the instance played most ({len(groups[key]):,} episodes on "
                  f"{site.compare_pages(key)} pages, {len(groups)} instances compared): its first page rendered in "
                  f"{(time.perf_counter() - t) * 1000:.0f} ms ({len(body) / 1e6:.2f} MB)")
        t = time.perf_counter()
        diff = RunDiff(res, res)            # the run against itself: every episode paired
        body = diff.page("index.html").body
        t_diff = time.perf_counter() - t
        pair = diff.pairs()[0]["url"]
        t = time.perf_counter()
        diff.page(pair)
        print(f"two runs compared ({len(diff.pairs()):,} pairs): read both and render the index {t_diff:.2f} s "
              f"({len(body) / 1e6:.2f} MB); a pair's page {(time.perf_counter() - t) * 1000:.0f} ms")
        if not shutil.which("chromium"):
            return
        site_dir = Path(tmp) / "site"
        export_site(res, site_dir, log=lambda m: None)
        (site_dir / "empty.html").write_text("<!DOCTYPE html><title>empty</title>")
        drawn, loaded, walls = [], [], {"empty": [], "index": [], "episode": [], "long": []}
        pages = {"empty": "empty.html", "index": "index.html", "episode": f"episodes/{eids[0]}.html"}
        if long:
            pages["long"] = f"episodes/{long}.html"
        for _ in range(args.repeats):
            for name, rel in pages.items():
                with tempfile.TemporaryDirectory() as prof:
                    wall, dom = _chromium((site_dir / rel).as_uri(), prof, dump=name == "index")
                walls[name].append(wall)
                if name == "index":
                    m = re.search(r'data-drawn-ms="(\d+)" data-load-ms="(\d+)"', dom)
                    if m is None:
                        raise SystemExit("the index did not record its timings (a script error?)")
                    drawn.append(int(m[1]))
                    loaded.append(int(m[2]))
        med = {k: statistics.median(v) for k, v in walls.items() if v}
        print(f"chromium (median of {args.repeats}): the index's episode table usable after {statistics.median(drawn):.0f} ms, "
              f"the page loaded after {statistics.median(loaded):.0f} ms (from navigation start; all: drawn {drawn}, "
              f"loaded {loaded}); wall time beyond an empty page ({med['empty']:.2f} s): index "
              f"{med['index'] - med['empty']:.2f} s, an episode page {med['episode'] - med['empty']:.2f} s"
              + (f", the long episode {med['long'] - med['empty']:.2f} s" if "long" in med else ""))
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} after")


if __name__ == "__main__":
    main()
