"""The games track in the workflow (``rules/games.smk``): config checks, jobs, and their records.

* :func:`config_errors` — the ``games:`` section checked at workflow start: every scenario file
  loads (errors name the scenario and the key), agents and judges exist with the right kinds,
  and test variants are drawn from scenarios with valid ``perturb:`` ranges;
* :func:`play_jobs` — one job per agent x mode x scenario (offline agents play the agentic
  mode only; LLM agents every configured mode);
* :func:`run_references` — the references of one scenario into :data:`GAME_REFERENCES`;
* :func:`plays_of` — plays per job: ``games.plays`` for an LLM agent, ``games.baseline_plays``
  for an offline game agent (cheap plays, played more often);
* :func:`run_plays` — the plays of one job into :data:`GAME_PLAYS` and
  :data:`GAME_CALLS` plus one JSON transcript per play, each finished play checkpointed
  (:class:`~heuresis.artifacts.io.Checkpoint`) so a killed job resumes; a play whose agent or
  harness crashes (an API error after retries, a harness error) is recorded ``failed`` with its
  error, never dropped, and not checkpointed: the tables count it and leave it out of the scores,
  and rerunning the target retries it (:mod:`heuresis.artifacts.failures`);
* :func:`run_judgements` — one judge on every play of one agent x mode into
  :data:`GAME_JUDGEMENTS`, checkpointed per play (:func:`judgement_unit`: the play and what the
  judge is shown of it; a ``failed`` judgement alike).  The checkpoint outlives the job (pruned to
  its plays), so when one play is played again only that play is judged again.

Play ``r`` of a scenario has the seed :func:`play_seed` ``(games.seed, scenario, r)`` for every
agent, so agents meet the same Stage-1 and Stage-2 draws (paired comparisons).
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pyarrow as pa

from heuresis.artifacts.failures import FIRST_ATTEMPT, failure_metadata, record_attempt
from heuresis.artifacts.io import Checkpoint, read_table, write_table
from heuresis.artifacts.privacy import make_folder
from heuresis.artifacts.provenance import PROVENANCE_KEY, dumps, provenance_record, utc_now
from heuresis.artifacts.report import format_interval
from heuresis.artifacts.schemas import (
    GAME_CALLS,
    GAME_JUDGEMENT_REQUESTS,
    GAME_JUDGEMENTS,
    GAME_PLAY_REQUESTS,
    GAME_PLAYS,
    GAME_REFERENCES,
)
from heuresis.artifacts.transcripts import PlayTranscript
from heuresis.causal.games.references import scenario_references, seed_of
from heuresis.causal.games.scenario import Scenario, ScenarioError, load_scenario
from heuresis.config.loading import CHECKOUT, agent_errors, config_digest
from heuresis.config.settings import CodeTool
from heuresis.harness.agent_spec import result_spec
from heuresis.harness.protocol import FatalAgentError
from heuresis.registry import MODEL_KINDS
from heuresis.stages.games.play import MODES
from heuresis.stages.games.variants import (
    base_of,
    build_variant,
    from_references,
    is_variant,
    perturbation_errors,
    split_of,
    variant_entropy,
    variant_index,
    variant_names,
)
from heuresis.stages.jobs import OFFLINE_RUNTIME_MIN, job_minutes, request_seconds

__all__ = [
    "MODES",
    "config_errors",
    "game_agent_kinds",
    "game_scenario",
    "is_llm",
    "judgement_job_runtime",
    "judgement_unit",
    "judges_for",
    "load_references",
    "max_turns_of",
    "may_judge",
    "model_family",
    "output_cap_errors",
    "play_job_runtime",
    "play_jobs",
    "play_seed",
    "plays_of",
    "requests_per_play",
    "run_judgements",
    "run_one_play",
    "run_plays",
    "run_references",
    "scenario_folder",
    "scenario_names",
    "test_variant_errors",
]

_Log = Callable[[str], None]


def _quiet(msg: str) -> None:
    pass


def game_agent_kinds() -> set[str]:
    """Registered kinds of the offline game agents."""
    from heuresis.agents import AGENTS
    from heuresis.agents.players import GameAgent

    return {k for k, cls in AGENTS.items() if isinstance(cls, type) and issubclass(cls, GameAgent)}


def is_llm(config: Mapping, agent: str) -> bool:
    """Whether ``agent`` is configured with kind ``llm`` (LLM agents get more plays and the prompting mode)."""
    return config.get("agents", {}).get(agent, {}).get("kind") in MODEL_KINDS


def max_turns_of(config: Mapping, agent: str) -> int:
    """Assistant replies per play of ``agent`` (either mode): ``games.llm_max_turns`` (LLM agents) or ``games.max_turns``."""
    g = config["games"]
    own = g.get("llm_max_turns") if is_llm(config, agent) else None
    return int(g["max_turns"] if own is None else own)


def plays_of(config: Mapping, agent: str) -> int:
    """Plays per scenario x mode of ``agent``: ``games.baseline_plays`` (the offline game players) or ``games.plays``.

    Every agent under test (LLM and plugin agents) plays ``games.plays`` times.
    """
    g = config["games"]
    kind = config.get("agents", {}).get(agent, {}).get("kind")
    return int(g["baseline_plays"] if kind in game_agent_kinds() else g["plays"])


def play_optimum(ref: Mapping) -> float:
    """The optimum a play's gap is measured to: over the agent's whole action space where it is known.

    The exact optimum over the full integer lattice (``integer_optimum``) where it was computed,
    else the references' optimum over the lattice.
    """
    best = ref.get("integer_optimum")
    return float(best) if best is not None and best == best else float(ref["optimum"])


def scenario_folder(config: Mapping) -> Path:
    """``games.scenarios_dir``; a relative default that does not exist here falls back to the repository's."""
    folder = Path(config["games"]["scenarios_dir"])
    if not folder.is_absolute() and not folder.is_dir():
        repo = CHECKOUT / folder
        if repo.is_dir():
            return repo
    return folder


