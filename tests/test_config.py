"""A bad configuration fails with the offending key named."""

import copy
import re

import pytest

from heuresis.config import ConfigError
from heuresis.preflight import validate_config


def _broken(cfg, edit):
    c = copy.deepcopy(cfg)
    edit(c)
    return c


CASES = [
    ("unknown kind", lambda c: c["families"]["wild"]["kinds"].update({"wavelet": {"weight": 1, "noise": [0.1, 0.2]}}),
     "families.wild.kinds.wavelet", "unknown mechanism kind 'wavelet'"),
    ("empty mixture", lambda c: c["families"]["lg"].update(kinds={}), "families.lg.kinds", "empty mixture"),
    ("negative range", lambda c: c["families"]["anm"]["kinds"]["mlp"].update(noise=[-0.5, 1.5]),
     "families.anm.kinds.mlp.noise", "negative"),
    ("inverted range", lambda c: c["families"]["mixed"].update(root_noise=[2.0, 0.5]),
     "families.mixed.root_noise", "inverted"),
    ("missing key", lambda c: c["families"]["gauntlet"].pop("root_noise"), "families.gauntlet.root_noise", "missing"),
    ("missing noise", lambda c: c["families"]["lg"]["kinds"]["linear"].pop("noise"),
     "families.lg.kinds.linear.noise", "needs a noise-scale range"),
    ("noise on hetero", lambda c: c["families"]["hetero"]["kinds"]["mlp_hetero"].update(noise=[0.1, 0.2]),
     "families.hetero.kinds.mlp_hetero.noise", "input-dependent"),
    ("zero weights", lambda c: c["families"]["lg"]["kinds"]["linear"].update(weight=0), "families.lg.kinds",
     "weights are zero"),
    ("typo at top", lambda c: c.update(sede=1), "sede", "unknown key; did you mean 'seed'?"),
    ("missing instances key", lambda c: c["instances"].pop("n"), "instances.n", "missing"),
    ("unknown prior", lambda c: c["graph"].update(priors=["sf"]), "graph.priors.0", "sf"),
    ("bad constant range", lambda c: c["mechanisms"]["sigmoid"].update(gain=[3.0, 1.0]), "mechanisms.sigmoid.gain",
     "inverted"),
    ("bad family override", lambda c: c["families"]["wild"]["kinds"]["fourier"].update(params={"frequency": [-1, 2]}),
     "families.wild.kinds.fourier.params.frequency.0", "-1 is less than the minimum of 0 (allowed: a number >= 0)"),
    ("short range", lambda c: c["families"]["lg"].update(root_noise=[1.0]), "families.lg.root_noise", "short"),
    # nonsense that used to pass, or to fail only in generation: each names the key and what it allows
    ("no Fourier features", lambda c: c["mechanisms"]["fourier"].update(features=0), "mechanisms.fourier.features",
     "0 is less than the minimum of 1 (allowed: an integer in [1, 1000])"),
    ("fractional hidden units", lambda c: c["mechanisms"]["mlp"].update(hidden=2.5), "mechanisms.mlp.hidden",
     "2.5 is not of type 'integer' (allowed: an integer in [1, 1000])"),
    ("integer written as a float", lambda c: c["mechanisms"]["mlp_hetero"].update(hidden=10.0),
     "mechanisms.mlp_hetero.hidden", "10.0 is not of type 'integer'"),
    ("Student-t without variance", lambda c: c["mechanisms"]["linear_t3"].update(df=2), "mechanisms.linear_t3.df",
     "(allowed: a number > 2)"),
    ("huge d", lambda c: c["instances"].update(d=100_000_000), "instances.d",
     "100000000 is greater than the maximum of 1000 (allowed: an integer in [2, 1000])"),
    ("d below 2", lambda c: c["instances"].update(d=1), "instances.d", "(allowed: an integer in [2, 1000])"),
    ("huge n", lambda c: c["instances"].update(n=10**7), "instances.n", "(allowed: an integer in [10, 100000])"),
    ("degree above d - 1", lambda c: c["graph"].update(expected_degree=9.5), "graph.expected_degree",
     "9.5 exceeds instances.d - 1 = 9 (a node has at most d - 1 neighbours; allowed: 0 < expected_degree <= 9)"),
    ("zero degree", lambda c: c["graph"].update(expected_degree=0), "graph.expected_degree", "(allowed: a number > 0)"),
    ("no test instances", lambda c: c["instances"].update(n_test=0), "instances.n_test",
     "0 is less than the minimum of 1 (allowed: an integer in [1, 9999])"),
    ("no dev instances", lambda c: c["instances"].update(n_dev=0), "instances.n_dev",
     "(allowed: an integer in [1, 9999])"),
    ("five-digit instance count", lambda c: c["instances"].update(n_test=10_000), "instances.n_test",
     "(allowed: an integer in [1, 9999])"),
    ("seed beyond 32 bits", lambda c: c.update(seed=2**32), "seed", "(allowed: an integer in [0, 4294967295])"),
    ("negative seed", lambda c: c["repairs"].update(seed=-1), "repairs.seed", "(allowed: an integer in [0, 4294967295])"),
    ("negative hash seed", lambda c: c["verification"]["scales"]["small"]["determinism"].update(hash_seeds=[0, -1]),
     "verification.scales.small.determinism.hash_seeds.1", "-1 is less than the minimum of 0"),
    ("fractional node count", lambda c: c["verification"]["scales"]["small"]["dsep"].update(d=[3, 10.5]),
     "verification.scales.small.dsep.d.1", "10.5 is not of type 'integer' (allowed: an integer in [2, 1000])"),
    ("node count below 2", lambda c: c["verification"]["scales"]["large"]["oracle_pc"].update(d=[1, 8]),
     "verification.scales.large.oracle_pc.d.0", "1 is less than the minimum of 2"),
    ("unknown foundation model", lambda c: c["headroom"].update(foundation_models=["cdfm", "tabpfn"]),
     "headroom.foundation_models.1", "unknown foundation model 'tabpfn'; known: ['cdfm', 'tabcausal']"),
    ("string for a number", lambda c: c["mechanisms"]["mlp"].update(bias_sd="1.0"), "mechanisms.mlp.bias_sd",
     "'1.0' is not of type 'number' (allowed: a number >= 0)"),
    ("zero weight sd", lambda c: c["mechanisms"]["mlp"].update(output_weight_sd=0), "mechanisms.mlp.output_weight_sd",
     "(allowed: a number > 0)"),
    ("negative weight range", lambda c: c["mechanisms"]["linear"].update(weight=[-1.0, 2.0]), "mechanisms.linear.weight.0",
     "(allowed: a number >= 0)"),
    ("typo in constants", lambda c: c["mechanisms"]["linear"].update(wieght=[0.5, 2.0]), "mechanisms.linear.wieght",
     "unknown key; did you mean 'weight'?"),
    ("fractional override", lambda c: c["families"]["anm"]["kinds"]["mlp"].update(params={"hidden": 0.5}),
     "families.anm.kinds.mlp.params.hidden", "0.5 is not of type 'integer' (allowed: an integer in [1, 1000])"),
    ("df override", lambda c: c["families"]["wild"]["kinds"]["linear_t3"].update(params={"df": 1}),
     "families.wild.kinds.linear_t3.params.df", "(allowed: a number > 2)"),
    ("unknown override", lambda c: c["families"]["anm"]["kinds"]["mlp"].update(params={"hiden": 5}),
     "families.anm.kinds.mlp.params.hiden", "not a constant of kind 'mlp'; known: ['bias_sd', 'hidden', "),
    ("inverted override", lambda c: c["families"]["wild"]["kinds"]["fourier"].update(params={"frequency": [3, 2]}),
     "families.wild.kinds.fourier.params.frequency", "inverted range [3, 2]"),
    ("no root noise", lambda c: c["families"]["lg"].update(root_noise=[0, 0]), "families.lg.root_noise",
     "gives no noise (allowed: 0 <= lo <= hi, hi > 0)"),
    ("no kind noise", lambda c: c["families"]["lg"]["kinds"]["linear"].update(noise=[0.0, 0.0]),
     "families.lg.kinds.linear.noise", "gives no noise"),
    ("merge needs more algorithms than the menu has", lambda c: c["agents"]["merge"].update(k=7), "agents.merge.k",
     "allowed: 1 <= k <= 6"),
    ("fractional merge k", lambda c: c["agents"]["merge"].update(k=1.5), "agents.merge.k",
     "1.5 is not of type 'integer' (allowed: an integer >= 1)"),
    ("shortcut takes no parameters", lambda c: c["agents"]["shortcut"].update(k=2), "agents.shortcut.k",
     "unknown key; known keys: kind"),
    ("merge parameter typo", lambda c: c["agents"]["merge"].update(kk=2), "agents.merge.kk", "unknown key; did you mean 'k'?"),
    ("evidence parameter typo", lambda c: c["agents"]["evidence"].update(max_sets=2), "agents.evidence",
     "unknown parameter(s) ['max_sets']"),
    ("thinking budget above max_tokens", lambda c: c["agents"]["claude"].update(max_tokens=1000),
     "agents.claude.max_tokens", "must exceed the thinking budget (thinking.budget_tokens = 1024)"),
    # an LLM agent's output settings against the conditions it plays: both keys named
    ("max_tokens above a turn's output budget", lambda c: c["agents"]["claude"].update(max_tokens=6000),
     "agents.claude.max_tokens", "6000 exceeds episodes.budgets.standard.output_tokens_per_turn = 4000 (grid main)"),
    ("max_tokens above the tight budget only", lambda c: c["agents"]["gpt"].update(max_tokens=3000),
     "agents.gpt.max_tokens", "3000 exceeds episodes.budgets.tight.output_tokens_per_turn = 2000 (grid budget_sweep)"),
    ("thinking budget not below the tight budget", lambda c: c["agents"]["claude"]["thinking"].update(budget_tokens=2000),
     "agents.claude.thinking.budget_tokens", "2000 does not fit under episodes.budgets.tight.output_tokens_per_turn"),
    ("thinking budget above the games' reply cap",
     lambda c: (c["agents"].update(g={"kind": "llm", "model": "anthropic/claude-sonnet-4-5",
                                      "thinking": {"type": "enabled", "budget_tokens": 5000}}),
                c["games"]["agents"].append("g")),
     "agents.g.thinking.budget_tokens", "does not fit under the games' per-reply cap (heuresis.stages.games.play.OUTPUT_TOKENS) "
                                        "= 4000"),
    ("judge's thinking budget above judge_max_tokens",
     lambda c: c["agents"]["judge_gpt"].update(thinking={"type": "enabled", "budget_tokens": 1500}),
     "agents.judge_gpt.thinking.budget_tokens", "1500 does not fit under games.judge_max_tokens = 1500"),
    ("judge's thinking budget above its max_tokens",
     lambda c: c["agents"]["judge_claude"].update(thinking={"type": "enabled", "budget_tokens": 1024}, max_tokens=1024),
     "agents.judge_claude.thinking.budget_tokens", "does not fit under agents.judge_claude.max_tokens = 1024"),
    # credentials are refused wherever they are written in an agent's entry
    ("api key in the config", lambda c: c["agents"]["claude"].update(api_key="sk-ant-api03-0123456789abcdef"),
     "agents.claude.api_key", "keys come only from the environment"),
    ("api key in extra", lambda c: c["agents"]["gpt"].update(extra={"api_key": "abc"}), "agents.gpt.extra.api_key",
     "a credential in the config is refused"),
    ("token in a plugin's parameters", lambda c: c["agents"].update(p={"kind": "python", "class": "m:C", "auth_token": 1}),
     "agents.p.auth_token", "a credential in the config is refused"),
    ("key-like value", lambda c: c["agents"]["qwen"].update(extra={"headers": {"X-Key": "sk-proj-0123456789abcdefgh"}}),
     "agents.qwen.extra.headers.X-Key", "the value looks like a secret key (refused, not shown)"),
    ("classifier value", lambda c: c["repairs"]["classifier"].update(n_estimators=0), "repairs.classifier",
     "'n_estimators' parameter of GradientBoostingClassifier must be an int in the range [1, inf)"),
    ("level outside (0, 1)", lambda c: c["bootstrap"].update(level=1.5), "bootstrap.level",
     "(allowed: a number in (0, 1))"),
    ("alpha outside (0, 1)", lambda c: c["episodes"].update(alpha=0), "episodes.alpha", "(allowed: a number in (0, 1))"),
    ("menu alpha outside (0, 1)", lambda c: c["references"]["algorithms"]["pc_kci"].update(alpha=1.5),
     "references.algorithms.pc_kci", "parameter 'alpha' must be a float in (0, 1); got 1.5"),
    ("huge resamples", lambda c: c["bootstrap"].update(resamples=10**9), "bootstrap.resamples",
     "(allowed: an integer in [100, 1000000])"),
    ("games search below its minimum", lambda c: c["games"].update(search={"verify_fleets": 1}),
     "games.search.verify_fleets", "(allowed: an integer in [2, 1000])"),
    ("games search typo", lambda c: c["games"].update(search={"verify_fleet": 5}), "games.search.verify_fleet",
     "unknown key; did you mean 'verify_fleets'?"),
    ("unknown salt mode", lambda c: c["secrets"].update(salt="fixed"), "secrets.salt", "'fixed'"),
    ("unknown test seed mode", lambda c: c["secrets"].update(test_seed="open"), "secrets.test_seed", "'open'"),
]


