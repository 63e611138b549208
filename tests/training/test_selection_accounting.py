r"""``dp_sgd_runs_epsilon``: the ε of DP-SGD runs of one shape, as the ledger converts it (issue 41, the mend)."""

from __future__ import annotations

import math

import pytest

from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.ledger.events import DPSGDRun
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.training.selection_accounting import dp_sgd_runs_epsilon
from botorch_dp.tuning import Hyperparameter, SearchSpace
from botorch_dp.tuning.tune_call import composed_cost_warning

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


def test_the_composed_cost_warning_states_the_ledgers_epsilons(monkeypatch):
    import botorch_dp.tuning.tune_call as tune_call

    sigma, rate, steps = SHAPES[1]
    monkeypatch.setattr(tune_call, "training_event", lambda objective, space: DPSGDRun(sigma, rate, steps))
    space = SearchSpace([Hyperparameter("lr", 1e-3, 1.0, log_scale=True)])
    with pytest.warns(PrivacyWarning, match=r"up to 31 DP-SGD training run\(s\)") as caught:
        composed_cost_warning(object(), space, 31, DELTA)
    message = str(caught[0].message)
    each, total = _ledger_epsilon(sigma, rate, steps, 1), _ledger_epsilon(sigma, rate, steps, 31)
    assert f"(epsilon = {each:.4g}, delta = {DELTA:.3g}) with noise_multiplier = {sigma:.4g}" in message
    assert f"composed (RDP) up to epsilon = {total:.4g}" in message
