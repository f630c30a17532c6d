"""The workflow on a real (single-node) SLURM cluster gives the same artifacts as a local run.

The fixture brings up slurmctld + slurmd + munged on this machine with tests/cluster/slurm_up.sh
(Debian's slurm-wlm and munge, root; .ci/run installs them) and stops exactly those daemons
afterwards.  Without them the tests are skipped, saying why, except in CI (CI=true), where
that is a failure.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess

import pytest
import yaml
from conftest import ROOT
from tinyflow import CONFIG, CORE_TARGETS, assert_same_artifacts, copy_workflow, run_snakemake

pytestmark = pytest.mark.slow

UP, DOWN = ROOT / "tests/cluster/slurm_up.sh", ROOT / "tests/cluster/slurm_down.sh"
SLURM_ARGS = ["--profile", "workflow/profiles/slurm", "--cores", "2", "--jobs", "4",
              "--slurm-status-command", "squeue",            # no accounting database here
              "--slurm-init-seconds-before-status-checks", "2",
              "--slurm-no-account", "--latency-wait", "5"]


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "SLURM test cluster needs root (slurmd)"
    missing = [b for b in ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue") if not shutil.which(b)]
    if missing:
        return f"SLURM test cluster needs Debian's slurm-wlm and munge (missing {', '.join(missing)})"
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        return "snakemake-executor-plugin-slurm is not installed (pip install -e '.[test]')"
    return None


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """SLURM_CONF of a running single-node cluster; daemons this fixture started are stopped after."""
    reason = _why_not()
    if reason and os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; .ci/run installs them, so in CI this is an error")
    if reason:
        pytest.skip(reason)
    env = {**os.environ, "HEURESIS_SLURM_DIR": os.environ.get("HEURESIS_SLURM_DIR", "/tmp/heuresis-slurm")}
    proc = subprocess.run(["bash", str(UP)], capture_output=True, text=True, env=env, timeout=120)
    if proc.returncode != 0:
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)(
            f"SLURM test cluster did not come up: {proc.stderr.strip()[-1500:]}")
    started_here = "already running" not in proc.stderr
    conf = proc.stdout.strip().split("=", 1)[1]
    yield conf
    if started_here:
        subprocess.run(["bash", str(DOWN)], env=env, timeout=120, check=False)


# First the test that needs no tiny run: it waits on SLURM while the tiny run (a shared fixture) is built.
def test_job_killed_by_time_limit_is_reported_with_rule_wildcards_and_log(slurm, tmp_path):
    """A job SLURM kills (here: its time limit) fails the run naming rule, wildcards and logs."""
    (tmp_path / "Snakefile").write_text(
        "rule slow:\n"
        "    output: 'out/{name}.txt'\n"
        "    log: 'logs/slow/{name}.log'\n"
        "    resources: runtime=1, mem_mb=100\n"
        "    shell: 'echo start > {log}; sleep 300; touch {output}'\n")
    args = [str(ROOT / a) if a == "workflow/profiles/slurm" else a for a in SLURM_ARGS]
    proc = run_snakemake(tmp_path, "out/sleepy.txt", *args, "--retries", "0", env={"SLURM_CONF": slurm},
                         timeout=600, check=False)
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "Error in rule slow" in log, log[-3000:]
    assert "TIMEOUT" in log, log[-3000:]
    assert "wildcards: name=sleepy" in log
    assert "logs/slow/sleepy.log" in log and ".snakemake/slurm_logs/rule_slow/sleepy/" in log


# Every submission costs the plugin's 5 s pause and a status poll that backs off while nothing
# finishes, so the run goes to SLURM as three group jobs, one per stage: the instance jobs (the
# profile's group), the reference runs of the tiny config together with headroom (12 jobs of
# seconds each and the one that reads them all), and the paper targets (the profile's group). Each
# stage still runs under SLURM from its own job script and reads the previous stage's files.
# A --group-components on the command line replaces the profile's whole list, so the profile's
# entries are repeated here from the profile itself.
PROFILE_GROUP_COMPONENTS = [f"{g}={n}" for g, n in yaml.safe_load(
    (ROOT / "workflow/profiles/slurm/config.yaml").read_text())["group-components"].items()]
STAGES_GROUPED = ["--groups", "references_pc_fisherz=test_references", "headroom=test_references",
                  "--group-components", *PROFILE_GROUP_COMPONENTS, "test_references=1"]


def test_slurm_run_equals_local_run(slurm, tiny_run, tmp_path_factory):
    wd = copy_workflow(tmp_path_factory.mktemp("slurm"))
    proc = run_snakemake(wd, *CORE_TARGETS, *SLURM_ARGS, *STAGES_GROUPED, *CONFIG, env={"SLURM_CONF": slurm},
                         timeout=1500)
    log = proc.stdout + proc.stderr
    submitted = [line for line in log.splitlines() if "submitted with SLURM jobid" in line]
    # one group job per stage, not one job each
    assert [sum(f"slurm_logs/group_{g}_" in line for line in submitted) for g in ("instances", "test_references",
                                                                              "targets")] == [1, 1, 1], log[-3000:]
    assert len(submitted) == 3 and log.count("rule_instances") == 0, log[-3000:]
    n = assert_same_artifacts(tiny_run / "results", wd / "results", subset=True)
    assert n > 20


RUNTIME_OVERLAY = """\
agents:
  local: {kind: llm, model: openai/scripted-model, api_base: 'http://127.0.0.1:9/v1', requires_key: false,
          timeout_s: 40, prices: {input_per_mtok: 1.0, output_per_mtok: 2.0}}
