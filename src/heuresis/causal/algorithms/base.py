"""The algorithm interface of the menu (docs/design.md §4.1) and its registry.

An :class:`Algorithm` is built from its parameters (keyword arguments, validated against the
class's :attr:`Algorithm.param_spec` table) and run on a data matrix ``(n, d)``::

    algo = make_algorithm("notears", lambda1=0.05)
    res = algo.run(data)          # AlgorithmResult
    res.graph                     # heuresis.causal.graph.Graph over X1..Xd
    res.runtime_s, res.n_tests    # wall time of run(); CI tests (0 for score/functional methods)
    res.details                   # JSON-serializable extras (parameters, seed, weights, ...)

Adding an algorithm to the menu is one class decorated with :func:`register_algorithm` (plus
its name in the config's algorithm list).  A class declares its parameters in ``param_spec``, a
table of :class:`Param` (default, validity check, description of the allowed values); the base
class fills defaults, rejects unknown keys and bad values with an error naming the key and the value,
times :meth:`Algorithm.run` and validates the data.
"""

from __future__ import annotations

import math
import numbers
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from heuresis.causal.graph import Graph
from heuresis.registry import Registry

__all__ = [
    "ALGORITHMS",
    "COST_CLASSES",
    "Algorithm",
    "AlgorithmResult",
    "Param",
    "check_data",
    "is_nonneg_float",
    "is_nonneg_int",
    "is_opt_pos_int",
    "is_pos_float",
    "is_pos_int",
    "is_prob",
    "is_seed",
    "make_algorithm",
    "one_of",
    "register_algorithm",
]