def scenario_names(config: Mapping) -> list[str]:
    """List the scenarios to play: ``games.scenarios`` (else every ``*.yaml`` of the folder), ablations, test variants.

    The folder's files come sorted; an ablation is ``NAME~DISCLOSURE``; a test variant
    ``NAME@testK`` (``games.test_variants``, :mod:`heuresis.stages.games.variants`).
    """
    g = config.get("games", {})
    names = list(g.get("scenarios") or []) or sorted(p.stem for p in scenario_folder(config).glob("*.yaml"))
    names += [a for a in g.get("ablations") or [] if a not in names]
    return [*names, *(v for v in variant_names(g) if v not in names)]


def play_jobs(config: Mapping) -> list[dict]:
    """Every play job: ``{agent, mode, scenario}``."""
    g = config["games"]
    out = []
    for agent in g["agents"]:
        modes = [m for m in g["modes"] if m == "agentic" or is_llm(config, agent)]
        for mode in modes:
            for scn in scenario_names(config):
                out.append({"agent": agent, "mode": mode, "scenario": scn})
    return out


def play_job_runtime(config: Mapping, agent: str) -> int:
    """Minutes of a play job of an LLM agent: its plays' requests at most, each at most ``timeout_s``.

    A play sends at most the agent's turn limit (:func:`max_turns_of`, either mode), and its debrief
    (:func:`requests_per_play`). :data:`~heuresis.stages.jobs.OFFLINE_RUNTIME_MIN` for an agent that
    is not an LLM agent.
    """
    seconds = request_seconds(config["agents"][agent])
    if seconds is None:
        return OFFLINE_RUNTIME_MIN
    return job_minutes(plays_of(config, agent) * requests_per_play(config, agent) * seconds)


def requests_per_play(config: Mapping, agent: str) -> int:
    """Model requests of one play of an LLM agent at most: its turn limit, plus one debrief under ``as_published``."""
    return max_turns_of(config, agent) + int("as_published" in config["games"]["protocols"])


def judgement_job_runtime(config: Mapping, judge: str, agent: str) -> int:
    """Minutes of a judgement job: a request per play of ``agent`` (one scenario x mode) and protocol, ``timeout_s`` each."""
    views = len(config["games"]["protocols"])
    return job_minutes(plays_of(config, agent) * views * (request_seconds(config["agents"][judge]) or 0.0))


