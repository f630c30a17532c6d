"""The verification config: the slice of it each check reads, and the checks of the section.

:func:`check_settings` is the config slice of one check (the workflow's ``params`` of its job);
:func:`config_errors` is what :mod:`heuresis.preflight.validation` collects for ``verification``.
"""

from __future__ import annotations

from collections.abc import Mapping

from heuresis.stages.verification.base import CHECKS

__all__ = ["check_settings", "config_errors"]


def check_settings(config: Mapping, check: str) -> dict:
    """Return the config slice one check depends on.

    It is the workflow's ``params`` of the check, so editing another check's sizes, or an
    unrelated section, does not rerun this one.
    """
    if check not in CHECKS:
        raise ValueError(f"unknown verification check {check!r}; known: {list(CHECKS)}")
    v = config["verification"]
    scale = v["scale"]
    if scale not in v["scales"]:
        raise ValueError(f"verification.scale {scale!r} is not one of verification.scales: {sorted(v['scales'])}")
    out = {"check": check, "scale": scale, "seed": int(v["seed"]), "alpha": float(v["alpha"]),
           "max_examples": int(v["max_examples"]), "tolerances": dict(v["tolerances"]),
           "sizes": dict(v["scales"][scale][check])}
    if CHECKS[check].uses_instances:
        from heuresis.stages.instances import instance_spec

        out["instances"] = {f: instance_spec(config, f) for f in config["families"]}
    return out


# --- config checks (heuresis.preflight.validation collects them) ------------------------------------
def config_errors(config: Mapping) -> list[str]:
    """Problems of ``verification``: the chosen scale exists; node-count ranges are ordered; determinism compares runs."""
    from heuresis.config.loading import range_errors

    msgs: list[str] = []
    v = config.get("verification")
    if not v:
        return msgs
    if v["scale"] not in v["scales"]:
        msgs.append(f"config key verification.scale: {v['scale']!r} is not one of verification.scales "
                    f"({sorted(v['scales'])})")
    for name, sizes in v["scales"].items():
        for check, spec in sizes.items():
            key = f"verification.scales.{name}.{check}"
            if "d" in spec:   # integers in [2, 1000]: the schema's node_range
                msgs.extend(range_errors(f"{key}.d", spec["d"]))
        det = sizes.get("determinism", {})
        if det and len(det["thread_counts"]) * len(det["hash_seeds"]) < 2:
            msgs.append(f"config key verification.scales.{name}.determinism: one thread count and one hash seed "
                        f"make a single run, nothing to compare")
    return msgs
