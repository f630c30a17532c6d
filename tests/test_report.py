"""The one interval format of every table (heuresis.artifacts.report.format_interval)."""

import math

import pytest

from heuresis.artifacts.report import format_interval
from heuresis.causal.bootstrap import Interval, bootstrap_mean


def test_the_interval_format():
    assert format_interval(0.51234, 0.43111, 0.59) == "0.512 [0.431, 0.590]"
    assert format_interval(0.041, -0.0123, 0.0936, signed=True) == "+0.041 [-0.012, +0.094]"
    assert format_interval(0.0, 0.0, 0.0, signed=True) == "+0.000 [+0.000, +0.000]"
    assert format_interval(0.4213, 0.35, 0.5, percent=True) == "42% [35%, 50%]"
    assert format_interval(0.97, 0.9, 1.0, digits=2) == "0.97 [0.90, 1.00]"
    assert format_interval(11.25, 10.04, 12.5, digits=1) == "11.2 [10.0, 12.5]"


def test_an_interval_object_is_formatted_from_its_own_bounds():
    iv = bootstrap_mean([0.2, 0.4, 0.6], resamples=200, seed=1)
    assert format_interval(iv) == f"{iv.estimate:.3f} [{iv.lo:.3f}, {iv.hi:.3f}]"
    with pytest.raises(ValueError, match="not both"):
        format_interval(iv, 0.1, 0.2)


@pytest.mark.parametrize("estimate", [None, math.nan, math.inf])
def test_no_estimate_is_shown_as_the_given_text(estimate):
    assert format_interval(estimate, 0.1, 0.2) == "n/a"
    assert format_interval(estimate, 0.1, 0.2, missing="n/a: no finished episode") == "n/a: no finished episode"


@pytest.mark.parametrize("iv", [None, Interval(math.nan, math.nan, math.nan, 0, 10, 0, 0.95),
                                Interval(math.nan, 0.1, 0.2, 5, 10, 0, 0.95)])
def test_an_interval_over_no_units_is_shown_as_the_given_text(iv):
    assert format_interval(iv) == "n/a"
    assert format_interval(iv, percent=True, missing="n/a: restored no deleted pair") == "n/a: restored no deleted pair"
