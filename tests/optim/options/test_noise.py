r"""Noise schedules (botorch_dp/optim/options/noise.py): the fixed schedule makes every one of the ``T``
steps ``μ_g/√T``-GDP with noise ``σ = 2B√T/(nμ_g)`` (Sopa et al., Thm. 3.1), charged as ``"grad"``, and
its record follows from the config; the adaptive schedule's step bound holds a norm and a gradient,
it refuses to start a step the budget cannot pay for, and its record is the stored one; each
schedule is rebuilt from its ``spec()`` and bad settings are refused naming the field. A user's
schedule that derives from no class of the package but implements ``NoisePolicy`` and is registered
runs in ``Options`` and through ``DPGIBO``, its releases charged as it declares them.

The adaptive-noise rule and its GDP filter (``AdaptiveNormSchedule``, spec B1′, §2.7). Oracles: the spec's E3.7
table (closed forms of the paper's Algorithm 3 and of the realised charge), a direct evaluation of
``σ_t = max(max(N_t, 0)/(c√d), Δ/μ_max)``, and the filter property (no sequence of released norms, however
adversarial, makes ``Σμ_j²`` exceed ``μ²``; the last step spends exactly the rest).
"""

import json
import math
import warnings
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from botorch_dp.optim import DPGIBO
from botorch_dp.optim.options import AdaptiveNorm, FixedNoise, NoisePolicy, Options, from_spec, register
from botorch_dp.optim.options.base import RunPlan
from botorch_dp.optim.options.budget import BudgetSplit
from botorch_dp.optim.options.noise import (
    AdaptiveNormSchedule,
    NoiseState,
    default_snr_factor,
    release_adaptive_step,
    remaining_square,
)
from botorch_dp.optim.options.projection import SubspaceTrack
from botorch_dp.optim.users import InMemoryUsers
from botorch_dp.privacy.ledger import Gaussian, PrivacyBudgetExceeded, PrivacyLedger, parse_release_key
from botorch_dp.privacy.mechanisms import AdaptiveGaussianGradientMechanism, GaussianGradientMechanism, GradientRelease
from botorch_dp.privacy.mechanisms.sums import ClippedSum
from tests.optim.options.plugin import run_and_resume
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

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> "Weighted":
        return cls(tuple(spec["weights"]))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Weighted) and other.weights == self.weights

    def __hash__(self) -> int:
        return hash(self.weights)

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


def test_a_users_schedule_resumes_from_its_checkpoint_bit_identically(tmp_path):
    config = config_with(_settings({"num_iterations": 3, "privacy_mu": MU}), noise=Weighted(WEIGHTS))
    whole, resumed, opt = run_and_resume(config, tmp_path, stop_after=1)
    assert resumed == whole and opt.config.noise == Weighted(WEIGHTS)  # rebuilt from its spec
    assert [float.fromhex(m) for m in whole["step_mus"]] == pytest.approx([MU * w for w in WEIGHTS], rel=1e-12)


# --------------------------------------------------------------------- the adaptive-noise rule (B1′)
FILTER = settings(
    max_examples=200, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)

# --------------------------------------------------------------- the paper's Algorithm 3
# For the record (spec E3.7): zCDP units, add/remove-style sensitivity L₀/n as in the paper. The
# library never charges with these (moved here from optim/options/noise.py, their only reader).


def paper_norm_sigma(*, lipschitz: float, num_users: int, rho: float) -> float:
    r"""Algorithm 3 line 3: the norm noise ``σ̂ = L₀/(√n ρ^{1/4})`` (a scalar, E3.6)."""
    return lipschitz / (math.sqrt(num_users) * rho**0.25)


def paper_sigma(noisy_norm: float, *, lipschitz: float, num_users: int, dim: int, rho: float, beta: float) -> float:
    r"""Algorithm 3 line 4: ``σ_t = max(N_t/√(d log(n√ρ/β)), 2L₀/(n√ρ))``."""
    root = math.sqrt(dim * math.log(num_users * math.sqrt(rho) / beta))
    return max(noisy_norm / root, 2.0 * lipschitz / (num_users * math.sqrt(rho)))