# a model's family: the first of these words in its model's name, else (a hosted model) in its provider
# prefix, so that "openai/gpt-5", "azure/gpt-4o" and "openrouter/openai/o3" are one family and
# "anthropic/claude-*" another, while "openai/smollm2" behind a local server is SmolLM2, not OpenAI
_FAMILY_WORDS = (("claude", "anthropic"), ("anthropic", "anthropic"), ("gpt", "openai"), ("openai", "openai"),
                 ("o1", "openai"), ("o3", "openai"), ("o4", "openai"), ("qwen", "qwen"), ("dashscope", "qwen"),
                 ("gemini", "google"), ("gemma", "google"), ("llama", "meta"), ("deepseek", "deepseek"),
                 ("mistral", "mistral"), ("mixtral", "mistral"), ("grok", "xai"), ("kimi", "moonshot"),
                 ("glm", "zhipu"))


def _family_word(parts: list[str]) -> str | None:
    words = [q for part in parts for q in part.replace("_", "-").split("-")]
    for word, family in _FAMILY_WORDS:
        if any(q == word or (q.startswith(word) and word not in ("o1", "o3", "o4")) for q in words):
            return family
    return None


def model_family(agent_spec: Mapping) -> str | None:
    """The model family of an agent entry (None for an agent without a ``model``: the offline players).

    The family is named by the first known word of the model's name (``gpt``, ``o3``: OpenAI's;
    ``claude``: Anthropic's; ``qwen``: Qwen's; ...), else, for a hosted model (no ``api_base`` or
    ``api_base_env``), of its provider prefix (``openai``, ``anthropic``, ``dashscope``); any other
    model is its own family (its name without the provider): behind a local server the prefix
    names only the protocol.
    """
    model = agent_spec.get("model")
    if not model:
        return None
    parts = str(model).lower().split("/")
    hosted = not (agent_spec.get("api_base") or agent_spec.get("api_base_env"))
    return _family_word(parts[-1:]) or (_family_word(parts[:-1]) if hosted else None) or parts[-1]


def may_judge(judge_spec: Mapping, player_spec: Mapping, own_family: bool = False) -> bool:
    """Whether a judge may grade a player's plays: not of the player's model family.

    Unless ``own_family`` (``games.judge_own_family``: a run with one model, such as the local smoke run).
    """
    own = model_family(player_spec)
    return own_family or own is None or model_family(judge_spec) != own


def judges_for(config: Mapping, agent: str) -> list[str]:
    """The judges of ``games.judges`` that may grade ``agent``'s plays (:func:`may_judge`)."""
    agents = config.get("agents", {})
    own_family = bool(config["games"].get("judge_own_family"))
    return [j for j in config["games"]["judges"] if may_judge(agents.get(j, {}), agents.get(agent, {}), own_family)]


def judge_panel_errors(config: Mapping) -> list[str]:
    """An LLM player none of whose configured judges is of another model family (its reports would go ungraded)."""
    g = config["games"]
    agents = config.get("agents", {})
    if not g.get("judges"):
        return []
    msgs = []
    for a in g["agents"]:
        fam = model_family(agents.get(a, {}))
        if fam is not None and not judges_for(config, a):
            msgs.append(f"config key games.judges: every judge ({', '.join(g['judges'])}) is of the model family "
                        f"{fam!r} of player {a!r}, and a judge never grades its own model family; add a judge of "
                        f"another family (or set games.judge_own_family: true, for a run with a single model)")
    return msgs


def config_errors(config: Mapping) -> list[str]:
    """Problems of the ``games:`` section, each naming its config key (and the scenario's key)."""
    g = config.get("games")
    if not g:
        return []
    from heuresis.agents import AGENTS
    from heuresis.harness.protocol import is_plugin

    msgs: list[str] = []
    # every agent plays but the privileged ones: the episodes' offline baselines, built on the unmasking map
    baselines = {k for k in AGENTS if AGENTS.lookup(k).privileged}
    players = {k for k in AGENTS if k not in baselines}
    plugins = {s.get("kind") for s in config.get("agents", {}).values() if is_plugin(s)}   # checked under agents
    msgs += agent_errors(config, "games.agents", g["agents"], players | plugins,
                         f"it cannot play games (an episode baseline: {sorted(baselines)}); players: "
                         f"{sorted(players)} or an agent from outside the package (docs/agents.md)")
    msgs += agent_errors(config, "games.judges", g["judges"], MODEL_KINDS, "a judge is an LLM agent (kind llm)")
    if not msgs:
        msgs += judge_panel_errors(config)
    msgs += output_cap_errors(config)
    folder = scenario_folder(config)
    if not folder.is_dir():
        return [*msgs, f"config key games.scenarios_dir: no folder {str(folder)!r}"]
    names = scenario_names(config)
    if not names:
        msgs.append(f"config key games.scenarios: no scenario file in {str(folder)!r}")
    for name in names:
        if is_variant(name):
            continue
        try:
            load_scenario(name, folder)
        except ScenarioError as exc:
            msgs.extend(f"config key games.scenarios: {line}" for line in str(exc).splitlines())
    return msgs + test_variant_errors(g, folder)


