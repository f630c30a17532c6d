"""The workflow's plan: what every rule of ``rules/`` asks of the validated config, in one object.

``rules/common.smk`` builds one :class:`WorkflowPlan` from the config Snakemake read (validated,
defaults filled in) and the rule files declare their inputs, params and resources by naming its
attributes; nothing else in the rule files computes.  Each method that a rule calls per job takes
the job's ``wildcards`` (anything with the wildcard names as attributes); the rest are the lists
and config slices of the whole run.

A params value here is what Snakemake compares between runs to decide whether a job reruns (its
"params changed" trigger), so each is exactly the config slice its job depends on: editing the
config reruns only the jobs whose slice changed (docs/configuration.md).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from heuresis.artifacts import paths as P
from heuresis.artifacts.failures import attempt_param
from heuresis.artifacts.sealing import SALT_FILE, write_salt
from heuresis.causal.games.scenario import load_scenario, scenario_files
from heuresis.config import SPLITS
from heuresis.harness.agent_spec import result_spec
from heuresis.harness.conditions import cell_records, grid_plan
from heuresis.harness.prompts import EPISODE_PROMPTS, JUDGE_PROMPTS, LEAKAGE_PROMPTS, play_prompts, prompt_digests
from heuresis.registry import MODEL_KINDS
from heuresis.stages.episodes import episode_job_config, episode_job_indices, episode_job_runtime, episode_jobs
from heuresis.stages.games.variants import base_of, is_variant, variant_spec
from heuresis.stages.games.workflow import (
    judgement_job_runtime,
    judges_for,
    max_turns_of,
    play_job_runtime,
    play_jobs,
    plays_of,
    scenario_folder,
)
from heuresis.stages.instances import instance_spec
from heuresis.stages.jobs import llm_resource, llm_resources
from heuresis.stages.leakage import leakage_job_runtime
from heuresis.stages.pilot import pc_kci_paths
from heuresis.stages.pilot import pilot_plan as plan_pilot
from heuresis.stages.references import reference_batches, reference_shard_indices, reference_shards
from heuresis.stages.saturation import saturation_settings
from heuresis.stages.verification import CHECKS, check_settings
from heuresis.targets.build import caption_text
from heuresis.targets.published import (
    causalgame_leaderboard_path,
    load_published_table2,
    published_table2_path,
    published_table13_path,
)
from heuresis.targets.registry import Target, caption_file, paper_targets, target_files
from heuresis.targets.table1 import load_table1

__all__ = ["WorkflowPlan", "expand"]

#: Public networks whose saturation jobs are long (PC-KCI on 27 and more nodes).
SLOW_NETWORKS = ("insurance", "alarm", "child")


def expand(patterns: str | Sequence[str], **values: Sequence) -> list[str]:
    """Every pattern formatted with every combination of ``values`` (Snakemake's ``expand``, same order)."""
    pats = [patterns] if isinstance(patterns, str) else list(patterns)
    lists = [[v] if isinstance(v, str) else list(v) for v in values.values()]
    return [p.format(**dict(zip(values, combo))) for p in pats for combo in itertools.product(*lists)]


class WorkflowPlan:
    """What the rules of one run ask of its config (validated, its defaults filled in).

    Parameters
    ----------
    config : Mapping
        The validated config (:func:`heuresis.preflight.validate_config`).
    secrets : Mapping
        The run's secrets regime (:func:`heuresis.artifacts.sealing.disclosure`): never a secret.
    basedir : path
        The workflow's folder (captions are read relative to it).
    """

    def __init__(self, config: Mapping, secrets: Mapping, basedir: str | Path) -> None:
        self.config = config
        self.basedir = Path(basedir)
        self.secrets = dict(secrets)
        #: what the headroom tables disclose of the secrets regime (the salt is not theirs)
        self.test_seed = {k: v for k, v in secrets.items() if k != "salt"}
        self.families = list(config["families"])
        self.llm_resources = llm_resources(config)
        # references
        self.menu = list(config["references"]["algorithms"])
        self.baselines = list(config["references"]["baselines"])
        self.swept = self.menu + self.baselines
        # each batch's rule is named after its first algorithm (references_<algorithm>), not its position
        self.reference_batches = {batch[0]: batch for batch in reference_batches(config)}
        # episodes
        self.episode_jobs = episode_jobs(config)
        self.episode_scopes = sorted({(j["family"], j["split"]) for j in self.episode_jobs})
        # agents of the active episode grids, in config order (game agents and judges do not touch the analysis)
        self.episode_agents = [a for a in config["agents"] if any(a in config["episodes"]["grids"][g]["agents"]
                                                                  for g in config["episodes"]["run"])]
        self.verification_checks = list(CHECKS)
        self.verification_scale = config["verification"]["scale"]
        self.leakage_agents = list(config["leakage"]["agents"])
        self.saturation_networks = list(config["saturation"]["networks"])
        # games: a test variant (NAME@testK) is drawn by its references job; planning needs only its family,
        # its public scenario's
        self.games = config["games"]
        self.game_folder = str(scenario_folder(config))
        self.game_jobs = play_jobs(config)
        self.game_scenarios = {s: load_scenario(base_of(s), self.game_folder)
                               for s in sorted({j["scenario"] for j in self.game_jobs})}
        self.game_families = sorted({s.family for s in self.game_scenarios.values()})
        self.game_agent_modes = sorted({(j["agent"], j["mode"]) for j in self.game_jobs})
        self.paper_targets = paper_targets(self.game_families)

    # --- shared ------------------------------------------------------------------------------------
    def llm_slots(self, role: str) -> dict[str, Callable]:
        """The provider resources of a model-calling rule.

        One unit of the provider of the agent named by wildcard ``role`` (agent, or judge for
        judgements), none of the others.
        """

        def slot(name):
            def units(wildcards):
                return int(llm_resource(self.config, getattr(wildcards, role)) == name)

            return units

        return {name: slot(name) for name in self.llm_resources}

    def result_agent_spec(self, name: str) -> dict:
        """An agent's config entry without its transport settings: the params of the jobs calling it.

        Transport settings (timeouts, retries, where the URL and key are read from:
        :data:`heuresis.harness.agent_spec.TRANSPORT_KEYS`) are left out, so changing how a model
        is asked reruns nothing. The job reads the full entry from the config at run time.
        """
        return result_spec(self.config["agents"][name])

    @staticmethod
    def attempt_of(output: str) -> Callable:
        """The ``attempt`` parameter of the jobs writing ``output`` (a pattern).

        It changes after a run with failed units, so the job reruns. A function of the wildcards
        only: Snakemake ignores changes of parameters computed from input or output files.
        """

        def attempt(wildcards):
            return attempt_param(output.format(**dict(wildcards.items())))

        return attempt

    @staticmethod
    def site_results_folder(wildcards, output) -> str:
        """The results folder the viewer's export is written into (rule view), from its output."""
        return str(Path(output.site).parent)

    # --- instances ---------------------------------------------------------------------------------
    def n_instances(self, wildcards) -> int:
        """Instances of a split (config: instances.n_dev / instances.n_test)."""
        return int(self.config["instances"][f"n_{wildcards.split}"])

    def instance_params(self, wildcards) -> dict:
        """The config slice a family's instances depend on; a change elsewhere reruns nothing here."""
        return instance_spec(self.config, wildcards.family, wildcards.split)

    def instance_outputs(self) -> list[str]:
        """The instances and hidden truth of every family and split."""
        return expand([P.INSTANCES, P.TRUTH_GRAPHS, P.TRUTH_NODES], family=self.families, split=SPLITS)

    def all_targets(self) -> list[str]:
        """Every final target of the workflow: the instances, the episodes, and every paper table and figure."""
        return (self.instance_outputs() + self.episode_outputs()
                + [p for t in self.paper_targets for p in target_files(t).values()])

    # --- references --------------------------------------------------------------------------------
    def algorithm_params(self, name: str) -> dict:
        """The parameters of a swept algorithm (from the menu or the baselines)."""
        section = "algorithms" if name in self.config["references"]["algorithms"] else "baselines"
        return dict(self.config["references"][section][name])

    def reference_indices(self, wildcards) -> list[int]:
        """The instances of a reference job's shard (references.shard_size each)."""
        return reference_shard_indices(self.config, wildcards.split, int(wildcards.shard))

    @staticmethod
    def reference_runtime(batch: Sequence[str]) -> int:
        """Minutes requested per reference job: its slowest algorithm's cost class (paper scale: 25 instances)."""
        from heuresis.causal.algorithms import ALGORITHMS
        from heuresis.causal.algorithms.base import COST_CLASSES

        return max(COST_CLASSES[ALGORITHMS.lookup(name).cost_class] for name in batch)

    @staticmethod
    def reference_template(algorithm: str) -> str:
        """The path template of one algorithm's reference shards (wildcards family, split, shard)."""
        return P.REFERENCES.replace("{algorithm}", algorithm)

    def reference_outputs(self, algorithms=None, families=None, splits=SPLITS) -> list[str]:
        """The reference Parquets of the given algorithms, families and splits (default: all)."""
        return [P.REFERENCES.format(algorithm=a, family=f, split=s, shard=P.shard(k))
                for a in algorithms or self.swept for f in families or self.families for s in splits
                for k in reference_shards(self.config, s)]

    # --- headroom and the targets' data files ------------------------------------------------------
    def headroom_params(self, wildcards=None) -> dict:
        """What the headroom stage depends on besides its inputs: the menu, the baselines, its section."""
        return {"menu": self.menu, "baselines": self.baselines, **self.config["headroom"]}

    def test_truth(self) -> list[str]:
        """The hidden truth of every family's test split."""
        return expand(P.TRUTH_GRAPHS, family=self.families, split="test")

    # --- episodes ----------------------------------------------------------------------------------
    def episode_indices(self, wildcards) -> list[int]:
        """The instances of the job's shard its grids select (episodes.grids.*.instances)."""
        return episode_job_indices(self.episode_jobs, wildcards.agent, wildcards.condition_id, wildcards.family,
                                   wildcards.split, int(wildcards.shard))

    def episode_config(self, wildcards) -> dict:
        """The part of the episodes section the job depends on (its budget, the code tool, alpha)."""
        return episode_job_config(self.config, wildcards.condition_id)

    def agent_spec(self, wildcards) -> dict:
        """The config entry of the job's agent (kind and parameters) without its transport settings."""
        return self.result_agent_spec(wildcards.agent)

    # --- prompts: a job's params hold the digests of the templates its messages are built from ----------------
    @staticmethod
    def episode_prompts(wildcards=None) -> dict[str, str]:
        """The digests of an episode's prompt templates (an edit of one reruns every episode, nothing else)."""
        return prompt_digests(EPISODE_PROMPTS)

    @staticmethod
    def game_prompts(wildcards) -> dict[str, str]:
        """The digests of the prompt templates of a play's mode."""
        return prompt_digests(play_prompts(wildcards.mode))

    @staticmethod
    def judge_prompts(wildcards=None) -> dict[str, str]:
        """The digests of the games judge's prompt templates."""
        return prompt_digests(JUDGE_PROMPTS)

    @staticmethod
    def leakage_prompts(wildcards=None) -> dict[str, str]:
        """The digests of the leakage probe's prompt templates."""
        return prompt_digests(LEAKAGE_PROMPTS)

    def episode_runtime(self, wildcards) -> int:
        """Minutes of an episode job: its conditions' wall budget times its episodes, plus a margin."""
        return episode_job_runtime(self.config, wildcards.agent, wildcards.condition_id,
                                   len(self.episode_indices(wildcards)))

    def episode_salt(self, wildcards) -> str | list:
        """The run's salt file (secrets.salt: drawn), drawn the first time an episode job is planned.

        Nothing for the public salt. A source file, not a rule's output: Snakemake deletes a job's
        outputs before it reruns the job (-F, -R, an edited rule), and a redrawn salt would change
        every mask. It is created exclusively (:func:`heuresis.artifacts.sealing.write_salt`), so
        concurrent planners keep one; delete it to draw a new one.
        """
        if self.config["secrets"]["salt"] != "drawn":
            return []
        write_salt(SALT_FILE)
        return SALT_FILE

    def episode_pc_kci(self, wildcards) -> list[str]:
        """PC-KCI references of the family and split: the guided start and the test budget."""
        return self.reference_outputs(["pc_kci"], [wildcards.family], [wildcards.split])

    def episode_outputs(self) -> list[str]:
        """The episode Parquet of every planned episode job."""
        return [P.EPISODES.format(**{**j, "shard": P.shard(j["shard"])}) for j in self.episode_jobs]

    # --- verification (Table 5) --------------------------------------------------------------------
    def verification_settings(self, wildcards) -> dict:
        """The config slice of one check (its scale's sizes, seed, tolerances, instance specs)."""
        return check_settings(self.config, wildcards.check)

    @staticmethod
    def verification_threads(wildcards) -> int:
        """Workers of a check: the exhaustive CPDAG enumeration is parallel, determinism runs 2-thread BLAS."""
        return {"cpdag_bruteforce": 8, "determinism": 2}.get(wildcards.check, 1)

    def verification_mem_mb(self, wildcards) -> int:
        """Memory of a check (MB): the exhaustive CPDAG enumeration at the large scale needs 8 GB."""
        large = self.verification_scale != "small"
        return 8000 if large and wildcards.check == "cpdag_bruteforce" else 2000

    def verification_runtime(self, wildcards) -> int:
        """Minutes per check job (large: the exhaustive d = 6 run and causal-learn's PC-KCI are the long ones)."""
        if self.verification_scale == "small":
            return 15
        return {"cpdag_bruteforce": 90, "pc_vs_causallearn": 90, "oracle_pc": 60, "dsep": 60}.get(wildcards.check, 30)

    # --- leakage probe (Figure 1a) -----------------------------------------------------------------
    def leakage_spec(self, wildcards) -> dict:
        """The config entry of the probed agent without its transport settings."""
        return self.result_agent_spec(wildcards.agent)

    def leakage_runtime(self, wildcards) -> int:
        """Minutes of a leakage job: its requests, each at most the agent's timeout, plus a margin."""
        return leakage_job_runtime(self.config, wildcards.agent)

    # --- Figure 1b, saturation on public network structures ---------------------------------------
    def saturation_params(self) -> dict:
        """The config slice the datasets depend on (sizes, seed, mechanisms, algorithms)."""
        return saturation_settings(self.config)

    def saturation_methods(self) -> list[str]:
        """Figure 1b's methods: its algorithms, and the oracle when PC-KCI is one of them."""
        algorithms = list(self.config["saturation"]["algorithms"])
        return algorithms + (["oracle"] if "pc_kci" in algorithms else [])

    @staticmethod
    def saturation_runtime(wildcards) -> int:
        """Minutes per network job (paper scale: PC-KCI on the 27- and 37-node networks is the slow part)."""
        return 120 if wildcards.network in SLOW_NETWORKS else 30

    # --- Figure 8, scripted repairs ----------------------------------------------------------------
    def repair_settings(self) -> dict:
        """The config slice the signals depend on (the classifier's settings only affect the figure)."""
        return {k: v for k, v in self.config["repairs"].items() if k != "classifier"}

    def repair_feature_outputs(self) -> list[str]:
        """The repair signals of every PC-KCI reference shard."""
        return [P.REPAIR_FEATURES.format(family=f, split=s, shard=P.shard(k)) for f in self.families for s in SPLITS
                for k in reference_shards(self.config, s)]

    # --- analysis (Tables 4, 6-10, 12, 13; Figures 6, 7a, 7b, 9) ---------------------------------
    def episode_calls(self) -> list[str]:
        """The calls table of every planned episode job."""
        return [P.EPISODE_CALLS.format(**{**j, "shard": P.shard(j["shard"])}) for j in self.episode_jobs]

    def episode_references(self) -> list[str]:
        """PC-KCI references of every family and split with episodes (deletion logs, PC-KCI graphs)."""
        return [p for f, s in self.episode_scopes for p in self.reference_outputs(["pc_kci"], [f], [s])]

    def episode_truth(self) -> list[str]:
        """The hidden truth of every family and split with episodes."""
        return [P.TRUTH_GRAPHS.format(family=f, split=s) for f, s in self.episode_scopes]

    # --- games track (docs/games.md; rules/games.smk) ---------------------------------------------
    def game_scenario_file(self, wildcards) -> list[str]:
        """The scenario's file and the files it extends (a change to a parent reruns the variant)."""
        return scenario_files(base_of(wildcards.scenario), self.game_folder)

    def game_variant_spec(self, wildcards) -> dict | None:
        """What a test variant's draws depend on (the public seed or the sealed seed's commitment); None: public."""
        return variant_spec(self.config) if is_variant(wildcards.scenario) else None

    def game_agent_spec(self, wildcards) -> dict:
        """The config entry of the playing agent without its transport settings."""
        return self.result_agent_spec(wildcards.agent)

    def game_judge_spec(self, wildcards) -> dict:
        """The config entry of the judge without its transport settings."""
        return self.result_agent_spec(wildcards.judge)

    def game_play_runtime(self, wildcards) -> int:
        """Minutes of a play job: its plays' requests, each at most the agent's timeout, plus a margin."""
        return play_job_runtime(self.config, wildcards.agent)

    def game_judgement_runtime(self, wildcards) -> int:
        """Minutes of a judgement job: one request per play, each at most the judge's timeout, plus a margin."""
        return judgement_job_runtime(self.config, wildcards.judge, wildcards.agent)

    def game_references(self) -> list[str]:
        """The reference Parquet of every configured scenario."""
        return expand(P.GAME_REFERENCES, scenario=sorted(self.game_scenarios))

    def game_plays(self, agent=None, mode=None) -> list[str]:
        """The plays Parquets of every planned play job (of one agent and mode, if given)."""
        return [P.GAME_PLAYS.format(**j) for j in self.game_jobs
                if agent in (None, j["agent"]) and mode in (None, j["mode"])]

    def game_play_count(self, wildcards) -> int:
        """Plays of a play job: games.plays for an LLM agent, games.baseline_plays for an offline one."""
        return plays_of(self.config, wildcards.agent)

    def game_max_turns(self, wildcards) -> int:
        """Assistant replies per play of the job's agent: games.llm_max_turns (LLM agents) or games.max_turns."""
        return max_turns_of(self.config, wildcards.agent)

    def game_judgements(self) -> list[str]:
        """The judgements of every played agent x mode x scenario by each judge not of the player's model family."""
        return [P.GAME_JUDGEMENTS.format(judge=j, agent=a, mode=m, scenario=s) for a, m in self.game_agent_modes
                for j in judges_for(self.config, a) for s in sorted(self.game_scenarios)]

    def game_bootstrap(self) -> dict:
        """games.bootstrap over the top-level bootstrap section."""
        return {**self.config["bootstrap"], **self.games["bootstrap"]}

    # --- paper targets (rules/targets.smk; heuresis.targets.registry) ------------------------------
    @functools.cached_property
    def target_input_paths(self) -> dict[str, list[str]]:
        """What each input name of a target is (:data:`heuresis.targets.registry.INPUT_NAMES`).

        Raises ValueError for a published Table 2 data file that does not validate.
        """
        c = self.config
        load_published_table2()
        return {
            "headroom_scores": [P.HEADROOM_SCORES],
            "headroom_selection": [P.HEADROOM_SELECTION],
            "episode_scores": [P.EPISODE_SCORES],
            "verification_records": expand(P.VERIFICATION_CHECK, check=self.verification_checks),
            "leakage": expand(P.LEAKAGE, agent=self.leakage_agents, network=c["leakage"]["networks"]),
            "saturation": expand(P.SATURATION, network=self.saturation_networks),
            "repair_features": self.repair_feature_outputs(),
            "table2": [P.TABLE.format(name="table2", ext="parquet")],
            "published_table2": [str(published_table2_path())],
            "published_table13": [str(published_table13_path())],
            "published_games": [str(causalgame_leaderboard_path())],
            "game_references": self.game_references(),
            "game_plays": self.game_plays(),
            "game_judgements": self.game_judgements(),
        }

    @functools.cached_property
    def target_param_values(self) -> dict[str, Any]:
        """What each param name of a target is: the config slice it depends on (:data:`~heuresis.targets.registry.PARAM_NAMES`).

        Raises ValueError for a Table 1 data file that does not validate (its content is a param: a change reruns
        the rule).
        """
        c = self.config
        return {
            "family_specs": {f: c["families"][f] for f in self.families},
            "families": self.families,
            "bootstrap": dict(c["bootstrap"]),
            "foundation_models": c["headroom"]["foundation_models"],
            "test_seed": self.test_seed,
            "secrets": self.secrets,
            "agents": self.episode_agents,
            "disclosure": {   # Table 12: every configured result, its agent's settings and the budgets
                "cells": cell_records(c),
                "agent_specs": {a: dict(c["agents"][a]) for a in self.episode_agents},
                "budgets": dict(c["episodes"]["budgets"]),
            },
            "table1": load_table1(),
            "verification": {"required": c["verification"]["required"], "scale": self.verification_scale},
            "leakage": {"agents": self.leakage_agents, "networks": c["leakage"]["networks"]},
            "saturation": {"networks": self.saturation_networks, "methods": self.saturation_methods(),
                           "n": c["saturation"]["n"]},
            "repairs": {"seed": c["repairs"]["seed"], "classifier": c["repairs"]["classifier"]},
            "judges": self.games["judges"],
            "game_bootstrap": self.game_bootstrap(),
            # the board's settings; its list of other results folders is the CLI's, not an input of this run's board
            "leaderboard": {k: v for k, v in c["leaderboard"].items() if k != "results"},
        }

    def target_inputs(self, target: Target) -> dict[str, list[str]]:
        """A target's inputs by name."""
        return {name: self.target_input_paths[name] for name in target.inputs}

    def target_params(self, target: Target) -> dict[str, Any]:
        """A target's config slices by name."""
        return {name: self.target_param_values[name] for name in target.params}

    def target_caption(self, target: Target) -> Callable:
        """A target's caption: its caption file's text (a change of the file reruns the target).

        A function of the wildcards, as Snakemake would read a string's braces as wildcards.
        """
        text = caption_text((self.basedir / caption_file(target)).read_text(encoding="utf-8"))

        def caption(wildcards):
            return text

        return caption

    # --- the pilot and the forecast ----------------------------------------------------------------
    def pilot_plan(self, wildcards) -> list[dict]:
        """The pilot episodes of the job's agent: k per budget setting, spread over its conditions and families."""
        return [ep for ep in plan_pilot(self.config, int(wildcards.k)) if ep["agent"] == wildcards.agent]

    def pilot_inputs(self, wildcards) -> dict:
        """The instances, hidden truth and PC-KCI references of the families and splits the agent's pilot plays."""
        cells = sorted({(ep["family"], ep["split"]) for ep in self.pilot_plan(wildcards)})
        return {"data": [P.INSTANCES.format(family=f, split=s) for f, s in cells],
                "truth": [P.TRUTH_GRAPHS.format(family=f, split=s) for f, s in cells],
                "pc_kci": [p for f, s in cells for p in pc_kci_paths(self.config, f, s)],
                "salt": self.episode_salt(wildcards)}

    def pilot_episode_configs(self, wildcards) -> dict:
        """The episodes section's slice of each pilot episode's condition (as its episode job gets it)."""
        return {ep["condition_id"]: episode_job_config(self.config, ep["condition_id"])
                for ep in self.pilot_plan(wildcards)}

    def pilot_tables(self, wildcards) -> list[str]:
        """The pilot table of every LLM agent with planned episodes."""
        agents = sorted({ep["agent"] for ep in plan_pilot(self.config, int(wildcards.k))})
        return [P.PILOT.format(k=wildcards.k, agent=a) for a in agents]

    def forecast_params(self, wildcards=None) -> dict:
        """What the forecast reads from the config besides the pilot: the planned episodes and each agent's cap."""
        return {"plan": [(r["grid"], r["llm_episodes"]) for r in grid_plan(self.config)],
                "caps": {a: s.get("max_run_usd") for a, s in self.config["agents"].items() if s.get("kind") in MODEL_KINDS}}
