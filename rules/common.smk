# Shared helpers: config validation at workflow start, wildcard constraints, target lists.
# Every helper function of the rules lives here (none inside rule files, no lambdas in rules);
# every package name they use is imported in the one block below. The rules ask the package
# what it knows (condition ids, play modes, the files a scenario extends), never copy it.

try:
    from heuresis.agents.llm import CredentialsError, ProviderFatalError, check_credentials, llm_agents_in_use, verify_keys
    from heuresis.harness.agent_spec import result_spec as _result_spec
    from heuresis.config import ConfigError, SPLITS, check_config_files
    from heuresis.preflight import validate_config
    from heuresis.artifacts import paths as P
    from heuresis.artifacts.failures import attempt_param as _attempt_param
    from heuresis.artifacts.paths import benchmark_of, log_of, one_of
    from heuresis.causal.games.scenario import load_scenario as _load_scenario, scenario_files as _scenario_files
    from heuresis.stages.games.variants import base_of as _base_of, is_variant as _is_variant, variant_spec as _variant_spec
    from heuresis.stages.games.workflow import (
        MODES as GAME_MODES,
        judgement_job_runtime as _judgement_job_runtime,
        judges_for as _judges_for,
        max_turns_of as _max_turns_of,
        play_jobs as _play_jobs,
        play_job_runtime as _play_job_runtime,
        plays_of as _plays_of,
        scenario_folder as _scenario_folder,
    )
    from heuresis.harness.conditions import CONDITION_ID_PATTERN, cell_records as _cell_records, grid_plan as _grid_plan
    from heuresis.harness.sandbox import IsolationUnavailable, check_isolation
    from heuresis.stages.episodes import (
        episode_job_config as _episode_job_config,
        episode_job_indices as _episode_job_indices,
        episode_job_runtime as _episode_job_runtime,
        episode_jobs as _episode_jobs,
    )
    from heuresis.stages.instances import instance_spec as _instance_spec
    from heuresis.stages.jobs import llm_resource as _llm_resource, llm_resources as _llm_resources
    from heuresis.stages.leakage import leakage_job_runtime as _leakage_job_runtime
    from heuresis.stages.references import (
        reference_batches as _reference_batches,
        reference_shard_indices as _reference_shard_indices,
        reference_shards as _reference_shards,
    )
    from heuresis.stages.saturation import saturation_settings as _saturation_settings
    from heuresis.stages.pilot import pc_kci_paths as _pc_kci_paths, pilot_plan as _pilot_plan
    from heuresis.targets.published import load_published_table2 as _load_published_table2
    from heuresis.targets.published import published_table2_path as _published_table2_path
    from heuresis.artifacts.sealing import SALT_FILE, SecretUnavailable, disclosure as _disclosure, require_test_seed
    from heuresis.artifacts.sealing import write_salt as _write_salt
    from heuresis.targets.build import caption_text as _caption_text
    from heuresis.targets.registry import caption_file as _caption_file, paper_targets as _paper_targets
    from heuresis.targets.registry import target_files
    from heuresis.targets.table1 import load_table1 as _load_table1
    from heuresis.stages.verification import CHECKS as _VERIFICATION, check_settings as _check_settings
    from heuresis.view.live import write_plan as _write_plan
except ImportError as exc:  # the package must be installed (README: pip install -e .)
    raise WorkflowError(
        f"cannot import the heuresis package ({exc}); install it first: pip install -e ."
    )
from pathlib import Path

from snakemake.logging import logger as _logger

# The config, validated once, here, before the rule files are read. Snakemake has read the config files
# already (PyYAML's FullLoader, which builds !!python/name objects and keeps the last of a
# duplicated key); read them again with the package's safe loader, so such a file stops the
# workflow naming the file and line, then check the merged config and fill in the schema's
# defaults (docs/config-validation.md). Everything below reads config[key].
try:
    check_config_files(workflow.configfiles)
    config.update(validate_config(config))
except ConfigError as exc:
    raise WorkflowError(str(exc))

