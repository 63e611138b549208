import json
import math

import pytest
import torch
from botorch.models import SingleTaskGP

from botorch_dp.optim import IterationInfo
from botorch_dp.optim.dp_gibo import DPGIBO, DPGIBOConfig
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.ledger import PrivacyBudgetExceeded, PrivacyLedger

from .loop_helpers import FAST, nl_config, normal_location, rbf_kernel


def test_non_private_converges_to_sample_mean():
    x, objective = normal_location()
    res = DPGIBO(nl_config()).run(objective, progress=False)
    assert (res.release.theta - x.mean(0)).norm() < 1e-3
    assert res.release.batch_sizes == [3] * 20
    assert res.release.evaluation_points.shape == (60, 5)
    assert res.release.guarantee.mu == math.inf
    assert res.diagnostics is None  # non-private diagnostics are off by default


def test_error_is_larger_for_smaller_mu():
    errors = {}
    for mu in (0.5, 2.0):
        errs = []
        for seed in range(4):
            x, objective = normal_location(seed=seed)
            cfg = nl_config(privacy_mu=mu, clip_bound=3.0, seed=seed, num_iterations=15)
            res = DPGIBO(cfg).run(objective, progress=False)
            errs.append(float((res.release.theta - x.mean(0)).norm()))
            g = res.release.guarantee
            assert math.isclose(g.mu, mu, rel_tol=1e-9)
            assert math.isclose(g.epsilon, gdp_epsilon(mu, 1e-5), rel_tol=1e-9)
            assert math.isclose(g.noise_std, 2 * 3.0 * math.sqrt(15) / (50 * mu))
        errors[mu] = sum(errs) / len(errs)
    assert errors[0.5] > 2 * errors[2.0], errors


def test_adaptive_batches_stop_on_tolerance_and_shrink():
    d = 3
    target = torch.tensor([0.7, 0.2, 0.5], dtype=torch.float64)

    def objective(X):  # 4 users with shifted quadratic losses
        shifts = torch.linspace(-0.1, 0.1, 4, dtype=torch.float64)[:, None]
        return ((X[:, None, :] - target - shifts) ** 2).sum(-1)

    eps, bmax = 0.05, d + 1
    cfg = DPGIBOConfig(
        bounds=torch.tensor([[0.0] * d, [1.0] * d], dtype=torch.float64),
        kernel=rbf_kernel(d, 0.5),
        num_iterations=12,
        privacy_mu=math.inf,
        clip_bound=10.0,
        step_size=0.05,
        bias_tolerance=eps,
        search_radius=0.05,
        noise_variance=1e-6,
        **FAST,
    )
    opt = DPGIBO(cfg)
    res = opt.run(objective, progress=False)
    sizes, traces = res.release.batch_sizes, res.release.posterior_traces
    assert all(b <= bmax for b in sizes)
    assert all(t <= eps or b == bmax for t, b in zip(traces, sizes, strict=True))
    # information carries over: later iterations need fewer new points
    assert sizes[0] == max(sizes)
    assert sum(sizes[-4:]) / 4 < sizes[0]
    assert sum(sizes) == res.release.evaluation_points.shape[0]


def test_bad_losses_are_refused_without_losing_evaluations():
    x, objective = normal_location(n=10, d=2)
    opt = DPGIBO(nl_config(d=2, privacy_mu=1.0, num_iterations=3, seed=0))
    X = opt.ask()
    good = objective(X)
    opt.tell(X, good)
    X = opt.ask()
    noise_state = opt.generators.noise.get_state()
    losses = objective(X)
    bad = losses.clone()
    bad[0, 3] = float("nan")
    for wrong, match in [
        (bad, "non-finite"),
        (losses[:, :5], "users"),
        (losses[:1], "shape"),
        (losses.T, "shape"),
        (torch.empty(X.shape[0], 0, dtype=torch.float64), "shape|user"),
    ]:
        with pytest.raises(ValueError, match=match):
            opt.tell(X, wrong)
    # nothing released or lost: same iteration, same data, noise untouched, points pending
    assert opt.iteration == 1
    assert opt.evaluation_points.shape[0] == 3
    assert torch.equal(opt.generators.noise.get_state(), noise_state)
    assert len(opt.ledger.validation.steps()) == 1
    assert torch.equal(opt.ask(), X)
    with pytest.raises(ValueError, match="points returned"):
        opt.tell(X + 1, losses)
    opt.tell(X, losses)
    assert opt.iteration == 2 and opt.evaluation_points.shape[0] == 6


