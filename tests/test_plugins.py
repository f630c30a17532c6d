"""Agents from outside the package: the example package installed with pip, its entry points,
the errors at workflow start, and an episode and a game play of it through the workflow.

The independent truths: the example's own ``pyproject.toml`` (its distribution name, version and
entry points), the references stage's output of the algorithm the agent ran (the graph it must
have submitted), and the deployments of the play (the design it must have submitted).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import NAMED_GAMES, ROOT

from heuresis.config import ConfigError
from heuresis.config.loading import read_config_files
from heuresis.preflight import validate_config

EXAMPLE = ROOT / "examples" / "example-agent"
PYPROJECT = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())
DIST, VERSION = PYPROJECT["project"]["name"], PYPROJECT["project"]["version"]
ENTRY_POINTS = PYPROJECT["project"]["entry-points"]["heuresis.agents"]

CASES = '''
from heuresis.harness.protocol import Agent, AgentReply
from heuresis.agents.offline import ShortcutAgent


class Open(Agent):
    """Takes any keyword parameter (the base class's ``**params``)."""

    def respond(self, messages, tools):
        return AgentReply({"role": "assistant", "content": "nothing"})


class Needs(Open):
    def __init__(self, name, *, depth):
        super().__init__(name, depth=depth)


class Sneaky(ShortcutAgent):
    """A subclass of an offline baseline: privileged by inheritance."""


NOT_A_CLASS = 3
'''


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The example package installed with this interpreter's pip into a folder of its own, plus test modules."""
    target = tmp_path_factory.mktemp("plugin_site")
    # offline: built with the installed setuptools and wheel (the test extra), nothing fetched
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                           "--quiet",
                           "--target", str(target), str(EXAMPLE)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (target / "plugin_cases.py").write_text(CASES)
    (target / "broken_plugin.py").write_text("raise RuntimeError('boom while importing')\n")
    return target


@pytest.fixture
def on_path(site, monkeypatch, request):
    """``site`` on ``sys.path`` (the entry points are found through importlib.metadata), modules forgotten after."""
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    _reread_entry_points(monkeypatch, request)
    yield site
    for name in [m for m in sys.modules if m.split(".")[0] in ("heuresis_example_agent", "plugin_cases")]:
        del sys.modules[name]


def _reread_entry_points(monkeypatch, request):
    """Make the registries read the installed entry points again (this process may have read them before
    the site was on the path); the example's algorithm is forgotten at the test's end, so that no later
    test in this process sees it."""
    from heuresis.causal.algorithms import ALGORITHMS
    from heuresis.causal.ci import CI_TESTS
    from heuresis.causal.mechanisms import MECHANISMS

    ALGORITHMS.pop("example_correlation", None)   # before: reading would load it
    request.addfinalizer(lambda: ALGORITHMS.pop("example_correlation", None))
    for reg in (ALGORITHMS, CI_TESTS, MECHANISMS):
        monkeypatch.setattr(reg, "_loaded", False)


def _config(**agents) -> dict:
    """The small configuration with ``agents`` added (not validated)."""
    cfg = read_config_files(ROOT / "config/config.yaml", ROOT / "config/quick.yaml")
    cfg["agents"].update(agents)
    return cfg


def _errors(cfg: dict) -> str:
    with pytest.raises(ConfigError) as exc:
        validate_config(cfg)
    return str(exc.value)


# --- the installed package ------------------------------------------------------------------------------
def test_the_installed_example_registers_its_kinds(on_path):
    from importlib import metadata

    from heuresis.agents import agent_origin, make_agent

    eps = {ep.name: ep for ep in metadata.entry_points(group="heuresis.agents")}
    assert {k: eps[k].value for k in ENTRY_POINTS} == ENTRY_POINTS
    assert eps["example_one_algorithm"].dist.metadata["Name"] == DIST and eps["example_one_algorithm"].dist.version == VERSION
    agent = make_agent("ex", {"kind": "example_one_algorithm", "pick": 2}, algorithm_map={"algorithm_A": "pc_kci"})
    assert type(agent).__module__ == "heuresis_example_agent" and agent.pick == 2
    assert agent.kind == "example_one_algorithm" and not agent.privileged
    assert agent_origin("ex", {"kind": "example_one_algorithm"}) == {
        "kind": "example_one_algorithm", "class": ENTRY_POINTS["example_one_algorithm"], "distribution": DIST,
        "version": VERSION}
    # the same class named by its path: the distribution is the one holding its package
    spec = {"kind": "python", "class": ENTRY_POINTS["example_player"]}
    assert agent_origin("p", spec) == {"kind": "python", "class": ENTRY_POINTS["example_player"],
                                       "distribution": DIST, "version": VERSION}
    assert make_agent("p", spec).kind == "python"
    assert agent_origin("m", {"kind": "merge"}) is None


def test_the_example_overlay_validates_and_adds_the_agents(on_path):
    from heuresis.stages.episodes import episode_jobs
    from heuresis.stages.games.workflow import play_jobs, plays_of

    cfg = read_config_files(ROOT / "config/config.yaml", ROOT / "config/quick.yaml", EXAMPLE / "config.yaml")
    cfg = validate_config(cfg)
    quick = validate_config(read_config_files(ROOT / "config/config.yaml", ROOT / "config/quick.yaml"))
    assert cfg["episodes"]["run"] == [*quick["episodes"]["run"], "example"]
    assert cfg["games"]["agents"] == [*quick["games"]["agents"], "example_player"]
    assert {j["agent"] for j in episode_jobs(cfg)} == {*{j["agent"] for j in episode_jobs(quick)}, "example"}
    modes = {j["mode"] for j in play_jobs(cfg) if j["agent"] == "example_player"}
    assert modes == {"agentic"}                                    # the prompting mode is for LLM agents
    assert plays_of(cfg, "example_player") == cfg["games"]["plays"] != cfg["games"]["baseline_plays"]


def test_a_plugin_is_never_given_the_unmasking_map(on_path):
    from heuresis.agents import make_agent

    agent = make_agent("open", {"kind": "python", "class": "plugin_cases:Open", "depth": 1},
                       algorithm_map={"algorithm_A": "pc_kci"})
    assert agent.params == {"depth": 1} and not agent.privileged


# --- errors at workflow start -----------------------------------------------------------------------------
ERRORS = {
    "module not importable": ({"kind": "python", "class": "no_such_package.agents:Agent"}, "agents.mine.class",
                              "module 'no_such_package.agents' cannot be imported (ModuleNotFoundError: "
                              "No module named 'no_such_package')"),
    "module raises on import": ({"kind": "python", "class": "broken_plugin:Agent"}, "agents.mine.class",
                                "cannot be imported (RuntimeError: boom while importing)"),
    "attribute missing": ({"kind": "python", "class": "plugin_cases:Missing"}, "agents.mine.class",
                          "module 'plugin_cases' has no attribute 'Missing'"),
    "not an Agent": ({"kind": "python", "class": "plugin_cases:NOT_A_CLASS"}, "agents.mine.class",
                     "is 3, not a subclass of heuresis.harness.protocol:Agent"),
    "malformed class": ({"kind": "python", "class": "plugin_cases.Open"}, "agents.mine.class",
                        "'plugin_cases.Open' is not of the form 'package.module:Class'"),
    "unexpected parameter": ({"kind": "example_one_algorithm", "pik": 1}, "agents.mine",
                             "bad parameters for heuresis_example_agent:OneAlgorithmAgent: "
                             "got an unexpected keyword argument 'pik'"),
    "missing parameter": ({"kind": "python", "class": "plugin_cases:Needs"}, "agents.mine",
                          "bad parameters for plugin_cases:Needs: missing a required argument: 'depth'"),
    "privileged": ({"kind": "python", "class": "plugin_cases:Sneaky"}, "agents.mine.class",
                   "declares privileged = True, which would give it the episode's unmasking map"),
    "unknown kind": ({"kind": "example_one_algorithmm"}, "agents.mine.kind",
                     "unknown kind 'example_one_algorithmm'; known: built-in ['evidence', 'external', 'game_bandit'"),
    "python without class": ({"kind": "python"}, "agents.mine.class", "missing (required)"),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_a_bad_plugin_entry_stops_the_workflow_naming_it(on_path, case):
    spec, key, text = ERRORS[case]
    msg = _errors(_config(mine=spec))
    lines = [ln.strip() for ln in msg.splitlines()[1:]]
    mine = [ln for ln in lines if ln.startswith(f"config key {key}:")]
    assert len(mine) == 1 and text in mine[0], msg
    assert all("agents.mine" not in ln for ln in lines if ln not in mine), msg


def test_a_value_the_plugin_refuses_fails_when_built(on_path):
    """Validation builds no outside class (its constructor may have side effects): the parameters fit its
    signature, so the entry passes; the value is the constructor's to refuse, when a job builds it."""
    from heuresis.agents import make_agent

    assert validate_config(_config(mine={"kind": "example_one_algorithm", "pick": -1}))["agents"]["mine"]["pick"] == -1
    with pytest.raises(ValueError, match="pick must be a whole number >= 0, got -1"):
        make_agent("mine", {"kind": "example_one_algorithm", "pick": -1})


def test_an_entry_point_shadowing_a_built_in_kind_is_an_error_naming_both(on_path, tmp_path, monkeypatch):
    dist = tmp_path / "clashing_agents-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: clashing-agents\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[heuresis.agents]\nmerge = plugin_cases:Open\npython = plugin_cases:Open\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    msg = _errors(_config(mine={"kind": "python", "class": "plugin_cases:Open"}))
    merge = [ln.strip() for ln in msg.splitlines() if ln.strip().startswith("config key agents.merge.kind:")]
    assert len(merge) == 1, msg
    assert ("kind 'merge' is both the built-in kind 'merge' (heuresis.agents.offline:MergeAgent) and the installed "
            "entry point merge = 'plugin_cases:Open' (group heuresis.agents) of distribution clashing-agents 1.0"
            in merge[0]), merge[0]
    mine = [ln for ln in msg.splitlines() if "config key agents.mine.kind:" in ln]
    assert len(mine) == 1 and "the kind 'python' that names a class and the installed entry point python" in mine[0]
    # the other built-in agents are untouched
    assert not any(f"agents.{a}" in msg for a in ("shortcut", "evidence"))


def test_algorithms_ci_tests_and_mechanism_kinds_come_from_entry_points(on_path, tmp_path, monkeypatch):
    """The example's algorithm is found through its entry point (with its cost class); a CI test and a
    mechanism kind through theirs; an entry that cannot be loaded, that takes a built-in's name or that
    registers nothing is an error naming the entry point and its distribution."""
    import numpy as np

    from heuresis.causal.algorithms import ALGORITHMS, make_algorithm
    from heuresis.causal.ci import CI_TESTS
    from heuresis.causal.mechanisms import MECHANISMS, MechanismKind

    (on_path / "more_plugins.py").write_text(textwrap.dedent("""
        from heuresis.causal.ci.fisherz import FisherZ
        from heuresis.causal.mechanisms import MECHANISMS, register_mechanism

        class LooseFisherZ(FisherZ):
            pass

        @register_mechanism("doubled_linear", standardize_parents=False)
        def doubled(rng, u, sigma, c):
            signal, noise, params = MECHANISMS["linear"].fn(rng, u, sigma, c)
            return 2 * signal, noise, params

        def unregistered(rng, u, sigma, c):
            return 0 * u[:, 0], 0 * u[:, 0], {}
    """))
    dist = tmp_path / "more_plugins-2.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: more-plugins\nVersion: 2.0\n")
    (dist / "entry_points.txt").write_text("[heuresis.ci_tests]\nloose_fisherz = more_plugins:LooseFisherZ\n"
                                           "[heuresis.mechanisms]\ndoubled_linear = more_plugins:doubled\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    registries = (ALGORITHMS, CI_TESTS, MECHANISMS)
    for reg in registries:   # read the installed entries again (this process read them before the site was on the path)
        monkeypatch.setattr(reg, "_loaded", False)
    try:
        cls = ALGORITHMS.lookup("example_correlation")
        assert cls.__module__ == "heuresis_example_agent" and cls.name == "example_correlation"
        assert cls.cost_class == "fast" and "example_correlation" in sorted(ALGORITHMS)
        with pytest.raises(ValueError, match="unknown parameter 'alpha'"):
            cls(alpha=0.1)
        assert CI_TESTS.lookup("loose_fisherz").__name__ == "LooseFisherZ"
        kind = MECHANISMS.lookup("doubled_linear")      # registered by its decorator when the entry loaded
        assert isinstance(kind, MechanismKind) and not kind.standardize_parents
        u = np.arange(6.0).reshape(3, 2)
        c = {"weight": [0.5, 1.0]}
        doubled, plain = kind.fn(np.random.default_rng(1), u, 0.0, c), MECHANISMS["linear"].fn(
            np.random.default_rng(1), u, 0.0, c)
        assert np.allclose(doubled[0], 2 * plain[0]) and doubled[2] == plain[2]
    finally:
        for reg, name in ((ALGORITHMS, "example_correlation"), (CI_TESTS, "loose_fisherz"),
                          (MECHANISMS, "doubled_linear")):
            dict.pop(reg, name, None)
        sys.modules.pop("more_plugins", None)

    for group, reg, entry, why in [
            ("heuresis.algorithms", ALGORITHMS, "boom = broken_plugin:X",
             "cannot be loaded: RuntimeError: boom while importing"),
            ("heuresis.algorithms", ALGORITHMS, "ges = heuresis_example_agent:CorrelationSkeleton",
             "names another object than the one registered under that name"),
            ("heuresis.mechanisms", MECHANISMS, "quiet = more_plugins:unregistered", "registered nothing under 'quiet'")]:
        (dist / "entry_points.txt").write_text(f"[{group}]\n{entry}\n")
        importlib.invalidate_caches()
        monkeypatch.setattr(reg, "_loaded", False)
        name = entry.split(" =")[0]
        with pytest.raises(ValueError, match=f"entry point {name} = .*distribution more-plugins 2.0") as exc:
            list(reg)
        assert why in str(exc.value)
        dict.pop(ALGORITHMS, "example_correlation", None)
    assert make_algorithm("ges").name == "ges"


def test_games_accept_a_plugin_player_and_refuse_an_unknown_one(on_path):
    cfg = _config(player={"kind": "python", "class": ENTRY_POINTS["example_player"]})
    cfg["games"]["agents"] = ["game_random", "player"]
    assert validate_config(cfg)["games"]["agents"] == ["game_random", "player"]
    cfg["games"]["agents"] = ["game_random", "nobody"]
    assert "config key games.agents: unknown agent 'nobody'" in _errors(cfg)


def test_a_plugin_game_player_in_an_episode_grid_is_refused(on_path):
    """A subclass of the games' offline player base plays games, not episodes (as the built-in players)."""
    from heuresis.agents.players import GameAgent  # noqa: F401  (the base the module below subclasses)

    cfg = _config(gp={"kind": "python", "class": "plugin_game:Player"})
    (on_path / "plugin_game.py").write_text(textwrap.dedent('''
        from heuresis.agents.players import GameAgent


        class Player(GameAgent):
            def policy(self):
                yield ("get_status", {})
    '''))
    cfg["episodes"]["grids"]["quick"]["agents"] = ["shortcut", "gp"]
    msg = _errors(cfg)
    assert "config key episodes.grids.quick.agents: agent 'gp' is a game agent (kind 'python')" in msg, msg
    sys.modules.pop("plugin_game", None)


# --- through the workflow -----------------------------------------------------------------------------------
PLUGIN_RUN = {
    "instances": {"d": 4, "n": 100, "n_dev": 1, "n_test": 1},
    "episodes": {"grids": {"example": {"agents": ["example"], "guided": [True, False], "families": ["lg"]}},
                 "run": ["example"]},
    "games": {**NAMED_GAMES, "scenarios": ["antenna_trap"], "agents": ["example_player"], "plays": 1,
              "search": {"verify_fleets": 2}},
}


# an adversary beside the example: what it tries is refused, and counted as integrity events
HOSTILE = r'''
import asyncio, os, socket
from mcp import Client

def through(request):
    proxy = os.environ.get("HTTPS_PROXY", "").rsplit(":", 1)
    if len(proxy) != 2:
        return ""
    s = socket.create_connection((proxy[0].split("//")[1], int(proxy[1])), timeout=10)
    s.sendall(request.encode())
    got = s.recv(65536)
    s.close()
    return got.decode(errors="replace")

async def main():
    for target in ("169.254.169.254:80", "127.0.0.1:22"):   # cloud metadata, the host's loopback
        through(f"CONNECT {target} HTTP/1.1\r\n\r\n")
    async with Client(os.environ["HEURESIS_MCP_URL"], cache=None) as c:
        await c.call_tool("admin_reset_budget", {})
        for _ in range(2):
            await c.call_tool("run_algorithm", {"algorithm": 5})
        await c.call_tool("run_code", {"code": "print(open('/proc/1/environ').read())"})
        await c.call_tool("submit", {})

asyncio.run(main())
'''
HOSTILE_EVENTS = {"refused_tool": 1, "malformed_call": 2, "probe": 1, "repeated_refusal": 1}


@pytest.mark.slow
def test_the_example_runs_an_episode_and_a_play_through_the_workflow(site, tmp_path, monkeypatch, request):
    from tinyflow import copy_workflow, run_snakemake

    from heuresis.artifacts.io import read_table
    from heuresis.artifacts.schemas import CALLS, EPISODES, GAME_CALLS, GAME_PLAYS, REFERENCES
    from heuresis.preflight import load_config
    from heuresis.stages.episodes import episode_jobs

    wd = copy_workflow(tmp_path / "wf")
    overlay = yaml.safe_load((EXAMPLE / "config.yaml").read_text())   # the example's own agent entries
    hostile = tmp_path / "hostile"                                     # outside the working folder (expose)
    hostile.mkdir()
    (hostile / "hostile.py").write_text(HOSTILE)
    agents = {**overlay["agents"], "hostile": {
        "kind": "external", "command": ["python", str(hostile / "hostile.py")], "expose": [str(hostile)],
        "isolation": "best_effort", "idle_timeout_s": 60, "network": {"allow": ["example.com:443"]}}}
    run = json.loads(json.dumps(PLUGIN_RUN))
    run["episodes"]["grids"]["hostile"] = {"agents": ["hostile"], "guided": [True], "families": ["lg"]}
    run["episodes"]["run"].append("hostile")
    run["references"] = overlay["references"]                          # the example's algorithm as a baseline
    (wd / "config/plugin.yaml").write_text(yaml.safe_dump({"agents": agents, **run}))
    configs = ["--configfile", "config/quick.yaml", "config/plugin.yaml"]
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
    run_snakemake(wd, "results/tables/table12.md", "results/tables/games_antenna.md",
                  "results/references/example_correlation/lg/test/shard-000.parquet", "--cores", "2", *configs,
                  env=env, timeout=600)
    res = wd / "results"
    sys.path.insert(0, str(site))
    _reread_entry_points(monkeypatch, request)
    try:
        cfg = load_config(wd / "config/config.yaml", wd / "config/quick.yaml", wd / "config/plugin.yaml")
    finally:
        sys.path.remove(str(site))
    origin = {"kind": "example_one_algorithm", "class": ENTRY_POINTS["example_one_algorithm"], "distribution": DIST,
              "version": VERSION}

    # episodes: the rows say which class it was; the graph submitted is the output of the algorithm it ran
    jobs = [j for j in episode_jobs(cfg) if j["agent"] != "hostile"]
    assert {j["agent"] for j in jobs} == {"example"} and len(jobs) == 2
    for j in jobs:
        path = res / f"episodes/example/{j['condition_id']}/lg/test/shard-000.parquet"
        ep = read_table(path, EPISODES).to_pandas()
        calls = read_table(str(path).replace(".parquet", ".calls.parquet"), CALLS).to_pandas()
        row = ep.iloc[0]
        assert (row.agent, row.agent_kind, bool(row.privileged), row.status, row.termination) == (
            "example", "example_one_algorithm", False, "ok", "submitted")
        assert list(calls.tool) == ["run_algorithm", "submit"] and calls.ok.all()
        real = json.loads(calls.details.iloc[0])["algorithm"]
        ref = read_table(res / f"references/{real}/lg/test/shard-000.parquet", REFERENCES).to_pandas().iloc[0]
        assert row.edges == ref.edges and row.n_calls == 2, (real, row.edges, ref.edges)
        prov = json.loads(pq.read_schema(path).metadata[b"heuresis.provenance"])
        assert prov["config"]["agent_origin"] == origin and prov["packages"][DIST] == VERSION
        assert json.loads((wd / row.transcript).read_text())["agent_origin"] == origin
    scores = pd.read_parquet(res / "analysis/episode_scores.parquet")
    assert sorted(scores[scores.agent == "example"].condition_id) == sorted(j["condition_id"] for j in jobs)

    # the package's algorithm swept as a baseline: its graph is the thresholded correlation of the instance's data
    swept = read_table(res / "references/example_correlation/lg/test/shard-000.parquet", REFERENCES).to_pandas()
    data = pd.read_parquet(res / "instances/lg/test/0000/data.parquet")
    r = data.corr().abs().to_numpy()
    names = list(data.columns)
    truth = sorted(f"{names[i]} -- {names[j]}" for i in range(len(names)) for j in range(i + 1, len(names))
                   if r[i, j] > 0.3)
    assert swept.status.iloc[0] == "ok" and sorted(filter(None, swept.edges.iloc[0].split("; "))) == truth, (
        swept.edges.iloc[0], truth)

    # Table 12: a row per condition naming the class and the installed distribution with its version
    t12 = pd.read_parquet(res / "tables/table12.parquet")
    bad, t12 = t12[t12.agent == "hostile"], t12[t12.agent != "hostile"]
    assert len(t12) == 2 and set(t12.agent) == {"example"} and set(t12.kind) == {"example_one_algorithm"}
    assert list(t12.integrity_events) == [0, 0]

    # the adversary: every refused or suspicious attempt counted in Table 12, marked on its transcript page
    from heuresis.harness.sandbox import isolation_status
    from heuresis.view.pages import Site

    expected = dict(HOSTILE_EVENTS)
    if isolation_status()[0]:      # the proxy runs only with bubblewrap: both CONNECTs refused there
        expected["network_refused"] = 2
    assert len(bad) == 1 and json.loads(bad.integrity_counts.iloc[0]) == expected, bad.integrity_counts.iloc[0]
    assert bad.integrity_events.iloc[0] == sum(expected.values())
    assert "repeated_refusal 1" in (res / "tables/table12.md").read_text()
    hostile_eps = scores[scores.agent == "hostile"]
    assert len(hostile_eps) == 1 and hostile_eps.status.iloc[0] == "ok", hostile_eps
    page = Site(res).page(f"episodes/{hostile_eps.episode_id.iloc[0]}.html").body.decode()
    assert f"Integrity events ({sum(expected.values())})" in page
    assert page.count('class="integrity"') >= 4 and "integrity: malformed_call, repeated_refusal" in page
    assert set(t12.implementation) == {f"{ENTRY_POINTS['example_one_algorithm']} ({DIST} {VERSION})"}
    assert set(t12.settings) == {json.dumps({"pick": 0})} and list(t12.episodes) == [1, 1]
    assert f"{ENTRY_POINTS['example_one_algorithm']} ({DIST} {VERSION})" in (res / "tables/table12.md").read_text()

    # games: the play is recorded with its kind and class; it submitted the better of its two deployments
    plays_path = res / "games/plays/example_player/agentic/antenna_trap.parquet"
    play = read_table(plays_path, GAME_PLAYS).to_pandas().iloc[0]
    assert (play.agent, play.agent_kind, play.status, play.termination, play.deployments) == (
        "example_player", "python", "ok", "submitted", 2)
    gcalls = read_table(str(plays_path).replace(".parquet", ".calls.parquet"), GAME_CALLS).to_pandas()
    assert list(gcalls.tool) == ["get_status", "get_history", "deploy", "deploy", "submit_final_design"]
    deploys = gcalls[gcalls.tool == "deploy"]
    rates = [json.loads(r)["returned"] / json.loads(r)["count"] for r in deploys.result]
    best = json.loads(deploys.arguments.iloc[max(range(2), key=lambda k: rates[k])])["design"]
    assert json.loads(play.design) == best
    pprov = json.loads(pq.read_schema(plays_path).metadata[b"heuresis.provenance"])
    assert pprov["config"]["agent_origin"] == {"kind": "python", "class": ENTRY_POINTS["example_player"],
                                               "distribution": DIST, "version": VERSION}
    assert pprov["packages"][DIST] == VERSION
    table = pd.read_parquet(res / "tables/games_antenna.parquet")
    mine = table[(table.agent == "example_player") & (table.scenario == "antenna_trap")]
    assert len(mine) == 1 and mine.survival.iloc[0] == pytest.approx(play.survival)