# The secrets regime (heuresis.artifacts.sealing; docs/provenance.md): a malformed sealed seed stops the workflow
# here; a missing one, or one without its published commitment record, is a warning (a dry run shows it) and
# stops a run that would build the test split (onstart below). SECRETS holds the salt mode and the test seed's commitment, never a secret: the
# tables show it in their captions.
try:
    SECRETS = _disclosure(config)
except SecretUnavailable as exc:
    raise WorkflowError(str(exc))
if SECRETS["test_seed"] == "sealed" and (SECRETS["commitment"] is None or SECRETS["committed"] is None):
    try:
        require_test_seed(config)
    except SecretUnavailable as exc:
        _logger.warning(f"WARNING: {exc}. Jobs that build the test split will not start.")
TEST_SEED = {k: v for k, v in SECRETS.items() if k != "salt"}  # what the headroom tables disclose

# Credentials of the configured LLM agents: a missing one is named here, when the workflow is read
# (a warning, so a dry run shows it), and stops the workflow at start, before any job runs, when a
# job about to run needs that agent (onstart below). Targets that need no LLM (Figure 1b, Table 2,
# ...) therefore build without the keys; `heuresis check-config` checks every configured agent.
try:
    check_credentials(config)
except CredentialsError as exc:
    _logger.warning(f"WARNING: {exc} Jobs that need such an agent will not start.")


def llm_agents_of(job):
    """The agents a job runs: episode, leakage and game-play jobs their `agent`, judgements their `judge`."""
    w = job.wildcards_dict
    if "judge" in w:  # the played agent's plays are inputs here: only the judge is called
        return {w["judge"]}
    return {w["agent"]} if "agent" in w else set()


onstart:
    needed = set()
    for _job in workflow.dag.needrun_jobs():
        needed |= llm_agents_of(_job)
    try:
        check_credentials(config, agents=needed)
    except CredentialsError as exc:
        raise WorkflowError(str(exc))
    # One cheap request per model and key about to be used (agents.<name>.verify_key: false skips it): a
    # refused key, an exhausted quota or an unknown model stops the run here, not in every job.
    try:
        for _warning in verify_keys(config, agents=needed, log=_logger.info):
            _logger.warning(f"WARNING: {_warning}")
    except ProviderFatalError as exc:
        raise WorkflowError(str(exc))
    # The code tool's isolation (episodes.code_tool.isolation): 'required' without a working
    # bubblewrap stops the run here, before any job, when an episode job or an agentic game play (whose
    # code tool is the same sandbox) is about to run.
    if any(_job.rule.name == "episodes" or (_job.rule.name == "games_plays" and _job.wildcards_dict["mode"] == "agentic")
           for _job in workflow.dag.needrun_jobs()):
        try:
            check_isolation(config)
        except IsolationUnavailable as exc:
            raise WorkflowError(str(exc))

    # The sealed test seed (secrets.test_seed: sealed): a job about to build a test split or draw a games test
    # variant without it stops the run here, before any job, naming the variable; dev targets build without it.
    if SECRETS["test_seed"] == "sealed" and any((_job.rule.name == "instances" and _job.wildcards_dict["split"] == "test")
                                                 or (_job.rule.name == "games_references"
                                                     and _is_variant(_job.wildcards_dict["scenario"]))
                                                 for _job in workflow.dag.needrun_jobs()):
        try:
            require_test_seed(config)
        except SecretUnavailable as exc:
            raise WorkflowError(str(exc))
    # The run's plan (the jobs about to run, the agents' run caps): what `heuresis view` follows live.
    _write_plan(P.RUN_PLAN, [(_job.rule.name, _job.output) for _job in workflow.dag.needrun_jobs()],
                {_name: _spec.get("max_run_usd") for _name, _spec in llm_agents_in_use(config).items()})

FAMILIES = list(config["families"])

