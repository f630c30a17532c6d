"""Fault tolerance: a workflow killed in the middle of each stage and rerun gives the same final
artifacts as an uninterrupted run, nothing lost and nothing duplicated; a truncated or corrupt
artifact is refused by readers and found, removed and rebuilt."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from tinyflow import CONFIG, assert_same_artifacts, copy_workflow, run_snakemake, snakemake_cmd
from tinyflow import CORE_TARGETS as TARGETS

from heuresis.artifacts.io import ArtifactError, read_table
from heuresis.artifacts.schemas import REFERENCES
from heuresis.cli import main

pytestmark = pytest.mark.slow

# kill points, in workflow order: the first file of a stage's log folder appears when a job of
# that stage has started
STAGES = ["logs/instances", "logs/references", "logs/headroom", "logs/tables"]


def _run_until(workdir: Path, marker: str, timeout: float = 600) -> bool:
    """Start the workflow, SIGKILL its whole process group once a job of this run has written a log
    under ``marker``; True if killed."""
    t0 = time.time()
    proc = subprocess.Popen(snakemake_cmd(*TARGETS, "--cores", "2", "--rerun-incomplete", *CONFIG), cwd=workdir,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return False                          # finished before the marker showed up
            if any(p.stat().st_mtime > t0 for p in (workdir / marker).rglob("*.log")):
                time.sleep(0.5)                       # let the job get going
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return True
            time.sleep(0.1)
        raise AssertionError(f"no {marker} after {timeout} s")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def uninterrupted(tiny_run) -> Path:
    return tiny_run


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory) -> tuple[Path, list[str]]:
    wd = copy_workflow(tmp_path_factory.mktemp("killed"))
    killed = []
    for marker in STAGES:
        # a SIGKILLed Snakemake leaves its lock behind: that is what --unlock is for
        run_snakemake(wd, "--unlock", *CONFIG)
        if _run_until(wd, marker):
            killed.append(marker)
    run_snakemake(wd, "--unlock", *CONFIG)
    run_snakemake(wd, *TARGETS, "--cores", "2", "--rerun-incomplete", *CONFIG)
    return wd, killed


def test_killed_in_every_stage_then_rerun_equals_uninterrupted(uninterrupted, interrupted):
    wd, killed = interrupted
    assert killed == STAGES, f"killed only at {killed}"
    assert_same_artifacts(uninterrupted / "results", wd / "results", subset=True)


def test_nothing_lost_nothing_duplicated_nothing_left_over(interrupted, quick_config):
    wd, _ = interrupted
    results = wd / "results"
    shards = sorted(results.glob("references/*/*/*/shard-*.parquet"))
    assert shards
    for shard in shards:
        ids = read_table(shard, REFERENCES).column("instance_id").to_pylist()
        assert len(ids) == len(set(ids)) == 2, (shard, ids)       # n_dev = n_test = 2 in TINY
    leftovers = [p for p in results.rglob("*") if p.name.endswith((".tmp", ".parts")) or ".parts" in p.parts]
    assert leftovers == []
    # every stage's job completed exactly once more: Snakemake sees nothing left to do
    dry = run_snakemake(wd, *TARGETS, "-n", *CONFIG)
    assert "Nothing to be done" in dry.stdout + dry.stderr


def test_truncated_artifact_is_refused_found_removed_and_rebuilt(uninterrupted, tmp_path, capsys, monkeypatch):
    wd = tmp_path / "wf"
    shutil.copytree(uninterrupted, wd, symlinks=True)     # the shared run stays intact (copy2 keeps times)
    monkeypatch.chdir(wd)
    shard = wd / "results/references/pc_kci/lg/test/shard-000.parquet"
    good = pq.read_table(shard).drop_columns(["runtime_s"]).replace_schema_metadata(None)
    data = wd / "results/instances/wild/dev/0001/data.parquet"
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])        # a torn copy
    data.write_bytes(data.read_bytes()[:-40] + b"\0" * 40)                     # corrupted bytes
    with pytest.raises(ArtifactError, match=str(shard)):
        read_table(shard, REFERENCES)

    assert main(["verify-artifacts", str(wd / "results")]) == 1
    out = capsys.readouterr().out
    assert f"DAMAGED {shard}" in out and f"DAMAGED {data}" in out
    # Snakemake judges by times and job metadata, not contents: it would not rebuild the damaged
    # files, only rerun what reads the (newer) shard, and that job refuses it, naming it
    dry = run_snakemake(wd, *TARGETS, "-n", *CONFIG).stdout
    assert "references_" not in dry and "instances " not in dry, dry
    failed = run_snakemake(wd, *TARGETS, "--cores", "2", *CONFIG, check=False)
    assert failed.returncode != 0
    assert "is truncated or corrupt" in failed.stdout + failed.stderr + (wd / "logs/headroom/selection.log").read_text()
    assert main(["verify-artifacts", "--delete", "results"]) == 0
    out = capsys.readouterr().out
    assert not shard.exists() and not (wd / "results/instances/wild/dev").exists()
    # the command it prints names the removed outputs as targets: they and what depends on them rerun
    removed = out.split("snakemake all ", 1)[1].split()
    assert sorted(removed) == ["results/instances/wild/dev", "results/references/pc_kci/lg/test/shard-000.parquet"]
    run_snakemake(wd, *TARGETS, *removed, "--cores", "2", *CONFIG)
    assert pq.read_table(shard).drop_columns(["runtime_s"]).replace_schema_metadata(None).equals(good)
    assert main(["verify-artifacts", "results"]) == 0
    assert_same_artifacts(uninterrupted / "results", wd / "results")


# --- infrastructure failures of episodes: rerunning the target retries exactly those -----------------
FLAKY = """\
episodes:                 # one grid: the shortcut agent, guided and unguided, on lg
  grids:
    flaky: {agents: [shortcut], guided: [true, false], families: [lg]}
  run: [flaky]
