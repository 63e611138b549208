"""Tests for botorch_dp.baselines.dp_hypo: the ratio-class projection, the adaptive search,
its guarantee and ledger charge, and the refusal of bad arguments."""

from __future__ import annotations

import importlib
import math
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from botorch_dp.baselines import dp_hypo, project_to_ratio_class
from botorch_dp.baselines.dp_hypo import LEDGER_KEY
from botorch_dp.baselines.selection import HiddenTrialError
from botorch_dp.privacy.analysis.dp_hypo import dp_hypo_rdp
from botorch_dp.privacy.analysis.private_selection import private_selection_rdp
from botorch_dp.privacy.analysis.rdp import DEFAULT_RDP_ORDERS, rdp_curve_epsilon
from botorch_dp.privacy.ledger import Gaussian, PrivacyBudgetExceeded, PrivacyLedger
from botorch_dp.privacy.seeding import PrivacyWarning

BOUNDS = torch.tensor([[-2.0, -2.0], [2.0, 2.0]], dtype=torch.float64)
_USERS = torch.tensor([0.6, -0.9], dtype=torch.float64) + 0.2 * torch.rand(
    40, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64
)


def quadratic(X: torch.Tensor) -> torch.Tensor:
    r"""``q x 40`` per-user losses ``‖θ − x_i‖²`` (a smooth bowl, minimum near (0.7, −0.8))."""
    return ((X[:, None, :] - _USERS[None]) ** 2).sum(-1)


def mean_loss(theta: torch.Tensor) -> float:
    return float(quadratic(theta.reshape(1, -1)).mean())


def _ratios(p: torch.Tensor) -> torch.Tensor:
    return p / p.sum() * p.numel()


# ------------------------------------------------------------------------ projection
@settings(max_examples=80, deadline=None)
@given(
    values=st.lists(
        st.one_of(st.floats(-1e6, 1e6), st.just(-math.inf), st.floats(-1e-3, 1e-3)), min_size=1, max_size=64
    ),
    upper=st.floats(1.0, 1e3),
    lower=st.one_of(st.none(), st.floats(1e-3, 1.0)),
)
def test_projection_stays_in_the_ratio_class_after_normalisation(values, upper, lower):
    p = project_to_ratio_class(torch.tensor(values, dtype=torch.float64), ratio_upper=upper, ratio_lower=lower)
    c = 1.0 / upper if lower is None else lower
    assert p.dtype == torch.float64 and p.shape == (len(values),)
    assert float(p.sum()) == pytest.approx(1.0, abs=1e-12)
    r = _ratios(p)
    assert float(r.min()) >= c * (1 - 1e-12) and float(r.max()) <= upper * (1 + 1e-12)


@settings(max_examples=40, deadline=None)
@given(values=st.lists(st.floats(-30.0, 30.0), min_size=2, max_size=40), upper=st.floats(1.0, 50.0))
def test_projection_is_the_kl_projection(values, upper):
    # p = clip(τ w, c/N, C/N): p/w is one constant on the entries strictly inside the bounds,
    # at least it on the entries at C/N, at most it on the entries at c/N
    z = torch.tensor(values, dtype=torch.float64)
    p = project_to_ratio_class(z, ratio_upper=upper)
    n, w = len(values), torch.exp(z - z.max())
    lo, hi = 1.0 / (upper * n), upper / n
    inside = (p > lo * (1 + 1e-9)) & (p < hi * (1 - 1e-9))
    if inside.any():
        tau = p[inside] / w[inside]
        torch.testing.assert_close(tau, tau.mean().expand_as(tau), rtol=1e-9, atol=0.0)
        t = float(tau.mean())
        assert torch.all(t * w[p >= hi * (1 - 1e-9)] >= hi * (1 - 1e-9))
        assert torch.all(t * w[p <= lo * (1 + 1e-9)] <= lo * (1 + 1e-9))