def test_variant_errors(games: Mapping, folder: str | Path) -> list[str]:
    """Problems of ``games.test_variants``: each scenario of ``of`` loads and has valid ``perturb:`` ranges."""
    msgs: list[str] = []
    tv = games.get("test_variants") or {}
    for name in (tv.get("of") or []) if int(tv.get("count", 0)) else []:   # count 0: `of` draws nothing
        try:
            base = load_scenario(name, folder)
        except ScenarioError as exc:
            msgs.extend(f"config key games.test_variants.of: {line}" for line in str(exc).splitlines())
            continue
        msgs.extend(f"config key games.test_variants.of: {m}" for m in perturbation_errors(base))
    return msgs


def game_scenario(name: str, folder: str | Path, references: Mapping[str, Mapping]) -> Scenario:
    """The scenario a play or a judgement meets: a test variant rebuilt from its references row, any other from its file."""
    if not is_variant(name):
        return load_scenario(name, folder)
    return from_references(load_scenario(base_of(name), folder), name, references[name])


def output_cap_errors(config: Mapping) -> list[str]:
    """A thinking budget that does not fit under the output cap of a play's or a judgement's request.

    A play's request is capped at the agent's ``max_tokens`` or else the games' per-reply cap
    (:data:`heuresis.stages.games.play.OUTPUT_TOKENS`); a judgement's at the judge's ``max_tokens`` or
    else ``games.judge_max_tokens``.  The thinking budget (``thinking.budget_tokens``) counts in
    those tokens and must be below the cap, or the provider refuses every request.
    """
    from heuresis.stages.games.play import OUTPUT_TOKENS

    g = config["games"]
    agents = config.get("agents", {})
    msgs = []
    roles = [(a, "games.agents", "the games' per-reply cap (heuresis.stages.games.play.OUTPUT_TOKENS)", OUTPUT_TOKENS)
             for a in g["agents"]]
    roles += [(j, "games.judges", "games.judge_max_tokens", g["judge_max_tokens"]) for j in g["judges"]]
    for name, role, default_key, default in roles:
        spec = agents.get(name, {})
        thinking = (spec.get("thinking") or {}).get("budget_tokens")
        if spec.get("kind") not in MODEL_KINDS or not isinstance(thinking, (int, float)):
            continue
        cap, key = (spec["max_tokens"], f"agents.{name}.max_tokens") if spec.get("max_tokens") else (default, default_key)
        if thinking >= cap:
            msgs.append(f"config key agents.{name}.thinking.budget_tokens: {thinking} does not fit under {key} = {cap} "
                        f"(the output cap of each request of {name} in {role}): the thinking budget counts in the "
                        f"reply's output tokens and must be below it")
    return msgs


def play_seed(seed: int, scenario: str, repeat: int) -> int:
    """Seed of play ``repeat`` of ``scenario`` (the same for every agent and mode)."""
    return int(seed_of(int(seed), scenario, "play", int(repeat)).generate_state(1)[0])


# --- references ----------------------------------------------------------------------------------
#: game_references columns that hold JSON (designs, lists; null stays null).
_JSON_COLUMNS = ("optimum_design", "trap_design", "standard_design", "trap_pattern", "strategies", "integer_design")


