"""The tiny workflow run by the cluster and fault tests: copy, run, and compare artifacts.

`TARGETS` covers the stages that compute benchmark numbers (instances, references, headroom,
episodes, analysis, paper targets); artifacts are compared by content, ignoring what legitimately differs between
two runs of the same code and config: wall-clock columns and the provenance fields that record
when, where and how a file was made (times, host, command, and input digests, which cover those
times too).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from conftest import ROOT
from llm_server import CLOCK

TINY = """\
# the small config made smaller still, so that the whole workflow runs in a test
instances: {d: 5, n: 200, n_dev: 2, n_test: 2}
bootstrap: {resamples: 200}
saturation: {networks: [cancer, asia], n: 100, datasets: 2}
verification:
  scale: tiny
  scales:
    tiny:
      dsep: {dags: 20, queries: 5, d: [3, 6]}
      cpdag_bruteforce: {max_d: 4}
      cpdag_causallearn: {dags: 20, d: [2, 6]}
      oracle_pc: {dags: 10, d: [3, 6]}
      pc_vs_causallearn: {fisherz: 1, kci: 1}
      shd_gadjid: {pairs: 50, d: [2, 8]}
      kci_causallearn: {instances: 1, tests: 2, max_cond: 2}
      invariance_no_repair: {instances: 1}
      invariance_relabel: {instances: 1, dags: 10, d: [3, 6]}
      determinism: {instances: 1, kci_tests: 2, thread_counts: [1, 2], hash_seeds: [0, 1]}
episodes:                 # every analysis table gets content from 10 short jobs on one family
  budgets:
    one_turn: {test_units_factor: 1.0, turns: 1, output_tokens_per_turn: 4000, algorithm_calls: 10, wall_seconds: 600}
  grids:
    tiny: {agents: [shortcut, merge], guided: [true, false], families: [lg]}
    tiny_toolbox: {agents: [evidence], toolbox: [full, minimal], guided: [true], families: [lg]}
    tiny_prompts: {agents: [shortcut], guided: [true], target: [none, dag], families: [lg]}
    tiny_budgets: {agents: [shortcut], guided: [true], budget: [one_turn], last_turn: [none, once, retry],
                   families: [lg]}
  run: [tiny, tiny_toolbox, tiny_prompts, tiny_budgets]
games:                      # two scenarios, two offline players, one play, references on two fleets
  test_variants: {count: 0}
  scenarios: [antenna_trap, deployment_zone_trap_categorical]
  ablations: []
  agents: [game_random, game_trap_follower]
  plays: 1
  baseline_plays: 1
  search: {verify_fleets: 2}
"""
CONFIG = ["--configfile", "config/quick.yaml", "config/tiny.yaml"]
ANALYSIS_TABLES = ["table4", "table6", "table7", "table8", "table9", "table10", "table12", "table13"]
ANALYSIS_FIGURES = ["figure6", "figure7a", "figure7b", "figure9"]
# the stages that compute the benchmark's reference numbers: what the cluster and fault tests rerun
CORE_TARGETS = ["results/tables/table2.parquet", "results/tables/table3.parquet", "results/tables/table11.parquet",
                "results/figures/figure1c.png"]
# the shared tiny run builds everything (rule all); the tests of each stage read its outputs
TARGETS = ["all"]
VOLATILE_COLUMNS = {"runtime_s", "wall_s"}
# the budgets line appended to every tool result shows the wall time left, in whole seconds: CLOCK masks it
VOLATILE_PROVENANCE = {"started", "finished", "host", "command", "launched_by", "inputs"}
# floats are compared to 1e-9 relative (see _assert_close); everything else exactly


def copy_workflow(dest: Path) -> Path:
    """A copy of the workflow (not of results) in ``dest``, plus config/tiny.yaml."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("Snakefile", "rules", "workflow", "config", "environment.yml"):
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, symlinks=True)
        else:
            shutil.copy(src, dest / name)
    (dest / "config" / "tiny.yaml").write_text(TINY)
    return dest


def snakemake_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", *args]


def run_snakemake(workdir: Path, *args: str, env: dict | None = None, timeout: int = 900,
                  check: bool = True) -> subprocess.CompletedProcess:
    cmd = snakemake_cmd(*args)
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n"
                             f"{proc.stderr[-4000:]}")
    return proc


def _strip_provenance(meta: dict[bytes, bytes]) -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in meta.items():
        key = k.decode()
        if key.startswith("ARROW:") or key == "pandas":
            continue
        if key == "heuresis.provenance":
            rec = json.loads(v)
            out[key] = {f: x for f, x in rec.items() if f not in VOLATILE_PROVENANCE}
            out[key + ".inputs"] = sorted(rec.get("inputs", {}))      # which inputs, not their digests
        else:
            out[key] = v.decode(errors="replace")
    return out


def artifact_contents(results: Path) -> dict[str, tuple]:
    """Every Parquet artifact under ``results``: (table without volatile columns, stable metadata)."""
    out = {}
    for p in sorted(results.rglob("*.parquet")):
        if "benchmarks" in p.parts:
            continue
        table = pq.read_table(p)
        keep = [c for c in table.column_names if c not in VOLATILE_COLUMNS]
        if "result" in keep and pa.types.is_string(table.schema.field("result").type):
            k = table.column_names.index("result")
            table = table.set_column(k, "result", pc.replace_substring_regex(table["result"], *CLOCK))
        meta = _strip_provenance(table.schema.metadata or {})
        out[str(p.relative_to(results))] = (table.select(keep).replace_schema_metadata(None), meta)
    return out


def assert_same_artifacts(a: Path, b: Path, *, subset: bool = False) -> int:
    """The Parquet artifacts under two results folders hold the same data; returns their count.

    With ``subset``, ``b`` may hold fewer artifacts (a run of fewer targets): each one it holds
    must be in ``a`` with the same data.
    """
    ca, cb = artifact_contents(a), artifact_contents(b)
    if subset:
        assert set(cb) <= set(ca), sorted(set(cb) - set(ca))
        ca = {k: ca[k] for k in cb}
    assert sorted(ca) == sorted(cb), (sorted(set(ca) ^ set(cb)))
    for rel in ca:
        ta, ma = ca[rel]
        tb, mb = cb[rel]
        assert ta.schema == tb.schema, rel
        if not ta.equals(tb):
            _assert_close(ta.to_pylist(), tb.to_pylist(), rel)
        assert ma == mb, f"{rel}: metadata differ"
    return len(ca)


def _assert_close(a, b, where: str) -> None:
    """Equal, except floats may differ in the last bits (rel. 1e-9): KCI p-values computed in two
    processes can differ by one ulp (BLAS reduction order); every discrete result must be equal."""
    if isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b)), \
            f"{where}: {a!r} != {b!r}"
    elif isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), f"{where}: keys {sorted(a)} != {sorted(b)}"
        for k in a:
            _assert_close(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), f"{where}: {len(a)} != {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_close(x, y, f"{where}[{i}]")
    elif isinstance(a, str) and isinstance(b, str) and a != b and a[:1] in "{[" and b[:1] in "{[":
        _assert_close(json.loads(a), json.loads(b), where)   # JSON details hold p-values too
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"