@pytest.mark.parametrize("name,edit,key,words", CASES, ids=[c[0] for c in CASES])
def test_bad_config_names_the_key(paper_config, name, edit, key, words):
    with pytest.raises(ConfigError) as info:
        validate_config(_broken(paper_config, edit))
    msg = str(info.value)
    assert f"config key {key}" in msg, msg
    assert words in msg, msg


def test_valid_configs_and_defaults(paper_config, quick_config):
    assert set(paper_config["families"]) == {"lg", "anm", "hetero", "wild", "mixed", "gauntlet"}
    assert paper_config["instances"] == {"d": 10, "n": 600, "n_dev": 100, "n_test": 32}
    assert quick_config["families"] == paper_config["families"]
    # schema defaults filled in per mixture entry
    assert paper_config["families"]["lg"]["kinds"]["linear"]["standardize_output"] is False
    assert paper_config["families"]["wild"]["kinds"]["abs"]["standardize_output"] is True


def test_seventh_family_is_one_entry(paper_config):
    c = copy.deepcopy(paper_config)
    c["families"]["smooth"] = {"root_noise": [1.0, 1.0],
                               "kinds": {"sigmoid": {"weight": 3, "noise": [0.2, 0.3]},
                                         "abs": {"weight": 1, "noise": [0.2, 0.3]}}}
    assert "smooth" in validate_config(c)["families"]


