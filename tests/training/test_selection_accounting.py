r"""``dp_sgd_runs_epsilon``: the ε of DP-SGD runs of one shape, as the ledger converts it (issue 41, the mend)."""

from __future__ import annotations

import math

import pytest

from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.ledger.events import DPSGDRun
from botorch_dp.training.selection_accounting import dp_sgd_runs_epsilon

DELTA = 1e-5
SHAPES = [(1.7, 0.0625, 240), (3.0, 0.0625, 240), (8.1, 0.01, 1500), (0.9, 0.2, 10)]


def _ledger_epsilon(sigma: float, rate: float, steps: int, runs: int) -> float:
    r"""The ledger's own ε of ``runs`` recorded DP-SGD runs (its RDP accountant: an independent path)."""
    ledger = PrivacyLedger()
    for k in range(runs):
        ledger.external.record(DPSGDRun(noise_multiplier=sigma, sample_rate=rate, steps=steps), run_id=f"run-{k}")
    return ledger.training.epsilon(DELTA, accountant="rdp")


@pytest.mark.parametrize(("sigma", "rate", "steps"), SHAPES)
@pytest.mark.parametrize("runs", [1, 3, 31])
def test_the_epsilon_is_the_ledgers_for_the_same_runs(sigma, rate, steps, runs):
    mine = dp_sgd_runs_epsilon(sigma, rate, steps, DELTA, num_runs=runs)
    assert math.isfinite(mine) and mine > 0
    assert mine == pytest.approx(_ledger_epsilon(sigma, rate, steps, runs), rel=1e-12)


@pytest.mark.parametrize(("sigma", "rate", "steps"), SHAPES)
def test_k_runs_of_t_steps_are_one_run_of_k_t_steps(sigma, rate, steps):
    # the subsampled Gaussian's RDP is linear in the number of steps: composing runs adds steps
    k = 4
    assert dp_sgd_runs_epsilon(sigma, rate, steps, DELTA, num_runs=k) == pytest.approx(
        dp_sgd_runs_epsilon(sigma, rate, k * steps, DELTA), rel=1e-9
    )
    assert dp_sgd_runs_epsilon(sigma, rate, steps, DELTA, num_runs=k) > dp_sgd_runs_epsilon(sigma, rate, steps, DELTA)


@pytest.mark.parametrize("runs", [0, -1, 2.0, True])
def test_a_bad_number_of_runs_is_refused_by_name(runs):
    with pytest.raises(ValueError, match=rf"num_runs must be an integer >= 1, got {runs!r}"):
        dp_sgd_runs_epsilon(1.0, 0.1, 10, DELTA, num_runs=runs)
