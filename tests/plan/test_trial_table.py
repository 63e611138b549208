r"""``plan.trial_table``: one fixed-width row per trial of ``PrivatePlan.table`` and its standard error."""

from __future__ import annotations

import math
import statistics
from types import SimpleNamespace

import numpy as np
import pytest

from botorch_dp.plan.trial_table import row, spread


def _trial(losses, *, tolerance=None, **kw):
    fields = dict(
        proxy_losses=tuple(losses),
        mean_proxy_loss=math.fsum(losses) / len(losses),
        bias_tolerance=tolerance,
        clip_quantile=0.5,
        clip_bound=1.25,
        step_size=0.1,
        num_iterations=12,
        noise_std=0.031,
        noise_to_signal=0.7,
    )
    return SimpleNamespace(**{**fields, **kw})


@pytest.mark.parametrize("seed", range(5))
def test_the_spread_is_the_standard_error_of_the_mean(seed):
    losses = np.random.default_rng(seed).normal(3.0, 0.2, size=2 + seed).tolist()
    expected = statistics.stdev(losses) / math.sqrt(len(losses))
    assert spread(_trial(losses)) == f"{expected:.2g}"


def test_one_repeat_has_no_spread_and_equal_repeats_have_zero():
    assert spread(_trial([1.5])) == "n/a"
    assert spread(_trial([2.0, 2.0, 2.0])) == "0"


def test_a_row_has_fixed_columns_and_names_the_clip_rule():
    fixed = row("*", _trial([1.0, 1.2]))
    tolerated = row(" ", _trial([1.0, 1.2], tolerance=0.001, num_iterations=3, noise_to_signal=12.5))
    assert len(fixed) == len(tolerated)  # fixed width: the columns line up
    assert fixed.split() == ["*", "fixed", "0.5", "1.25", "0.1", "12", "1.1", "0.1", "0.031", "0.7"]
    assert tolerated.split() == ["tol", "0.001", "0.5", "1.25", "0.1", "3", "1.1", "0.1", "0.031", "12.5"]
    assert row("g", _trial([4.0])).split()[7] == "n/a" and row("g", _trial([4.0])).startswith("g ")


def test_a_nan_loss_shows_as_nan_rather_than_failing():
    text = row(" ", _trial([math.nan, 1.0]))
    assert text.split()[5:7] == ["nan", "nan"]  # the blank mark is no column of split()