# --- episode grids: instance subsets and repeats per family ------------------------------------------
def _grid_config(grids: dict, run: list[str], n_test: int = 10, shard_size: int = 4) -> dict:
    """A minimal config for the grid expansion: three families, one LLM and one offline agent."""
    return {"families": {"lg": {}, "wild": {}, "mixed": {}}, "instances": {"n_dev": 6, "n_test": n_test},
            "agents": {"bot": {"kind": "llm", "model": "openai/x"}, "shortcut": {"kind": "shortcut"}},
            "episodes": {"shard_size": shard_size, "run": run, "grids": grids,
                         "budgets": {"standard": {"turns": 30}, "tight": {"turns": 10}}}}


def _episodes(config) -> set[tuple]:
    """Every planned (agent, condition_id, family, split, index), from the jobs' instance lists."""
    from heuresis.stages.episodes import episode_jobs

    return {(j["agent"], j["condition_id"], j["family"], j["split"], i) for j in episode_jobs(config)
            for i in j["indices"]}


def test_grid_instance_subset_and_repeats_per_family_expand_as_written():
    from heuresis.harness.conditions import expand_conditions, grid_plan
    from heuresis.stages.episodes import episode_job_indices, episode_jobs

    cfg = _grid_config({"g": {"agents": ["bot"], "guided": [True, False], "instances": [3, 9],
                              "repeats": {"lg": 3, "default": 1}, "families": ["lg", "wild"]}}, ["g"])
    cells = expand_conditions(cfg)
    # 2 starts x 3 repeats; repeats 1 and 2 only on lg
    assert len(cells) == 6
    assert {c.families for c in cells if c.condition.repeat == 0} == {("lg", "wild")}
    assert {c.families for c in cells if c.condition.repeat > 0} == {("lg",)}
    eps = _episodes(cfg)
    # lg: 2 starts x 3 repeats x 6 instances; wild: 2 starts x 1 repeat x 6 instances
    assert len(eps) == 2 * 3 * 6 + 2 * 1 * 6
    assert {e[4] for e in eps} == set(range(3, 9))
    jobs = episode_jobs(cfg)
    # instances 3..8 with shard size 4: shard 0 holds index 3, shard 1 holds 4..7, shard 2 holds 8
    lg0 = {j["shard"]: j["indices"] for j in jobs if j["family"] == "lg" and j["condition_id"].endswith("guided"
                                                                                                         "-p0-none-standard-once-r0")}
    assert lg0 == {0: [3], 1: [4, 5, 6, 7], 2: [8]}
    assert episode_job_indices(jobs, "bot", "full-guided-p0-none-standard-once-r2", "lg", "test", 1) == [4, 5, 6, 7]
    with pytest.raises(ValueError, match="no planned episode job"):
        episode_job_indices(jobs, "bot", "full-guided-p0-none-standard-once-r2", "wild", "test", 1)
    (row,) = grid_plan(cfg)
    assert row["llm_episodes"] == row["new_llm_episodes"] == len(eps)
    assert row["llm_requests"] == len(eps) * (30 + 1)          # standard budget: 30 turns + one last turn


def test_grids_sharing_a_condition_run_it_once_on_the_union_of_instances():
    from heuresis.harness.conditions import expand_conditions, grid_plan

    cfg = _grid_config({"all": {"agents": ["bot", "shortcut"], "families": ["lg"]},
                        "sweep": {"agents": ["bot"], "last_turn": ["once", "retry"], "budget": ["standard", "tight"],
                                  "instances": 2, "families": ["lg", "mixed"]}}, ["all", "sweep"])
    eps = _episodes(cfg)
    shared = [e for e in eps if e[0] == "bot" and e[1] == "full-unguided-p0-none-standard-once-r0"]
    # in both grids: every lg instance (grid all) and the first two of mixed (grid sweep)
    assert sorted((e[2], e[4]) for e in shared) == [*((("lg", i)) for i in range(10)), ("mixed", 0), ("mixed", 1)]
    cell = next(c for c in expand_conditions(cfg) if c.condition.agent == "bot" and c.condition.budget == "standard"
                and c.condition.last_turn == "once")
    assert cell.families == ("lg", "mixed") and cell.indices("mixed", 10) == (0, 1)
    rows = {r["grid"]: r for r in grid_plan(cfg)}
    assert rows["all"]["episodes"] == 2 * 10 and rows["all"]["llm_episodes"] == 10
    assert rows["sweep"]["llm_episodes"] == 4 * 2 * 2               # 4 conditions x 2 families x 2 instances
    assert rows["sweep"]["new_llm_episodes"] == 4 * 2 * 2 - 2        # lg 0, 1 of the shared condition: planned
    assert sum(r["new_llm_episodes"] for r in rows.values()) == len({e for e in eps if e[0] == "bot"})
    # requests: standard 30 turns, tight 10; once +1, retry +2 (per episode, an upper bound)
    assert rows["sweep"]["llm_requests"] == 4 * (31 + 32 + 11 + 12)


GRID_CASES = [
    ("range beyond the split", {"instances": [40, 48]}, "episodes.grids.g.instances", "up to index 47"),
    ("empty range", {"instances": [5, 5]}, "episodes.grids.g.instances", "empty"),
    ("range beyond the split", {"instances": [20, 33]}, "episodes.grids.g.instances", "has 32"),
    ("three bounds", {"instances": [0, 4, 8]}, "episodes.grids.g.instances", "[0, 4, 8]"),
    ("repeats of an unknown family", {"repeats": {"lg": 2, "smooth": 1, "default": 1}}, "episodes.grids.g.repeats.smooth",
     "not a family of this grid"),
    ("repeats of a family the grid skips", {"families": ["lg"], "repeats": {"lg": 2, "wild": 1}},
     "episodes.grids.g.repeats.wild", "not a family of this grid"),
    ("repeats leave a family out", {"repeats": {"lg": 3, "anm": 3}}, "episodes.grids.g.repeats", "no repeat count"),
    ("zero repeats", {"repeats": {"lg": 0, "default": 1}}, "episodes.grids.g.repeats.lg", ">= 1"),
    ("zero repeats everywhere", {"repeats": 0}, "episodes.grids.g.repeats", ">= 1"),
    ("zero instances", {"instances": 0}, "episodes.grids.g.instances", ">= 1"),
    ("a range of words", {"instances": "first 16"}, "episodes.grids.g.instances", "not of type"),
]