def paper_line6_zcdp(
    noisy_norm: float, *, lipschitz: float, num_users: int, dim: int, rho: float, beta: float
) -> float:
    r"""Algorithm 3 line 6, the paper's charge of one step (norm and gradient release):
    ``min(L₀² d log(n√ρ/β)/(n² N_t²), ρ/2) + √ρ/n`` (the minimum is ``ρ/2`` at
    ``N_t = 0``). Computed from ``N_t``, not from the ``σ_t`` used, so it under-counts
    when ``N_t`` is small or negative (E3.7)."""
    log_term = math.log(num_users * math.sqrt(rho) / beta)
    grad = (
        rho / 2.0
        if noisy_norm == 0.0
        else min(lipschitz**2 * dim * log_term / (num_users**2 * noisy_norm**2), rho / 2.0)
    )
    return grad + math.sqrt(rho) / num_users


def realized_zcdp(sigma: float, *, sensitivity: float, paper_constant: bool = False) -> float:
    r"""The zCDP cost of a Gaussian release with noise ``σ``: ``Δ²/(2σ²)``, or the paper's
    ``(Δ/σ)²`` when ``paper_constant`` (2× the true cost for the same ``Δ``, E3.1)."""
    ratio = (sensitivity / sigma) ** 2
    return ratio if paper_constant else ratio / 2.0


# --------------------------------------------------------------------- spec E3.7 table
# n = 1000, d = 10, ρ = 1, β = 0.1, L₀ = 1; rows: N_t, σ_t, line-6 charge, realised with the
# paper's constant (Δ = L₀/n, (Δ/σ)²), realised replace-one (Δ = 2L₀/n, Δ²/(2σ²)).
PAPER = dict(lipschitz=1.0, num_users=1000, dim=10, rho=1.0, beta=0.1)
E37 = [
    (1.0, 0.10420, 0.00109, 0.00109, 0.00218),
    (0.1, 0.01042, 0.01021, 0.01021, 0.02042),
    (0.01, 0.00200, 0.50100, 0.25100, 0.50200),
    (-0.1, 0.00200, 0.01021, 0.25100, 0.50200),
    (-0.5, 0.00200, 0.00137, 0.25100, 0.50200),
]


@pytest.mark.parametrize("row", E37, ids=[f"N={r[0]}" for r in E37])
def test_e37_table_paper_line6_versus_realised_charge(row):
    noisy_norm, sigma, line6, realised_paper, realised_replace_one = row
    sigma_t = paper_sigma(noisy_norm, **PAPER)
    sigma_hat = paper_norm_sigma(lipschitz=1.0, num_users=1000, rho=1.0)
    assert sigma_hat == pytest.approx(0.0316, abs=5e-5)
    assert sigma_t == pytest.approx(sigma, abs=5e-6)
    assert paper_line6_zcdp(noisy_norm, **PAPER) == pytest.approx(line6, abs=5e-6)
    # realised = norm release + gradient release, from the σ actually used
    paper_delta, delta = 1.0 / 1000, 2.0 / 1000
    paper_const = realized_zcdp(sigma_hat, sensitivity=paper_delta, paper_constant=True) + realized_zcdp(
        sigma_t, sensitivity=paper_delta, paper_constant=True
    )
    true_cost = realized_zcdp(sigma_hat, sensitivity=delta) + realized_zcdp(sigma_t, sensitivity=delta)
    assert paper_const == pytest.approx(realised_paper, abs=5e-6)
    assert true_cost == pytest.approx(realised_replace_one, abs=5e-6)
    assert true_cost == pytest.approx(2 * paper_const, rel=1e-12)  # E3.1: the paper's charge is half the true one


