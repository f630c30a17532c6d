"""Where README command 1's workflow spends its time: each rule's jobs, wall and CPU time, and the start-up every job pays.

Runs ``snakemake all --cores N --configfile config/quick.yaml`` from scratch in a fresh copy of the
checkout's tracked files (``--runs`` times, each in its own copy), then reads the rules' benchmark files
(``results/benchmarks/``: Snakemake's ``s`` and ``cpu_time`` per job) and prints per rule: jobs,
their summed wall and CPU seconds, the mean wall per job and the share of the run's job time.
Beside it, the fixed cost of one job: a fresh Python process importing ``heuresis`` and the
stage modules the scripts call (the median of five each), and of the workflow itself: ``snakemake
-n`` (reading the workflow and planning the DAG); and the time a perfect schedule of the jobs on
``--cores`` cores would need.

    python benchmarks/first_run.py                 # one run on 2 cores
    python benchmarks/first_run.py --runs 2        # two runs from scratch, side by side
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def fresh_copy(dest: Path) -> Path:
    """The checkout's tracked files (no results, no .snakemake) in ``dest``."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, files):
        src = ROOT / name.decode()
        if src.is_file():
            (dest / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name.decode())
    return dest


def per_rule(results: Path) -> dict[str, dict[str, float]]:
    """Per rule, from the benchmark files: jobs, summed wall (``s``) and CPU (``cpu_time``) seconds, the largest max_rss (MB)."""
    out: dict[str, dict[str, float]] = defaultdict(lambda: {"jobs": 0, "wall": 0.0, "cpu": 0.0, "rss": 0.0})
    for path in sorted((results / "benchmarks").rglob("*.tsv")):
        rows = list(csv.DictReader(path.open(), delimiter="\t"))
        if not rows:
            continue
        row = rows[-1]
        rel = path.relative_to(results / "benchmarks").parts
        rule = "/".join(rel[:2]) if rel[0] in ("games", "analysis") and len(rel) > 2 else rel[0]
        agg = out[rule]
        agg["jobs"] += 1
        agg["wall"] += float(row["s"])
        agg["cpu"] += float(row.get("cpu_time") or 0)
        agg["rss"] = max(agg["rss"], float(row.get("max_rss") or 0))
    return dict(out)


def import_seconds(module: str, repeats: int = 5) -> float:
    """Median wall time of a fresh Python process importing ``module`` (a job's fixed start-up)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", f"import {module}"], check=True, cwd=ROOT)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def one_run(cores: int) -> tuple[float, float, dict[str, dict[str, float]], int]:
    """A fresh copy, its dry run's and its run's wall seconds, its per-rule table and its console's line count."""
    with tempfile.TemporaryDirectory(prefix="heuresis-first-run-") as tmp:
        work = fresh_copy(Path(tmp))
        cmd = [sys.executable, "-m", "snakemake", "all", "--cores", str(cores), "--configfile", "config/quick.yaml"]
        t0 = time.perf_counter()
        subprocess.run([*cmd, "-n", "--quiet", "all"], cwd=work, check=True, capture_output=True)
        dry = time.perf_counter() - t0
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode:
            sys.exit(f"snakemake failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        return dry, wall, per_rule(work / "results"), len(proc.stderr.splitlines())


def main() -> None:
    """Run command 1's workflow ``--runs`` times from scratch and print where its time went."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1, help="runs from scratch, each in a fresh copy")
    ap.add_argument("--cores", type=int, default=2)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores; snakemake all --cores {args.cores} "
          f"--configfile config/quick.yaml")
    runs = [one_run(args.cores) for _ in range(args.runs)]
    for k, (dry, wall, rules, lines) in enumerate(runs):
        jobs = sum(r["jobs"] for r in rules.values())
        job_wall = sum(r["wall"] for r in rules.values())
        cpu = sum(r["cpu"] for r in rules.values())
        print(f"\nrun {k + 1}: workflow {wall:.0f} s for {jobs} jobs with a benchmark file (dry run {dry:.1f} s); "
              f"job wall {job_wall:.0f} s, job CPU {cpu:.0f} s (a perfect {args.cores}-core schedule: "
              f"{job_wall / args.cores:.0f} s); console {lines} lines")
        print("| rule | jobs | wall s | CPU s | wall per job | share of job wall | max RSS MB |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for rule, r in sorted(rules.items(), key=lambda kv: -kv[1]["wall"]):
            print(f"| {rule} | {r['jobs']:.0f} | {r['wall']:.1f} | {r['cpu']:.1f} | {r['wall'] / r['jobs']:.2f} | "
                  f"{r['wall'] / job_wall:.0%} | {r['rss']:.0f} |")
    print("\nA job's fixed start-up: a fresh Python process importing (median of 5)")
    for module in ("heuresis", "heuresis.stages.references", "heuresis.stages.episodes", "heuresis.stages.games.workflow",
                   "heuresis.targets.build"):
        print(f"  {module}: {import_seconds(module):.2f} s")


if __name__ == "__main__":
    main()