@pytest.mark.parametrize("name,grid,key,words", GRID_CASES, ids=[c[0] for c in GRID_CASES])
def test_bad_grid_subset_or_repeats_names_the_key(paper_config, name, grid, key, words):
    c = copy.deepcopy(paper_config)
    c["episodes"]["grids"]["g"] = {"agents": ["shortcut"], **grid}
    c["episodes"]["run"] = ["g"]
    with pytest.raises(ConfigError) as info:
        validate_config(c)
    msg = str(info.value)
    assert f"config key {key}" in msg, msg
    assert words in msg, msg


def test_first_n_of_a_smaller_split_is_every_instance():
    from heuresis.harness.conditions import expand_conditions

    cfg = _grid_config({"g": {"agents": ["bot"], "instances": 16, "families": ["lg"]}}, ["g"], n_test=5)
    (cell,) = expand_conditions(cfg)
    assert cell.indices("lg", 5) == (0, 1, 2, 3, 4)
    assert len(_episodes(cfg)) == 5


def test_inactive_grid_is_not_held_to_a_smaller_split(quick_config):
    # the quick config keeps the paper's grids (16 instances) over 3 test instances, without running them
    assert quick_config["instances"]["n_test"] < quick_config["episodes"]["grids"]["prompts"]["instances"]
    assert "prompts" not in quick_config["episodes"]["run"]


def test_paper_config_plans_the_paper_design(paper_config):
    """The paper's design, counted by hand: three models; 32 test instances, 16 in the sweeps."""
    from heuresis.harness.conditions import grid_plan

    n, half, models = 32, 16, 3
    main = models * (3 * 4 + 1 * 2) * n                 # 3 repeats on lg/anm/hetero/wild, 1 on mixed/gauntlet
    guided = models * 2 * 4 * n                         # full and minimal toolbox, once, four families
    prompts = models * (4 * 3) * 2 * half               # 4 levels x 3 targets, lg and wild
    prompts_new = prompts - models * 2 * half           # level 0 / no target on lg, wild: main's repeat 0
    budget = models * (3 * 3) * 4 * half                # 3 budgets x 3 last-turn settings, four families
    budget_new = budget - models * 4 * half             # standard / once guided full: the guided grid's
    rows = {r["grid"]: r for r in grid_plan(paper_config)}
    assert rows["main"]["llm_episodes"] == main == 1344
    assert rows["guided"]["llm_episodes"] == guided
    assert rows["offline"]["llm_episodes"] == 0
    assert (rows["prompts"]["llm_episodes"], rows["prompts"]["new_llm_episodes"]) == (prompts, prompts_new)
    assert (rows["budget_sweep"]["llm_episodes"], rows["budget_sweep"]["new_llm_episodes"]) == (budget, budget_new)
    total = main + guided + prompts_new + budget_new
    assert total == 4704
    assert sum(r["new_llm_episodes"] for r in rows.values()) == total
    llm = {a for a, s in paper_config["agents"].items() if s["kind"] == "llm"}
    assert len({e for e in _episodes(paper_config) if e[0] in llm}) == total


def test_a_refused_credential_is_never_echoed(paper_config):
    secret = "sk-ant-api03-DO-NOT-PRINT-0123456789"
    cfg = copy.deepcopy(paper_config)
    cfg["agents"]["claude"]["extra"] = {"metadata": {"note": secret}, "client_secret": secret}
    with pytest.raises(ConfigError) as info:
        validate_config(cfg)
    msg = str(info.value)
    assert "agents.claude.extra.metadata.note" in msg and "agents.claude.extra.client_secret" in msg, msg
    assert "DO-NOT-PRINT" not in msg


_MODELS = {"gpt": ("gpt-5", 128000), "claude": ("claude-sonnet-4-5", 64000),   # the map's keys, output limits
           "qwen": ("dashscope/qwen3-max", 65536)}


def _rates(config, agent: str) -> tuple[int, float, float]:
    """The model's context window and the dollars per input and output token of a request of a full window."""
    import litellm

    entry = litellm.model_cost[_MODELS[agent][0]]
    prices = config["agents"][agent].get("prices")
    if prices:   # the config's prices (qwen: DashScope's tiers, cache hits and writes), per million tokens
        top = {**prices, **(prices.get("tiers") or [{}])[-1]}   # the top tier: a request of a full window
        rate_in = max(top["input_per_mtok"], top.get("cache_write_input_per_mtok", 0)) / 1e6
        rate_out = top["output_per_mtok"] / 1e6
    else:        # the map's; input at the dearer of plain input and a cache write (prompt caching is on)
        rate_in = max(entry["input_cost_per_token"], entry.get("cache_creation_input_token_cost") or 0)
        rate_out = entry["output_cost_per_token"]
    return entry["max_input_tokens"], rate_in, rate_out


def test_the_bill_under_the_caps_and_the_recommended_pilot(paper_config):
    """check-config's bound under each agent's max_run_usd (the paper config's caps: $5,050 in all), a warning
    naming a paid agent without a cap, and the recommended pilot's cost at most: its episodes (8 per agent and
    budget setting) at their ceilings, each (turns + last-turn requests) x (window in, turn budget out)."""
    import copy

    from heuresis.cli.costs import spend_lines
    from heuresis.preflight.spend import pilot_bound, spend_bounds
    from heuresis.stages.pilot import RECOMMENDED_PILOT, pilot_plan

    lines = spend_lines(paper_config)
    at = lines.index("LLM spend under the run caps (each agent stops at its max_run_usd, docs/agents.md):")
    assert lines[-1] == "  all LLM agents: at most $5,050.00" and "WARNING" not in "".join(lines)
    assert lines[at + 1].split()[:2] == ["claude", "$3,000.00"]
    uncapped = copy.deepcopy(paper_config)
    del uncapped["agents"]["gpt"]["max_run_usd"]
    lines = spend_lines(uncapped)
    assert any(line.startswith("  WARNING: agent 'gpt' has no max_run_usd") for line in lines)
    gpt = next(r.dollars for r in spend_bounds(uncapped) if (r.agent, r.part) == ("gpt", "total"))
    assert lines[-1] == f"  all LLM agents: at most ${3000 + 800 + 3 * 150 + gpt:,.2f}"   # claude, qwen, judges, gpt
    budgets = paper_config["episodes"]["budgets"]
    extra = {"none": 0, "once": 1, "retry": 2}
    want: dict[str, float] = {}
    for ep in pilot_plan(paper_config, RECOMMENDED_PILOT):
        window, rate_in, rate_out = _rates(paper_config, ep["agent"])
        b = budgets[ep["budget"]]
        last = ep["condition_id"].split("-")[-2]
        want[ep["agent"]] = want.get(ep["agent"], 0.0) + (b["turns"] + extra[last]) * (
            window * rate_in + b["output_tokens_per_turn"] * rate_out)
    got = pilot_bound(paper_config, RECOMMENDED_PILOT)
    assert got.keys() == want.keys() == set(_MODELS)
    assert all(got[a] == pytest.approx(want[a]) for a in want), (got, want)


