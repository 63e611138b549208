r"""AMP's two draws (``privacy.mechanisms.objective_perturbation``, Redberg et al., Alg. 1): the
perturbation ``b ~ N(0, σ² I)`` drawn once (fixed-seed χ² bound) and recorded as the whole
mechanism's RDP curve before it is drawn, the release refused unless ``‖∇L^P(θ̃)‖ ≤ τ``, and the
released model on the public grid with discrete Gaussian noise of scale ``σ_out``. AMP training
itself is tested in ``tests/training/test_objective_perturbation.py``.
"""

import math
from typing import Any

import pytest
import torch

from botorch_dp.privacy.analysis.objective_perturbation.rdp_curves import amp_rdp
from botorch_dp.privacy.ledger.events import TRAINING_RDP_ORDERS, TrainingMechanism
from botorch_dp.privacy.mechanisms import AMPNotConvergedError, ObjectivePerturbationMechanism, RDPCost
from botorch_dp.privacy.mechanisms._noise import discrete_gaussian_integers


def test_mechanism_refuses_an_unverified_minimiser_and_draws_b_once():
    mech = ObjectivePerturbationMechanism(dim=2, clip=1.0, beta=0.5, lam=2.0, sigma=1.0, tau=1e-3, sigma_out=0.1)
    theta = torch.zeros(2, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="perturbation"):
        mech.release(theta, lambda t: torch.zeros(2, dtype=torch.float64))
    mech.perturbation()
    with pytest.raises(RuntimeError, match="already drawn"):
        mech.perturbation()
    for bad in (torch.tensor([1e-3, 1e-3]), torch.tensor([math.nan, 0.0]), torch.zeros(3)):
        with pytest.raises(AMPNotConvergedError):
            mech.release(theta, lambda t, g=bad: g.double())
    with pytest.raises(AMPNotConvergedError):
        mech.release(torch.tensor([math.inf, 0.0]), lambda t: torch.zeros(2, dtype=torch.float64))
    release = mech.release(theta, lambda t: torch.tensor([6e-4, 7e-4], dtype=torch.float64))  # ‖g‖ ≈ 9.2e-4
    assert release.theta.shape == (2,) and isinstance(release.cost, RDPCost)
    assert "lam=2" in release.cost.description and "sigma_out=0.1" in release.cost.description
    with pytest.raises(RuntimeError, match="already released"):
        mech.release(theta, lambda t: torch.zeros(2, dtype=torch.float64))
    with pytest.raises(ValueError, match="lam"):
        ObjectivePerturbationMechanism(dim=2, clip=1.0, beta=0.5, lam=0.5, sigma=1.0, tau=1e-3, sigma_out=0.1)


class _Meter:
    r"""A stand-in for the training charge's meter: keeps what is recorded and the generator's state then."""

    def __init__(self, generator: torch.Generator) -> None:
        self.generator = generator
        self.records: list[tuple[Any, Any, torch.Tensor]] = []

    def record(self, run_id, event) -> None:
        self.records.append((run_id, event, self.generator.get_state().clone()))


_PARAMS = dict(clip=1.0, beta=0.25, lam=2.0, sigma=0.5, tau=1e-4, sigma_out=0.3)


def test_the_whole_mechanism_is_recorded_as_its_amp_curve_before_b_is_drawn():
    g = torch.Generator().manual_seed(1)
    before, meter = g.get_state().clone(), _Meter(g)
    mech = ObjectivePerturbationMechanism(dim=3, generator=g, **_PARAMS)
    mech.perturbation(meter=meter, run_id="amp-0")
    ((run_id, event, state),) = meter.records
    assert run_id == "amp-0" and isinstance(event, TrainingMechanism)
    assert event.rdp == tuple(amp_rdp(a, **_PARAMS) for a in TRAINING_RDP_ORDERS)  # the curve at its parameters
    assert event.description == mech.cost.description and "tau=0.0001" in event.description
    assert torch.equal(state, before) and not torch.equal(g.get_state(), before)  # recorded, then drawn


def test_b_has_std_sigma():
    d = 20_000
    mech = ObjectivePerturbationMechanism(dim=d, generator=torch.Generator().manual_seed(2), **_PARAMS)
    b = mech.perturbation()
    # Σ b²/σ² ~ χ²_d: the std within 1 ± 5/√(2d) (false failure about 6e-7); the mean within 5 sd
    assert b.shape == (d,) and b.dtype == torch.float64
    assert abs(float(b.pow(2).mean().sqrt()) / _PARAMS["sigma"] - 1) < 5 / math.sqrt(2 * d)
    assert abs(float(b.mean())) < 5 * _PARAMS["sigma"] / math.sqrt(d)


def test_the_release_is_theta_rounded_to_the_public_grid_plus_discrete_gaussian_integers_of_scale_sigma_out():
    d = 300
    g = torch.Generator().manual_seed(3)
    mech = ObjectivePerturbationMechanism(dim=d, generator=g, **_PARAMS)
    mech.perturbation()
    after_b = g.get_state().clone()
    theta_tilde = torch.linspace(-1.0, 1.0, d, dtype=torch.float64)
    theta = mech.release(theta_tilde, lambda t: torch.zeros(d, dtype=torch.float64)).theta
    noise = mech.output_noise
    assert noise.noise_std >= _PARAMS["sigma_out"] and noise.noise_std < _PARAMS["sigma_out"] * (1 + 2.0**-14)
    assert math.sqrt(d) * noise.grid <= 2.0**-14 * _PARAMS["sigma_out"]  # the rounding's share of the charge
    # recomputed from the generator's state after b: γ (round(θ̃/γ) + k), k ~ N_Z(0, s²)
    k = discrete_gaussian_integers(d, noise.scale, generator=torch.Generator().set_state(after_b))
    assert torch.equal(theta, (torch.round(theta_tilde / noise.grid).to(torch.int64) + k).double() * noise.grid)
    error = (theta - theta_tilde) / noise.noise_std  # about N(0, 1): within 5 sd of the χ² band
    assert abs(float(error.pow(2).mean().sqrt()) - 1) < 5 / math.sqrt(2 * d)
