"""Heuresis episodes and game plays as inspect_ai tasks (the ``inspect`` extra; docs/agents.md, "From inspect_ai").

``inspect eval heuresis_inspect/episodes --model M -T results=results -T config=config/quick.yaml`` plays
episodes of a built results folder with inspect's model ``M``.  A sample is one condition ×
instance and holds only public fields (the condition, ``family/split/index``): the truth never
enters a sample, its target or its metadata.  The solver runs the episode through the harness's own
loop (:func:`heuresis.stages.episodes.run_one_episode`) with an agent of kind ``inspect`` on the
evaluation's model (with ``-T solver=react``, inspect's react agent holds the conversation:
:mod:`heuresis.agents.inspect_model`), so turns, budgets, the last turn, the tools and their sandbox, the request log
and the spend caps are those of every other episode; each request goes through inspect's
``Model.generate`` and is logged in the ``.eval`` file.  The episode's tables, transcript and
request log are written where ``heuresis serve-episode`` writes them (beside the run's own), and
the scorer reports the episode's scores from that table once the agent has finished.  A rerun of the
task on the same results folder replays every request already answered (nothing is paid twice).

``inspect eval heuresis_inspect/games --model M -T results=results -T config=config/quick.yaml`` plays the
games track's scenarios the same way (:func:`heuresis.stages.games.workflow.run_one_play`: one
agentic play per sample, a sample is a scenario name); the scorer reports the play's Stage-2
survival, whether it won and its gap to the scenario's optimum.

The distribution ``heuresis-inspect`` (``integrations/inspect``) holds this module alone, so that
heuresis itself never needs inspect_ai; inspect loads it through its ``inspect_ai`` entry point
and names its tasks after its top-level module.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import (
    ChatCompletionChoice,
    ChatMessageAssistant,
    GenerateConfig,
    ModelAPI,
    ModelOutput,
    ModelUsage,
    modelapi,
)
from inspect_ai.scorer import Score, Target, mean, scorer
from inspect_ai.solver import Generate, TaskState, solver
from inspect_ai.tool import ToolCall

from heuresis.artifacts.io import read_table
from heuresis.artifacts.schemas import EPISODES, GAME_PLAYS
from heuresis.config import BASE_CONFIG, config_files
from heuresis.preflight import load_config
from heuresis.stages.episodes import run_one_episode
from heuresis.stages.games.workflow import run_one_play, scenario_names

__all__ = ["GAME_SCORES", "SCORES", "ScriptedModel", "episodes", "games"]

#: The scores of an episode the scorer reports: its F1, PC-KCI's on the same instance, and the difference.
#: Δ^s and Δ^r need the run's best chosen algorithms (the headroom stage): run the agent as
#: ``kind: inspect`` in the workflow to get them in every table.
SCORES = ("f1", "pc_kci_f1", "gain_over_pc_kci")

#: The scores of a game play the scorer reports (columns of the plays table).
GAME_SCORES = ("survival", "won", "gap")

#: The agent name an inspect task's episodes are recorded under, unless ``agent`` is given.
DEFAULT_AGENT = "inspect"


def _config(config: str | list[str] | None, no_base: bool) -> dict:
    """The config as the workflow reads it: the base config, then the given files (run from its folder)."""
    files = config_files([config] if isinstance(config, str) else list(config or []),
                         base=None if no_base else BASE_CONFIG)
    return load_config(*files)


def _instances(cfg: dict, families: list[str], split: str, indices: list[int] | None) -> list[str]:
    n = int(cfg["instances"][f"n_{split}"])
    chosen = list(range(n)) if indices is None else indices
    bad = [i for i in chosen if not 0 <= i < n]
    if bad:
        raise ValueError(f"instances {bad}: the config's {split} split has {n} instances per family (0 to {n - 1})")
    return [f"{fam}/{split}/{i:04d}" for fam in families for i in chosen]


def _indices(value: str | int | list) -> list[int]:
    """Instance indices as inspect passes ``-T instances=...`` (``3``, ``0,1``, a list)."""
    items = value if isinstance(value, list) else str(value).split(",")
    try:
        return [int(str(i).strip()) for i in items]
    except ValueError:
        raise ValueError(f"instances {value!r}: expected indices, e.g. 0,1,2") from None


@task
def episodes(results: str = "results", config: str | list[str] | None = None, condition: str | None = None,
             families: str | list[str] | None = None, split: str = "dev", instances: str | list[int] | None = None,
             agent: str = DEFAULT_AGENT, no_base: bool = False, solver: str | None = None,
             solver_args: dict | None = None) -> Task:
    """Episodes of the results folder ``results`` (built with ``config``) under ``condition``.

    ``condition``: a condition id (``full-unguided-p1-none-standard-once-r0``, the default);
    ``families``: a family or a list (default: every family of the config); ``split``: ``dev`` or
    ``test``; ``instances``: indices (default: all of the split); ``agent``: the name the episodes
    are recorded under; ``no_base``: read only ``config``, without the base config under it;
    ``solver``: an inspect agent playing the episode with the evaluation's model (``react``, or
    ``package.module:function``; default: the harness's own loop), ``solver_args`` its keyword arguments.
    """
    cfg = _config(config, no_base)
    fams = [families] if isinstance(families, str) else list(families or cfg["families"])
    unknown = sorted(set(fams) - set(cfg["families"]))
    if unknown:
        raise ValueError(f"families {unknown}: not in the config (known: {sorted(cfg['families'])})")
    idx = None if instances is None else _indices(instances)
    cond = condition or "full-unguided-p1-none-standard-once-r0"
    samples = [Sample(id=f"{cond}/{inst}", input=f"Heuresis episode {cond} on instance {inst}",
                      metadata={"condition": cond, "instance": inst})
               for inst in _instances(cfg, fams, split, idx)]
    return Task(dataset=MemoryDataset(samples, name="heuresis-episodes"),
                solver=heuresis_run(_episode_run, cfg, results, agent, _spec(solver, solver_args)),
                scorer=heuresis_scorer("heuresis_score", EPISODES, _episode_values, SCORES))


#: The store key of the table a sample's run wrote (a path, not a score: read by the scorer).
TABLE_KEY = "heuresis_table"


def _spec(solver: str | None, solver_args: dict | None) -> dict:
    """The agent spec of a task's samples: kind inspect on the evaluation's model, with the solver if one is named."""
    return {"kind": "inspect", **({"solver": solver} if solver else {}),
            **({"solver_args": dict(solver_args)} if solver_args else {})}


def _episode_run(cfg: dict, results: str, agent: str, spec: dict, metadata: dict) -> Path:
    return run_one_episode(cfg, results, agent, spec, metadata["condition"], metadata["instance"])


def _play_run(cfg: dict, results: str, agent: str, spec: dict, metadata: dict) -> Path:
    return run_one_play(cfg, results, agent, spec, metadata["scenario"])


def _episode_values(row: dict) -> tuple[dict, str]:
    f1, pc = (float("nan") if row[c] is None else float(row[c]) for c in ("f1", "pc_kci_f1"))
    return {"f1": f1, "pc_kci_f1": pc, "gain_over_pc_kci": f1 - pc}, row["edges"]


def _play_values(row: dict) -> tuple[dict, str]:
    return {"survival": float(row["survival"]), "won": float(bool(row["won"])), "gap": float(row["gap"])}, row["design"]


@solver
def heuresis_run(run, cfg: dict, results: str, agent: str, spec: dict):
    """Run the sample (``run``: its episode or its play) through the harness's loop with the evaluation's model."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        out = await anyio.to_thread.run_sync(partial(run, cfg, results, agent, spec, dict(state.metadata)))
        state.store.set(TABLE_KEY, str(out))
        state.completed = True
        return state

    return solve