def run_references(scenario: str, folder: str | Path, search: Mapping, out: str | Path, *, log: _Log = _quiet,
                   variants: Mapping | None = None, test_seed: str | None = None) -> Path:
    """Optimum (exact, flown on fresh fleets), trap, standard and threshold of one scenario.

    A test variant (``NAME@testK``) is drawn here (:func:`~heuresis.stages.games.variants.build_variant`)
    from ``variants`` (:func:`~heuresis.stages.games.variants.variant_spec`) and, when sealed, the sealed
    ``test_seed``; its drawn values are recorded in the row, from which plays rebuild it.

    Raises :class:`~heuresis.causal.games.scenario.ScenarioError` (the job fails) when no draw of a
    test variant has a trap.
    """
    started = utc_now()
    t0 = time.perf_counter()
    seeds: dict[str, object] = {}
    scn: Scenario
    if is_variant(scenario):
        if variants is None:
            raise ScenarioError(f"scenario {scenario!r}: a test variant's references need the variants' seed spec")
        scn, ref = build_variant(load_scenario(base_of(scenario), folder), variant_index(scenario),
                                 variant_entropy(variants, test_seed), search, log)
        seeds["test_variants"] = dict(variants)   # the public seed or the sealed seed's commitment, never the seed
    else:
        scn = load_scenario(scenario, folder)
        ref = scenario_references(scn, search)
    seeds["scenario_seed"] = int(scn.spec["seed"])
    log(f"{scenario}: optimum {format_interval(ref.optimum, ref.optimum_lo, ref.optimum_hi)} ({ref.optimum_method} "
        f"{ref.optimum_search:.3f} ± {ref.optimum_se:.3f}, {ref.designs_evaluated} of {ref.lattice_size} designs, "
        f"runner-up {ref.runner_up:.3f}), trap {'none' if ref.trap_design is None else f'{ref.trap:.3f}'}, "
        f"standard {ref.standard:.3f}, "
        f"threshold {ref.threshold:.3f} ({ref.threshold_rule}) in {time.perf_counter() - t0:.1f} s")
    if ref.integer_optimum is not None:
        log(f"{scenario}: full integer lattice ({ref.integer_lattice_size} designs): the best design found survives "
            f"{ref.integer_optimum:.4f}" + (", the exact optimum" if ref.integer_exact else
                                            f"; every design at most {ref.integer_bound:.4f}"))
    if ref.optimum < ref.threshold or ref.trap >= ref.threshold:   # CausalGame's, kept as published
        log(f"{scenario}: as published, the optimum ({ref.optimum:.3f}) or the trap ({ref.trap:.3f}) "
            f"does not separate at the threshold {ref.threshold:.3f} (docs/games.md, 'Divergences')")
    row = ref.as_dict()
    for k in _JSON_COLUMNS:
        row[k] = None if row[k] is None else json.dumps(row[k], sort_keys=True)
    row.update(split=split_of(scenario), variant_of=scn.spec.get("variant_of"),
               perturbed=json.dumps(scn.spec.get("perturbed") or {}, sort_keys=True),
               variant_attempt=int(scn.spec.get("variant_attempt", -1)),
               bias=scn.spec["bias"], selection_bias=bool(scn.spec["selection_bias"]),
               intended_mechanism=" ".join(scn.spec["intended_mechanism"].split()),
               control=scn.spec.get("control"), ablation_of=scn.spec.get("ablation_of"),
               runtime_s=round(time.perf_counter() - t0, 3))
    prov = provenance_record(stage="games_references", config={"scenario": scn.spec, "search": dict(search)},
                             seeds=seeds, inputs=[scn.path], started=started)
    table = pa.table({c: [row[c]] for c in GAME_REFERENCES.schema.names}, schema=GAME_REFERENCES.schema)
    return write_table(table, out, GAME_REFERENCES, {PROVENANCE_KEY: dumps(prov)})


def load_references(paths: Sequence[str | Path]) -> dict[str, dict]:
    """References rows by scenario (designs decoded)."""
    out = {}
    for p in paths:
        for r in read_table(p, GAME_REFERENCES).to_pylist():
            for k in _JSON_COLUMNS:
                r[k] = None if r[k] is None else json.loads(r[k])
            out[r["scenario"]] = r
    return out


# --- plays -----------------------------------------------------------------------------------------
def _failed_row(agent: str, spec: Mapping, scn: Scenario, mode: str, repeat: int, seed: int, ref: Mapping,
                error: str, task_variant: str = "standard") -> dict:
    """The record of a play that crashed outside the agent loop (every column present)."""
    row = dict.fromkeys(GAME_PLAYS.schema.names)
    row.update(play_id=f"{agent}/{mode}/{scn.name}/r{repeat}", agent=agent, agent_kind=str(spec.get("kind")),
               model=spec.get("model"), mode=mode, task_variant=task_variant, scenario=scn.name,
               family=scn.family, variant=scn.spec["variant"],
               bias=scn.spec["bias"], repeat=repeat, seed=seed, status="failed", error=error, termination="failed",
               submitted=False, design="null", survival=0.0, threshold=ref["threshold"], won=False,
               optimum=play_optimum(ref), gap=play_optimum(ref), deployments=0, drones_used=0, designs_deployed="[]",
               deployment_counts="[]", distinct_designs=0, report="", turns=0, n_calls=0, n_errors=0, tokens_in=0,
               tokens_out=0, cost=0.0,
               retries=0, warnings="[]", wall_s=0.0)
    return row