def test_e37_negative_norm_undercount_and_floor_threshold():
    # N_t = −0.05 is charged 0.0378 by line 6 against a realised 0.251 (paper constant)
    assert paper_line6_zcdp(-0.05, **PAPER) == pytest.approx(0.0378, abs=5e-5)
    sigma_t = paper_sigma(-0.05, **PAPER)
    assert realized_zcdp(sigma_t, sensitivity=1e-3, paper_constant=True) + 1e-3 == pytest.approx(0.251, abs=5e-6)
    # σ_t sits at the floor exactly for N_t ≤ 2L₀√(d log(n√ρ/β))/(n√ρ) = 0.019194
    threshold = 2 * math.sqrt(10 * math.log(1000 / 0.1)) / 1000
    assert threshold == pytest.approx(0.019194, abs=5e-7)
    assert paper_sigma(threshold * (1 - 1e-9), **PAPER) == 2e-3
    assert paper_sigma(threshold * (1 + 1e-6), **PAPER) > 2e-3


# -------------------------------------------------------------------- the library's rule
def _schedule(**overrides) -> AdaptiveNormSchedule:
    settings_: dict[str, Any] = dict(total_mu=1.0, sensitivity=0.02, dim=5, max_iterations=20, num_users=100)
    settings_.update(overrides)
    return AdaptiveNormSchedule.build(**settings_)


def test_build_defaults_follow_the_spec():
    s = _schedule()
    assert s.norm_mu == pytest.approx(math.sqrt(0.1 / 20))
    # μ_max = min(μ/2, 2μ/√T_max): the spec's μ/2 for T_max ≤ 16, capped above
    assert s.max_step_mu == pytest.approx(2 / math.sqrt(20)) and s.min_step_mu == pytest.approx(1 / (2 * math.sqrt(20)))
    assert _schedule(max_iterations=9).max_step_mu == 0.5 and _schedule(max_iterations=16).max_step_mu == 0.5
    assert s.snr_factor == pytest.approx(math.sqrt(math.log(100 * 1.0 / (math.sqrt(2) * 0.05))))
    # β = 0.05, n μ small: the logarithm is below 1 and the factor is floored at 1
    assert default_snr_factor(1, 0.05) == 1.0


def test_noise_target_is_delta_over_realised_sigma():
    s = _schedule()
    floor = s.sensitivity / s.max_step_mu
    for n_t in [-5.0, -1e-300, 0.0, 1e-300, 1e-3, 0.05, 0.3, 1.0, 7.0, 1e6]:
        sigma = max(max(n_t, 0.0) / (s.snr_factor * math.sqrt(s.dim)), floor)
        expected = max(s.sensitivity / sigma, s.min_step_mu)
        assert s.noise_target_mu(n_t) == pytest.approx(expected, rel=1e-14)
    with pytest.raises(ValueError, match="finite"):
        s.noise_target_mu(math.nan)
    with pytest.raises(ValueError, match="finite"):
        s.noise_target_mu(math.inf)


def test_schedule_refuses_inconsistent_settings():
    # the strategy's fields (f_N, c_snr, μ_max, T_max) are checked once, by AdaptiveNorm (above); the
    # schedule checks what it derives and how the values relate
    with pytest.raises(ValueError, match=r"max_step_mu \(μ_max\) = 2 exceeds the budget μ = 1"):
        _schedule(max_step_mu=2.0)
    with pytest.raises(ValueError, match=r"max_step_mu \(μ_max\) = 2 exceeds the budget μ = 1"):
        AdaptiveNorm(max_step_mu=2.0).check(BudgetSplit(1.0), 2, 5)
    assert _schedule(max_step_mu=0.01).min_step_mu == 0.01  # μ_min is capped at μ_max
    with pytest.raises(ValueError, match="μ_N² \\+ μ_min²"):
        AdaptiveNormSchedule(
            total_mu=1.0,
            sensitivity=0.1,
            dim=2,
            max_iterations=3,
            norm_mu=0.9,
            snr_factor=1.0,
            max_step_mu=0.5,
            min_step_mu=0.5,
        )
    with pytest.raises(ValueError, match="total_mu"):
        _schedule(total_mu=math.inf)


def _simulate(schedule: AdaptiveNormSchedule, norms: list[float]) -> tuple[list[float], list[bool]]:
    r"""The loop of B1′ on a given sequence of released norms: ``μ_j`` of every release
    (norm, gradient, norm, ...) and the ``final`` flag of each step."""
    spent: list[float] = []
    finals: list[bool] = []
    for t in range(schedule.max_iterations):
        if not schedule.can_start_step(t, spent):
            break
        spent.append(schedule.norm_mu)
        budget = schedule.gradient_budget(norms[t % len(norms)], t, spent)
        spent.append(budget.mu)
        finals.append(budget.final)
        if budget.final:
            break
    return spent, finals