def test_spend_bounds_of_the_paper_config_counted_by_hand(paper_config):
    """Every LLM request the paper config plans, counted by hand, and its dollars in closed form from
    the rates of litellm's price map or the config's prices (each request: the model's context window
    in, its cap out)."""
    from heuresis.preflight.spend import spend_bounds
    from heuresis.stages.games.workflow import scenario_names

    rows = {(r.agent, r.part): r for r in spend_bounds(paper_config)}
    scenarios = scenario_names(paper_config)
    n_scn = 14 + 3                 # CausalGame's 14 files and one test variant of each of three (weather has no trap)
    assert len(scenarios) == n_scn and sum("@test" in s for s in scenarios) == 3
    # episodes of one model: tight (10 turns), generous (60) in the budget sweep x last turn none/once/retry
    # on 4 families x 16 instances; every other LLM request is a standard one (30 turns)
    tight, generous = 4 * 16 * (10 + 11 + 12), 4 * 16 * (60 + 61 + 62)
    standard = 151_584 // 3 - tight - generous
    parts = {"episodes": (tight + generous + standard, tight * 2000 + generous * 8000 + standard * 4000),
             "games_agentic": (n_scn * 3 * 41, n_scn * 3 * 41 * 4000),     # 3 plays, 40 turns + the debrief
             "games_prompting": (n_scn * 3 * 41, n_scn * 3 * 41 * 4000)}   # the same in text; 4000 tokens a reply
    # offline players 20 plays each; the LLM players' 3 per mode, but not those of the judge's own model family;
    # each play judged in both protocol views (committed, as_published)
    assert paper_config["games"]["protocols"] == ["committed", "as_published"]
    judged = 2 * (5 * n_scn * 20 + 2 * 2 * n_scn * 3)
    leak = 7 * 2 * 3                                                     # networks x conditions x repeats
    total_requests = total_dollars = 0
    for agent, (_model, max_out) in _MODELS.items():
        window, rate_in, rate_out = _rates(paper_config, agent)
        for part, (n, out) in {**parts, "leakage": (leak, leak * max_out)}.items():
            r = rows[(agent, part)]
            assert (r.requests, r.input_tokens, r.output_tokens) == (n, n * window, out), (agent, part)
            assert r.dollars == pytest.approx(n * window * rate_in + out * rate_out)
        judge = rows[(f"judge_{agent}", "judgements")]
        assert (judge.requests, judge.output_tokens) == (judged, judged * 1500)
        assert judge.dollars == pytest.approx(judged * (window * rate_in + 1500 * rate_out))
        for a in (agent, f"judge_{agent}"):
            total_requests += rows[(a, "total")].requests
            total_dollars += rows[(a, "total")].dollars
    assert total_requests == 151_584 + 3 * (2 * n_scn * 3 * 41 + judged + leak)
    assert {a for a, _ in rows} == {*_MODELS, *(f"judge_{m}" for m in _MODELS)}


def test_an_unknown_price_or_window_is_unknown_never_zero(paper_config):
    from heuresis.preflight.spend import spend_bounds

    cfg = copy.deepcopy(paper_config)
    cfg["agents"]["gpt"]["model"] = "openai/no-such-model"                 # no window, no price
    cfg["agents"]["qwen"].update(model="hosted_vllm/my-model", prices={"input_per_mtok": 0, "output_per_mtok": 0})
    rows = {(r.agent, r.part): r for r in spend_bounds(cfg)}
    gpt = rows[("gpt", "total")]
    assert gpt.requests == rows[("claude", "total")].requests and gpt.input_tokens is None and gpt.dollars is None
    assert rows[("gpt", "leakage")].output_tokens is None                  # no max_tokens, no known output limit
    assert rows[("gpt", "episodes")].output_tokens == rows[("claude", "episodes")].output_tokens
    qwen = rows[("qwen", "episodes")]
    assert qwen.input_tokens is None and qwen.dollars == 0.0               # a free local model: $0 whatever the tokens
    cfg["agents"]["qwen"]["prices"] = {"input_per_mtok": 1.0, "output_per_mtok": 0}
    assert {(r.agent, r.part): r for r in spend_bounds(cfg)}[("qwen", "episodes")].dollars is None


def test_check_config_prints_each_grids_bill(root, capsys):
    from heuresis.cli import main

    main(["check-config", "--config", str(root / "config/config.yaml")])
    out = capsys.readouterr().out
    assert re.search(r"main +1,344 episodes +1,344 LLM", out), out
    assert re.search(r"prompts +1,152 episodes +1,152 LLM \( +1,056 new\)", out), out
    assert "total: 4,704 LLM episodes" in out, out
    assert "LLM requests at most" in out


GRID_OVERLAY = """\
episodes:
  shard_size: 1
  grids:
    subset:
      agents: [shortcut]
      guided: [true]
      instances: [1, 3]
      repeats: {lg: 2, default: 1}
      families: [lg, wild]
  run: [subset]
"""


@pytest.mark.slow
def test_dry_run_plans_the_episode_jobs_of_the_subset_and_repeats(tmp_path):
    """Snakemake plans exactly the shards of instances 1 and 2 (shard size 1), two repeats on lg, one on wild."""
    import subprocess
    import sys

    from tinyflow import copy_workflow

    wf = copy_workflow(tmp_path / "wf")
    (wf / "config" / "subset.yaml").write_text(GRID_OVERLAY)
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--configfile", "config/quick.yaml",
                           "config/subset.yaml", "--", "results/analysis/episode_scores.parquet"],
                          cwd=wf, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    planned = set(re.findall(r"results/episodes/(\S+?)\.parquet", proc.stdout))
    planned = {p for p in planned if not p.endswith((".calls", ".requests"))}
    cond = "full-guided-p0-none-standard-once-r{}"
    expected = {f"shortcut/{cond.format(r)}/{fam}/test/shard-{s:03d}"
                for fam, reps in (("lg", 2), ("wild", 1)) for r in range(reps) for s in (1, 2)}
    assert planned == expected, sorted(planned)


# --- boundaries: the largest or smallest allowed value passes ------------------------------------
EDGES = [
    ("degree d - 1", lambda c: c["graph"].update(expected_degree=9)),
    ("df just above 2", lambda c: c["mechanisms"]["linear_t3"].update(df=2.01)),
    ("one hidden unit, one feature", lambda c: (c["mechanisms"]["mlp"].update(hidden=1),
                                                c["mechanisms"]["fourier"].update(features=1))),
    ("d and n at the caps", lambda c: c["instances"].update(d=1000, n=100_000, n_dev=9999, n_test=1)),
    ("largest seed", lambda c: c.update(seed=2**32 - 1)),
    ("valid override", lambda c: c["families"]["anm"]["kinds"]["mlp"].update(params={"hidden": 3})),
]


