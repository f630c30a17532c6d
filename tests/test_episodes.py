"""The episode sweep: tables and transcripts, resume after a kill, failures recorded."""

import copy
import json

import pytest
from conftest import small_lg_split

from heuresis.artifacts.io import read_table
from heuresis.artifacts.schemas import CALLS, EPISODES
from heuresis.harness.budgets import normalize_clock
from heuresis.stages.episodes import run_episode_shard

COND = "full-guided-p0-none-standard-once-r0"


@pytest.fixture(scope="module")
def small(quick_config, tmp_path_factory):
    """4 lg test instances (d = 5, n = 200) with their pc_kci references."""
    return small_lg_split(quick_config, tmp_path_factory.mktemp("episodes"), 4)


def _run(small, out_name, agent="shortcut", spec=None, cond=COND, **kw):
    cfg, root = small["cfg"], small["root"]
    out = root / "episodes" / out_name / "shard-000.parquet"
    return run_episode_shard(agent, spec or {"kind": agent}, cond, "lg", "test", [0, 1, 2, 3],
                             data_dir=small["data"], truth_dir=small["truth"], pc_kci_paths=[small["ref"]],
                             episodes_cfg=cfg["episodes"], menu=cfg["references"]["algorithms"],
                             grades=cfg["grades"], seed=cfg["seed"], out=out,
                             calls_out=out.with_name("shard-000.calls.parquet"),
                             requests_out=out.with_name("shard-000.requests.parquet"),
                             transcripts_dir=root / "transcripts" / out_name, **kw)


def test_tables_and_transcripts(small):
    out = _run(small, "plain")
    ep = read_table(out, EPISODES).to_pandas()
    calls = read_table(out.with_name("shard-000.calls.parquet"), CALLS).to_pandas()
    assert list(ep.instance) == [0, 1, 2, 3] and ep.finished.all() and (ep.status == "ok").all()
    assert (ep.f1 == ep.pc_kci_f1).all()          # the shortcut agent submits PC-KCI's output
    assert set(calls.tool) == {"run_algorithm", "submit"} and len(calls) == 8
    tr = json.loads((small["root"] / "transcripts/plain/0002.json").read_text())
    call = tr["calls"][0]
    assert {"arguments", "result", "test_units", "wall_s"} <= set(call)
    assert json.loads(call["arguments"])["algorithm"] in tr["algorithm_map"]
    assert tr["algorithm_map"][json.loads(call["arguments"])["algorithm"]] == "pc_kci"
    assert [m["role"] for m in tr["messages"]][:3] == ["system", "user", "assistant"]
    assert "wrong" not in json.dumps(tr["deletion_log_shown"])


class Killed(BaseException):
    """Stands for SIGKILL: not an Exception, so nothing inside the sweep can catch it."""


def test_killed_sweep_resumes_to_the_same_episodes(small):
    done = []

    def die_after_two(i):
        done.append(i)
        if len(done) == 2:
            raise Killed

    with pytest.raises(Killed):
        _run(small, "killed", after_episode=die_after_two)
    out = small["root"] / "episodes/killed/shard-000.parquet"
    assert not out.exists()
    first = {i: (small["root"] / f"transcripts/killed/{i:04d}.json").stat().st_mtime_ns for i in done}
    redone = []
    _run(small, "killed", after_episode=redone.append)
    assert sorted(redone) == [2, 3]               # finished episodes are not redone
    ep = read_table(out, EPISODES).to_pandas()
    assert sorted(ep.instance) == [0, 1, 2, 3] and ep.episode_id.is_unique
    assert all((small["root"] / f"transcripts/killed/{i:04d}.json").stat().st_mtime_ns == t for i, t in first.items())
    ref = read_table(_run(small, "reference"), EPISODES).to_pandas()
    assert list(ep.edges) == list(ref.edges) and list(ep.seed) == list(ref.seed)
    assert not out.with_name("shard-000.parquet.parts").exists()
    # each conversation is the same as without the kill, tool-call ids included (the budgets line's clock and
    # each message's measured times aside)
    for i in range(4):
        convo = [normalize_clock(json.dumps([{k: v for k, v in m.items() if k != "meta"} for m in json.loads(
            (small["root"] / f"transcripts/{run}/{i:04d}.json").read_text())["messages"]])) for run in ("killed", "reference")]
        assert convo[0] == convo[1] and '"call_0"' in convo[0], i