_NORMS = st.one_of(
    st.floats(min_value=-1e300, max_value=1e300, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 5e-324, -5e-324, 1e-300, -1e-12, 1e-12]),
)


@FILTER
@given(
    mu=st.floats(0.01, 50.0),
    sensitivity=st.floats(1e-8, 10.0),
    dim=st.integers(1, 200),
    max_iterations=st.integers(1, 200),
    fraction=st.floats(0.001, 0.9),
    snr=st.floats(0.1, 10.0),
    max_step_fraction=st.floats(0.01, 1.0),
    norms=st.lists(_NORMS, min_size=1, max_size=50),
)
def test_filter_never_overspends_and_the_last_step_spends_the_rest(
    mu, sensitivity, dim, max_iterations, fraction, snr, max_step_fraction, norms
):
    schedule = AdaptiveNormSchedule.build(
        total_mu=mu,
        sensitivity=sensitivity,
        dim=dim,
        max_iterations=max_iterations,
        num_users=10,
        norm_mu_fraction=fraction,
        snr_factor=snr,
        max_step_mu=mu * max_step_fraction,
    )
    spent, finals = _simulate(schedule, norms)
    total_sq = math.fsum(m * m for m in spent)
    assert total_sq <= mu * mu * (1 + 1e-9)  # never overspends
    assert len(finals) <= max_iterations and finals[-1] and not any(finals[:-1])
    assert total_sq == pytest.approx(mu * mu, rel=1e-9)  # the last step spends exactly the rest
    assert remaining_square(mu, spent) == pytest.approx(0.0, abs=1e-9 * mu * mu)
    # non-final gradient releases lie in [μ_min, μ_max]; every norm release is μ_N
    grads = spent[1::2]
    assert all(schedule.min_step_mu <= g <= schedule.max_step_mu for g in grads[:-1])
    assert spent[0::2] == [schedule.norm_mu] * len(finals)
    # after the final step, the filter refuses to start another
    assert not schedule.can_start_step(len(finals), spent)


@FILTER
@given(norms=st.lists(_NORMS, min_size=1, max_size=30), max_iterations=st.integers(1, 30))
def test_adversarial_norms_each_step_checks_before_spending(norms, max_iterations):
    r"""Each gradient charge fits what is left after the step's norm release (checked
    before the release), whatever the released norms were."""
    schedule = _schedule(max_iterations=max_iterations)
    spent: list[float] = []
    for t in range(max_iterations):
        if not schedule.can_start_step(t, spent):
            break
        assert remaining_square(1.0, spent) >= schedule.norm_mu**2 + schedule.min_step_mu**2 - 1e-12
        spent.append(schedule.norm_mu)
        budget = schedule.gradient_budget(norms[t % len(norms)], t, spent)
        assert budget.mu**2 <= remaining_square(1.0, spent) * (1 + 1e-12)
        spent.append(budget.mu)
        if budget.final:
            break
    assert math.fsum(m * m for m in spent) <= 1.0 + 1e-9


def test_nan_norm_is_refused_before_any_charge():
    schedule = _schedule()
    with pytest.raises(ValueError, match="finite"):
        schedule.gradient_budget(math.nan, 0, [schedule.norm_mu])


def test_small_or_negative_norms_are_charged_the_floor_not_the_paper_value():
    r"""E3.7 in the library: a negative or tiny ``N_t`` gets the smallest noise
    ``Δ/μ_max`` and is charged ``μ_max``, never the near-zero charge of line 6."""
    schedule = _schedule(max_iterations=100)
    for n_t in [-1.0, -1e-9, 0.0, 1e-12]:
        budget = schedule.gradient_budget(n_t, 0, [schedule.norm_mu])
        assert budget.mu == schedule.max_step_mu and not budget.final
        assert schedule.noise_std(budget.mu) == pytest.approx(schedule.sensitivity / schedule.max_step_mu)