@pytest.mark.parametrize("name,edit", EDGES, ids=[e[0] for e in EDGES])
def test_allowed_edges_validate(paper_config, name, edit):
    validate_config(_broken(paper_config, edit))


def test_every_builtin_kind_declares_its_constants(paper_config):
    """The schema declares the constants of each registered kind, and the paper config gives exactly those."""
    from heuresis.causal.mechanisms import MECHANISMS
    from heuresis.config import constants_schema

    for kind in MECHANISMS:
        node = constants_schema(kind)
        assert node is not None, kind
        assert node["additionalProperties"] is False, kind
        assert set(node.get("properties", {})) == set(paper_config["mechanisms"][kind]), kind


def test_shipped_configs_validate(root, tmp_path):
    """The paper, small and tests' tiny configs and every games scenario validate."""
    from tinyflow import TINY

    from heuresis.causal.games.scenario import load_scenarios
    from heuresis.preflight import load_config

    (tmp_path / "tiny.yaml").write_text(TINY)
    tiny = load_config(root / "config/config.yaml", root / "config/quick.yaml", tmp_path / "tiny.yaml")
    assert tiny["instances"] == {"d": 5, "n": 200, "n_dev": 2, "n_test": 2}
    folder = root / "config/games/causalgame"
    assert len(load_scenarios(folder)) == len(list(folder.glob("*.yaml"))) == 14


# --- config files: malformed YAML and unsafe tags -------------------------------------------------
YAML_CASES = [
    ("unclosed list", "instances:\n  d: 6\n  n: [300\n", "line 4, column 1",
     "while parsing a flow sequence (started on line 3, column 6)"),
    ("tab indentation", "instances:\n\td: 6\n", "line 2, column 1", "found character '\\t'"),
    ("unclosed quote", 'seed: "12\n', "line 2, column 1", "while scanning a quoted scalar"),
    ("bad indentation", "instances:\n  d: 6\n n: 300\n", "line 3, column 2", "expected <block end>"),
    ("object/apply tag", 'instances: !!python/object/apply:os.system ["touch {pwned}"]\n', "line 1, column 12",
     "unsafe or unknown YAML tag !!python/object/apply:os.system"),
    ("python/name tag", "instances: !!python/name:os.system\n", "line 1, column 12",
     "unsafe or unknown YAML tag !!python/name:os.system"),
    ("local tag", "seed: !env SEED\n", "line 1, column 7", "unsafe or unknown YAML tag !env"),
    ("duplicate key", "instances:\n  d: 6\n  d: 7\n", "line 3, column 3", "key 'd' given twice (first on line 2)"),
    ("two documents", "seed: 1\n---\nseed: 2\n", "line 2, column 1", "expected a single document"),
    ("top-level list", "- seed\n- 1\n", "", "must hold a mapping of config keys, got a list"),
    ("YTE template", "__use_yte__: true\nseed: ?1 + 1\n", "", "a YTE template (__use_yte__)"),
]


@pytest.mark.parametrize("name,text,where,words", YAML_CASES, ids=[c[0] for c in YAML_CASES])
def test_bad_yaml_names_file_and_line(root, tmp_path, name, text, where, words):
    from heuresis.preflight import load_config

    pwned = tmp_path / "pwned"
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("{pwned}", str(pwned)))
    with pytest.raises(ConfigError) as info:
        load_config(root / "config/config.yaml", bad)
    msg = str(info.value)
    assert "\n" not in msg, msg
    assert msg.startswith(f"config file {bad}{', ' + where if where else ''}: "), msg
    assert words in msg, msg
    assert not pwned.exists()   # nothing in the file ran


def test_missing_config_file(tmp_path):
    from heuresis.preflight import load_config

    with pytest.raises(ConfigError, match=f"config file {tmp_path / 'nope.yaml'}: not found"):
        load_config(tmp_path / "nope.yaml")


@pytest.mark.parametrize("text,words", [("instances: !!python/name:os.system\n", "line 1, column 12: unsafe"),
                                        ("{seed: [1, 2}\n", "line 1, column 13: while parsing a flow sequence")])
def test_check_config_cli_one_line_no_traceback(root, tmp_path, text, words):
    """The installed command: exit status non-zero, one line on stderr naming the file and line."""
    import subprocess
    import sys

    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    proc = subprocess.run([sys.executable, "-m", "heuresis.cli", "check-config", "--config",
                           str(root / "config/config.yaml"), "--config", str(bad)],
                          capture_output=True, text=True, cwd=root, timeout=300)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"heuresis check-config: error: config file {bad}, {words}"), lines


