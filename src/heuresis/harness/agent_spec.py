"""An agent's config entry, read three ways: what its results depend on, where its requests go, what never belongs in it.

* **Transport settings** (:data:`TRANSPORT_KEYS`: timeouts, retries and backoff, where the
  server's URL and the key are read from) change *how* a model is asked, never *what*: the
  same request gets the same reply whatever they are.  :func:`result_spec` is the entry without
  them — what the rules pass as parameters and what the resume keys digest, so changing a
  timeout reruns and re-pays nothing — and :func:`transport_of` is the rest, which a job reads at
  run time from the full config.
* **The provider** a model is served by (:func:`provider_of`, as litellm routes the model) names
  the Snakemake resource (:func:`provider_resource`, e.g. ``llm_openai``) every model-calling job
  holds one unit of, so a limit on it caps the concurrent requests to that provider across jobs.
* **No secret in the config** (:func:`secret_errors`): a key named like a credential (``api_key``,
  ``token``, ``secret``, ``password``) or a value that looks like one (``sk-...``) anywhere in an
  agent's entry is refused, naming the key and never echoing the value: keys come only from the
  environment (``api_key_env`` names the variable), so none lands in Snakemake's params, the
  provenance of an output or a log.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from typing import Any

from heuresis.registry import MODEL_KINDS

__all__ = ["RESOURCE_PREFIX", "TRANSPORT_KEYS", "env_errors", "provider_of", "provider_resource", "result_spec",
           "scrub", "secret_errors", "transport_of"]

#: Keys of an agent entry that change how a model is asked, not what: out of the params and resume keys.
TRANSPORT_KEYS = frozenset({"timeout_s", "retries", "api_base_env", "api_key_env", "requires_key", "verify_key",
                            "max_run_usd", "prompt_caching", "tokens_per_minute"})
#: Prefix of the Snakemake resource of a provider (``llm_`` + the litellm provider name).
RESOURCE_PREFIX = "llm_"

# a key naming a credential (api_key, apikey, access_token, client_secret, password; not *_env,
# which names the environment variable, nor max_tokens / budget_tokens, which count tokens)
_SECRET_NAME = re.compile(r"(^|_)(api_?key|token|secret|password|passwd|credentials?|auth|authorization)($|_)", re.IGNORECASE)
# a value shaped like a provider's key: OpenAI/Anthropic/DeepSeek sk-..., Google AIza..., Hugging Face hf_...,
# Groq gsk_..., xAI xai-..., an HTTP bearer header, AWS access key ids
_KEY_SHAPES = (r"sk-[A-Za-z0-9_-]{12,}|AIza[A-Za-z0-9_-]{20,}|hf_[A-Za-z0-9]{20,}|gsk_[A-Za-z0-9]{20,}"
               r"|xai-[A-Za-z0-9]{20,}|Bearer\s+\S{12,}|AKIA[A-Z0-9]{16}")
_SECRET_VALUE = re.compile(rf"^\s*({_KEY_SHAPES})")
# in a provider's error text: a key as above, or echoed masked and short (sk-proj-abc***wxyz), a bearer
# header, an api_key=... assignment
_SECRET_FRAGMENT = re.compile(rf"{_KEY_SHAPES}|\b(?:sk|pk|rk)-[A-Za-z0-9_*.\-]{{3,}}|\bBearer\s+\S+"
                              r"|(?i:api[_-]?key)\s*[=:]\s*\S+")


def scrub(text: str, secrets=()) -> str:
    """``text`` with key-like fragments and the given secret values replaced by ``[redacted]``.

    Applied to every error text the harness stores (provider errors, tracebacks).
    """
    out = str(text)
    for value in secrets:
        if value and len(value) >= 6:
            out = out.replace(value, "[redacted]")
    return _SECRET_FRAGMENT.sub("[redacted]", out)


def result_spec(spec: Mapping) -> dict:
    """The agent entry without its transport settings: what an agent's results depend on."""
    return {k: v for k, v in spec.items() if k not in TRANSPORT_KEYS}


def transport_of(spec: Mapping) -> dict:
    """The transport settings of an agent entry (read by the job at run time, from the full config)."""
    return {k: v for k, v in spec.items() if k in TRANSPORT_KEYS}


