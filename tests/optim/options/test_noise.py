r"""Noise schedules (botorch_dp/optim/options/noise.py): the fixed schedule makes every one of the ``T``
steps ``μ_g/√T``-GDP with noise ``σ = 2B√T/(nμ_g)`` (Sopa et al., Thm. 3.1), charged as ``"grad"``, and
its record follows from the config; the adaptive schedule's step bound holds a norm and a gradient,
it refuses to start a step the budget cannot pay for, and its record is the stored one; each
schedule is rebuilt from its ``spec()`` and bad settings are refused naming the field. A user's
schedule that derives from no class of the package but implements ``NoisePolicy`` and is registered
runs in ``Options`` and through ``DPGIBO``, its releases charged as it declares them."""

import json
import math
import warnings
from typing import Any

import pytest
import torch

from botorch_dp.optim import DPGIBO
from botorch_dp.optim.options import AdaptiveNorm, FixedNoise, NoisePolicy, Options, from_spec, register
from botorch_dp.optim.options.base import RunPlan
from botorch_dp.optim.options.budget import BudgetSplit
from botorch_dp.optim.options.noise import NoiseState
from botorch_dp.optim.options.projection import SubspaceTrack
from botorch_dp.optim.users import InMemoryUsers
from botorch_dp.privacy.ledger import Gaussian, PrivacyBudgetExceeded, PrivacyLedger, parse_release_key
from botorch_dp.privacy.mechanisms import GaussianGradientMechanism, GradientRelease
from botorch_dp.privacy.mechanisms.sums import ClippedSum
from tests.optim.options.strategy_config import config_with
from tests.test_option_pins import _objective, _settings

N, T, B, MU = 50, 4, 2.0, 1.5