"""


def _jobs(dry: str) -> dict[str, int]:
    """Job counts per rule from the 'Job stats' table of a dry run."""
    counts, on = {}, False
    for line in dry.splitlines():
        parts = line.split()
        if parts[:2] == ["job", "count"]:
            on = True
        elif on and len(parts) == 2 and parts[1].isdigit() and parts[0] != "total":
            counts[parts[0]] = int(parts[1])
        elif on and parts[:1] == ["total"]:
            break
    return counts


def _table13_failed(wd: Path, targets: list[str], cfg: dict) -> dict[str, int]:
    """n_failed per condition of Table 13 built from the episode shards (BCA columns are not used there)."""
    import pandas as pd

    from heuresis.stages.analysis.scores import load_episodes, score_episodes
    from heuresis.stages.analysis.tables import table13
    from heuresis.stages.instances import load_truth
    from heuresis.stages.references import load_references

    eps, calls = load_episodes([wd / t for t in targets])
    refs = load_references([wd / "results/references/pc_kci/lg/test/shard-000.parquet"])
    scores = score_episodes(eps, calls, {("lg", "test"): load_truth(wd / "results/truth/lg/test")}, refs,
                            pd.DataFrame(columns=["family", "instance", "method", "f1"]),
                            list(cfg["references"]["algorithms"]))
    numbers, _ = table13(scores, ["lg"], cfg["bootstrap"], ["shortcut"])
    return dict(zip(numbers["condition_id"], numbers["n_failed"]))


def test_failed_episodes_rerun_alone_when_the_same_target_is_built_again(tmp_path):
    import infra_faults

    from heuresis.artifacts.failures import n_failed
    from heuresis.artifacts.schemas import EPISODES
    from heuresis.preflight import load_config
    from heuresis.stages.episodes import episode_jobs

    wd = copy_workflow(tmp_path / "wf")
    (wd / "config/flaky.yaml").write_text(FLAKY)
    config = [*CONFIG, "config/flaky.yaml"]
    cfg = load_config(wd / "config/config.yaml", *(wd / c for c in config[1:]))
    jobs = episode_jobs(cfg)
    targets = [f"results/episodes/{j['agent']}/{j['condition_id']}/{j['family']}/{j['split']}/shard-{j['shard']:03d}"
               ".parquet" for j in jobs]
    assert len(targets) == 2 and cfg["instances"]["n_test"] == 2
    guided = next(t for t in targets if "-guided-" in t)
    unguided = next(t for t in targets if t != guided)
    gid = guided.split("/")[3]
    site, log = infra_faults.sitecustomize(tmp_path / "site"), tmp_path / "invocations.log"
    failing = {f"shortcut/{gid}/lg/test/0001"}

    run_snakemake(wd, *targets, "--cores", "2", *config, env=infra_faults.env(site, failing, log))
    assert sorted(log.read_text().split()) == sorted(f"shortcut/{t.split('/')[3]}/lg/test/{i:04d}"
                                                     for t in targets for i in range(2))
    ep = read_table(wd / guided, EPISODES).to_pandas()
    assert list(ep.status) == ["ok", "failed"] and n_failed(wd / guided) == 1 and n_failed(wd / unguided) == 0
    assert (wd / (guided + ".parts")).is_dir() and not (wd / (unguided + ".parts")).exists()
    assert _table13_failed(wd, targets, cfg) == {gid: 1, unguided.split("/")[3]: 0}

    # the dry run of the same targets lists exactly the job with the failed episode
    dry = run_snakemake(wd, *targets, "-n", *config).stdout
    assert _jobs(dry) == {"episodes": 1}, dry
    outputs = [ln.split(":", 1)[1] for ln in dry.splitlines() if ln.strip().startswith("output:")]
    assert len(outputs) == 1 and guided in outputs[0], dry
    assert "now: 'attempt 2: retry 1 failed episodes'" in dry

    log.write_text("")
    run_snakemake(wd, *targets, "--cores", "2", *config, env=infra_faults.env(site, set(), log))
    assert log.read_text().split() == [f"shortcut/{gid}/lg/test/0001"]     # only the failed episode ran again
    ep2 = read_table(wd / guided, EPISODES).to_pandas()
    assert (ep2.status == "ok").all() and n_failed(wd / guided) == 0
    assert ep2.loc[0, "edges"] == ep.loc[0, "edges"] and not (wd / (guided + ".parts")).exists()
    assert set(_table13_failed(wd, targets, cfg).values()) == {0}
    dry = run_snakemake(wd, *targets, "-n", *config)
    assert "Nothing to be done" in dry.stdout + dry.stderr
