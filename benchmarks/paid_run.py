"""A paid run under provider faults, killed and resumed, against the same run without faults.

Scripted LLM episodes go through the workflow (``snakemake`` on a copy of it, the small config
with one LLM agent on ``--episodes`` episodes: ``--conditions`` conditions x the lg test
instances) against the scripted server of ``tests/llm_server.py`` on 127.0.0.1, twice:

1. **clean**: no faults;
2. **faulty**: about ``--rate-limits`` of the attempts answered 429 (with ``Retry-After``),
   ``--server-errors`` 500, each failed attempt delayed by a random latency; the workflow is
   killed (its whole process group, SIGKILL) once ``--kill-at`` of the needed replies were
   sent, then resumed with the same command.

Prints one JSON object: requests needed (the clean run's), requests sent and successful replies
in the faulty run (only failed attempts may be extra: a successful reply sent twice would be paid
twice — the only ones are replies the server had sent but the killed job had not yet stored,
counted as ``replies_in_flight_at_kill``), the peak of concurrent requests the server saw, and
whether every episode's outcome (status, termination, exhausted limit, turns, graph, F1) is the
same in both runs.

    PYTHONPATH=src python benchmarks/paid_run.py --instances 12   # 192 episodes
    PYTHONPATH=src python benchmarks/paid_run.py --instances 2    # 32 episodes, a few minutes
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from llm_server import Conversations, ScriptedLLMServer  # noqa: E402

OUTCOME = ["episode_id", "status", "termination", "exhausted", "turns", "edges", "f1", "finished"]


def conversation(_prompt: str) -> list[dict]:
    """Four turns: look, test, edit, submit."""
    return [{"tool_calls": [("view_graph", {})], "usage": (400, 10)},
            {"tool_calls": [("ci_test", {"x": "X1", "y": "X2", "given": [], "test": "fisherz"})], "usage": (450, 15)},
            {"tool_calls": [("set_edges", {"changes": [{"x": "X1", "y": "X3", "relation": "none"}]})],
             "usage": (480, 12)},
            {"tool_calls": [("submit", {"edges": ["X1 -> X2", "X2 -- X4"]})], "usage": (500, 20)}]


def overlay(url: str, instances: int) -> dict:
    """The small config's overlay: lg test instances, PC-KCI's references only, one LLM grid."""
    return {
        "instances": {"d": 5, "n": 200, "n_test": instances},
        "references": {"batches": [["pc_kci"], ["pc_fisherz", "fci", "ges", "direct_lingam", "resit", "notears",
                                                "router"]]},
        "agents": {"paid": {"kind": "llm", "model": "openai/scripted-model", "api_base": f"{url}/v1",
                            "requires_key": False, "timeout_s": 30,
                            "prices": {"input_per_mtok": 3.0, "output_per_mtok": 15.0},
                            "retries": {"max_retries": 8, "base_s": 0.05, "max_s": 1.0}}},
        "episodes": {"shard_size": 64, "grids": {"paid": {
            "agents": ["paid"], "guided": [True, False], "prompt_level": [0, 1, 2, 3], "target": ["none", "dag"],
            "families": ["lg"], "split": "test"}}, "run": ["paid"]},
    }


def workdir(base: Path, name: str, url: str, instances: int) -> Path:
    wd = base / name
    wd.mkdir(parents=True)
    for item in ("Snakefile", "rules", "workflow", "config", "environment.yml"):
        src = ROOT / item
        (shutil.copytree if src.is_dir() else shutil.copy)(src, wd / item)
    (wd / "config" / "bench.yaml").write_text(json.dumps(overlay(url, instances)))
    return wd


def targets(wd: Path) -> list[str]:
    from heuresis.config.loading import merge_configs, read_config_file
    from heuresis.preflight import validate_config
    from heuresis.stages.episodes import episode_jobs

    cfg: dict = {}
    for name in ("config.yaml", "quick.yaml", "bench.yaml"):
        cfg = merge_configs(cfg, read_config_file(wd / "config" / name))
    cfg = validate_config(cfg)
    return [f"results/episodes/{j['agent']}/{j['condition_id']}/{j['family']}/{j['split']}/shard-{j['shard']:03d}.parquet"
            for j in episode_jobs(cfg)]


def snakemake(wd: Path, outs: list[str], cores: int, cap: int = 0) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "snakemake", *outs, "--cores", str(cores), "--rerun-incomplete", "--quiet",
           "--configfile", "config/quick.yaml", "config/bench.yaml"]
    if cap:   # the provider's limit (heuresis.harness.agent_spec.provider_resource of openai/...)
        cmd += ["--resources", f"llm_openai={cap}"]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.Popen(cmd, cwd=wd, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=open(wd / "snakemake.err", "a"))


def build_inputs(wd: Path, outs: list[str], cores: int) -> None:
    """Instances and PC-KCI's references (no model request) before the timed part."""
    pc = sorted({"results/references/pc_kci/lg/test/shard-000.parquet"})
    proc = snakemake(wd, pc, cores)
    if proc.wait() != 0:
        raise SystemExit(f"building the inputs failed: {(wd / 'snakemake.err').read_text()[-3000:]}")


