"""What every verification check shares: its record, the registry, the examples and the random cases.

A check is a function ``check(settings, workers=1, log=None) -> CheckResult`` registered under
its name with :func:`register`; :data:`CHECKS` keeps the registration order, which is the row
order of Table 5.  The helpers draw a check's random DAGs and queries from a generator seeded by
the config's seed and the check's name (:func:`check_rng`), load its generated instances
(:func:`generated_instances`), count its disagreements and keep the first of them as examples
(:class:`Examples`), and build its :class:`CheckResult` (:func:`make_result`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from heuresis.causal.graph import Graph

__all__ = [
    "CHECKS",
    "CheckResult",
    "Examples",
    "Log",
    "check_rng",
    "check_start",
    "dag_edges",
    "generated_instances",
    "instance_size",
    "jsonable",
    "make_result",
    "quiet_blas",
    "random_dag",
    "random_dags",
    "random_queries",
    "register",
]

Log = Callable[[str], None]


# --- records --------------------------------------------------------------------------------
@dataclass
class CheckResult:
    """Outcome of one check: what was compared with what, at which scale, and what was found."""

    check: str
    title: str
    reference: str
    scale: str
    scale_description: str
    n_cases: int
    disagreements: int
    passed: bool
    tolerance: str
    finding: str
    examples: list[dict] = field(default_factory=list)
    details: dict = field(default_factory=dict)
    runtime_s: float = 0.0


@dataclass(frozen=True)
class _Check:
    name: str
    title: str
    reference: str
    fn: Callable
    uses_instances: bool = False


CHECKS: dict[str, _Check] = {}


def register(name: str, title: str, reference: str, uses_instances: bool = False):
    """Register the decorated function in :data:`CHECKS` as the check ``name`` (its title and reference in Table 5)."""
    def deco(fn):
        CHECKS[name] = _Check(name, title, reference, fn, uses_instances)
        return fn

    return deco


class Examples:
    """Counts disagreements and keeps the first ``cap`` of them as examples."""

    def __init__(self, cap: int) -> None:
        self.cap = int(cap)
        self.count = 0
        self.items: list[dict] = []

    def add(self, example: Mapping) -> None:
        """Count one disagreement and keep it if fewer than ``cap`` are kept."""
        self.count += 1
        if len(self.items) < self.cap:
            self.items.append(jsonable(dict(example)))


def jsonable(obj):
    """``obj`` with numpy arrays and scalars turned into lists and Python numbers, keys into strings."""
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def check_rng(settings: Mapping) -> np.random.Generator:
    """The generator of one check: the config's seed, spawned by the check's name."""
    from heuresis.stages.instances import stable_key

    return np.random.default_rng(np.random.SeedSequence(entropy=int(settings["seed"]),
                                                        spawn_key=(stable_key(settings["check"]),)))


def check_start(settings: Mapping) -> tuple[Mapping, np.random.Generator, Examples]:
    """What every check opens with: its sizes, its generator (:func:`check_rng`) and its examples."""
    return settings["sizes"], check_rng(settings), Examples(settings["max_examples"])


def random_dag(rng: np.random.Generator, d: int, p: float) -> np.ndarray:
    """An Erdős–Rényi DAG over a random order (i -> j at [i, j])."""
    perm = rng.permutation(d)
    a = np.triu(rng.random((d, d)) < p, 1).astype(np.int8)
    return a[np.ix_(perm, perm)]


def random_dags(rng: np.random.Generator, count: int, d_range: Sequence[int]):
    """``count`` random DAGs (:func:`random_dag`), each with d drawn from ``d_range`` and edge probability from [0.1, 0.7]."""
    lo, hi = int(d_range[0]), int(d_range[1])
    for _ in range(int(count)):
        d = int(rng.integers(lo, hi + 1))
        yield random_dag(rng, d, float(rng.uniform(0.1, 0.7)))


def dag_edges(adj: np.ndarray) -> list[str]:
    """The edges of a DAG as text lines (:meth:`heuresis.causal.graph.Graph.to_lines`)."""
    return Graph.from_dag(adj).to_lines()


def random_queries(rng: np.random.Generator, d: int, count: int, max_cond: int) -> list[tuple[int, int, list[int]]]:
    """``count`` random queries ``(x, y, S)`` over d variables with ``|S|`` at most ``max_cond``."""
    out = []
    for _ in range(int(count)):
        k = int(rng.integers(0, min(max_cond, d - 2) + 1))
        v = [int(t) for t in rng.choice(d, k + 2, replace=False)]
        out.append((v[0], v[1], sorted(v[2:])))
    return out


def make_result(settings: Mapping, *, n_cases: int, examples: Examples, passed: bool | None = None,
                tolerance: str = "exact", finding: str = "", scale_description: str = "",
                details: Mapping | None = None, disagreements: int | None = None) -> CheckResult:
    """The result of the check ``settings["check"]``; it passes when nothing disagreed unless ``passed`` says otherwise."""
    info = CHECKS[settings["check"]]
    dis = examples.count if disagreements is None else int(disagreements)
    return CheckResult(check=info.name, title=info.title, reference=info.reference, scale=str(settings["scale"]),
                       scale_description=scale_description, n_cases=int(n_cases), disagreements=dis,
                       passed=(dis == 0) if passed is None else bool(passed), tolerance=tolerance,
                       finding=finding, examples=examples.items, details=jsonable(dict(details or {})))


def quiet_blas():
    """One BLAS thread for in-process runs (small matrices; see heuresis.causal.algorithms.base)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1)


# --- instances ----------------------------------------------------------------------------------
def generated_instances(settings: Mapping, per_family: int):
    """Generated instances (dev split, indices 0..per_family-1) of every configured family."""
    from heuresis.stages.instances import generate_instance

    for family, spec in settings["instances"].items():
        for index in range(int(per_family)):
            yield generate_instance(spec, family, "dev", index)


def instance_size(settings: Mapping) -> str:
    """The node and sample counts of the first configured family, for the scale description."""
    spec = next(iter(settings["instances"].values()))
    return f"d={spec['instances']['d']}, n={spec['instances']['n']}"

