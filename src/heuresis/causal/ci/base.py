"""Conditional-independence (CI) test interface and registry.

A :class:`CITest` is built once from a data matrix ``(n, d)`` and answers
``pvalue(x, y, S)`` queries for column indices.  Every call is counted in
``n_tests`` (a call is a test charged to the caller, whether or not it was
served from the cache); repeated queries are served from a p-value cache whose
key follows causal-learn's convention: the unordered pair ``{x, y}`` (stored
as ``(min, max)``) plus the sorted, de-duplicated conditioning set.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from heuresis.registry import Registry

__all__ = ["CI_TESTS", "CITest", "CacheKey", "make_ci_test", "register_ci_test"]

CacheKey = tuple[int, int, tuple[int, ...]]


class CITest(ABC):
    """Abstract conditional-independence test on a fixed data matrix.

    Subclasses implement :meth:`_compute`, which receives a canonical query
    ``(x, y, S)`` with ``x < y`` and ``S`` a sorted tuple not containing x, y.
    """

    name: ClassVar[str] = ""

    def __init__(self, data: np.ndarray) -> None:
        arr = np.asarray(data, dtype=float)
        if arr.ndim != 2:
            raise ValueError(f"data must be a 2-D array (n, d); got shape {arr.shape}")
        if arr.shape[0] < 4:
            raise ValueError(f"need at least 4 samples; got {arr.shape[0]}")
        if not np.all(np.isfinite(arr)):
            raise ValueError("data contains NaN or Inf")
        self.data: np.ndarray = arr
        self.n_samples, self.n_vars = arr.shape
        self.n_tests: int = 0        # every call to pvalue()
        self.n_cache_hits: int = 0   # calls answered from the p-value cache
        self._pcache: dict[CacheKey, float] = {}
        self._prefetched: set[CacheKey] = set()  # computed ahead by prefetch(), not yet asked for

    # ------------------------------------------------------------------ keys
    def cache_key(self, x: int, y: int, S: Sequence[int] = ()) -> CacheKey:
        """Canonical key: ``(min(x,y), max(x,y), sorted(set(S)))`` (validated)."""
        x, y = int(x), int(y)
        cond = tuple(sorted({int(s) for s in S}))
        d = self.n_vars
        if x == y:
            raise ValueError(f"x and y must differ; got x = y = {x}")
        for v in (x, y, *cond):
            if not 0 <= v < d:
                raise ValueError(f"variable index {v} out of range [0, {d})")
        if x in cond or y in cond:
            raise ValueError(f"x={x} and y={y} must not be in the conditioning set {cond}")
        return (x, y, cond) if x < y else (y, x, cond)

    # ------------------------------------------------------------------ API
    def pvalue(self, x: int, y: int, S: Sequence[int] = ()) -> float:
        """p-value of the test ``x _||_ y | S``; cached, and always counted."""
        key = self.cache_key(x, y, S)
        self.n_tests += 1
        p = self._pcache.get(key)
        if p is not None:
            if key in self._prefetched:
                self._prefetched.discard(key)
            else:
                self.n_cache_hits += 1
            return p
        p = float(self._compute(*key))
        self._pcache[key] = p
        return p

    __call__ = pvalue

    def prefetch(self, queries: Sequence[tuple[int, int, Sequence[int]]]) -> int:
        """Compute the p-values of ``queries`` ahead of the calls that will ask for them.

        A caller that knows its next tests (PC-stable knows a whole level's from the adjacencies
        frozen at the level's start) passes them here; a test that can run several at once
        (:class:`~heuresis.causal.ci.kci.KCI`, in as many processes as the caller allows BLAS threads)
        computes them side by side. The values are those :meth:`pvalue` would compute, and a
        prefetched query is neither counted nor a cache hit until :meth:`pvalue` asks for it.
        This default computes nothing; returns the number of queries computed.
        """
        return 0

    def _store_prefetched(self, values: dict[CacheKey, float]) -> int:
        """Record prefetched p-values (see :meth:`prefetch`)."""
        for key, p in values.items():
            if key not in self._pcache:
                self._pcache[key] = float(p)
                self._prefetched.add(key)
        return len(values)

    def __deepcopy__(self, memo: dict) -> CITest:
        """A CI test is a memoised function of its (never modified) data: copies share it.

        causal-learn's ``pc`` deep-copies its graph object, which holds the test, twice
        during orientation; copying our matrix caches (up to ``max_cache_mb``) there
        tripled the peak memory of a PC-KCI run and cost time.
        """
        memo[id(self)] = self
        return self

    @property
    def n_computed(self) -> int:
        """Number of distinct tests computed and asked for (prefetched ones once asked)."""
        return len(self._pcache) - len(self._prefetched)

    def clear_cache(self) -> None:
        """Drop cached p-values (counters are kept)."""
        self._pcache.clear()
        self._prefetched.clear()

    @abstractmethod
    def _compute(self, x: int, y: int, S: tuple[int, ...]) -> float:
        """p-value for canonical ``x < y`` and sorted ``S``."""

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(n={self.n_samples}, d={self.n_vars}, "
                f"n_tests={self.n_tests}, n_computed={self.n_computed})")


CI_TESTS = Registry("CI test", CITest, entry_points="heuresis.ci_tests")

#: Class decorator registering a :class:`CITest` subclass under a name (sets ``cls.name``).
register_ci_test = CI_TESTS.register


def make_ci_test(name: str, data: np.ndarray, **options) -> CITest:
    """Instantiate the registered CI test ``name`` on ``data``."""
    return CI_TESTS.lookup(name)(data, **options)
