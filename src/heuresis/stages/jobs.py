"""What a model-calling job asks of the workflow: its provider's resource and its minutes.

The stages that call models (episodes, leakage probes, game plays, judgements) plan their jobs in
their own modules; the pieces they share are here. A job holds one unit of the Snakemake resource
of the provider it calls (:func:`llm_resource`) and sends one request at a time, so a limit on
the resource caps a provider's concurrent requests across jobs. A job's minutes on a cluster are
its time bound through :func:`job_minutes`: the longest one request may take comes from the
agent's ``timeout_s`` (:func:`request_seconds`).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping

from heuresis.harness.agent_spec import provider_resource
from heuresis.registry import MODEL_KINDS

__all__ = [
    "OFFLINE_RUNTIME_MIN",
    "RUNTIME_MARGIN_MIN",
    "RUNTIME_SLACK",
    "job_minutes",
    "llm_resource",
    "llm_resources",
    "request_seconds",
]

#: A job's minutes are its time bound times this (the agent's working-time clock leaves out
#: start-up, failed attempts and backoff waits, which still take wall time) ...
RUNTIME_SLACK = 1.5
#: ... plus this many minutes (imports, loading inputs, writing outputs).
RUNTIME_MARGIN_MIN = 15
#: Minutes of a job whose agent calls no model (the offline baselines and game players: minutes of work).
OFFLINE_RUNTIME_MIN = 120


def llm_resource(config: Mapping, agent: str) -> str | None:
    """The Snakemake resource of the provider ``agent`` calls (``llm_openai``), None for an agent that calls none."""
    return provider_resource(config["agents"].get(agent, {}))


def llm_resources(config: Mapping) -> list[str]:
    """The provider resources of every LLM agent the config uses (episodes, leakage, games, judges), sorted."""
    from heuresis.agents.llm import llm_agents_in_use

    return sorted({r for spec in llm_agents_in_use(config).values() if (r := provider_resource(spec))})


def request_seconds(spec: Mapping) -> float | None:
    """The longest one request of an ``llm`` agent may take (its ``timeout_s``), None for other kinds."""
    if spec.get("kind") not in MODEL_KINDS:
        return None
    if spec.get("timeout_s") is not None:
        return float(spec["timeout_s"])
    from heuresis.agents.llm import LLMAgent

    return float(inspect.signature(LLMAgent).parameters["timeout_s"].default)


def job_minutes(seconds: float) -> int:
    """Minutes a job asks a cluster for, given its time bound in seconds (:data:`RUNTIME_SLACK`, :data:`RUNTIME_MARGIN_MIN`)."""
    return int(math.ceil(seconds * RUNTIME_SLACK / 60.0)) + RUNTIME_MARGIN_MIN