def test_projection_by_hand_and_against_clip_then_renormalise():
    w = torch.tensor([0.0, -math.inf, -math.inf, -math.inf])
    p = project_to_ratio_class(w, ratio_upper=2.0, ratio_lower=0.5)
    torch.testing.assert_close(p, torch.tensor([1 / 2, 1 / 6, 1 / 6, 1 / 6], dtype=torch.float64))
    naive = torch.tensor([1.0, 0.0, 0.0, 0.0]).clamp(0.5 / 4, 2.0 / 4)
    assert float(_ratios(naive).max()) == pytest.approx(16 / 7)  # clip-then-renormalise leaves the class
    # a density already in the class is its own projection; ratio 1 gives the prior
    z = torch.log(torch.tensor([0.2, 0.3, 0.25, 0.25], dtype=torch.float64))
    torch.testing.assert_close(project_to_ratio_class(z, ratio_upper=1.5), torch.exp(z))
    torch.testing.assert_close(project_to_ratio_class(z, ratio_upper=1.0), torch.full((4,), 0.25, dtype=torch.float64))
    torch.testing.assert_close(
        project_to_ratio_class(torch.full((3,), -math.inf), ratio_upper=3.0),
        torch.full((3,), 1 / 3, dtype=torch.float64),
    )


def test_projection_refuses_bad_input():
    with pytest.raises(ValueError, match="log_weights"):
        project_to_ratio_class(torch.tensor([0.0, float("nan")]), ratio_upper=2.0)
    with pytest.raises(ValueError, match="log_weights"):
        project_to_ratio_class(torch.tensor([0.0, math.inf]), ratio_upper=2.0)
    with pytest.raises(ValueError, match="log_weights"):
        project_to_ratio_class(torch.zeros(2, 2), ratio_upper=2.0)
    with pytest.raises(ValueError, match="ratio_upper"):
        project_to_ratio_class(torch.zeros(3), ratio_upper=0.5)