# Provider limits (docs/agents.md, "Running real models at scale"): every job that calls a model
# holds one unit of its provider's resource (llm_openai, llm_anthropic, ...: heuresis.stages.jobs.
# llm_resource) and sends one request at a time, so `--resources llm_openai=N` (the profiles set
# them) caps the concurrent requests to that provider across all jobs. A provider without a limit
# is not capped (Snakemake ignores a resource that --resources does not name).
LLM_RESOURCES = _llm_resources(config)


# A model-calling job is never resubmitted (the profiles' `retries` applies to every other rule): one
# that failed on a fatal provider error (a refused key, an exhausted quota) would pay again for the
# same refusal, and while a resubmission is pending Snakemake keeps submitting new jobs. After a node
# failure the same command resumes such a job from its checkpoints (docs/cluster.md).
MODEL_JOB_RETRIES = 0


def llm_slots(role):
    """The provider resources of a model-calling rule: one unit of the provider of the agent named by
    wildcard `role` (agent, or judge for judgements), none of the others."""

    def slot(name):
        def units(wildcards):
            return int(_llm_resource(config, getattr(wildcards, role)) == name)

        return units

    return {name: slot(name) for name in LLM_RESOURCES}


def result_agent_spec(name):
    """An agent's config entry without its transport settings (timeouts, retries, where the URL and key
    are read from: heuresis.harness.agent_spec.TRANSPORT_KEYS), the params of the jobs calling it: changing
    how a model is asked reruns nothing. The job reads the full entry from the config at run time."""
    return _result_spec(config["agents"][name])

# A job whose output records failed units (episodes, plays, judgements, probes: status "failed") reruns the
# next time a target needs it, retrying only those units (heuresis.artifacts.failures; docs/failures.md).
def attempt_of(output):
    """The `attempt` parameter of the jobs writing `output` (a pattern): it changes after a run with
    failed units, so the job reruns. A function of the wildcards only: Snakemake ignores changes of
    parameters computed from input or output files."""

    def attempt(wildcards):
        return _attempt_param(output.format(**dict(wildcards.items())))

    return attempt


wildcard_constraints:
    family=one_of(FAMILIES),
    split=one_of(SPLITS),
    shard=r"\d+",


def site_results_folder(wildcards, output):
    """The results folder the viewer's export is written into (rule view), from its output."""
    return str(Path(output.site).parent)


def n_instances(wildcards):
    """Instances of a split (config: instances.n_dev / instances.n_test)."""
    return int(config["instances"][f"n_{wildcards.split}"])


def instance_params(wildcards):
    """The config slice a family's instances depend on; a change elsewhere reruns nothing here."""
    return _instance_spec(config, wildcards.family, wildcards.split)


def instance_outputs():
    """The instances and hidden truth of every family and split."""
    return expand(
        [
            P.INSTANCES,
            P.TRUTH_GRAPHS,
            P.TRUTH_NODES,
        ],
        family=FAMILIES,
        split=SPLITS,
    )


def all_targets():
    """Every final target of the workflow: the instances, the episodes, and every paper table and figure."""
    return instance_outputs() + episode_outputs() + [p for t in PAPER_TARGETS for p in target_files(t).values()]


# --- references ------------------------------------------------------------------------------
MENU = list(config["references"]["algorithms"])
BASELINES = list(config["references"]["baselines"])
SWEPT = MENU + BASELINES
# each batch's rule is named after its first algorithm (references_<algorithm>), not its position
REFERENCE_BATCHES = {batch[0]: batch for batch in _reference_batches(config)}
SLOW_ALGORITHMS = {"pc_kci", "router", "resit"}  # KCI or forests: longer jobs


def algorithm_params(name):
    """The parameters of a swept algorithm (from the menu or the baselines)."""
    section = "algorithms" if name in config["references"]["algorithms"] else "baselines"
    return dict(config["references"][section][name])


def reference_indices(wildcards):
    """The instances of a reference job's shard (references.shard_size each)."""
    return _reference_shard_indices(config, wildcards.split, int(wildcards.shard))


