"""Conditional-independence tests: a small interface, a registry, Fisher-z and KCI."""
from .base import CI_TESTS, CacheKey, CITest, make_ci_test, register_ci_test
from .fisherz import FisherZ
from .kci import KCI

__all__ = ["CI_TESTS", "KCI", "CITest", "CacheKey", "FisherZ", "make_ci_test", "register_ci_test"]
