"""Credentials: the variables each configured model needs, checked before anything runs, and one cheap request per key."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from heuresis.agents.llm.agent import LLMAgent
from heuresis.agents.llm.errors import CredentialsError, ProviderFatalError
from heuresis.agents.llm.provider import load_litellm
from heuresis.agents.spend import SPEND_DIR, clear_stop
from heuresis.harness.agent_spec import scrub
from heuresis.registry import MODEL_KINDS


def missing_credentials(spec: Mapping) -> list[str]:
    """Environment variables the model of one ``llm`` agent entry needs and that are not set.

    ``api_key_env`` names the variable explicitly; ``requires_key: false`` (a local server) needs
    none; otherwise litellm's ``validate_environment`` for the model says which are missing
    (``*_API_BASE`` variables do not count when ``api_base`` is given in the config).  An
    ``inspect`` agent's key is inspect's to read: none is checked here.
    """
    if spec.get("kind") == "inspect":
        return []
    base = [str(spec["api_base_env"])] if spec.get("api_base_env") and not os.environ.get(str(spec["api_base_env"])) \
        else []
    if spec.get("api_key_env"):
        var = str(spec["api_key_env"])
        return base + ([] if os.environ.get(var) else [var])
    if spec.get("requires_key") is False:
        return base
    need = load_litellm().validate_environment(model=str(spec["model"]), api_base=spec.get("api_base"))["missing_keys"]
    if spec.get("api_base") or spec.get("api_base_env"):
        need = [k for k in need if not k.endswith("_API_BASE")]
    return base + list(need)


def llm_agents_in_use(config: Mapping) -> dict[str, dict]:
    """Return the model-calling agents (kinds ``llm``, ``inspect``) the configured run will call, by name.

    They are the agents of the active episode grids, of the leakage probe and of the games
    track (``games.agents`` and ``games.judges``).
    """
    used: set[str] = set()
    episodes = config.get("episodes", {})
    for grid in episodes.get("run", []):
        used.update(episodes.get("grids", {}).get(grid, {}).get("agents", []))
    used.update(config.get("leakage", {}).get("agents", []))
    used.update(config.get("games", {}).get("agents", []))
    used.update(config.get("games", {}).get("judges", []))
    agents = config.get("agents", {})
    return {a: dict(agents[a]) for a in sorted(used) if a in agents and agents[a].get("kind") in MODEL_KINDS}


def check_credentials(config: Mapping, agents: Iterable[str] | None = None) -> None:
    """Fail, naming every missing variable and the agent that needs it, before anything runs.

    ``agents``: check only these agent names (those the jobs about to run need); None: every
    ``llm`` agent the config uses (:func:`llm_agents_in_use`).
    """
    used = llm_agents_in_use(config)
    if agents is not None:
        wanted = set(agents)
        used = {a: spec for a, spec in used.items() if a in wanted}
    missing = [(name, var, spec["model"]) for name, spec in used.items() for var in missing_credentials(spec)]
    if missing:
        lines = [f"agent {a!r} (model {m}) needs the environment variable {v}, which is not set" for a, v, m in missing]
        raise CredentialsError("missing credentials: " + "; ".join(lines)
                               + ". Export it, or remove the agent from the active grids (episodes.run), "
                                 "leakage.agents, games.agents and games.judges.")


def verify_keys(config: Mapping, agents: Iterable[str] | None = None, log=lambda m: None) -> list[str]:
    """Send one cheap request (one output token) per distinct model and key of the LLM agents in use.

    Agents that need no key (``requires_key: false``) and those with ``verify_key: false`` are skipped.
    A key that answers clears the stop records of the agents using it (a fatal error of an earlier
    run, now shown fixed: :func:`heuresis.agents.spend.stop_run`).
    Raises :class:`ProviderFatalError` naming the agent, model and variable when a key is refused, the
    quota is gone or the model is unknown; a transient failure (rate limit, timeout) is returned as a
    warning, not an error.  Returns the warnings.
    """
    used = llm_agents_in_use(config)
    if agents is not None:
        used = {a: spec for a, spec in used.items() if a in set(agents)}
    seen: set[tuple] = set()
    warnings = []
    for name, spec in sorted(used.items()):
        if spec.get("kind") != "llm" or spec.get("requires_key") is False or spec.get("verify_key") is False:
            continue
        ident = (spec["model"], spec.get("api_base"), spec.get("api_key_env"))
        sharing = [a for a, s in used.items() if (s["model"], s.get("api_base"), s.get("api_key_env")) == ident]
        if ident in seen:
            continue
        seen.add(ident)
        params = {k: v for k, v in spec.items() if k != "kind"}
        agent = LLMAgent(name, **{**params, "retries": {"max_retries": 0}, "max_tokens": 1,
                                  "thinking": None, "reasoning_effort": None})
        agent.stop_records = False
        try:
            agent.respond([{"role": "user", "content": "Reply with OK."}], [])
            log(f"agent {name!r} (model {spec['model']}): key verified")
            for a in sharing:
                if clear_stop(SPEND_DIR, a):
                    log(f"agent {a!r}: the stop record of an earlier fatal error is cleared (its key now answers)")
        except ProviderFatalError:
            raise
        except Exception as exc:   # rate limited, a timeout, an unsupported parameter: not proof of a bad key
            warnings.append(f"agent {name!r} (model {spec['model']}): key check inconclusive: "
                            f"{scrub(str(exc), agent._secrets())[:300]}")
    return warnings