def test_objective_returning_nan_stops_run_before_release():
    x, objective = normal_location(n=10, d=2)
    opt = DPGIBO(nl_config(d=2, privacy_mu=1.0, num_iterations=3))
    with pytest.raises(ValueError, match="non-finite"):
        opt.run(lambda X: objective(X) * float("nan"), progress=False)
    assert opt.iteration == 0 and opt.ledger.validation.mu() == 0.0
    opt.run(objective, progress=False)  # the run continues once the objective is fixed
    assert opt.iteration == 3


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(privacy_mu=0.0), "privacy_mu"),
        (dict(privacy_mu=-1.0), "privacy_mu"),
        (dict(clip_bound=0.0), "clip_bound"),
        (dict(clip_bound=-3.0), "clip_bound"),
        (dict(num_iterations=0), "num_iterations"),
        (dict(step_size=0.0), "step_size"),
        (dict(step_rule="adam"), "step_rule"),
        (dict(batch_size=0), "batch_size"),
        (dict(bias_tolerance=-1.0, batch_size=None), "bias_tolerance"),
        (dict(bias_tolerance=0.1), "either batch_size"),
        (dict(theta0=torch.full((5,), 10.0)), "theta0"),
        (dict(bounds=torch.ones(2, 5)), "lower < upper"),
        (dict(noise_variance=-1.0), "noise_variance"),
        (dict(target_delta=0.0), "target_delta"),
        (dict(batch_search="random"), "batch_search"),
    ],
)
def test_config_refusals(kw, match):
    with pytest.raises(ValueError, match=match):
        nl_config(**kw)  # refused by DPGIBOConfig itself, before any DPGIBO exists


def test_callback_receives_only_the_public_iteration_info():
    x, objective = normal_location(n=10, d=2)
    seen = []
    opt = DPGIBO(nl_config(d=2, privacy_mu=1.0, num_iterations=4))
    opt.run(objective, progress=False, callback=lambda *args: seen.append(args) or len(seen) == 3)
    assert all(len(args) == 1 and isinstance(args[0], IterationInfo) for args in seen)
    assert [args[0].iteration for args in seen] == [1, 2, 3] and opt.iteration == 3  # True stops the run
    assert torch.equal(seen[-1][0].theta, opt.theta)


def test_sensitive_fitting_is_refused_unless_opted_out():
    d = 2
    X = torch.rand(4, d, dtype=torch.float64)
    model = SingleTaskGP(X, X.sum(-1, keepdim=True))  # Standardize by default
    with pytest.raises(ValueError, match="Standardize"):
        DPGIBO(nl_config(d=d, kernel=None, model=model))
    fit = lambda kernel, X, y: None  # noqa: E731
    with pytest.raises(ValueError, match="hyperparameter_fit"):
        DPGIBO(nl_config(d=d, hyperparameter_fit=fit))
    with pytest.warns(UserWarning, match="NO differential-privacy guarantee"):
        opt = DPGIBO(nl_config(d=d, kernel=None, model=model, unsafe_allow_sensitive_fitting=True))
    assert opt.guarantee().holds is False and opt.guarantee().mu == math.inf
    # a model without transforms is accepted; its kernel is copied and frozen
    plain = SingleTaskGP(X, X.sum(-1, keepdim=True), outcome_transform=None)
    opt = DPGIBO(nl_config(d=d, kernel=None, model=plain))
    assert all(not p.requires_grad for p in opt.kernel.parameters())


def test_an_unsafe_fit_is_recorded_before_it_reads_the_losses_and_every_output_says_no_guarantee():
    # issue 40, item 5: the opt-out's look at the losses is a release of mu = inf in the ledger (recorded
    # before the losses are read), so the statement, report, repr and JSON read off it say so
    x, objective = normal_location(n=10, d=2)
    seen = []

    def fit(kernel, X, y):
        seen.append([r.key for r in opt.ledger.validation.records()])

    with pytest.warns(UserWarning, match="NO differential-privacy guarantee"):
        opt = DPGIBO(
            nl_config(
                d=2,
                privacy_mu=1.0,
                num_iterations=2,
                seed=0,
                unsafe_allow_sensitive_fitting=True,
                hyperparameter_fit=fit,
            )
        )
    result = opt.run(objective, progress=False)
    assert seen == [["step-0000/fit"], ["step-0000/fit", "step-0000", "step-0001/fit"]]
    assert result.release.guarantee.holds is False and opt.ledger.validation.mu() == math.inf
    assert result.statement is not None and result.statement.holds is False
    for text in (result.guarantee_report(), repr(result)):
        assert "NO differential-privacy guarantee" in text and ")-DP" not in text
    written = json.loads(result.to_json())
    assert written["guarantee"]["ledger"]["holds"] is False and written["guarantee"]["this_run"]["holds"] is False
    assert written["guarantee"]["ledger"]["validation"]["epsilon"] == "inf"
    # a budget cannot hold a run without a guarantee: refused by name before anything runs
    with pytest.raises(ValueError, match="unsafe_allow_sensitive_fitting=True on a ledger with a validation budget"):
        DPGIBO(
            nl_config(d=2, privacy_mu=1.0, unsafe_allow_sensitive_fitting=True, hyperparameter_fit=fit),
            ledger=PrivacyLedger(validation_mu_budget=5.0),
        )