def heuresis_scorer(name: str, schema, values, names):
    """The scorer ``name`` reading the sample's row of ``schema`` after the agent finished (the truth is read only here).

    ``values(row)`` gives the scores (``names``) and the answer.
    """

    @scorer(metrics={s: [mean()] for s in names}, name=name)
    def make():
        async def score(state: TaskState, target: Target) -> Score:
            path = Path(state.store.get(TABLE_KEY))
            row = read_table(path, schema).to_pylist()[0]
            value, answer = values(row)
            return Score(value=value, answer=answer,
                         explanation=f"{row['status']} ({row['termination']}), {row['turns']} turns",
                         metadata={"status": row["status"], "termination": row["termination"], "table": str(path),
                                   "cost": row["cost"], "tokens_in": row["tokens_in"],
                                   "tokens_out": row["tokens_out"]})

        return score

    return make()


@task
def games(results: str = "results", config: str | list[str] | None = None, scenarios: str | list[str] | None = None,
          agent: str = DEFAULT_AGENT, no_base: bool = False, solver: str | None = None,
          solver_args: dict | None = None) -> Task:
    """One agentic play of each scenario (default: the config's) of the results folder ``results``.

    ``solver``, ``solver_args``: an inspect agent playing, as for :func:`episodes`.
    """
    cfg = _config(config, no_base)
    known = scenario_names(cfg)
    chosen = [scenarios] if isinstance(scenarios, str) else list(scenarios or known)
    unknown = sorted(set(chosen) - set(known))
    if unknown:
        raise ValueError(f"scenarios {unknown}: not played by the config (known: {known})")
    samples = [Sample(id=name, input=f"Heuresis game {name}", metadata={"scenario": name}) for name in chosen]
    return Task(dataset=MemoryDataset(samples, name="heuresis-games"),
                solver=heuresis_run(_play_run, cfg, results, agent, _spec(solver, solver_args)),
                scorer=heuresis_scorer("heuresis_play_score", GAME_PLAYS, _play_values, GAME_SCORES))


