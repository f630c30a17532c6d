"""The workflow's plan (heuresis.preflight.plan): the rules' lists and paths, computed by the package."""

import pytest
from snakemake.io import expand as snakemake_expand

from heuresis.artifacts import paths as P
from heuresis.preflight.plan import expand


@pytest.mark.parametrize("patterns, values", [
    (P.TRUTH_GRAPHS, {"family": ["lg", "wild"], "split": ["dev", "test"]}),
    ([P.INSTANCES, P.TRUTH_GRAPHS, P.TRUTH_NODES], {"family": ["anm", "lg", "mixed"], "split": ["dev", "test"]}),
    (P.TRUTH_GRAPHS, {"family": ["lg", "wild"], "split": "test"}),
    (P.LEAKAGE, {"agent": ["gpt", "claude"], "network": ["asia", "cancer", "sachs"]}),
    (P.GAME_REFERENCES, {"scenario": []}),
])
def test_expand_is_snakemakes_in_the_same_order(patterns, values):
    assert expand(patterns, **values) == snakemake_expand(patterns, **values)


#: Snakemake's own dry run, read through its API: per rule, the number of jobs and a digest of every
#: job's first output with its params (what Snakemake compares to decide that a job reruns).
DRY_RUN = r"""
import collections, hashlib, json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, Quietness, ResourceSettings

with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
    wf = api.workflow(resource_settings=ResourceSettings(cores=32), snakefile=Path("Snakefile"), workdir=Path("."),
                      config_settings=ConfigSettings(configfiles=[Path(p) for p in sys.argv[1:]]))
    wf.dag(DAGSettings(targets={"all"})).execute_workflow(executor="local", pseudo_executor="dryrun")
    jobs = collections.defaultdict(list)
    for job in wf._workflow.dag.jobs:
        params = json.dumps(dict(job.params.items()), sort_keys=True, default=str)
        jobs[job.rule.name].append(f"{min(map(str, job.output), default='')} {params}")
print(json.dumps({rule: [len(v), hashlib.sha256("\n".join(sorted(v)).encode()).hexdigest()[:16]]
                  for rule, v in sorted(jobs.items())}, indent=1))
"""


@pytest.mark.parametrize("name, configs", [("quick", ["config/quick.yaml"]), ("paper", [])])
def test_the_plan_equals_the_recorded_dry_run(name, configs, tmp_path):
    """Every rule's jobs and params, as Snakemake's dry run of the small and the paper config plans them, equal
    the recorded ones (tests/data/plan-NAME.json): a change that moves a param, and so reruns paid jobs, fails
    here by rule. After an intended change: ``HEURESIS_RECORD_PLAN=1 python3 -m pytest tests/test_plan.py``."""
    import json
    import os
    import subprocess
    import sys

    from conftest import ROOT
    from tinyflow import copy_workflow

    wd = copy_workflow(tmp_path / "wf")
    env = {**os.environ, **dict.fromkeys(("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "DASHSCOPE_API_KEY"), "dummy")}
    proc = subprocess.run([sys.executable, "-c", DRY_RUN, *configs], cwd=wd, env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    planned = json.loads(proc.stdout)
    golden = ROOT / "tests" / "data" / f"plan-{name}.json"
    if os.environ.get("HEURESIS_RECORD_PLAN"):
        golden.write_text(json.dumps(planned, indent=1) + "\n")
    recorded = json.loads(golden.read_text())
    changed = {rule: {"recorded": recorded.get(rule), "planned": planned.get(rule)}
               for rule in sorted(recorded.keys() | planned.keys()) if recorded.get(rule) != planned.get(rule)}
    assert not changed, (f"rules whose jobs or params differ from the recorded dry run of the {name} config "
                         f"([jobs, digest]): {changed}")
    assert planned["all"][0] == 1 and sum(n for n, _ in planned.values()) > (1000 if name == "paper" else 100)
