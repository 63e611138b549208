r"""``BudgetSplit``'s shares in closed form, and ``resolved_mu``."""

import math

import pytest

from botorch_dp.optim.options import BudgetSplit, Options, resolved_mu


@pytest.mark.parametrize("clip", [None, 0.0, 0.1, 0.3])
@pytest.mark.parametrize("precond", [None, 0.0, 0.25, 0.5])
def test_gradient_mu_is_the_steps_mu_times_the_root_of_what_the_other_shares_leave(clip, precond):
    split = BudgetSplit(2.0, selection_mu=0.5, clip_fraction=clip, precond_fraction=precond)
    steps = math.sqrt(2.0**2 - 0.5**2)
    assert split.steps_mu == pytest.approx(steps, rel=1e-15)
    # each case written out as the three separate formulas it replaced (bit-identical)
    if clip is None and precond is None:
        expected = split.steps_mu
    elif precond is None:
        expected = split.steps_mu * math.sqrt(1.0 - clip)
    elif clip is None:
        expected = split.steps_mu * math.sqrt(1.0 - precond)
    else:
        expected = split.steps_mu * math.sqrt(1.0 - clip - precond)
    assert split.gradient_mu == expected
    others = (split.clip_mu or 0.0) ** 2 + (split.precond_mu or 0.0) ** 2
    assert split.gradient_mu**2 + others == pytest.approx(steps**2, rel=1e-14)  # GDP: root sum of squares


def test_resolved_mu_refuses_none_and_keeps_a_float():
    assert resolved_mu(0.7) == 0.7 and math.isinf(resolved_mu(math.inf))
    with pytest.raises(ValueError, match="privacy_mu is None"):
        resolved_mu(None)
    with pytest.raises(ValueError, match="privacy_mu is None"):
        Options().split(None)
    with pytest.raises(ValueError, match="privacy_mu is None"):
        Options().check(None, 2, 3)