episodes:
  budgets:
    long: {test_units_factor: 1.0, turns: 5, output_tokens_per_turn: 4000, algorithm_calls: 10, wall_seconds: 1000}
  grids:
    llm: {agents: [local, shortcut], guided: [true], budget: [standard, long], last_turn: [none, retry],
          families: [lg]}
  run: [llm]
leakage: {agents: [local], networks: [cancer], repeats: 2}
"""


def test_model_calling_jobs_ask_for_their_conditions_wall_time(tmp_path):
    """A model-calling job's runtime (what sbatch gets as --time) is its episodes' wall budgets plus
    the last turn's requests (each at most timeout_s), times 1.5, plus 15 minutes; an offline
    baseline's job 120 minutes; a leakage job its requests times timeout_s likewise."""
    import math
    import re

    wf = copy_workflow(tmp_path / "wf")
    (wf / "config" / "runtime.yaml").write_text(RUNTIME_OVERLAY)
    targets = [f"results/episodes/{a}/full-guided-p0-none-{b}-{t}-r0/lg/test/shard-000.parquet"
               for a in ("local", "shortcut") for b in ("standard", "long") for t in ("none", "retry")]
    proc = run_snakemake(wf, *targets, "results/leakage/local/cancer.parquet", "-n", "--cores", "1",
                         "--configfile", "config/quick.yaml", "config/runtime.yaml")
    asked = {}
    for block in re.split(r"\n(?=rule |localrule )", proc.stdout + proc.stderr):
        out = re.search(r"output: (results/(?:episodes|leakage)/\S+?\.parquet)", block)
        res = re.search(r"runtime=(\d+)", block)
        if out and res:
            asked[out.group(1)] = int(res.group(1))
    n = 3                                               # quick.yaml: three test instances, one shard
    wall = {"standard": 600, "long": 1000}              # quick.yaml's standard budget, the overlay's long one
    for a in ("local", "shortcut"):
        for b in ("standard", "long"):
            for t, last in (("none", 0), ("retry", 2)):
                path = f"results/episodes/{a}/full-guided-p0-none-{b}-{t}-r0/lg/test/shard-000.parquet"
                want = math.ceil(n * (wall[b] + last * 40) * 1.5 / 60) + 15 if a == "local" else 120
                assert asked[path] == want, (path, asked)
    assert asked["results/leakage/local/cancer.parquet"] == math.ceil(2 * 2 * 40 * 1.5 / 60) + 15


def test_fatal_provider_error_is_not_resubmitted_and_stops_the_run(slurm, tiny_run, tmp_path):
    """A refused key on the SLURM profile (its `retries: 1`): the episode job that met it fails after one
    request and is not resubmitted, no further model-calling job is submitted, the stop record is written."""
    import json

    from llm_server import ScriptedLLMServer

    wd = tmp_path / "wf"
    shutil.copytree(tiny_run, wd, symlinks=True)
    refusal = {"status": 401, "error": "Incorrect API key provided: sk-bad***1234"}
    with ScriptedLLMServer([refusal] * 10) as server:
        (wd / "config" / "paid.yaml").write_text(json.dumps({
            "agents": {"paid": {"kind": "llm", "model": "openai/scripted-model", "api_base": f"{server.url}/v1",
                                "requires_key": False, "prices": {"input_per_mtok": 1.0, "output_per_mtok": 4.0}}},
            "episodes": {"grids": {"paid": {"agents": ["paid"], "guided": [True], "prompt_level": [0, 1, 2],
                                            "families": ["lg"]}}, "run": ["paid"]}}))
        targets = [f"results/episodes/paid/full-guided-p{p}-none-standard-once-r0/lg/test/shard-000.parquet"
                   for p in (0, 1, 2)]
        proc = run_snakemake(wd, *targets, *SLURM_ARGS, "--resources", "llm_openai=1", *CONFIG, "config/paid.yaml",
                             env={"SLURM_CONF": slurm}, timeout=900, check=False)
        sent = len(server.requests)
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, log[-3000:]
    assert log.count("submitted with SLURM jobid") == 1, log[-4000:]      # not resubmitted, nothing after it
    assert sent == 1, sent
    assert "Error in rule episodes" in log and "paid" in log, log[-3000:]
    stop = json.loads((wd / "results/spend/stopped/paid.json").read_text())
    assert stop["agent"] == "paid" and "invalid key" in stop["reason"] and "sk-bad" not in stop["reason"], stop
    assert not any((wd / t).exists() for t in targets)