def run_plays(agent: str, spec: Mapping, mode: str, scenario: str, folder: str | Path, *, plays: int, seed: int,
              max_turns: int, references: str | Path, out: str | Path, calls_out: str | Path,
              transcripts_dir: str | Path, log: _Log = _quiet, attempt: str = FIRST_ATTEMPT,
              requests_out: str | Path | None = None, task_variant: str = "standard",
              max_tool_calls: int | None = None, code_tool: CodeTool | Mapping | None = None,
              spend_dir: str | Path | None = None, protocols: Sequence[str] = ("committed",)) -> Path:
    """``plays`` plays of ``scenario`` by ``agent`` in ``mode``; checkpointed per play.

    ``protocols``: config ``games.protocols`` (``as_published`` asks CausalGame's debrief after each
    submitted play of an LLM agent, :func:`heuresis.stages.games.play.run_play`);
    ``requests_out``: the plays' model requests (:data:`~heuresis.artifacts.schemas.GAME_PLAY_REQUESTS`);
    ``task_variant``, ``max_tool_calls`` and ``code_tool``: config ``games.task_variant``,
    ``games.max_tool_calls_per_turn`` and ``episodes.code_tool`` (see :func:`heuresis.stages.games.play.run_play`;
    a mapping is read with :meth:`CodeTool.from_config <heuresis.config.settings.CodeTool.from_config>`).
    """
    from heuresis.agents import agent_origin
    from heuresis.harness.protocol import origin_packages
    from heuresis.harness.requestlog import RequestLog
    from heuresis.stages.games.play import run_play

    started = utc_now()
    code_tool = None if code_tool is None else CodeTool.coerce(code_tool)
    refs = load_references([references])
    scn = game_scenario(scenario, folder, refs)
    ref = refs[scenario]
    cfg_slice = {"agent": agent, "spec": result_spec(spec), "mode": mode, "scenario": scn.spec, "plays": int(plays),
                 "seed": int(seed), "max_turns": int(max_turns), "threshold": ref["threshold"],
                 "optimum": play_optimum(ref), "task_variant": task_variant,
                 "max_tool_calls": None if max_tool_calls is None else int(max_tool_calls),
                 "code_tool": {} if code_tool is None else code_tool.as_dict()}
    if "as_published" in protocols:   # the debrief is part of the play (a committed-only play keeps its old key)
        cfg_slice["protocols"] = sorted(protocols)
    origin = agent_origin(agent, spec)
    if origin is not None:   # a plugin's class and distribution version: in the provenance and the resume key
        cfg_slice["agent_origin"] = origin
    ckpt = Checkpoint(out, config_digest(cfg_slice))
    if len(ckpt):
        log(f"{agent} {mode} {scenario}: resuming, {len(ckpt)} of {plays} plays done")
    tdir = Path(transcripts_dir)
    make_folder(tdir)
    for r in range(int(plays)):
        if r in ckpt:
            continue
        s = play_seed(seed, scn.seed_name, r)     # an ablation meets its scenario's plays' draws
        t0 = time.perf_counter()
        try:
            res = run_play(agent, spec, scn, repeat=r, seed=s, threshold=ref["threshold"], optimum=play_optimum(ref),
                           max_turns=max_turns, mode=mode, task_variant=task_variant,
                           max_tool_calls=max_tool_calls, code_tool=code_tool,
                           request_log=RequestLog(tdir / f"r{r}.requests.jsonl"), spend_dir=spend_dir,
                           protocols=tuple(protocols))
            row, calls, transcript, requests = res.row, res.calls, res.transcript, res.requests
        except FatalAgentError:   # a refused key, an exhausted quota or spend limit: the job stops
            raise
        except Exception as exc:  # the harness itself failed: a recorded failure, the other plays go on
            err = f"{type(exc).__name__}: {exc}"
            row = _failed_row(agent, spec, scn, mode, r, s, ref, err, task_variant)
            calls, transcript, requests = [], PlayTranscript.failed(row, traceback.format_exc(limit=8)), []
        row["transcript"] = str(tdir / f"r{r}.json")
        transcript.write(tdir / f"r{r}.json")
        if row["status"] == "failed":   # written, not saved: a rerun retries it
            ckpt.fail(r, {"row": row, "calls": calls, "requests": requests})
        else:
            ckpt.save(r, {"row": row, "calls": calls, "requests": requests})
        log(f"{agent} {mode} {scenario} r{r}: {row['status']} {row['termination']} survival {row['survival']:.3f} "
            f"(threshold {ref['threshold']:.3f}, optimum {ref['optimum']:.3f}) in {time.perf_counter() - t0:.1f} s"
            + (f" ERROR {row['error']}" if row["error"] else ""))
    records = ckpt.values(range(int(plays)))
    rows = [rec["row"] for rec in records]
    calls = [c for rec in records for c in rec["calls"]]
    requests = [q for rec in records for q in rec.get("requests", [])]
    prov = provenance_record(stage="games_plays", config=cfg_slice, seeds={"seed": int(seed)},
                             inputs=[scn.path, references], started=started, packages=origin_packages(origin))
    failed = len(ckpt.failed)
    meta = {PROVENANCE_KEY: dumps(prov), **failure_metadata(failed, attempt)}
    record_attempt(out, attempt, failed, "plays")
    write_table(pa.table({c: [x.get(c) for x in calls] for c in GAME_CALLS.schema.names}, schema=GAME_CALLS.schema),
                calls_out, GAME_CALLS, meta)
    if requests_out is not None:
        write_table(pa.table({c: [x.get(c) for x in requests] for c in GAME_PLAY_REQUESTS.schema.names},
                             schema=GAME_PLAY_REQUESTS.schema), requests_out, GAME_PLAY_REQUESTS, meta)
    write_table(pa.table({c: [x.get(c) for x in rows] for c in GAME_PLAYS.schema.names}, schema=GAME_PLAYS.schema),
                out, GAME_PLAYS, meta)
    if ckpt.finish():
        log(f"{agent} {mode} {scenario}: {failed} of {plays} plays FAILED; rerun the target to retry them")
    return Path(out)