def episodes(wd: Path, outs: list[str]):
    import pandas as pd

    from heuresis.artifacts.io import read_table
    from heuresis.artifacts.schemas import EPISODES, REQUESTS

    ep = pd.concat([read_table(wd / o, EPISODES).to_pandas() for o in outs]).sort_values("episode_id")
    req = pd.concat([read_table(wd / o.replace(".parquet", ".requests.parquet"), REQUESTS).to_pandas() for o in outs])
    return ep, req


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--instances", type=int, default=16, help="lg test instances (x 16 conditions = episodes)")
    p.add_argument("--rate-limits", type=float, default=0.20)
    p.add_argument("--server-errors", type=float, default=0.05)
    p.add_argument("--kill-at", type=float, default=0.4, help="share of the needed replies sent before the kill")
    p.add_argument("--cores", type=int, default=3)
    p.add_argument("--cap", type=int, default=2, help="the provider's concurrency limit (resource llm_openai)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    base = Path(tempfile.mkdtemp(prefix="heuresis-paid-run."))
    result: dict = {"episodes": a.instances * 16, "provider_cap": a.cap}

    with ScriptedLLMServer(Conversations(conversation)) as server:
        wd = workdir(base, "clean", server.url, a.instances)
        outs = targets(wd)
        build_inputs(wd, outs, a.cores)
        t0 = time.time()
        if snakemake(wd, outs, a.cores, a.cap).wait() != 0:
            raise SystemExit((wd / "snakemake.err").read_text()[-3000:])
        result["clean_s"] = round(time.time() - t0, 1)
        needed = len(server.replies)
        result.update(requests_needed=needed, clean_peak_concurrency=server.max_in_flight)
    clean, _ = episodes(wd, outs)

    faults = Conversations(conversation, faults={429: a.rate_limits, 500: a.server_errors}, seed=a.seed,
                           retry_after=0.2, latency=(0.05, 0.5))
    with ScriptedLLMServer(faults) as server:
        wd = workdir(base, "faulty", server.url, a.instances)
        build_inputs(wd, outs, a.cores)
        t0 = time.time()
        proc = snakemake(wd, outs, a.cores, a.cap)
        while proc.poll() is None and len(server.replies) < a.kill_at * needed:
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        killed_at = len(server.replies)
        logged = sum(1 for log in (wd / "results" / "transcripts").rglob("*.requests.jsonl")
                     for line in log.read_text().splitlines() if '"status": "ok"' in line)
        subprocess.run([sys.executable, "-m", "snakemake", "--unlock", "--cores", "1", "--configfile",
                        "config/quick.yaml", "config/bench.yaml"], cwd=wd, capture_output=True)
        if snakemake(wd, outs, a.cores, a.cap).wait() != 0:
            raise SystemExit((wd / "snakemake.err").read_text()[-3000:])
        result["faulty_s"] = round(time.time() - t0, 1)
        result.update(killed_after_replies=killed_at, replies_in_flight_at_kill=killed_at - logged,
                      requests_sent=len(server.requests),
                      failed_attempts=len(server.requests) - len(server.replies),
                      successful_replies=len(server.replies),
                      successful_sent_twice=len(server.replies) - needed,
                      faulty_peak_concurrency=server.max_in_flight)
    faulty, req = episodes(wd, outs)
    result["replayed_requests"] = int(req.replayed.sum())
    result["episodes_identical"] = bool(clean[OUTCOME].reset_index(drop=True).equals(
        faulty[OUTCOME].reset_index(drop=True)))
    result["working_s_max"] = float(faulty.working_s.max())
    result["wall_s_max"] = float(faulty.wall_s.max())
    print(json.dumps(result))
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