def _plan(cap=T):
    return RunPlan(T, cap, 2, N, BudgetSplit(MU), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("schedule", [FixedNoise(), AdaptiveNorm(), AdaptiveNorm(0.2, 2.0, 0.5, 9)])
def test_a_schedule_is_rebuilt_from_its_spec(schedule):
    assert from_spec("noise", json.loads(json.dumps(schedule.spec()))) == schedule


def test_the_fixed_schedule_releases_each_step_at_its_closed_form_and_charges_it():
    plan, noise = _plan(), FixedNoise()
    sigma = 2.0 * B * math.sqrt(T) / (N * MU)
    std, multiplier = noise.noise(plan, NoiseState(), B)
    assert std == pytest.approx(sigma, rel=1e-12) and multiplier == pytest.approx(sigma / (2.0 * B / N), rel=1e-12)
    assert noise.bound(plan, NoiseState(), [], math.inf)["grad"].mu == pytest.approx(MU / math.sqrt(T), rel=1e-12)
    g = torch.Generator().manual_seed(1)
    users = InMemoryUsers((torch.randn(3, N, generator=g, dtype=torch.float64),))
    summed = users.clipped_sum(torch.randn(2, 3, generator=g, dtype=torch.float64), B)
    ledger, state = PrivacyLedger(), NoiseState()
    for step in range(2):
        with ledger.charge(noise.bound(plan, state, [], math.inf), run_id="run", step=step) as meter:
            _, state = noise.release(summed, plan, state, meter, step=step, dim=2, spent=[], room=math.inf)
    assert state.step_mus == pytest.approx([MU / math.sqrt(T)] * 2, rel=1e-12)
    assert state.noise_stds == pytest.approx([sigma] * 2, rel=1e-12)
    assert ledger.validation.mu() == pytest.approx(MU * math.sqrt(2 / T), rel=1e-12)
    assert noise.restored(plan, NoiseState(), [B, B]) == NoiseState(state.step_mus, state.noise_stds)
    assert noise.iteration_cap(T) == T


def test_the_adaptive_schedule_bounds_a_norm_and_a_gradient_and_refuses_a_step_it_cannot_pay():
    noise = AdaptiveNorm(max_iterations=6)
    assert noise.iteration_cap(T) == 6 and noise.provides == {"noisy_norms"}
    plan = _plan(cap=noise.iteration_cap(T))  # the run's plan carries the schedule's T_max
    bound = noise.bound(plan, NoiseState(), [], math.inf)
    assert set(bound) == {"norm", "grad"}
    assert bound["norm"].mu == pytest.approx(MU * math.sqrt(noise.norm_mu_fraction / 6), rel=1e-12)  # μ_N
    with pytest.raises(PrivacyBudgetExceeded, match="the ledger has mu=0.001 left.*Nothing was released"):
        noise.bound(plan, NoiseState(), [], 1e-3)
    stored = NoiseState((0.3,), (1.0,), (0.2,), (0.1,), False)
    assert noise.restored(plan, stored, [B]) is stored


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: AdaptiveNorm(norm_mu_fraction=1.0), r"norm_mu_fraction \(f_N\)"),
        (lambda: AdaptiveNorm(snr_factor=0.0), r"snr_factor \(c_snr\)"),
        (lambda: AdaptiveNorm(max_step_mu=math.inf), r"max_step_mu \(μ_max\)"),
        (lambda: AdaptiveNorm(max_iterations=0), r"max_iterations \(T_max\)"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(make, named):
    with pytest.raises(ValueError, match=named):
        make()


@register("noise", "test_weighted")
class Weighted:
    r"""A user's noise schedule (no package base class): step ``t`` is ``μ_g w_t``-GDP for public
    weights with ``Σ w_t² = 1``, so the ``T`` steps compose to ``μ_g`` (GDP: root sum of squares)."""

    family: str  # set by register
    name: str
    requires: frozenset[str] = frozenset()
    provides: frozenset[str] = frozenset()
    needs_finite_mu = "splits a finite budget between its steps"

    def __init__(self, weights: tuple[float, ...]) -> None:
        self.weights = tuple(weights)

    @property
    def key(self) -> str:
        return f"{self.family}:{self.name}"

    @property
    def label(self) -> str:
        return f"noise_schedule={self.name!r}"

    def conflicts(self) -> dict[str, str]:
        return {}

    def spec(self) -> dict[str, Any]:
        return {"kind": self.name, "weights": list(self.weights)}

    def iteration_cap(self, num_iterations: int) -> int:
        return num_iterations

    def check(self, split: BudgetSplit, dim: int, num_iterations: int) -> None:
        if len(self.weights) != num_iterations or not math.isclose(math.fsum(w * w for w in self.weights), 1.0):
            raise ValueError(f"weights must be T = {num_iterations} values with squares summing to 1.")

    def step_mu(self, plan: RunPlan, step: int) -> float:
        return plan.split.gradient_mu * self.weights[step]

    def bound(self, plan: RunPlan, state: NoiseState, spent: list[float], room: float) -> dict[str, Gaussian]:
        return {"grad": Gaussian(self.step_mu(plan, len(state.step_mus)))}

    def release(
        self, summed: ClippedSum, plan: RunPlan, state: NoiseState, meter: Any, *, step: int, dim: int, **_: Any
    ) -> tuple[GradientRelease, NoiseState]:
        mechanism = GaussianGradientMechanism(
            clip_bound=summed.bound,
            num_users=plan.num_users,
            privacy_mu=self.step_mu(plan, step),
            num_steps=1,
            generator=plan.generator,
            chunk_size=plan.chunk_size,
        )
        release = mechanism.release_sum(summed, diagnostics=plan.diagnostics, meter=meter)
        return release, NoiseState(
            step_mus=(*state.step_mus, mechanism.step_mu), noise_stds=(*state.noise_stds, mechanism.noise_std)
        )

    def record(self, state: NoiseState) -> NoiseState:
        return state

    def noise(self, plan: RunPlan, state: NoiseState, bound: float) -> tuple[float, float]:
        sensitivity = 2.0 * bound / max(plan.num_users, 1)
        std = state.noise_stds[-1] if state.noise_stds else sensitivity / self.step_mu(plan, 0)
        return std, std / sensitivity

    def restored(self, plan: RunPlan, stored: NoiseState, bounds: list[float]) -> NoiseState:
        return stored


WEIGHTS = (2.0 / 3.0, 2.0 / 3.0, 1.0 / 3.0)


def test_a_users_schedule_implements_the_protocol_without_a_package_base_class():
    schedule: NoisePolicy = Weighted(WEIGHTS)  # mypy checks the protocol's signatures here
    assert type(schedule).__mro__ == (Weighted, object)
    options = Options(noise=schedule)
    options.check(MU, 2, 3)
    with pytest.raises(ValueError, match="weights must be T = 4 values"):
        options.check(MU, 2, 4)
    with pytest.raises(ValueError, match="noise_schedule='test_weighted' splits a finite budget"):
        options.check(math.inf, 2, 3)
    assert options.describe()["noise"] == {"kind": "test_weighted", "weights": list(WEIGHTS)}


def test_a_users_schedule_releases_and_is_charged_as_it_declares_in_options():
    g = torch.Generator().manual_seed(2)
    users = InMemoryUsers((torch.randn(3, N, generator=g, dtype=torch.float64),))
    W = torch.randn(2, 3, generator=g, dtype=torch.float64)
    options = Options(noise=Weighted(WEIGHTS))
    plan = RunPlan(3, 3, 2, N, options.split(MU), generator=torch.Generator().manual_seed(0))
    ledger, noise, clip = PrivacyLedger(), NoiseState(), options.clip.initial_state()
    for t, w in enumerate(WEIGHTS):
        bound = options.step_bound(plan, noise, [], math.inf)
        assert bound == {"grad": Gaussian(MU * w)}
        with ledger.charge(bound, run_id="run", step=t) as meter:
            out = options.release_step(
                users, W, plan, noise=noise, clip=clip, track=SubspaceTrack(), meter=meter, step=t, spent=[], room=1e9
            )
        noise = out.noise
        assert noise.noise_stds[-1] == pytest.approx(2.0 * 1.0 / N / (MU * w), rel=1e-12)  # Δ/μ_t, B = 1
    assert ledger.validation.steps() == {
        ("run", release): MU * w for release, w in zip(("step-0000", "step-0001", "step-0002"), WEIGHTS, strict=True)
    }
    assert ledger.validation.mu() == pytest.approx(MU, rel=1e-12)  # √Σ(μ w_t)² = μ


def test_a_users_schedule_runs_through_dpgibo():
    config = config_with(_settings({"num_iterations": 3, "privacy_mu": MU}), noise=Weighted(WEIGHTS))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the seed's warning
        opt = DPGIBO(config)
        release = opt.run(_objective, progress=False).release
    assert release.step_mus == pytest.approx([MU * w for w in WEIGHTS], rel=1e-12)
    records = opt.ledger.validation.records(opt.run_id)
    assert [parse_release_key(r.key) for r in records] == [(0, "grad"), (1, "grad"), (2, "grad")]
    assert [r.event.mu for r in records] == pytest.approx([MU * w for w in WEIGHTS], rel=1e-12)
    assert release.guarantee.mu == pytest.approx(MU, rel=1e-12) and torch.isfinite(release.theta).all()