def test_last_allowed_step_is_final_and_takes_the_rest():
    schedule = _schedule(max_iterations=3)
    spent = [schedule.norm_mu, 0.1, schedule.norm_mu, 0.1, schedule.norm_mu]
    budget = schedule.gradient_budget(10.0, 2, spent)
    assert budget.final and budget.mu == pytest.approx(math.sqrt(1.0 - math.fsum(m * m for m in spent)))
    assert not schedule.can_start_step(3, [*spent, budget.mu])


def test_steps_at_a_large_norm_count_as_the_closed_form():
    r"""Constant released norm ``N`` (no norm noise): each non-final step costs
    ``μ_N² + (c√d Δ/N)²``, so the run makes ``⌊μ²/cost⌋`` steps (the last one takes the
    rest when a full step no longer leaves room for another)."""
    schedule = _schedule(max_iterations=10_000, sensitivity=1e-2, dim=9, max_step_mu=0.5)
    n_t = 0.4
    mu_t = schedule.sensitivity * schedule.snr_factor * 3 / n_t
    cost = schedule.norm_mu**2 + mu_t**2
    spent, finals = _simulate(schedule, [n_t])
    assert all(g == pytest.approx(mu_t, rel=1e-14) for g in spent[1::2][:-1])
    # k non-final steps while (k + 1) full steps and one more minimal step fit
    k = 0
    while 1.0 - (k + 1) * cost - (schedule.norm_mu**2 + schedule.min_step_mu**2) >= 0:
        k += 1
    assert len(finals) == k + 1


def test_release_adaptive_step_checks_and_records_both_releases():
    A = torch.eye(3, dtype=torch.float64)
    Y = torch.full((3, 10), 0.1, dtype=torch.float64)
    mech = AdaptiveGaussianGradientMechanism(clip_bound=1.0, num_users=10, generator=torch.Generator().manual_seed(0))
    schedule = AdaptiveNormSchedule.build(
        total_mu=1.0, sensitivity=mech.sensitivity, dim=3, max_iterations=4, num_users=10, max_step_mu=0.5
    )
    ledger = PrivacyLedger(validation_mu_budget=1.0)
    with ledger.charge(schedule.step_bound([], ledger.validation.remaining_mu()), run_id="r", step=2) as meter:
        step = release_adaptive_step(mech.clipped_mean(A, Y), schedule, index=2, spent_mus=[], meter=meter)
    assert ledger.validation.steps() == {
        ("r", "step-0002/norm"): schedule.norm_mu,
        ("r", "step-0002/grad"): step.gradient.cost.mu,
    }
    assert step.noise_std == pytest.approx(mech.sensitivity / step.gradient.cost.mu)
    assert step.gradient.cost.mu == schedule.gradient_budget(step.norm.norm, 2, [schedule.norm_mu]).mu
    # a ledger with room for the norm but not a minimal gradient: no step can start, and the
    # ledger refuses the step's worst case before anything is drawn (no record, no noise)
    tight = PrivacyLedger(validation_mu_budget=schedule.norm_mu * 1.01)
    room = tight.validation.remaining_mu()
    assert not schedule.can_start_step(0, [], room) and schedule.can_start_step(0, [])
    with pytest.raises(PrivacyBudgetExceeded, match="Nothing was released"):
        with tight.charge(schedule.step_bound([]), run_id="r", step=0):
            raise AssertionError("not reached")
    assert tight.validation.records() == []
    # a ledger that admits one small step: the step plans with what the ledger has left
    # (the final step, spending exactly that), so it is never refused half way
    small = PrivacyLedger(validation_mu_budget=math.hypot(schedule.norm_mu, 2 * schedule.min_step_mu))
    room = small.validation.remaining_mu()
    with small.charge(schedule.step_bound([], room), run_id="r", step=0) as meter:
        step = release_adaptive_step(
            mech.clipped_mean(A, Y), schedule, index=0, spent_mus=[], meter=meter, ledger_room=room
        )
    assert step.final and small.validation.mu() == pytest.approx(small.validation_mu_budget, rel=1e-9)