# --- judgements ---------------------------------------------------------------------------------------

def run_one_play(cfg: Mapping, results: str | Path, agent: str, spec: Mapping, scenario: str, *,
                 log: _Log = _quiet) -> Path:
    """Play ``scenario`` once in the agentic mode outside the workflow, into a built results folder.

    The scenario's references come from ``results`` (the workflow's games references stage).  What
    ``heuresis serve-play`` and the inspect task ``heuresis_inspect/games`` run; returns the plays table's
    path (:data:`heuresis.artifacts.paths.SERVED_PLAY`: its calls and transcript beside it).
    """
    from heuresis.artifacts import paths as P

    res = Path(results)
    refs = P.located(P.GAME_REFERENCES, res, scenario=scenario)
    if not refs.exists():
        raise FileNotFoundError(f"no references of scenario {scenario!r} at {refs} (run the workflow's games "
                                "references stage first)")
    g = cfg["games"]
    out = P.located(P.SERVED_PLAY, res, agent=agent, scenario=scenario)
    return run_plays(agent, spec, "agentic", scenario, scenario_folder(cfg), plays=1, seed=g["seed"],
                     max_turns=g["max_turns"], references=refs, out=out, calls_out=out.with_suffix(".calls.parquet"),
                     requests_out=out.with_suffix(".requests.parquet"),
                     transcripts_dir=P.located(P.GAME_TRANSCRIPTS, res, agent=agent, mode="agentic", scenario=scenario),
                     log=log, task_variant=g["task_variant"], max_tool_calls=g["max_tool_calls_per_turn"],
                     code_tool=CodeTool.from_config(cfg["episodes"]["code_tool"]))


def judgement_unit(play: Mapping, protocol: str = "committed") -> str:
    """The checkpoint unit of one judgement: the play's id and a digest of everything the judge is shown of it.

    The play's status, report, design and deployments, and the optimum it is compared with: a play
    that changed (played again after a failure) is a new unit, an unchanged one keeps its judgement.
    A view other than ``committed`` is its own unit (``PROTOCOL:`` before the id).
    """
    shown = {k: play.get(k) for k in ("status", "report", "design", "submitted", "designs_deployed",
                                      "deployment_counts", "optimum_design")}
    unit = f"{play['play_id']}@{config_digest(shown)[:16]}"
    return unit if protocol == "committed" else f"{protocol}:{unit}"