def reference_runtime(batch):
    """Minutes requested per reference job (paper scale: 25 instances; KCI is the slow part)."""
    return 120 if SLOW_ALGORITHMS & set(batch) else 30


def reference_template(algorithm):
    """The path template of one algorithm's reference shards (wildcards family, split, shard)."""
    return P.REFERENCES.replace("{algorithm}", algorithm)


def reference_outputs(algorithms=None, families=None, splits=SPLITS):
    """The reference Parquets of the given algorithms, families and splits (default: all)."""
    out = []
    for algorithm in algorithms or SWEPT:
        for family in families or FAMILIES:
            for split in splits:
                for shard in _reference_shards(config, split):
                    out.append(P.REFERENCES.format(algorithm=algorithm, family=family, split=split,
                                                   shard=P.shard(shard)))
    return out


# --- headroom and targets ----------------------------------------------------------------------
def headroom_params(wildcards=None):
    """What the headroom stage depends on besides its inputs: the menu, the baselines, its section."""
    return {"menu": MENU, "baselines": BASELINES, **config["headroom"]}


def test_truth():
    """The hidden truth of every family's test split."""
    return expand(P.TRUTH_GRAPHS, family=FAMILIES, split="test")


def table1_data():
    """Table 1's data file (validated; a change of its content reruns the rule)."""
    try:
        return _load_table1()
    except ValueError as exc:
        raise WorkflowError(str(exc))


def published_table2_file():
    """The published Table 2's data file (validated at workflow start; its content is an input)."""
    try:
        _load_published_table2()
    except ValueError as exc:
        raise WorkflowError(str(exc))
    return str(_published_table2_path())


# --- episodes ------------------------------------------------------------------------------------
EPISODE_JOBS = _episode_jobs(config)


def episode_indices(wildcards):
    """The instances of the job's shard its grids select (episodes.grids.*.instances)."""
    return _episode_job_indices(EPISODE_JOBS, wildcards.agent, wildcards.condition_id, wildcards.family,
                                wildcards.split, int(wildcards.shard))


def episode_config(wildcards):
    """The part of the episodes section the job depends on (its budget, the code tool, alpha)."""
    return _episode_job_config(config, wildcards.condition_id)


def agent_spec(wildcards):
    """The config entry of the job's agent (kind and parameters) without its transport settings."""
    return result_agent_spec(wildcards.agent)


def episode_runtime(wildcards):
    """Minutes of an episode job: its conditions' wall budget times its episodes, plus a margin."""
    return _episode_job_runtime(config, wildcards.agent, wildcards.condition_id, len(episode_indices(wildcards)))


def episode_salt(wildcards):
    """The run's salt file (secrets.salt: drawn), drawn here the first time an episode job is planned; nothing
    for the public salt. A source file, not a rule's output: Snakemake deletes a job's outputs before it reruns
    the job (-F, -R, an edited rule), and a redrawn salt would change every mask. It is created exclusively
    (heuresis.artifacts.sealing.write_salt), so concurrent planners keep one; delete it to draw a new one."""
    if config["secrets"]["salt"] != "drawn":
        return []
    _write_salt(SALT_FILE)
    return SALT_FILE


def episode_pc_kci(wildcards):
    """PC-KCI references of the family and split: the guided start and the test budget."""
    return reference_outputs(["pc_kci"], [wildcards.family], [wildcards.split])


def episode_outputs():
    """The episode Parquet of every planned episode job."""
    return [
        P.EPISODES.format(**{**j, "shard": P.shard(j["shard"])})
        for j in EPISODE_JOBS
    ]


# --- verification (Table 5) ---------------------------------------------------------------------
VERIFICATION_CHECKS = list(_VERIFICATION)
VERIFICATION_SCALE = config["verification"]["scale"]


def verification_settings(wildcards):
    """The config slice of one check (its scale's sizes, seed, tolerances, instance specs)."""
    return _check_settings(config, wildcards.check)