@pytest.mark.parametrize("text,words", [
    ("instances: !!python/name:os.system\n", "config file {bad}, line 1, column 12: unsafe or unknown YAML tag"),
    ("instances:\n  d: 6\n  d: 7\n", "config file {bad}, line 3, column 3: key 'd' given twice"),
    ("instances: {d: 2.5}\n", "config key instances.d: 2.5 is not of type 'integer' (allowed: an integer in [2, 1000])"),
    # Snakemake reads --configfile before the workflow runs: its own message, without file or line
    ("instances: {d: [6}\n", "Config file is not valid JSON or YAML"),
])
def test_workflow_stops_with_a_message(tmp_path, text, words):
    from tinyflow import copy_workflow, run_snakemake

    wd = copy_workflow(tmp_path / "wf")
    bad = wd / "config" / "bad.yaml"
    bad.write_text(text)
    proc = run_snakemake(wd, "all", "-n", "--cores", "1", "--configfile", "config/quick.yaml", "config/bad.yaml",
                         check=False, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert words.format(bad=bad) in out, out
    assert "Traceback" not in out and "common.smk" not in out, out   # the message alone, no line of our rules


def test_cli_invalid_value_message(root, tmp_path, capsys):
    from heuresis.cli import main

    (tmp_path / "bad.yaml").write_text("mechanisms:\n  mlp: {hidden: 2.5}\n")
    assert main(["check-config", "--config", str(root / "config/config.yaml"), "--config",
                 str(tmp_path / "bad.yaml")]) == 2
    err = capsys.readouterr().err
    assert "config key mechanisms.mlp.hidden: 2.5 is not of type 'integer' (allowed: an integer in [1, 1000])" in err


def test_scenario_yaml_error_names_file_and_line(tmp_path):
    from heuresis.causal.games.scenario import ScenarioError, load_scenario

    (tmp_path / "broken.yaml").write_text("name: broken\nseed: !!python/name:os.system\n")
    with pytest.raises(ScenarioError) as info:
        load_scenario("broken", tmp_path)
    assert str(info.value) == (f"scenario 'broken': scenario file {tmp_path / 'broken.yaml'}, line 2, column 7: "
                               "unsafe or unknown YAML tag !!python/name:os.system (a config holds plain YAML only: "
                               "mappings, lists, strings, numbers, booleans, null)")


@pytest.mark.parametrize("instance,words", [
    ("wild", "instance id 'wild': expected family/split/index, e.g. wild/test/0003"),
    ("lg/test/x", "instance id 'lg/test/x': expected family/split/index"),
    ("lg/test/0007", "instance id 'lg/test/0007': no instance 7 in lg/test (indices 0000..0001)"),
])
def test_show_instance_bad_id(quick_config, tmp_path, capsys, instance, words):
    import copy

    from heuresis.cli import main
    from heuresis.stages.instances import instance_spec, write_split

    cfg = copy.deepcopy(quick_config)
    cfg["instances"].update(d=4, n=50)
    write_split(instance_spec(cfg, "lg"), "lg", "test", 2, tmp_path / "instances/lg/test", tmp_path / "truth/lg/test")
    assert main(["show-instance", instance, "--results", str(tmp_path)]) == 2
    assert f"heuresis show-instance: error: {words}" in capsys.readouterr().err


def test_verify_artifacts_missing_folder(tmp_path, capsys):
    from heuresis.cli import main

    assert main(["verify-artifacts", str(tmp_path / "nope")]) == 2
    assert f"no results folder {tmp_path / 'nope'}" in capsys.readouterr().err


def test_broken_scenario_file_named_at_start(paper_config, tmp_path):
    """A scenario file with a YAML error fails config validation naming the file and line."""
    (tmp_path / "broken.yaml").write_text("name: broken\nseed: [1\n")
    cfg = copy.deepcopy(paper_config)
    cfg["games"].update(scenarios_dir=str(tmp_path), scenarios=["broken"])
    with pytest.raises(ConfigError) as info:
        validate_config(cfg)
    assert (f"config key games.scenarios: scenario 'broken': scenario file {tmp_path / 'broken.yaml'}, line 3, "
            f"column 1: while parsing a flow sequence (started on line 2, column 7)") in str(info.value)


@pytest.mark.parametrize("folder,words", [("nope", "no scenario folder {d}/nope"),
                                          ("empty", "no scenario file (*.yaml) in {d}/empty")])
def test_game_references_without_scenarios(tmp_path, capsys, folder, words):
    from heuresis.cli import main

    (tmp_path / "empty").mkdir()
    assert main(["game-references", "--scenarios", str(tmp_path / folder)]) == 2
    assert words.format(d=tmp_path) in capsys.readouterr().err


@pytest.mark.parametrize("override,words", [
    ("model: plasma", "model: 'plasma' is not one of ['antenna', 'weather', 'zone']"),
    ("seed: abc", "seed: every draw derives from the scenario's integer seed, got 'abc'"),
    ("seed: true", "seed: every draw derives from the scenario's integer seed, got True"),
    ("name: bad_one", "key 'name' given twice"),
])
def test_scenario_values_name_key_and_range(root, tmp_path, override, words):
    import shutil

    from heuresis.causal.games.scenario import ScenarioError, load_scenario

    shutil.copy(root / "config/games/causalgame/antenna_trap.yaml", tmp_path / "antenna_trap.yaml")
    (tmp_path / "bad_one.yaml").write_text(f"extends: antenna_trap\nname: bad_one\n{override}\n")
    with pytest.raises(ScenarioError) as info:
        load_scenario("bad_one", tmp_path)
    assert str(info.value).startswith("scenario 'bad_one': ") and words in str(info.value)


def test_code_defaults_are_the_schema_defaults(root):
    """A section left out of a config gets the schema's defaults; the code's own defaults are the same values."""
    import dataclasses

    from heuresis.causal.bootstrap import LEVEL, RESAMPLES
    from heuresis.causal.games.scenario import SCENARIO_DIR
    from heuresis.config import read_config_files
    from heuresis.harness.conditions import Condition
    from heuresis.harness.sandbox import SandboxLimits

    raw = read_config_files(root / "config/config.yaml")
    for section, key in (("episodes", "code_tool"), ("episodes", "grids"), ("bootstrap", "resamples"),
                         ("bootstrap", "level"), ("games", "scenarios_dir")):
        raw[section].pop(key, None)
    raw["episodes"]["grids"] = {"bare": {"agents": ["shortcut"]}}
    raw["episodes"]["run"] = []
    cfg = validate_config(raw)
    assert dataclasses.asdict(SandboxLimits()) == {k: v for k, v in cfg["episodes"]["code_tool"].items()
                                                   if k != "isolation"}
    grid = cfg["episodes"]["grids"]["bare"]
    bare = Condition("shortcut")
    assert [bare.toolbox, bare.guided, bare.prompt_level, bare.target, bare.budget, bare.last_turn] == [
        grid[k][0] for k in ("toolbox", "guided", "prompt_level", "target", "budget", "last_turn")]
    assert (RESAMPLES, LEVEL) == (cfg["bootstrap"]["resamples"], cfg["bootstrap"]["level"])
    assert SCENARIO_DIR == cfg["games"]["scenarios_dir"]


def test_condition_id_pattern_matches_exactly_the_condition_ids():
    """The workflow's wildcard constraint (the package's pattern) accepts every condition id and nothing else."""
    import itertools

    from heuresis.harness.conditions import CONDITION_ID_PATTERN, LAST_TURNS, PROMPT_LEVELS, TARGETS, TOOLBOXES, Condition

    pattern = re.compile(CONDITION_ID_PATTERN)
    for toolbox, guided, level, target, last in itertools.product(TOOLBOXES, (True, False), PROMPT_LEVELS, TARGETS,
                                                                    LAST_TURNS):
        cid = Condition("a", toolbox, guided, level, target, "tight_2", last, 12).condition_id
        assert pattern.fullmatch(cid), cid
        assert Condition.from_id("a", cid).condition_id == cid
    for bad in ("full-guided-p4-none-standard-once-r0", "full-guided-p0-none-standard-twice-r0",
                "partial-guided-p0-none-standard-once-r0", "full-guided-p0-none-Standard-once-r0",
                "full-guided-p0-none-standard-once-r"):
        assert not pattern.fullmatch(bad), bad


def test_scenario_files_follow_extends(tmp_path):
    """A scenario's job depends on its file and every file it extends, child first."""
    from heuresis.causal.games.scenario import scenario_files

    (tmp_path / "base.yaml").write_text("name: base\n")
    (tmp_path / "middle.yaml").write_text("extends: base\nname: middle\n")
    (tmp_path / "leaf.yaml").write_text("extends: middle\nname: leaf\n")
    (tmp_path / "orphan.yaml").write_text("extends: nowhere\nname: orphan\n")
    (tmp_path / "loop_a.yaml").write_text("extends: loop_b\n")
    (tmp_path / "loop_b.yaml").write_text("extends: loop_a\n")
    assert scenario_files("leaf", tmp_path) == [str(tmp_path / f"{n}.yaml") for n in ("leaf", "middle", "base")]
    assert scenario_files("orphan", tmp_path) == [str(tmp_path / "orphan.yaml")]
    assert scenario_files("loop_a", tmp_path) == [str(tmp_path / "loop_a.yaml"), str(tmp_path / "loop_b.yaml")]
    assert scenario_files("missing", tmp_path) == []


def test_each_reference_batch_has_a_name_that_does_not_depend_on_its_position(paper_config):
    """Reordering references.batches keeps each batch's rule name (references_<first algorithm>)."""
    from heuresis.stages.references import reference_batches

    batches = reference_batches(paper_config)
    swapped = copy.deepcopy(paper_config)
    swapped["references"]["batches"] = list(reversed(paper_config["references"]["batches"]))
    names = {b[0]: b for b in batches}
    assert len(names) == len(batches)   # first algorithms are unique: an algorithm is in one batch only
    assert {b[0]: b for b in reference_batches(swapped)} == names


def test_transport_keys_are_llm_settings_and_split_an_entry(paper_config):
    """Every transport key is a declared setting of an llm agent; an entry is its result part plus its transport part."""
    from heuresis.config.loading import schema
    from heuresis.harness.agent_spec import TRANSPORT_KEYS, result_spec, transport_of

    llm = schema()["properties"]["agents"]["additionalProperties"]["then"]["properties"]
    assert TRANSPORT_KEYS <= set(llm), sorted(TRANSPORT_KEYS - set(llm))
    spec = {**paper_config["agents"]["claude"], "retries": {"max_retries": 2}, "api_key_env": "MY_KEY"}
    assert {**result_spec(spec), **transport_of(spec)} == spec
    assert set(transport_of(spec)) == {"timeout_s", "retries", "api_key_env", "max_run_usd"}
    assert result_spec(spec)["thinking"] == {"type": "enabled", "budget_tokens": 1024}


# --- check-config reads configs as the workflow does: the base config under the overlays ----------------
def test_check_config_reads_an_overlay_over_the_base_config(root, tmp_path, monkeypatch, capsys):
    """``--config config/quick.yaml`` alone: config/config.yaml first, as the Snakefile's configfile."""
    import yaml

    from heuresis.cli import main

    monkeypatch.chdir(root)
    quick = yaml.safe_load((root / "config/quick.yaml").read_text())
    base = yaml.safe_load((root / "config/config.yaml").read_text())
    assert "seed" not in quick and "seed" in base          # the small config is an overlay
    assert main(["check-config", "--config", "config/quick.yaml"]) == 0
    out = capsys.readouterr().out
    assert "config files merged, in order: config/config.yaml, config/quick.yaml" in out, out
    i = quick["instances"]
    assert f"config OK: d={i['d']}, n={i['n']}, {i['n_dev']} dev + {i['n_test']} test" in out, out
    # the base given first is read once; --no-base reads the overlay alone, which lacks required keys
    assert main(["check-config", "--config", "config/config.yaml", "--config", "config/quick.yaml"]) == 0
    assert "in order: config/config.yaml, config/quick.yaml\n" in capsys.readouterr().out
    assert main(["check-config", "--no-base", "--config", "config/quick.yaml"]) == 2
    assert "config key seed: missing (required)" in capsys.readouterr().err
    # without --config: the base alone
    assert main(["check-config"]) in (0, 1)                  # 1: the paper config's LLM keys are not set
    assert "config files merged, in order: config/config.yaml\n" in capsys.readouterr().out
    # outside the workflow's folder the base is not there: a clear error, not the overlay alone
    monkeypatch.chdir(tmp_path)
    assert main(["check-config", "--config", str(root / "config/quick.yaml")]) == 2
    err = capsys.readouterr().err
    assert "base config config/config.yaml: not found in" in err and "--no-base" in err, err


# --- typed settings (heuresis.config.settings) --------------------------------------------------

def test_typed_settings_give_back_the_validated_mappings(quick_config):
    """Each dataclass's as_dict is its validated mapping: the same keys, order and values."""
    from heuresis.preflight import typed_settings

    t = typed_settings(quick_config)
    eps = quick_config["episodes"]
    pairs = [(t.bootstrap.as_dict(), quick_config["bootstrap"]), (t.code_tool.as_dict(), eps["code_tool"]),
             *((t.budgets[n].as_dict(), eps["budgets"][n]) for n in eps["budgets"])]
    for typed, plain in pairs:
        assert list(typed.items()) == list(plain.items())
        assert [type(v) for v in typed.values()] == [type(v) for v in plain.values()]   # nothing converted
    assert set(t.budgets) == set(eps["budgets"]) and all(b.name == n for n, b in t.budgets.items())
    llm = {n for n, s in quick_config["agents"].items() if s.get("kind") == "llm"}
    assert set(t.retries) == llm


def test_typed_settings_fill_in_the_schema_defaults_and_are_frozen():
    import dataclasses

    from heuresis.config.loading import schema_default
    from heuresis.config.settings import Bootstrap, CodeTool, Retries

    assert Bootstrap.from_config({}).as_dict() == {k: schema_default("bootstrap", k) for k in ("resamples", "level", "seed")}
    assert Bootstrap.from_config({"seed": 3}).seed == 3
    assert CodeTool.from_config({"isolation": "best_effort"}).isolation == "best_effort"
    assert Retries.coerce(None) == Retries() and Retries.coerce({"max_retries": 0}).max_retries == 0
    b = Bootstrap(resamples=100)
    assert Bootstrap.coerce(b) is b
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.seed = 1


@pytest.mark.parametrize("build, key", [
    (lambda s: s.Bootstrap.from_config({"resamples": 5}), "bootstrap.resamples"),
    (lambda s: s.Bootstrap.from_config({"level": 1.5}), "bootstrap.level"),
    (lambda s: s.Bootstrap.from_config({"resamples": 2000.0}), "bootstrap.resamples"),
    (lambda s: s.Bootstrap.from_config({"seed": 1, "sead": 2}, "games.bootstrap"), "games.bootstrap"),
    (lambda s: s.BudgetSettings.from_config("tight", {"test_units_factor": 1.0, "turns": 0, "output_tokens_per_turn": 10,
                                                      "algorithm_calls": 1, "wall_seconds": 5}),
     "episodes.budgets.tight.turns"),
    (lambda s: s.BudgetSettings.from_config("tight", {"turns": 3}), "episodes.budgets.tight.wall_seconds"),
    (lambda s: s.CodeTool.from_config({"memory_mb": 1}), "episodes.code_tool.memory_mb"),
    (lambda s: s.CodeTool.from_config({"isolation": "maybe"}), "episodes.code_tool.isolation"),
    (lambda s: s.Retries.from_config({"base_s": -1}, "agents.gpt.retries"), "agents.gpt.retries.base_s"),
    (lambda s: s.Retries.from_config([1], "agents.gpt.retries"), "agents.gpt.retries"),
])
def test_a_bad_setting_is_a_config_error_naming_its_key(build, key):
    from heuresis.config import settings

    with pytest.raises(ConfigError, match=re.escape(f"config key {key}")):
        build(settings)