def test_budget_filter_refuses_before_release():
    x, objective = normal_location(n=10, d=2)
    calls = []

    def counted(X):
        calls.append(X.shape[0])
        return objective(X)

    opt = DPGIBO(nl_config(d=2, privacy_mu=1.0, num_iterations=4, validation_mu_budget=0.75))
    # each step is mu/sqrt(T) = 0.5: two steps (total ~0.707) fit, a third (0.866) does not, and is
    # refused when its batch is asked for: the objective is not called for it
    match = r"step 2 of run .* \(checked before its points are evaluated\).*remaining"
    with pytest.raises(PrivacyBudgetExceeded, match=match):
        opt.run(counted, progress=False)
    assert calls == [3, 3] and opt.iteration == 2 and opt.evaluation_points.shape[0] == 6
    assert opt.state.pending is None and len(opt.ledger.validation.records()) == 2


def test_a_ledger_that_cannot_pay_one_step_costs_no_evaluation():
    _, objective = normal_location(n=10, d=2)
    calls = []
    tight = PrivacyLedger(validation_mu_budget=0.3)  # one step is mu/sqrt(T) = 0.5
    opt = DPGIBO(nl_config(d=2, privacy_mu=1.0, num_iterations=4), ledger=tight)
    with pytest.raises(PrivacyBudgetExceeded, match="step 0 of run"):
        opt.run(lambda X: calls.append(X) or objective(X), progress=False)
    assert calls == [] and tight.validation.records() == [] and opt.iteration == 0
    assert tight.validation.remaining_mu() == pytest.approx(0.3)  # the check held nothing back


def test_tell_still_refuses_what_another_run_spent_after_the_ask():
    _, objective = normal_location(n=10, d=2)
    shared = PrivacyLedger(validation_mu_budget=0.6)
    first, second = (DPGIBO(nl_config(d=2, privacy_mu=1.0, num_iterations=4), ledger=shared) for _ in range(2))
    X = first.ask()  # admitted now: one step of 0.5 fits 0.6
    Y = second.ask()
    second.tell(Y, objective(Y))  # spends 0.5 of the shared budget
    with pytest.raises(PrivacyBudgetExceeded, match="Nothing was released"):
        first.tell(X, objective(X))  # 0.707 > 0.6: refused at the charge, before its draw
    assert len(shared.validation.records()) == 1 and first.iteration == 0


def test_diagnostics_are_opt_in_and_labelled():
    x, objective = normal_location(n=30, d=3)
    true_gradient = lambda T: T - x.mean(0)  # noqa: E731
    # a fixed noise seed: unseeded, about 1 run in 12 of the warm-started search ends at a bias near 1e-4
    cfg = nl_config(
        d=3, privacy_mu=1.0, clip_bound=100.0, num_iterations=5, record_non_private_diagnostics=True, seed=0
    )
    res = DPGIBO(cfg).run(objective, progress=False)
    diag = res.diagnostics
    assert diag.NON_PRIVATE
    assert diag.unnoised_gradients.shape == (5, 3) and diag.clip_fractions == [0.0] * 5
    # released = unnoised + noise, and the noise norm is recorded
    noise = res.release.released_gradients - diag.unnoised_gradients
    torch.testing.assert_close(noise.norm(dim=-1), torch.tensor(diag.noise_norms, dtype=torch.float64))
    # the loss lies in the degree-2 polynomial RKHS (10 features for d = 3): once D
    # pins down the quadratic and nobody is clipped, the GP gradient is exact (zero bias)
    bias = diag.bias_norms(res.release.iterates, true_gradient)
    assert bias.shape == (5,) and bias[0] > 1e-2 and bias[-1] < 1e-5
    # with a small clip bound most users are clipped
    cfg = nl_config(d=3, privacy_mu=1.0, clip_bound=0.1, num_iterations=2, record_non_private_diagnostics=True)
    diag = DPGIBO(cfg).run(objective, progress=False).diagnostics
    assert min(diag.clip_fractions) > 0.5


def test_first_batch_does_not_depend_on_the_data():
    _, obj_a = normal_location(seed=0)
    _, obj_b = normal_location(seed=1)
    cfg = nl_config(privacy_mu=1.0, num_iterations=2, seed=0)  # same public search stream
    a, b = DPGIBO(cfg), DPGIBO(cfg)
    Xa, Xb = a.ask(), b.ask()
    assert torch.equal(Xa, Xb)
    a.tell(Xa, obj_a(Xa))
    b.tell(Xb, obj_b(Xb))
    assert not torch.equal(a.theta, b.theta)