def verification_threads(wildcards):
    """Workers of a check: the exhaustive CPDAG enumeration is parallel, determinism runs 2-thread BLAS."""
    return {"cpdag_bruteforce": 8, "determinism": 2}.get(wildcards.check, 1)


def verification_mem_mb(wildcards):
    """Memory of a check (MB): the exhaustive CPDAG enumeration at the large scale needs 8 GB."""
    large = VERIFICATION_SCALE != "small"
    return 8000 if large and wildcards.check == "cpdag_bruteforce" else 2000


def verification_runtime(wildcards):
    """Minutes per check job (large: the exhaustive d = 6 run and causal-learn's PC-KCI are the long ones)."""
    if VERIFICATION_SCALE == "small":
        return 15
    return {"cpdag_bruteforce": 90, "pc_vs_causallearn": 90, "oracle_pc": 60, "dsep": 60}.get(wildcards.check, 30)


# --- leakage probe (Figure 1a) -------------------------------------------------------------------
LEAKAGE_AGENTS = list(config["leakage"]["agents"])


def leakage_spec(wildcards):
    """The config entry of the probed agent without its transport settings."""
    return result_agent_spec(wildcards.agent)


def leakage_runtime(wildcards):
    """Minutes of a leakage job: its requests, each at most the agent's timeout, plus a margin."""
    return _leakage_job_runtime(config, wildcards.agent)


# --- Figure 1b, saturation on public network structures -----------------------------------------
SATURATION_NETWORKS = list(config["saturation"]["networks"])


def saturation_params():
    """The config slice the datasets depend on (sizes, seed, mechanisms, algorithms)."""
    return _saturation_settings(config)


def saturation_methods():
    """Figure 1b's methods: its algorithms, and the oracle when PC-KCI is one of them."""
    algorithms = list(config["saturation"]["algorithms"])
    return algorithms + (["oracle"] if "pc_kci" in algorithms else [])


def saturation_runtime(wildcards):
    """Minutes per network job (paper scale: PC-KCI on the 27- and 37-node networks is the slow part)."""
    return 120 if wildcards.network in ("insurance", "alarm", "child") else 30


# --- Figure 8, scripted repairs --------------------------------------------------------------------
def repair_settings():
    """The config slice the signals depend on (the classifier's settings only affect the figure)."""
    return {k: v for k, v in config["repairs"].items() if k != "classifier"}


def repair_feature_outputs():
    """The repair signals of every PC-KCI reference shard."""
    return [P.REPAIR_FEATURES.format(family=f, split=s, shard=P.shard(k)) for f in FAMILIES for s in SPLITS
            for k in _reference_shards(config, s)]


# --- analysis (Tables 4, 6-10, 12, 13; Figures 6, 7a, 7b, 9) -----------------------------------
EPISODE_SCOPES = sorted({(j["family"], j["split"]) for j in EPISODE_JOBS})


def episode_calls():
    """The calls table of every planned episode job."""
    return [P.EPISODE_CALLS.format(**{**j, "shard": P.shard(j["shard"])}) for j in EPISODE_JOBS]


def episode_references():
    """PC-KCI references of every family and split with episodes (deletion logs, PC-KCI graphs)."""
    return [p for f, s in EPISODE_SCOPES for p in reference_outputs(["pc_kci"], [f], [s])]


def episode_truth():
    """The hidden truth of every family and split with episodes."""
    return [P.TRUTH_GRAPHS.format(family=f, split=s) for f, s in EPISODE_SCOPES]


# agents of the active episode grids, in config order (game agents and judges do not touch the analysis)
EPISODE_AGENTS = [a for a in config["agents"] if any(a in config["episodes"]["grids"][g]["agents"]
                                                     for g in config["episodes"]["run"])]


def episode_cells():
    """Table 12: every configured result (agent x condition) with its families, split, instances."""
    return _cell_records(config)




