# Shared declarations: config validation at workflow start, the checks before any job runs, wildcard
# constraints, and the run's plan. What the rules ask of the config (job lists, input paths, config
# slices, resources) is computed by the package (heuresis.preflight.plan.WorkflowPlan, built once
# below); the rule files name its attributes through the declarations at the end of this file.
# Every package name used here is imported in the one block below.

import sys as _sys


def _stop(message):
    """Stop while the workflow is read, with the message alone (no Snakemake traceback): exit status 1."""
    print(f"heuresis: {message}", file=_sys.stderr)
    _sys.exit(1)


try:
    from heuresis.agents.llm import CredentialsError, ProviderFatalError, check_credentials, llm_agents_in_use, verify_keys
    from heuresis.config import ConfigError, SPLITS, check_config_files, in_file_order
    from heuresis.preflight import validate_config
    from heuresis.preflight.plan import WorkflowPlan
    from heuresis.artifacts import paths as P
    from heuresis.artifacts.paths import benchmark_of, log_of, one_of
    from heuresis.stages.games.variants import is_variant as _is_variant
    from heuresis.stages.games.workflow import MODES as GAME_MODES
    from heuresis.harness.conditions import CONDITION_ID_PATTERN
    from heuresis.harness.sandbox import IsolationUnavailable, check_isolation
    from heuresis.artifacts.sealing import SecretUnavailable, disclosure as _disclosure, require_test_seed
    from heuresis.artifacts.privacy import PrivacyError, check_private_folders
    from heuresis.targets.registry import caption_file as _caption_file
    from heuresis.targets.registry import target_files
    from heuresis.view.live import finished_lines as _finished_lines, write_plan as _write_plan
except ImportError as exc:  # the package must be installed (README: pip install -e .)
    _stop(f"cannot import the heuresis package ({exc}); install it first: pip install -e .")

from snakemake.logging import logger as _logger

# The config, validated once, here, before the rule files are read. Snakemake has read the config files
# already (PyYAML's FullLoader, which builds !!python/name objects and keeps the last of a
# duplicated key); read them again with the package's safe loader, so such a file stops the
# workflow naming the file and line, then check the merged config and fill in the schema's
# defaults (docs/config-validation.md). Everything below reads config[key].
try:
    check_config_files(workflow.configfiles)
    config.update(validate_config(in_file_order(config, workflow.configfiles)))
except ConfigError as exc:
    _stop(exc)

# The secrets regime (heuresis.artifacts.sealing; docs/provenance.md): a malformed sealed seed stops the workflow
# here; a missing one, or one without its published commitment record, is a warning (a dry run shows it) and
# stops a run that would build the test split (onstart below). SECRETS holds the salt mode and the test seed's commitment, never a secret: the
# tables show it in their captions.
try:
    SECRETS = _disclosure(config)
except SecretUnavailable as exc:
    _stop(exc)
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
    # The folders of the truth, the secrets, the transcripts and the spend journals: created owner-only
    # after every check above, before any job (Snakemake makes a job's output folders under them), and refused when open to others.
    try:
        check_private_folders()
    except PrivacyError as exc:
        raise WorkflowError(str(exc))
    # The run's plan (the jobs about to run, the agents' run caps): what `heuresis view` follows live.
    _write_plan(P.RUN_PLAN, [(_job.rule.name, _job.output) for _job in workflow.dag.needrun_jobs()],
                {_name: _spec.get("max_run_usd") for _name, _spec in llm_agents_in_use(config).items()})

onsuccess:
    # what was built, where, and the commands to look at it (heuresis.view.live.finished_lines)
    for _line in _finished_lines(workflow.configfiles):
        _logger.info(_line)

# The run's plan (heuresis.preflight.plan): every list, path, config slice and resource the rules declare.
try:
    PLAN = WorkflowPlan(config, SECRETS, workflow.basedir)
    # the targets' inputs and config slices by name, computed here so that the published Table 2 and the
    # Table 1 data files are validated at workflow start
    PLAN.target_input_paths, PLAN.target_param_values
except ValueError as exc:
    _stop(exc)


# A model-calling job is never resubmitted (the profiles' `retries` applies to every other rule): one
# that failed on a fatal provider error (a refused key, an exhausted quota) would pay again for the
# same refusal, and while a resubmission is pending Snakemake keeps submitting new jobs. After a node
# failure the same command resumes such a job from its checkpoints (docs/cluster.md).
MODEL_JOB_RETRIES = 0

