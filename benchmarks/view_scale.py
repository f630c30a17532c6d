"""Load times of `heuresis view` on a synthetic run of many episodes, built from a finished run.

The episodes of RESULTS are copied N / len times over into one ``episodes`` table of a new results
folder (each copy under another condition id, its transcript, truth and references those of the
original), then: the time to read the run and render the index, the index's size, the time to
render an episode page, and the time headless chromium takes to load the index and draw its first
table page, less its time for an empty page (the browser's start).

    PYTHONPATH=src python benchmarks/view_scale.py RESULTS --episodes 5000
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from heuresis.io import read_table, write_table
from heuresis.schemas import EPISODES
from heuresis.view import Site, export_site


def synthetic(results: Path, n: int, out: Path) -> int:
    """A results folder under ``out`` with ``n`` episodes copied from ``results``; returns the count."""
    for sub in ("truth", "references", "transcripts"):
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
    write_table({c: [r[c] for r in big] for c in EPISODES.schema.names}, out / "episodes/all/shard-000.parquet", EPISODES)
    return len(big)


def chromium_seconds(url: str) -> float:
    exe = shutil.which("chromium")
    with tempfile.TemporaryDirectory() as prof:
        t = time.perf_counter()
        subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        f"--user-data-dir={prof}", "--dump-dom", url], capture_output=True, check=True, timeout=300)
        return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--episodes", type=int, default=5000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        res = Path(tmp) / "results"
        res.mkdir()
        n = synthetic(args.results, args.episodes, res)
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
        if shutil.which("chromium"):
            site_dir = Path(tmp) / "site"
            export_site(res, site_dir, log=lambda m: None)
            (site_dir / "empty.html").write_text("<!DOCTYPE html><title>empty</title>")
            base = chromium_seconds((site_dir / "empty.html").as_uri())
            full = chromium_seconds((site_dir / "index.html").as_uri())
            ep = chromium_seconds((site_dir / f"episodes/{eids[0]}.html").as_uri())
            print(f"chromium: the index loaded and its first table page drawn in {full - base:.2f} s, an episode "
                  f"page in {ep - base:.2f} s (beyond {base:.2f} s for an empty page)")


if __name__ == "__main__":
    main()