# --- games track (docs/games.md; rules/games.smk) ------------------------------------------
GAMES = config["games"]
GAME_FOLDER = str(_scenario_folder(config))
# a test variant (NAME@testK) is drawn by its references job; planning needs only its family, its public scenario's
GAME_SCENARIOS = {s: _load_scenario(_base_of(s), GAME_FOLDER) for s in sorted({j["scenario"] for j in _play_jobs(config)})}
GAME_FAMILIES = sorted({s.family for s in GAME_SCENARIOS.values()})
GAME_JOBS = _play_jobs(config)
GAME_AGENT_MODES = sorted({(j["agent"], j["mode"]) for j in GAME_JOBS})


def game_scenario_file(wildcards):
    """The scenario's file and the files it extends (a change to a parent reruns the variant)."""
    return _scenario_files(_base_of(wildcards.scenario), GAME_FOLDER)


def game_variant_spec(wildcards):
    """What a test variant's draws depend on (the public seed or the sealed seed's commitment); None for a public scenario."""
    return _variant_spec(config) if _is_variant(wildcards.scenario) else None


def game_agent_spec(wildcards):
    """The config entry of the playing agent without its transport settings."""
    return result_agent_spec(wildcards.agent)


def game_judge_spec(wildcards):
    """The config entry of the judge without its transport settings."""
    return result_agent_spec(wildcards.judge)


def game_play_runtime(wildcards):
    """Minutes of a play job: its plays' requests, each at most the agent's timeout, plus a margin."""
    return _play_job_runtime(config, wildcards.agent)


def game_judgement_runtime(wildcards):
    """Minutes of a judgement job: one request per play, each at most the judge's timeout, plus a margin."""
    return _judgement_job_runtime(config, wildcards.judge, wildcards.agent)


def game_references():
    """The reference Parquet of every configured scenario."""
    return expand(P.GAME_REFERENCES, scenario=sorted(GAME_SCENARIOS))


def game_plays(agent=None, mode=None):
    """The plays Parquets of every planned play job (of one agent and mode, if given)."""
    return [P.GAME_PLAYS.format(**j) for j in GAME_JOBS
            if agent in (None, j["agent"]) and mode in (None, j["mode"])]


def game_play_count(wildcards):
    """Plays of a play job: games.plays for an LLM agent, games.baseline_plays for an offline one."""
    return _plays_of(config, wildcards.agent)


def game_max_turns(wildcards):
    """Assistant replies per play of the job's agent: games.llm_max_turns (LLM agents) or games.max_turns."""
    return _max_turns_of(config, wildcards.agent)


def game_judgements():
    """The judgements of every played agent x mode x scenario by each judge not of the player's model family."""
    return [P.GAME_JUDGEMENTS.format(judge=j, agent=a, mode=m, scenario=s) for a, m in GAME_AGENT_MODES
            for j in _judges_for(config, a) for s in sorted(GAME_SCENARIOS)]


def game_bootstrap():
    """games.bootstrap over the top-level bootstrap section."""
    return {**config["bootstrap"], **GAMES["bootstrap"]}


# --- paper targets (rules/targets.smk; heuresis.targets.registry) -------------------------------------
PAPER_TARGETS = _paper_targets(GAME_FAMILIES)

# what each input name of a target is (heuresis.targets.registry.INPUT_NAMES)
TARGET_INPUTS = {
    "headroom_scores": [P.HEADROOM_SCORES],
    "headroom_selection": [P.HEADROOM_SELECTION],
    "episode_scores": [P.EPISODE_SCORES],
    "verification_records": expand(P.VERIFICATION_CHECK, check=VERIFICATION_CHECKS),
    "leakage": expand(P.LEAKAGE, agent=LEAKAGE_AGENTS, network=config["leakage"]["networks"]),
    "saturation": expand(P.SATURATION, network=SATURATION_NETWORKS),
    "repair_features": repair_feature_outputs(),
    "table2": [P.TABLE.format(name="table2", ext="parquet")],
    "published_table2": [published_table2_file()],
    "game_references": game_references(),
    "game_plays": game_plays(),
    "game_judgements": game_judgements(),
}