# ------------------------------------------------------------------------ the search
def _run(ratio, seed, **kw):
    settings = dict(
        mean_trials=10.0,
        per_trial_mu=1e6,
        loss_clip=30.0,
        ratio_bound=ratio,
        distribution="poisson",
        num_candidates=128,
        refit_every=8,
        seed=seed,
        non_private_trials=True,  # the NON-PRIVATE diagnostic: these tests read K and the trials
    )
    settings.update(kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        return dp_hypo(quadratic, BOUNDS, **settings)


def test_adaptive_density_beats_the_prior_with_negligible_noise():
    # same seeds: the same K (and the same first two trials) with and without adaptivity;
    # the GP density, held within a ratio of 8 of the prior, finds better points on average
    seeds = range(5)
    plain = [_run(1.0, s) for s in seeds]
    adaptive = [_run(8.0, s) for s in seeds]
    assert [r.num_evaluations for r in plain] == [r.num_evaluations for r in adaptive]
    plain_loss = sum(mean_loss(r.theta) for r in plain) / len(plain)
    adaptive_loss = sum(mean_loss(r.theta) for r in adaptive) / len(adaptive)
    assert adaptive_loss < 0.8 * plain_loss  # measured: 0.33 vs 0.48
    for r in adaptive:  # every sampling density stayed in the class, and the GP was used
        ratios = r.history.extras["max_ratio"]
        assert float(ratios.max()) <= 8.0 * (1 + 1e-12)
        if r.num_evaluations > 3:
            assert float(ratios[2:].max()) > 2.0
        assert r.history.extras["released_score"] == pytest.approx(mean_loss(r.theta), abs=1e-3)
        assert torch.equal(r.theta, r.history.points[int(torch.argmin(r.history.extras["noisy_scores"]))])
    assert all(float(r.history.extras["max_ratio"].max()) == pytest.approx(1.0) for r in plain)


def _spy_density_updates(monkeypatch):
    module = importlib.import_module("botorch_dp.baselines.dp_hypo")  # the package's dp_hypo is the function
    calls = []
    real = module.gp_sampling_log_weights

    def spy(train_X, train_Y, candidates, **kw):
        calls.append((train_X.shape[0], kw["fit"]))
        return real(train_X, train_Y, candidates, **kw)

    monkeypatch.setattr(module, "gp_sampling_log_weights", spy)
    return calls


@pytest.mark.parametrize("every, refit", [(1, 3), (5, 8), (4, 1)])
def test_density_updates_and_fits_follow_their_cadence(monkeypatch, every, refit):
    calls = _spy_density_updates(monkeypatch)
    result = _run(8.0, 3, mean_trials=30.0, refit_every=refit, density_update_every=every)
    K = result.num_evaluations
    assert K > 12
    updates = list(range(2, K, every))  # trial j's density sees the j earlier trials
    assert [n for n, _ in calls] == updates
    fits, last = [], None
    for j in updates:  # a fit when refit_every trials have passed since the last one
        fits.append(last is None or j - last >= refit)
        last = j if fits[-1] else last
    assert [f for _, f in calls] == fits
    if every == 1:  # the former rule: a fit at every refit_every-th GP trial
        assert fits == [(j - 2) % refit == 0 for j in updates]
    ratios = result.history.extras["max_ratio"]  # the trials between updates draw from one density
    assert float(ratios.max()) <= 8.0 * (1 + 1e-12)
    for start in updates:
        block = ratios[start : start + every]
        assert torch.equal(block, block[:1].expand_as(block))


def test_max_points_shows_the_density_only_the_last_trials(monkeypatch):
    module = importlib.import_module("botorch_dp.baselines.dp_hypo")
    seen, real = [], module.gp_sampling_log_weights

    def spy(train_X, train_Y, candidates, **kw):
        seen.append((train_X.clone(), train_Y.clone()))
        return real(train_X, train_Y, candidates, **kw)

    monkeypatch.setattr(module, "gp_sampling_log_weights", spy)
    result = _run(8.0, 3, mean_trials=30.0, density_update_every=3, max_points=7)
    K = result.num_evaluations
    assert K > 12
    points = (result.history.points - BOUNDS[0]) / (BOUNDS[1] - BOUNDS[0])  # the unit-cube trials
    scores = result.history.extras["noisy_scores"]
    assert len(seen) == len(range(2, K, 3))
    for j, (X, Y) in zip(range(2, K, 3), seen, strict=True):  # trial j's density: trials max(0, j - 7), ..., j - 1
        first = max(0, j - 7)
        assert X.shape[0] == j - first
        assert torch.allclose(X, points[first:j], atol=1e-12)
        assert torch.equal(Y, scores[first:j].to(torch.float64))


def test_batched_density_still_beats_the_prior_with_negligible_noise():
    seeds = range(5)
    plain = sum(mean_loss(_run(1.0, s).theta) for s in seeds) / 5
    batched = sum(mean_loss(_run(8.0, s, density_update_every=3).theta) for s in seeds) / 5
    assert batched < 0.8 * plain


def test_guarantee_is_the_bound_on_the_ledger_grid_and_reduces_to_papernot_steinke():
    kw = dict(per_trial_mu=0.5, mean_trials=5.0, distribution="truncated_negative_binomial", tnb_eta=1.0)
    for ratio in (1.0, 3.0):
        res = _run(ratio, 3, mean_trials=5.0, per_trial_mu=0.5, distribution="truncated_negative_binomial")
        expected = rdp_curve_epsilon(
            [dp_hypo_rdp(a, ratio_upper=ratio, **kw) for a in DEFAULT_RDP_ORDERS], DEFAULT_RDP_ORDERS, 1e-5
        )[0]
        assert res.guarantee.epsilon == expected
        assert not res.history.public and res.guarantee.details["ratio_bound"] == ratio
    ps = rdp_curve_epsilon([private_selection_rdp(a, **kw) for a in DEFAULT_RDP_ORDERS], DEFAULT_RDP_ORDERS, 1e-5)[0]
    assert (
        _run(1.0, 4, mean_trials=5.0, per_trial_mu=0.5, distribution="truncated_negative_binomial").guarantee.epsilon
        == ps
    )


def test_ledger_is_charged_before_the_first_evaluation():
    ledger = PrivacyLedger()
    calls = []

    def failing(X):
        calls.append(X)
        raise RuntimeError("objective failed")

    with pytest.raises(HiddenTrialError, match="hidden trials"):
        dp_hypo(
            failing,
            BOUNDS,
            mean_trials=5.0,
            per_trial_mu=0.5,
            loss_clip=1.0,
            ratio_bound=2.0,
            ledger=ledger,
            run_id="hypo-1",
        )
    assert len(calls) == 1 and list(ledger.validation.mechanisms()) == [("hypo-1", LEDGER_KEY)]
    assert not ledger.training.run_ids()  # the validation users pay, not the training data

    ledger = PrivacyLedger()
    res = _run(2.0, 0, ledger=ledger, run_id="hypo-2", mean_trials=4.0)
    assert ledger.validation.epsilon(1e-5) == pytest.approx(res.guarantee.epsilon, rel=1e-12)
    assert res.guarantee.details["ledger_run_id"] == "hypo-2"
    with pytest.raises(ValueError, match="validation.epsilon"):
        ledger.validation.mu()  # no mu covers the run

    # the validation mu budget filter refuses the run before anything is evaluated exactly
    # when its curve exceeds alpha B^2/2 at some grid order (alpha = 1.1 here)
    curve = [
        max(dp_hypo_rdp(a, per_trial_mu=0.5, mean_trials=5.0, ratio_upper=2.0, ratio_lower=0.5), 0.0)
        for a in DEFAULT_RDP_ORDERS
    ]
    needed = max(math.sqrt(2.0 * c / a) for c, a in zip(curve, DEFAULT_RDP_ORDERS, strict=True))
    tight = PrivacyLedger(validation_mu_budget=0.99 * needed)
    calls.clear()
    with pytest.raises(PrivacyBudgetExceeded, match="alpha=1.1"):
        dp_hypo(failing, BOUNDS, mean_trials=5.0, per_trial_mu=0.5, loss_clip=1.0, ratio_bound=2.0, ledger=tight)
    assert not calls and not tight.validation.mechanisms() and tight.validation.mu() == 0.0
    roomy = PrivacyLedger(validation_mu_budget=1.01 * needed)
    with pytest.raises(HiddenTrialError, match="hidden trials"):
        dp_hypo(failing, BOUNDS, mean_trials=5.0, per_trial_mu=0.5, loss_clip=1.0, ratio_bound=2.0, ledger=roomy)
    assert len(calls) == 1 and len(roomy.validation.mechanisms()) == 1


def test_dp_hypo_and_a_gaussian_step_compose_on_the_validation_side():
    """A DP-HyPO run and a DP-GIBO-sized Gaussian step on one ledger: both on the validation
    side, nothing on the training side, and validation_epsilon is the RDP conversion of the
    sum of the run's closed-form curve and the step's alpha mu^2/2."""
    ledger = PrivacyLedger(validation_mu_budget=20.0)
    kw = dict(mean_trials=4.0, per_trial_mu=0.5, distribution="poisson")
    res = _run(2.0, 3, ledger=ledger, run_id="hypo", **kw)
    step_mu = 1.0 / math.sqrt(25)  # one step of a mu = 1, T = 25 DP-GIBO run
    ledger.external.check(Gaussian(step_mu))
    ledger.external.record(Gaussian(step_mu), run_id="gibo", key="step-0000")
    assert not ledger.training.run_ids() and ledger.training.epsilon(1e-5) == 0.0
    assert ledger.validation.run_ids() == ["hypo", "gibo"]
    run_curve = [
        max(
            dp_hypo_rdp(a, per_trial_mu=0.5, mean_trials=4.0, ratio_upper=2.0, ratio_lower=0.5, distribution="poisson"),
            0.0,
        )
        for a in DEFAULT_RDP_ORDERS
    ]
    both = [c + a * step_mu**2 / 2 for c, a in zip(run_curve, DEFAULT_RDP_ORDERS, strict=True)]
    assert ledger.validation.rdp_curve() == pytest.approx(both, rel=1e-12)
    eps = ledger.validation.epsilon(1e-5)
    assert eps == pytest.approx(rdp_curve_epsilon(both, DEFAULT_RDP_ORDERS, 1e-5)[0], rel=1e-12)
    assert eps > res.guarantee.epsilon  # the step costs something on top of the run
    report = ledger.report(1e-5)["validation"]
    assert report["mu"] is None and report["epsilon"] == eps and report["num_steps"] == 2
    assert [r["run_id"] for r in report["rdp_releases"]] == ["hypo"]
    assert ledger.validation.mu(run_id="gibo") == pytest.approx(step_mu)  # a run without RDP entries


def test_seed_warns_and_default_draws_from_os_entropy():
    kw = dict(
        mean_trials=30.0, per_trial_mu=0.3, loss_clip=30.0, ratio_bound=1.0, distribution="poisson", num_candidates=4096
    )
    with pytest.warns(PrivacyWarning, match="reproducible"):
        a = dp_hypo(quadratic, BOUNDS, seed=1, non_private_trials=True, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)
        b = dp_hypo(quadratic, BOUNDS, non_private_trials=True, **kw)
        c = dp_hypo(quadratic, BOUNDS, non_private_trials=True, **kw)
    scores = [r.history.extras["noisy_scores"] for r in (b, c)]
    assert not (scores[0].shape == scores[1].shape and torch.equal(*scores))
    assert a.guarantee.epsilon == b.guarantee.epsilon


def test_poisson_with_zero_trials_returns_the_fallback_without_evaluating():
    calls = []
    objective = lambda X: calls.append(X) or torch.zeros(X.shape[0], 3, dtype=torch.float64)
    res = dp_hypo(
        objective,
        BOUNDS,
        mean_trials=1e-9,
        per_trial_mu=0.1,
        loss_clip=1.0,
        ratio_bound=2.0,
        distribution="poisson",
        fallback=torch.tensor([0.5, -0.5]),
        non_private_trials=True,
    )
    assert res.num_evaluations == 0 and not calls
    torch.testing.assert_close(res.theta, torch.tensor([0.5, -0.5], dtype=torch.float64))


@pytest.mark.parametrize(
    "override, name",
    [
        (dict(ratio_bound=0.9), "ratio_bound"),
        (dict(ratio_bound=math.inf), "ratio_bound"),
        (dict(ratio_bound=float("nan")), "ratio_bound"),
        (dict(mean_trials=1.0), "mean_trials"),
        (dict(mean_trials=0.0, distribution="poisson"), "mean_trials"),
        (dict(per_trial_mu=0.0), "per_trial_mu"),
        (dict(loss_clip=-1.0), "loss_clip"),
        (dict(distribution="uniform"), "distribution"),
        (dict(tnb_eta=-1.0), "tnb_eta"),
        (dict(num_candidates=1), "num_candidates"),
        (dict(temperature=0.0), "temperature"),
        (dict(exploration=-1.0), "exploration"),
        (dict(refit_every=0), "refit_every"),
        (dict(density_update_every=0), "density_update_every"),
        (dict(max_points=1), "max_points"),
        (dict(target_delta=1.0), "target_delta"),
        (dict(fallback=torch.zeros(3)), "fallback"),
        (dict(ledger="ledger"), "ledger"),
        (dict(run_id="hypo"), "run_id"),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_evaluated(override, name):
    calls = []
    objective = lambda X: calls.append(X) or torch.zeros(X.shape[0], 3, dtype=torch.float64)
    kw = dict(mean_trials=5.0, per_trial_mu=0.5, loss_clip=1.0, ratio_bound=2.0)
    kw.update(override)
    with pytest.raises(ValueError, match=name):
        dp_hypo(objective, BOUNDS, **kw)
    assert not calls