def run_judgements(judge: str, spec: Mapping, agent: str, mode: str, plays_paths: Sequence[str | Path],
                   references: Sequence[str | Path], folder: str | Path, out: str | Path, *, max_tokens: int = 1500,
                   log: _Log = _quiet, attempt: str = FIRST_ATTEMPT, requests_out: str | Path | None = None,
                   agent_spec: Mapping | None = None, own_family: bool = False,
                   protocols: Sequence[str] = ("committed",)) -> Path:
    """Judge ``judge`` scores the report of every play in ``plays_paths``; checkpointed per play and protocol.

    ``protocols`` (config ``games.protocols``): each play is judged once per view, ``committed``
    (its report) and ``as_published`` (its debrief after the outcome; :func:`~heuresis.stages.games.judge.judged_view`).
    ``requests_out``: the judge's model requests (:data:`~heuresis.artifacts.schemas.GAME_JUDGEMENT_REQUESTS`).
    ``agent_spec``: the player's agent entry; a judge of the player's model family is refused unless
    ``own_family`` (``games.judge_own_family``: a run with a single model).
    """
    if agent_spec is not None and not may_judge(spec, agent_spec, own_family):
        raise ValueError(f"judge {judge!r} ({spec.get('model')}) is of the model family {model_family(agent_spec)!r} "
                         f"of player {agent!r} ({agent_spec.get('model')}); a judge never grades its own model family")
    from heuresis.agents import make_agent
    from heuresis.stages.games.judge import judge_play, judged_view

    started = utc_now()
    plays = [r for p in plays_paths for r in read_table(p, GAME_PLAYS).to_pylist()]
    refs = load_references(references)
    for p in plays:   # the judge sees the optimum found by search (references), never the Stage-2 survival
        p["optimum_design"] = json.dumps(refs[p["scenario"]]["optimum_design"], sort_keys=True)
    cfg_slice = {"judge": judge, "spec": result_spec(spec), "agent": agent, "mode": mode, "max_tokens": int(max_tokens)}
    # one unit per play and what the judge is shown of it: a play played again (a retried failure)
    # is judged again, the job's other judgements are kept
    ckpt = Checkpoint(out, config_digest(cfg_slice))
    units = {(p["play_id"], pr): judgement_unit(judged_view(p, pr), pr) for p in plays for pr in protocols}
    model = make_agent(judge, spec)
    if getattr(model, "max_tokens", None) is None:
        model.max_tokens = int(max_tokens)  # type: ignore[attr-defined]
    scns: dict[str, Scenario] = {}
    for p in plays:
        for protocol in protocols:
            unit = units[(p["play_id"], protocol)]
            if unit in ckpt:
                continue
            scn = scns.setdefault(p["scenario"], game_scenario(p["scenario"], folder, refs))
            row = judge_play(model, judge, p, scn, protocol)
            if row["status"] == "failed":   # written, not saved: a rerun retries it
                ckpt.fail(unit, row)
            else:
                ckpt.save(unit, row)
            log(f"judge {judge} on {p['play_id']} ({protocol}): {row['status']} total {row['total']}"
                + (f" ERROR {row['error']}" if row["error"] else ""))
    rows = ckpt.values(units.values())
    prov = provenance_record(stage="games_judgements", config=cfg_slice, inputs=[*plays_paths, *references],
                             started=started)
    table = pa.table({c: [x.get(c) for x in rows] for c in GAME_JUDGEMENTS.schema.names},
                     schema=GAME_JUDGEMENTS.schema)
    failed = len(ckpt.failed)
    record_attempt(out, attempt, failed, "judgements")
    meta = {PROVENANCE_KEY: dumps(prov), **failure_metadata(failed, attempt)}
    if requests_out is not None:
        requests = [q for x in rows for q in x.get("requests", [])]
        write_table(pa.table({c: [x.get(c) for x in requests] for c in GAME_JUDGEMENT_REQUESTS.schema.names},
                             schema=GAME_JUDGEMENT_REQUESTS.schema), requests_out, GAME_JUDGEMENT_REQUESTS, meta)
    write_table(table, out, GAME_JUDGEMENTS, meta)
    if ckpt.keep(units.values()):   # the parts stay: a play played again is the only one judged again
        log(f"judge {judge}: {failed} of {len(plays)} judgements FAILED; rerun the target to retry them")
    return Path(out)