@functools.lru_cache(maxsize=256)
def _provider(model: str, api_base: str | None) -> str:
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"   # litellm's bundled map, never a download
    import litellm

    try:
        return str(litellm.get_llm_provider(model, api_base=api_base)[1])
    except Exception:   # an unknown provider prefix: litellm will say so on the first call
        return model.split("/", 1)[0] if "/" in model else "unknown"


def provider_of(spec: Mapping) -> str | None:
    """The litellm provider of an ``llm`` agent entry (``openai``, ``anthropic``, ...); None for other kinds."""
    if spec.get("kind") not in MODEL_KINDS:
        return None
    return _provider(str(spec["model"]), spec.get("api_base"))


def provider_resource(spec: Mapping) -> str | None:
    """The Snakemake resource of the agent's provider (``llm_openai``), None for an agent that calls no model."""
    provider = provider_of(spec)
    return None if provider is None else RESOURCE_PREFIX + re.sub(r"\W", "_", provider)


def _secrets(node: Any, path: str) -> list[str]:
    out = []
    if isinstance(node, Mapping):
        for k, v in node.items():
            key = f"{path}.{k}"
            if _SECRET_NAME.search(str(k)) and not str(k).endswith("_env"):
                out.append(f"config key {key}: a credential in the config is refused (it would land in the "
                           f"workflow's params, logs and the provenance of every output); keys come only from the "
                           f"environment: export it and name the variable with api_key_env")
            else:
                out += _secrets(v, key)
    elif isinstance(node, (list, tuple)):
        for i, v in enumerate(node):
            out += _secrets(v, f"{path}[{i}]")
    elif isinstance(node, str) and _SECRET_VALUE.match(node):
        out.append(f"config key {path}: the value looks like a secret key (refused, not shown); keys come only "
                   f"from the environment: export it and name the variable with api_key_env")
    return out


def secret_errors(config: Mapping) -> list[str]:
    """Credentials written into ``agents.*`` (any depth, ``extra`` included), each naming its config key."""
    agents = config.get("agents")
    if not isinstance(agents, Mapping):
        return []
    return [m for name, spec in agents.items() for m in _secrets(spec, f"agents.{name}")]


def _key_variable(spec: Mapping) -> str | None:
    """The variable an LLM agent's key comes from, as its config says (the agent's own rule: ``key_variable``)."""
    if spec.get("api_key_env"):
        return str(spec["api_key_env"])
    if spec.get("requires_key") is False:
        return None
    provider = provider_of(spec)
    return None if provider is None else f"{provider.upper()}_API_KEY"


def env_errors(config: Mapping) -> list[str]:
    """Secrets an agent's ``env`` would hand to its command, each naming the config key.

    Refused in any agent's ``env``: the sealed test seed's variable (``secrets.test_seed_env``) and
    every provider key the run holds for another agent (an LLM agent's or judge's key variable), so
    that no config can pass the harness's secrets to the party under test.
    """
    agents = config.get("agents")
    if not isinstance(agents, Mapping):
        return []
    secrets = config.get("secrets")
    if not isinstance(secrets, Mapping):
        secrets = {}
    seed_var = str(secrets.get("test_seed_env") or "HEURESIS_TEST_SEED")
    keys = {name: _key_variable(spec) for name, spec in agents.items()
            if isinstance(spec, Mapping) and spec.get("kind") in MODEL_KINDS and isinstance(spec.get("model"), str)}
    out = []
    for name, spec in agents.items():
        env = spec.get("env") if isinstance(spec, Mapping) else None
        if not isinstance(env, (list, tuple)):
            continue
        for k, var in enumerate(env):
            if var == seed_var:
                out.append(f"config key agents.{name}.env[{k}]: {var} holds the sealed test seed "
                           "(secrets.test_seed_env); no agent may be given it")
            holders = sorted(other for other, v in keys.items() if v == var and other != name)
            if holders:
                out.append(f"config key agents.{name}.env[{k}]: {var} holds the provider key of "
                           f"{', '.join(holders)}; an agent is given no key the run holds for another")
    return out
