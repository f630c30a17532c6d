"""Conditional-independence tests: a small interface, a registry, Fisher-z and KCI."""
from .base import CI_TESTS, CacheKey, CITest, make_ci_test, register_ci_test
from .fisherz import FisherZ
from .kci import KCI

__all__ = ["CITest", "CI_TESTS", "CacheKey", "register_ci_test", "make_ci_test", "FisherZ", "KCI"]