# Provider limits (docs/agents.md, "Running real models at scale"): every job that calls a model
# holds one unit of its provider's resource (llm_openai, llm_anthropic, ...: heuresis.stages.jobs.
# llm_resource) and sends one request at a time, so `--resources llm_openai=N` (the profiles set
# them) caps the concurrent requests to that provider across all jobs. A provider without a limit
# is not capped (Snakemake ignores a resource that --resources does not name).
llm_slots = PLAN.llm_slots
# A job whose output records failed units (episodes, plays, judgements, probes: status "failed") reruns the
# next time a target needs it, retrying only those units (heuresis.artifacts.failures; docs/failures.md).
attempt_of = PLAN.attempt_of

FAMILIES = PLAN.families
all_targets = PLAN.all_targets
site_results_folder = PLAN.site_results_folder

wildcard_constraints:
    family=one_of(FAMILIES),
    split=one_of(SPLITS),
    shard=r"\d+",

# instances
n_instances = PLAN.n_instances
instance_params = PLAN.instance_params

# references, headroom
MENU, BASELINES, SWEPT = PLAN.menu, PLAN.baselines, PLAN.swept
REFERENCE_BATCHES = PLAN.reference_batches
algorithm_params = PLAN.algorithm_params
reference_indices = PLAN.reference_indices
reference_runtime = PLAN.reference_runtime
reference_template = PLAN.reference_template
reference_outputs = PLAN.reference_outputs
headroom_params = PLAN.headroom_params
test_truth = PLAN.test_truth

# episodes, the pilot and the forecast, the analysis
EPISODE_JOBS = PLAN.episode_jobs
EPISODE_SCOPES = PLAN.episode_scopes
EPISODE_AGENTS = PLAN.episode_agents
episode_indices = PLAN.episode_indices
episode_config = PLAN.episode_config
agent_spec = PLAN.agent_spec
episode_prompts = PLAN.episode_prompts
episode_runtime = PLAN.episode_runtime
episode_salt = PLAN.episode_salt
episode_pc_kci = PLAN.episode_pc_kci
episode_outputs = PLAN.episode_outputs
episode_calls = PLAN.episode_calls
episode_references = PLAN.episode_references
episode_truth = PLAN.episode_truth
pilot_plan = PLAN.pilot_plan
pilot_inputs = PLAN.pilot_inputs
pilot_episode_configs = PLAN.pilot_episode_configs
pilot_tables = PLAN.pilot_tables
forecast_params = PLAN.forecast_params

# verification (Table 5), leakage (Figure 1a), saturation (Figure 1b), repairs (Figure 8)
VERIFICATION_CHECKS = PLAN.verification_checks
VERIFICATION_SCALE = PLAN.verification_scale
verification_settings = PLAN.verification_settings
verification_threads = PLAN.verification_threads
verification_mem_mb = PLAN.verification_mem_mb
verification_runtime = PLAN.verification_runtime
LEAKAGE_AGENTS = PLAN.leakage_agents
leakage_spec = PLAN.leakage_spec
leakage_prompts = PLAN.leakage_prompts
leakage_runtime = PLAN.leakage_runtime
SATURATION_NETWORKS = PLAN.saturation_networks
saturation_params = PLAN.saturation_params
saturation_runtime = PLAN.saturation_runtime
repair_settings = PLAN.repair_settings

# the games track
GAMES = PLAN.games
GAME_FOLDER = PLAN.game_folder
GAME_SCENARIOS = PLAN.game_scenarios
GAME_FAMILIES = PLAN.game_families
GAME_JOBS = PLAN.game_jobs
GAME_AGENT_MODES = PLAN.game_agent_modes
game_scenario_file = PLAN.game_scenario_file
game_variant_spec = PLAN.game_variant_spec
game_agent_spec = PLAN.game_agent_spec
game_judge_spec = PLAN.game_judge_spec
game_prompts = PLAN.game_prompts
judge_prompts = PLAN.judge_prompts
game_play_runtime = PLAN.game_play_runtime
game_judgement_runtime = PLAN.game_judgement_runtime
game_plays = PLAN.game_plays
game_play_count = PLAN.game_play_count
game_max_turns = PLAN.game_max_turns

# the paper's targets (rules/targets.smk)
PAPER_TARGETS = PLAN.paper_targets
target_caption = PLAN.target_caption

target_inputs = PLAN.target_inputs
target_params = PLAN.target_params


def target_outputs(target):
    """A target's outputs by name; the report (Snakemake's report()) shows the Markdown of a table and the PNG
    of a figure."""
    files = target_files(target)
    shown = "md" if target.kind == "table" else "png"
    caption = f"../{_caption_file(target)}"
    return {name: report(path, caption=caption, category=target.category) if name == shown else path
            for name, path in files.items()}