@modelapi(name="heuresis-script")
def _script_api() -> type[ModelAPI]:
    return ScriptedModel


class ScriptedModel(ModelAPI):
    """A model that plays a fixed script (``--model heuresis-script/NAME -M script=moves.json``), offline.

    The script is a JSON list of moves; the reply to a conversation with ``k`` assistant messages is
    move ``k`` (so every sample of a task plays the same moves), and past the end a text reply that
    calls no tool.  A move is ``{"content": text, "tool_calls": [[name, arguments], ...], "usage":
    [tokens_in, tokens_out]}`` (each key optional): arguments are an object, or a string sent as
    written (a malformed one arrives as a call inspect could not parse); ``{"error": text}`` fails
    the request (a provider error); ``{"wait_s": seconds}`` answers only after that long (a slow
    provider; a test kills an evaluation waiting there).  Without ``usage`` the
    tokens are counted as characters / 4.  For trying the task and for tests; it knows nothing of
    the instance.
    """

    def __init__(self, model_name: str, base_url: str | None = None, api_key: str | None = None,
                 config: GenerateConfig | None = None, script: str | None = None, **model_args: Any) -> None:
        super().__init__(model_name, base_url, api_key, [], config or GenerateConfig())
        if script is None:
            raise ValueError(f"model heuresis-script/{model_name} needs its moves: -M script=moves.json")
        self.moves = json.loads(Path(script).read_text())
        if not isinstance(self.moves, list):
            raise ValueError(f"script {script}: expected a JSON list of moves, got {type(self.moves).__name__}")

    async def generate(self, input, tools, tool_choice, config) -> ModelOutput:
        """Move ``k`` of the script, ``k`` the number of assistant messages in ``input``."""
        k = sum(m.role == "assistant" for m in input)
        move: dict[str, Any] = self.moves[k] if k < len(self.moves) else {"content": "I have nothing more to do."}
        if "wait_s" in move:
            await anyio.sleep(float(move["wait_s"]))
        if "error" in move:
            raise RuntimeError(f"scripted provider error: {move['error']}")
        calls = []
        for j, (name, args) in enumerate(move.get("tool_calls") or []):
            parsed, error = args, None
            if isinstance(args, str):
                try:
                    parsed = json.loads(args)
                except ValueError as exc:
                    parsed, error = {}, f"arguments are not valid JSON: {exc}"
            calls.append(ToolCall(id=f"script_{k}_{j}", function=name, arguments=parsed, parse_error=error))
        text = str(move.get("content") or "")
        n_in, n_out = move.get("usage") or (sum(len(m.text) for m in input) // 4, len(json.dumps(move)) // 4)
        message = ChatMessageAssistant(content=text, tool_calls=calls or None, model=self.model_name,
                                       source="generate")
        return ModelOutput(model=self.model_name, usage=ModelUsage(input_tokens=int(n_in), output_tokens=int(n_out),
                                                                   total_tokens=int(n_in) + int(n_out)),
                           choices=[ChatCompletionChoice(message=message,
                                                         stop_reason="tool_calls" if calls else "stop")])
