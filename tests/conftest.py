"""Shared fixtures: the repository root, the validated configs, random DAGs."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROOT = Path(__file__).resolve().parents[1]

#: tests/test_inspect.py needs the inspect extra, which lives in its own environment
#: (requirements/inspect-lock.txt).  Where ``HEURESIS_INSPECT_TESTS=separate`` says that environment
#: runs it (.ci/run), an environment without inspect_ai does not collect it; elsewhere it is skipped,
#: saying why.
collect_ignore = []
if os.environ.get("HEURESIS_INSPECT_TESTS") == "separate":
    import importlib.util

    if importlib.util.find_spec("inspect_ai") is None:
        collect_ignore.append("test_inspect.py")
#: the scenario folder (``games.scenarios_dir``'s default: CausalGame's 14 scenarios)
SCENARIOS = ROOT / "config" / "games" / "causalgame"
#: the ``games`` keys of a test that names its own scenarios: no ablations, no test variants
NAMED_GAMES = {"scenarios": [], "ablations": [], "test_variants": {"count": 0}}


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def paper_config() -> dict:
    from heuresis.preflight import load_config

    return load_config(ROOT / "config/config.yaml")


@pytest.fixture(scope="session")
def quick_config() -> dict:
    from heuresis.preflight import load_config

    return load_config(ROOT / "config/config.yaml", ROOT / "config/quick.yaml")


def random_dag(rng: np.random.Generator, d: int, p: float) -> np.ndarray:
    """A random DAG (ER over a random order) as a 0/1 adjacency matrix, i -> j at [i, j]."""
    perm = rng.permutation(d)
    a = np.triu(rng.random((d, d)) < p, 1).astype(np.int8)
    return a[np.ix_(perm, perm)]


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """The tiny workflow (tests/tinyflow.py) run once locally through the local profile; shared by
    the SLURM and fault tests as the uninterrupted reference run. Do not modify: copy it.

    Run once per test run, not once per pytest-xdist worker: the workers share the folder above
    their own base temporary folders, and the first to take the lock builds it there."""
    import fcntl
    import shutil

    from tinyflow import CONFIG, TARGETS, copy_workflow, run_snakemake

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    wd, done = shared / "tiny_local", shared / "tiny_local.done"
    with open(shared / "tiny_local.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(wd, ignore_errors=True)       # a build that failed in another worker
            copy_workflow(wd)
            proc = run_snakemake(wd, *TARGETS, "--profile", "workflow/profiles/local", "--cores", "2", *CONFIG)
            (wd / "snakemake.log").write_text(proc.stdout + proc.stderr)     # what Snakemake said it ran
            done.touch()
    return wd


def pc_episode_input(family: str, split: str, index: int, instance_id: str, data: np.ndarray, dag: np.ndarray):
    """An episode's input for ``data`` with true DAG ``dag``, started from PC-KCI's run on it: (input, PC-KCI's result)."""
    from heuresis.causal.algorithms import make_algorithm
    from heuresis.causal.graph import Graph, dag_to_cpdag
    from heuresis.harness.episode import EpisodeInput

    pc = make_algorithm("pc_kci").run(data)
    names = [f"X{k + 1}" for k in range(data.shape[1])]
    log = [{"x": names[d.x], "y": names[d.y], "sepset": [names[k] for k in d.sepset], "test": d.test,
            "grade": d.grade} for d in pc.pc.deletions]
    return EpisodeInput(family, split, index, instance_id, data, Graph.from_dag(dag), dag_to_cpdag(dag), pc.graph,
                        pc.n_tests, log), pc


def chain_instance(seed: int):
    """A nonlinear chain with a collider on 5 variables (n = 200, standardized) as an episode's input, and PC-KCI's result."""
    rng = np.random.default_rng(seed)
    n = 200
    x1 = rng.normal(size=n)
    x2 = np.tanh(2 * x1) + 0.3 * rng.normal(size=n)
    x3 = x2 ** 2 + 0.3 * rng.normal(size=n)
    x4 = np.sin(x1) + 0.3 * rng.normal(size=n)
    x5 = x3 + x4 + 0.3 * rng.normal(size=n)
    data = np.column_stack([x1, x2, x3, x4, x5])
    data = (data - data.mean(0)) / data.std(0)
    dag = np.zeros((5, 5), int)
    for a, b in [(0, 1), (1, 2), (0, 3), (2, 4), (3, 4)]:
        dag[a, b] = 1
    return pc_episode_input("t", "test", 0, "t/test/0000", data, dag)


def small_lg_split(quick_config: dict, root: Path, n: int) -> dict:
    """``n`` lg test instances (d = 5, n = 200) under ``root`` with their pc_kci references."""
    import copy

    from heuresis.stages.instances import instance_spec, write_split
    from heuresis.stages.references import run_shard

    cfg = copy.deepcopy(quick_config)
    cfg["instances"].update(d=5, n=200)
    data, truth = root / "instances/lg/test", root / "truth/lg/test"
    write_split(instance_spec(cfg, "lg"), "lg", "test", n, data, truth)
    ref = root / "references/pc_kci/lg/test/shard-000.parquet"
    run_shard("pc_kci", {"alpha": 0.05}, "lg", "test", list(range(n)), data, truth, ref, grades=cfg["grades"])
    return dict(cfg=cfg, root=root, data=data, truth=truth, ref=ref)


def pytest_xdist_auto_num_workers(config) -> int:
    """``-n auto`` ([tool.pytest.ini_options]): one worker more than there are cores, since the
    end-to-end tests spend much of their time waiting (on SLURM's queue, on servers, on
    subprocesses); ``PYTEST_XDIST_AUTO_NUM_WORKERS`` overrides it."""
    env = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS")
    if env:
        return int(env)
    return len(os.sched_getaffinity(0)) + 1


#: Modules that spend minutes waiting (SLURM's queue, its one-minute time limit): in parallel runs they
#: start first, so that the other workers compute while they wait instead of after.
WAIT_FIRST = ("test_slurm.py",)


def pytest_collection_modifyitems(config, items) -> None:
    """In pytest-xdist's workers (each file is one unit, handed out in collection order): the waiting
    modules first, then the other end-to-end ones (marked ``slow``), then the rest, each group in its order."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return

    def rank(item) -> int:
        return 0 if item.path.name in WAIT_FIRST else 1 if item.get_closest_marker("slow") else 2

    items.sort(key=rank)      # stable: within a rank, the files and their tests keep their order


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI (``CI=true``) a skipped test is a failure: ``.ci/run`` installs everything the tests
    need (bubblewrap, the local model, SLURM), so a skip there would hide an untested path."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI") == "true" and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped in CI ({reason}); .ci/run installs what this test needs"


def agent_episode(name: str, spec, cond, inp, settings, seed: int, **records):
    """One episode of agent ``name`` (config entry ``spec``), built and run as the episodes stage does."""
    from heuresis.agents import agent_origin, make_agent  # (importing it registers every built-in kind)
    from heuresis.harness.episode import episode_algorithm_map, run_episode

    agent = make_agent(name, spec, algorithm_map=episode_algorithm_map(settings, seed))
    return run_episode(agent, cond, inp, settings, seed, agent_origin=agent_origin(name, spec), **records)
