"""litellm, loaded on first use with its local price map, and each provider's client code warmed up once."""

from __future__ import annotations

import os


def load_litellm():
    """litellm, imported on first use (it takes seconds); the local price map, never a download."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import litellm

    litellm.suppress_debug_info = True
    return litellm


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
