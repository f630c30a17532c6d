"""A bad configuration fails with the offending key named."""

import copy
import re

import pytest

from heuresis.config import ConfigError, validate_config


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
    ("typo at top", lambda c: c.update(sede=1), "<top level>", "sede"),
    ("missing instances key", lambda c: c["instances"].pop("n"), "instances.n", "missing"),
    ("unknown prior", lambda c: c["graph"].update(priors=["sf"]), "graph.priors.0", "sf"),
    ("bad constant range", lambda c: c["mechanisms"]["sigmoid"].update(gain=[3.0, 1.0]), "mechanisms.sigmoid.gain",
     "inverted"),
    ("bad family override", lambda c: c["families"]["wild"]["kinds"]["fourier"].update(params={"frequency": [-1, 2]}),
     "families.wild.kinds.fourier.params.frequency", "negative"),
    ("short range", lambda c: c["families"]["lg"].update(root_noise=[1.0]), "families.lg.root_noise", "short"),
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
                               "kinds": {"sigmoid": {"weight": 3, "noise": [0.2, 0.3]}, "abs": {"weight": 1, "noise": [0.2, 0.3]}}}
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
    from heuresis.config import episode_jobs

    return {(j["agent"], j["condition_id"], j["family"], j["split"], i) for j in episode_jobs(config)
            for i in j["indices"]}


def test_grid_instance_subset_and_repeats_per_family_expand_as_written():
    from heuresis.config import episode_job_indices, episode_jobs
    from heuresis.harness.conditions import expand_conditions, grid_plan

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
    ("subset beyond the split", {"instances": 40}, "episodes.grids.g.instances", "up to index 39"),
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
    ("zero instances", {"instances": 0}, "episodes.grids.g.instances", "empty"),
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
