"""Prices per token of a model's requests: the config's ``prices`` or litellm's bundled map, and cache writes."""

from __future__ import annotations

from collections.abc import Mapping

from heuresis.agents.llm.provider import price_map


def config_token_prices(prices: Mapping, n_prompt: int | None = None) -> dict[str, float]:
    """USD per token from a config entry's ``prices`` (USD per million tokens).

    Cached input at ``cached_input_per_mtok`` and a cache write at ``cache_write_input_per_mtok``,
    each the input price when not given.  ``tiers`` (a list of ``{from_tokens, input_per_mtok, ...}``)
    price a request of at least ``from_tokens`` prompt tokens at the last tier it reaches, as
    providers with tiered prices bill; ``n_prompt`` None takes the dearest tier (a worst case).
    """
    levels = [dict(prices)] + [dict(t) for t in prices.get("tiers") or []]

    def per_token(level: Mapping) -> dict[str, float]:
        p_in = float(level["input_per_mtok"])
        return {"input_per_token": p_in / 1e6, "output_per_token": float(level["output_per_mtok"]) / 1e6,
                "cached_per_token": float(level.get("cached_input_per_mtok", p_in)) / 1e6,
                "cache_write_per_token": float(level.get("cache_write_input_per_mtok", p_in)) / 1e6}

    if n_prompt is None:
        each = [per_token(level) for level in levels]
        return {k: max(p[k] for p in each) for k in each[0]}
    chosen = levels[0]
    for tier in sorted(levels[1:], key=lambda t: int(t["from_tokens"])):
        if int(n_prompt) >= int(tier["from_tokens"]):
            chosen = tier
    return per_token(chosen)


def _map_prices(model: str) -> dict | None:
    """litellm's bundled prices of ``model`` as a config ``prices`` entry (tiers kept); None: not priced."""
    prices = price_map()
    info = prices.get(model) or prices.get(model.split("/", 1)[-1]) or {}

    def level(entry: Mapping) -> dict | None:
        if entry.get("input_cost_per_token") is None or entry.get("output_cost_per_token") is None:
            return None
        out = {"input_per_mtok": float(entry["input_cost_per_token"]) * 1e6,
               "output_per_mtok": float(entry["output_cost_per_token"]) * 1e6}
        for ours, theirs in (("cached_input_per_mtok", "cache_read_input_token_cost"),
                             ("cache_write_input_per_mtok", "cache_creation_input_token_cost")):
            if entry.get(theirs) is not None:
                out[ours] = float(entry[theirs]) * 1e6
        return out

    base = level(info)
    tiers = [(t.get("range") or [0])[0] for t in info.get("tiered_pricing") or []]
    levels = [level(t) for t in info.get("tiered_pricing") or []]
    if base is None and levels and all(levels):   # only tiers: the first is the base
        base, levels, tiers = levels[0], levels[1:], tiers[1:]
    if base is None or not all(levels):
        return None
    return {**base, "tiers": [{**lv, "from_tokens": int(t)} for lv, t in zip(levels, tiers, strict=True)]}  # type: ignore[dict-item]


def token_prices(model: str, prices: Mapping | None, n_prompt: int | None = None) -> dict[str, float] | None:
    """USD per token (input, cached input, cache write, output) of one request of ``model``.

    The config's ``prices`` (:func:`config_token_prices`), else litellm's map (a model with only
    tiered prices, such as DashScope's, priced by its tiers); None: no known price.  ``n_prompt``
    picks the tier (None: the dearest, for a worst case).
    """
    if prices is None:
        prices = _map_prices(model)
    return None if prices is None else config_token_prices(prices, n_prompt)


def cache_write_tokens(usage) -> int:
    """Prompt tokens a reply's usage says were written to the provider's cache (0: none reported).

    Anthropic reports ``cache_creation_input_tokens`` on the usage; litellm also carries it, and
    DashScope's count, in ``prompt_tokens_details`` (``cache_creation_tokens``, ``cache_write_tokens``,
    ``cache_creation_input_tokens``).
    """
    direct = getattr(usage, "cache_creation_input_tokens", None)
    if direct:
        return int(direct)
    details = getattr(usage, "prompt_tokens_details", None)
    for key in ("cache_creation_tokens", "cache_write_tokens", "cache_creation_input_tokens"):
        value = getattr(details, key, None) if details is not None else None
        if value is None and isinstance(details, Mapping):
            value = details.get(key)
        if value:
            return int(value)
    return 0
