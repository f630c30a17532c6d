"""litellm, loaded on first use with its local price map, and each provider's client code warmed up once."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
from collections.abc import Mapping
from pathlib import Path


def load_litellm():
    """litellm, imported on first use (it takes seconds); the local price map, never a download."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import litellm

    litellm.suppress_debug_info = True
    return litellm


#: The price map litellm ships and loads under ``LITELLM_LOCAL_MODEL_COST_MAP=True``, in its package folder.
PRICE_MAP_FILE = "model_prices_and_context_window_backup.json"


@functools.cache
def price_map() -> Mapping[str, Mapping]:
    """litellm's bundled price map as ``litellm.model_cost`` serves it, read without importing litellm.

    Importing litellm takes seconds, and the config's checks, which run whenever Snakemake reads the
    workflow (on a cluster, once in every job), need only prices. The file is the one litellm loads
    with its local map; names resolve as litellm resolves them (``get_model_cost_map``): an entry's
    ``aliases`` and an alias row's ``alias_of`` serve the owner's entry, a canonical entry wins over
    an alias, the first claim of an alias wins, and the ``fallback_generalizations`` block is no
    model. ``tests/test_llm_costs.py`` checks every name against ``litellm.model_cost``.
    """
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("litellm is not installed")
    raw: dict[str, Mapping] = json.loads((Path(next(iter(spec.submodule_search_locations))) / PRICE_MAP_FILE).read_text())
    raw.pop("fallback_generalizations", None)
    pointers = {name: info["alias_of"] for name, info in raw.items() if isinstance(info.get("alias_of"), str)}
    owners: dict[str, str] = {}
    for name, info in raw.items():
        aliases = info.get("aliases")
        if name in pointers or not isinstance(aliases, list):
            continue
        for alias in aliases:
            if not (alias in raw and alias not in pointers) and alias not in owners:
                owners[alias] = name
    for alias, target in pointers.items():
        if target in raw and target not in pointers and alias not in owners:
            owners[alias] = target
    served = {name: info for name, info in raw.items() if name not in pointers}
    served.update({alias: raw[owner] for alias, owner in owners.items()})
    return served


_WARM: set[str] = set()


def warm_up(model: str) -> None:
    """Import litellm and load the provider's client code once per process, before any episode's clock.

    The first request through a provider's handler loads its SDK and builds its client (about a
    second); a request to a closed port on 127.0.0.1 does that without sending anything anywhere.
    """
    litellm = load_litellm()
    if model in _WARM:
        return
    _WARM.add(model)
    import socket

    with socket.socket() as sock:   # a port nothing listens on: the request is refused at once
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    try:
        litellm.completion(model=model, messages=[{"role": "user", "content": "warm-up"}], max_tokens=1,
                           api_base=f"http://127.0.0.1:{port}", api_key="warm-up", num_retries=0, max_retries=0,
                           timeout=5)
    except Exception:  # refused, as intended
        pass