# --- parameter checks ---------------------------------------------------------------------
def _is_real(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(float(v))


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def is_prob(v: Any) -> bool:
    """A float strictly between 0 and 1 (a significance level)."""
    return _is_real(v) and 0.0 < float(v) < 1.0


def is_pos_float(v: Any) -> bool:
    """Whether ``v`` is a finite real number > 0 (booleans excluded)."""
    return _is_real(v) and float(v) > 0.0


def is_nonneg_float(v: Any) -> bool:
    """Whether ``v`` is a finite real number >= 0 (booleans excluded)."""
    return _is_real(v) and float(v) >= 0.0


def is_pos_int(v: Any) -> bool:
    """Whether ``v`` is an integer > 0 (booleans excluded)."""
    return _is_int(v) and int(v) > 0


def is_nonneg_int(v: Any) -> bool:
    """Whether ``v`` is an integer >= 0 (booleans excluded)."""
    return _is_int(v) and int(v) >= 0


def is_seed(v: Any) -> bool:
    """Whether ``v`` is an integer in ``[0, 2**32)``, a valid ``random_state`` for lingam and scikit-learn."""
    return _is_int(v) and 0 <= int(v) < 2**32


def is_opt_pos_int(v: Any) -> bool:
    """Whether ``v`` is None (no limit) or an integer > 0."""
    return v is None or is_pos_int(v)


def one_of(*choices: Any) -> Callable[[Any], bool]:
    """Build a check that accepts exactly the strings in ``choices``.

    Parameters
    ----------
    *choices
        The allowed values.

    Returns
    -------
    Callable[[Any], bool]
        A check for :class:`Param`: True for a string among ``choices``.
    """
    return lambda v: isinstance(v, str) and v in choices


@dataclass(frozen=True)
class Param:
    """One parameter of an algorithm: default, validity check, what the check allows."""

    default: Any
    check: Callable[[Any], bool]
    allowed: str  # e.g. "a float in (0, 1)" — shown in the error message for a bad value
    doc: str = ""


# --- result -------------------------------------------------------------------------------
@dataclass
class AlgorithmResult:
    """The output of one run of an algorithm.

    Attributes
    ----------
    graph : Graph
        Output over X1..Xd: per pair none, undirected, i->j or j->i.
    runtime_s : float
        Wall time of :meth:`Algorithm.run` in seconds.
    n_tests : int
        Number of conditional-independence tests run (0 for score-based and functional methods).
    details : dict
        JSON-serializable extras: the algorithm name, its parameters, seed, method-specific output.
    pc : object or None
        The PC variants attach their :class:`heuresis.causal.algorithms.pc.PCResult` here (with the deletion log);
        not part of ``details`` because it is not plain JSON.
    """

    graph: Graph
    runtime_s: float = 0.0
    n_tests: int = 0
    details: dict = field(default_factory=dict)
    pc: object | None = None

    def to_dict(self) -> dict:
        """JSON-serializable summary (the ``pc`` object excluded)."""
        return {
            "d": self.graph.d,
            "edges": self.graph.to_lines(),
            "runtime_s": float(self.runtime_s),
            "n_tests": int(self.n_tests),
            "details": self.details,
        }


# --- data ---------------------------------------------------------------------------------
def check_data(data: Any) -> np.ndarray:
    """A finite float matrix (n, d) with n >= 4 rows and d >= 1 columns, or a ValueError."""
    try:
        x = np.asarray(data, dtype=float)
    except (TypeError, ValueError) as e:
        raise ValueError(f"data must be a numeric (n, d) array: {e}") from None
    if x.ndim != 2:
        raise ValueError(f"data must be a 2-D array (n, d); got shape {x.shape}")
    if x.shape[1] < 1 or x.shape[0] < 4:
        raise ValueError(f"data needs at least 4 rows and 1 column; got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("data contains NaN or Inf")
    return x


# --- the algorithm base class ---------------------------------------------------------------
class Algorithm(ABC):
    """Base class of every algorithm on the menu.

    Subclasses set :attr:`name` (done by :func:`register_algorithm`), :attr:`param_spec` and
    implement :meth:`_run`, which returns an :class:`AlgorithmResult` whose ``runtime_s`` the
    base class fills in.  Parameters are read from ``self.params`` (a dict with every key).
    """

    name: ClassVar[str] = ""
    param_spec: ClassVar[Mapping[str, Param]] = {}
    #: How long its reference jobs run (:data:`COST_CLASSES`): ``slow`` ones (kernel tests, forests)
    #: ask the cluster for more minutes per job.
    cost_class: ClassVar[str] = "fast"
    #: BLAS/OpenMP threads during :meth:`run` (None: leave the process setting).  One thread is
    #: the default: these methods work on small matrices (d x d, a few hundred rows), where
    #: multi-threaded BLAS is slower (a 10 x 10 ``expm`` took 12 ms with 2 OpenBLAS threads on a
    #: busy 2-core machine and 0.1 ms with one) and results do not depend on the thread count.
    blas_threads: ClassVar[int | None] = 1

    def __init__(self, **params: Any) -> None:
        known = dict(self.param_spec)
        for key, value in params.items():
            if key not in known:
                raise ValueError(f"{self.name}: unknown parameter {key!r} (value {value!r}); "
                                 f"known parameters: {sorted(known)}")
            p = known[key]
            try:
                ok = bool(p.check(value))
            except Exception:
                ok = False
            if not ok:
                raise ValueError(f"{self.name}: parameter {key!r} must be {p.allowed}; got {value!r}")
        self.params: dict[str, Any] = {k: params.get(k, p.default) for k, p in known.items()}

    def run(self, data: np.ndarray) -> AlgorithmResult:
        """Run on ``data`` (n, d) and return the graph with runtime, test count and details."""
        x = check_data(data)
        self.warm_up()
        t0 = time.perf_counter()
        if self.blas_threads is None:
            res = self._run(x)
        else:
            from threadpoolctl import threadpool_limits

            with threadpool_limits(limits=self.blas_threads):
                res = self._run(x)
        runtime = time.perf_counter() - t0
        if res.graph.d != x.shape[1]:  # pragma: no cover - a bug in a subclass
            raise RuntimeError(f"{self.name} returned a graph over {res.graph.d} nodes for d={x.shape[1]}")
        details = {"algorithm": self.name, "params": _jsonable(self.params), **res.details}
        return replace(res, runtime_s=runtime, n_tests=int(res.n_tests), details=details)

    def warm_up(self) -> None:
        """Import heavy libraries before the clock starts.

        lingam and causal-learn take seconds to import; warming up keeps ``runtime_s`` a
        measure of the algorithm, not of a one-off import.
        """

    @abstractmethod
    def _run(self, data: np.ndarray) -> AlgorithmResult:
        """The algorithm proper on validated data."""

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({args})"


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


# --- registry -------------------------------------------------------------------------------
#: An algorithm's :attr:`Algorithm.cost_class` -> minutes requested per reference job (paper scale: 25 instances).
COST_CLASSES = {"fast": 30, "slow": 120}

ALGORITHMS = Registry("algorithm", Algorithm, entry_points="heuresis.algorithms")

#: Class decorator: register an :class:`Algorithm` subclass under a name (sets ``cls.name``).
register_algorithm = ALGORITHMS.register


def make_algorithm(name: str, **params: Any) -> Algorithm:
    """The registered algorithm ``name`` with the given parameters."""
    if not isinstance(name, str):
        raise ValueError(f"unknown algorithm {name!r}; known: {sorted(ALGORITHMS)}")
    cls = ALGORITHMS.lookup(name)
    return cls(**params)