# what each param name of a target is: the config slice it depends on (heuresis.targets.registry.PARAM_NAMES)
TARGET_PARAMS = {
    "family_specs": {f: config["families"][f] for f in FAMILIES},
    "families": FAMILIES,
    "bootstrap": dict(config["bootstrap"]),
    "foundation_models": config["headroom"]["foundation_models"],
    "test_seed": TEST_SEED,
    "secrets": SECRETS,
    "agents": EPISODE_AGENTS,
    "disclosure": {   # Table 12: every configured result, its agent's settings and the budgets
        "cells": episode_cells(),
        "agent_specs": {a: dict(config["agents"][a]) for a in EPISODE_AGENTS},
        "budgets": dict(config["episodes"]["budgets"]),
    },
    "table1": table1_data(),
    "verification": {"required": config["verification"]["required"], "scale": VERIFICATION_SCALE},
    "leakage": {"agents": LEAKAGE_AGENTS, "networks": config["leakage"]["networks"]},
    "saturation": {"networks": SATURATION_NETWORKS, "methods": saturation_methods(), "n": config["saturation"]["n"]},
    "repairs": {"seed": config["repairs"]["seed"], "classifier": config["repairs"]["classifier"]},
    "judges": GAMES["judges"],
    "game_bootstrap": game_bootstrap(),
}


def target_inputs(target):
    """A target's inputs by name."""
    return {name: TARGET_INPUTS[name] for name in target.inputs}


def target_params(target):
    """A target's config slices by name."""
    return {name: TARGET_PARAMS[name] for name in target.params}


def target_outputs(target):
    """A target's outputs by name; the report shows the Markdown of a table and the PNG of a figure."""
    files = target_files(target)
    shown = "md" if target.kind == "table" else "png"
    caption = f"../{_caption_file(target)}"
    return {name: report(path, caption=caption, category=target.category) if name == shown else path
            for name, path in files.items()}


def target_caption(target):
    """A target's caption: its caption file's text (a change of the file reruns the target). A function of
    the wildcards, as Snakemake would read a string's braces as wildcards."""
    text = _caption_text((Path(workflow.basedir) / _caption_file(target)).read_text(encoding="utf-8"))

    def caption(wildcards):
        return text

    return caption


# --- the pilot and the forecast --------------------------------------------------------------------
def pilot_plan(wildcards):
    """The pilot episodes of the job's agent: k per budget setting, spread over its conditions and families."""
    return [ep for ep in _pilot_plan(config, int(wildcards.k)) if ep["agent"] == wildcards.agent]


def pilot_inputs(wildcards):
    """The instances, hidden truth and PC-KCI references of the families and splits the agent's pilot plays."""
    cells = sorted({(ep["family"], ep["split"]) for ep in pilot_plan(wildcards)})
    return {"data": [P.INSTANCES.format(family=f, split=s) for f, s in cells],
            "truth": [P.TRUTH_GRAPHS.format(family=f, split=s) for f, s in cells],
            "pc_kci": [p for f, s in cells for p in _pc_kci_paths(config, f, s)],
            "salt": episode_salt(wildcards)}


def pilot_episode_configs(wildcards):
    """The episodes section's slice of each pilot episode's condition (as its episode job gets it)."""
    return {ep["condition_id"]: _episode_job_config(config, ep["condition_id"]) for ep in pilot_plan(wildcards)}


def pilot_tables(wildcards):
    """The pilot table of every LLM agent with planned episodes."""
    agents = sorted({ep["agent"] for ep in _pilot_plan(config, int(wildcards.k))})
    return [P.PILOT.format(k=wildcards.k, agent=a) for a in agents]


def forecast_params(wildcards=None):
    """What the forecast reads from the config besides the pilot: the planned episodes and each agent's cap."""
    return {"plan": [(r["grid"], r["llm_episodes"]) for r in _grid_plan(config)],
            "caps": {a: s.get("max_run_usd") for a, s in config["agents"].items() if s.get("kind") == "llm"}}