def test_a_crashing_agent_is_recorded_failed(small):
    # the merge agent asked for an algorithm missing from the menu crashes in its first turn
    menu_without_pc = {k: v for k, v in small["cfg"]["references"]["algorithms"].items() if k != "pc_kci"}
    cfg = copy.deepcopy(small["cfg"])
    cfg["references"]["algorithms"] = menu_without_pc
    out = _run(dict(small, cfg=cfg), "crash", agent="shortcut")
    ep = read_table(out, EPISODES).to_pandas()
    assert (ep.status == "failed").all() and ep.error.str.contains("not on the menu").all()
    assert (~ep.finished).all() and (ep.termination == "failed").all()


def test_infrastructure_failures_are_written_flagged_and_retried_alone(small, monkeypatch):
    """Episodes whose model calls fail for good: written with status failed and counted in the
    metadata, the finished ones kept in the checkpoint; the rerun retries only the failed ones."""
    import infra_faults

    from heuresis.artifacts.failures import ATTEMPT_KEY, FIRST_ATTEMPT, N_FAILED_KEY, attempt_file, attempt_param, n_failed
    from heuresis.artifacts.io import read_metadata

    ids = [f"shortcut/{COND}/lg/test/{i:04d}" for i in range(4)]
    log = small["root"] / "flaky.log"
    out = small["root"] / "episodes/flaky/shard-000.parquet"
    infra_faults.install({ids[1], ids[3]}, log, monkeypatch.setattr)
    _run(small, "flaky", attempt=attempt_param(out))
    ep = read_table(out, EPISODES).to_pandas()
    assert list(ep.episode_id) == ids                       # every episode is written ...
    assert list(ep.status) == ["ok", "failed", "ok", "failed"]  # ... the failed ones flagged
    assert ep.error[ep.status == "failed"].str.contains("ConnectionError: scripted").all()
    meta = read_metadata(out)
    assert meta[N_FAILED_KEY] == "2" and n_failed(out) == 2 and meta[ATTEMPT_KEY] == FIRST_ATTEMPT
    for name in ("calls", "requests"):
        assert read_metadata(out.with_name(f"shard-000.{name}.parquet"))[N_FAILED_KEY] == "2"
    parts = sorted(p.name for p in out.with_name("shard-000.parquet.parts").glob("*.json"))
    assert parts == ["0.json", "2.json"]                    # only the finished episodes are checkpointed
    assert attempt_param(out) == "attempt 2: retry 2 failed episodes"
    assert log.read_text().split() == ids

    # the provider is back: the rerun runs exactly the two failed episodes
    monkeypatch.undo()
    infra_faults.install(set(), log, monkeypatch.setattr)
    log.write_text("")
    _run(small, "flaky", attempt=attempt_param(out))
    assert log.read_text().split() == [ids[1], ids[3]]
    ep2 = read_table(out, EPISODES).to_pandas()
    assert (ep2.status == "ok").all() and n_failed(out) == 0
    assert read_metadata(out)[ATTEMPT_KEY] == "attempt 2: retry 2 failed episodes"
    assert ep2.loc[[0, 2], "edges"].tolist() == ep.loc[[0, 2], "edges"].tolist()
    assert not out.with_name("shard-000.parquet.parts").exists()
    # a clean run leaves the attempt as it was: the parameter equals the one the job ran with
    assert attempt_param(out) == "attempt 2: retry 2 failed episodes" and attempt_file(out).exists()
    ref = read_table(_run(small, "reference_flaky"), EPISODES).to_pandas()
    assert list(ep2.edges) == list(ref.edges) and list(ep2.f1) == list(ref.f1)
