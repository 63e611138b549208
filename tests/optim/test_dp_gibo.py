import math
import warnings

import pytest
import torch
from botorch.models import SingleTaskGP
from gpytorch.kernels import PolynomialKernel, RBFKernel

from botorch.optim import optimize_acqf

from botorch_dp.acquisition import qGradientInformation
from botorch_dp.optim.dp_gibo import DPGIBO, DPGIBOConfig
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.ledger import PrivacyBudgetExceeded

FAST = dict(num_restarts=2, raw_samples=32)


def normal_location(n=50, d=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = 1 + torch.randn(n, d, generator=g, dtype=torch.float64)

    def objective(X):
        return 0.5 * (X[:, None, :] - x[None]).pow(2).sum(-1)

    return x, objective


def poly_kernel():
    k = PolynomialKernel(power=2)
    k.offset = 1.0
    return k


def rbf_kernel(d, ls=1.0):
    k = RBFKernel(ard_num_dims=d)
    k.lengthscale = ls
    return k


def nl_config(d=5, **kw):
    base = dict(
        bounds=torch.tensor([[-2.0] * d, [4.0] * d], dtype=torch.float64),
        kernel=poly_kernel(),
        num_iterations=20,
        privacy_mu=math.inf,
        clip_bound=10.0,
        step_size=0.5,
        batch_size=3,
        theta0=torch.zeros(d, dtype=torch.float64),
        search_radius=0.5,
        **FAST,
    )
    base.update(kw)
    return DPGIBOConfig(**base)


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
        kernel=rbf_kernel(d, 0.5), num_iterations=12, privacy_mu=math.inf, clip_bound=10.0,
        step_size=0.05, bias_tolerance=eps, search_radius=0.05, noise_variance=1e-6, **FAST,
    )
    opt = DPGIBO(cfg)
    res = opt.run(objective, progress=False)
    sizes, traces = res.release.batch_sizes, res.release.posterior_traces
    assert all(b <= bmax for b in sizes)
    assert all(t <= eps or b == bmax for t, b in zip(traces, sizes))
    # information carries over: later iterations need fewer new points
    assert sizes[0] == max(sizes)
    assert sum(sizes[-4:]) / 4 < sizes[0]
    assert sum(sizes) == res.release.evaluation_points.shape[0]


def _first_batch_trace(cfg):
    opt = DPGIBO(cfg)
    X = opt.ask()
    gp = GradientGP(X, opt.kernel, opt.noise_variance)
    return X, float(gp.posterior_trace(opt.theta))


def test_joint_batches_carry_more_gradient_information_than_greedy():
    d = 6
    traces = {}
    for selection in ("joint", "greedy"):
        cfg = DPGIBOConfig(
            bounds=torch.tensor([[0.0] * d, [5.0] * d], dtype=torch.float64), kernel=rbf_kernel(d),
            batch_size=d + 1, search_radius=0.5, noise_variance=1e-4, batch_selection=selection, **FAST,
        )
        X, traces[selection] = _first_batch_trace(cfg)
        assert X.shape == (d + 1, d)
    # a lone point says little about the gradient, so picking one at a time is myopic
    assert traces["joint"] < 0.5 * traces["greedy"], traces


def test_adaptive_joint_batch_is_the_smallest_that_reaches_the_tolerance():
    d, eps = 3, 0.3
    kw = dict(
        bounds=torch.tensor([[0.0] * d, [5.0] * d], dtype=torch.float64), kernel=rbf_kernel(d),
        bias_tolerance=eps, search_radius=0.5, noise_variance=1e-4, **FAST,
    )
    X, trace = _first_batch_trace(DPGIBOConfig(**kw))
    q = X.shape[0]
    assert 1 < q <= d + 1 and trace <= eps
    # brute force: a well-searched joint batch of q - 1 points does not reach eps
    opt = DPGIBO(DPGIBOConfig(**kw))
    acqf = qGradientInformation(GradientGP(opt.evaluation_points, opt.kernel, 1e-4), opt.theta)
    torch.manual_seed(0)
    Xs, _ = optimize_acqf(acqf, opt.local_bounds(), q=q - 1, num_restarts=16, raw_samples=1024)
    assert float(GradientGP(Xs, opt.kernel, 1e-4).posterior_trace(opt.theta)) > eps
    # greedy selection needs at least as many points for the same tolerance
    Xg, trace_g = _first_batch_trace(DPGIBOConfig(batch_selection="greedy", **kw))
    assert Xg.shape[0] >= q and (trace_g <= eps or Xg.shape[0] == d + 1)


def test_resume_reproduces_uninterrupted_run(tmp_path):
    x, objective = normal_location(n=20, d=3)
    cfg = nl_config(d=3, privacy_mu=1.0, clip_bound=2.0, num_iterations=8, step_rule="adagrad", seed=7)
    full = DPGIBO(cfg).run(objective, progress=False)

    opt = DPGIBO(cfg, checkpoint_dir=tmp_path)
    opt.run(objective, progress=False, callback=lambda info: info.iteration == 3)
    assert opt.iteration == 3
    # crash after ask() but before tell(): the pending points survive the restart
    pending = opt.ask()
    del opt
    opt = DPGIBO.resume(tmp_path)
    assert opt.iteration == 3
    assert torch.equal(opt.ask(), pending)
    resumed = opt.run(objective, progress=False)
    assert torch.equal(resumed.release.iterates, full.release.iterates)
    assert torch.equal(resumed.release.evaluation_points, full.release.evaluation_points)
    assert resumed.release.batch_sizes == full.release.batch_sizes
    # no step counted twice
    assert len(opt.ledger.validation_steps) == 8
    assert math.isclose(resumed.release.guarantee.mu, 1.0, rel_tol=1e-9)
    assert not list(tmp_path.glob("*.tmp"))


def test_bad_losses_are_refused_without_losing_evaluations():
    x, objective = normal_location(n=10, d=2)
    opt = DPGIBO(nl_config(d=2, privacy_mu=1.0, num_iterations=3))
    X = opt.ask()
    good = objective(X)
    opt.tell(X, good)
    X = opt.ask()
    noise_state = opt._noise_gen.get_state()
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
    assert torch.equal(opt._noise_gen.get_state(), noise_state)
    assert len(opt.ledger.validation_steps) == 1
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
    assert opt.iteration == 0 and opt.ledger.validation_mu() == 0.0
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
        (dict(batch_selection="random"), "batch_selection"),
    ],
)
def test_config_refusals(kw, match):
    with pytest.raises(ValueError, match=match):
        DPGIBO(nl_config(**kw))


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


def test_budget_filter_refuses_before_release():
    x, objective = normal_location(n=10, d=2)
    opt = DPGIBO(nl_config(d=2, privacy_mu=1.0, num_iterations=4, privacy_budget_mu=0.75))
    # each step is mu/sqrt(T) = 0.5: two steps (total ~0.707) fit, a third (0.866) does not
    for _ in range(2):
        X = opt.ask()
        opt.tell(X, objective(X))
    X = opt.ask()
    with pytest.raises(PrivacyBudgetExceeded, match="remaining"):
        opt.tell(X, objective(X))
    assert opt.iteration == 2 and opt.evaluation_points.shape[0] == 6


def test_diagnostics_are_opt_in_and_labelled():
    x, objective = normal_location(n=30, d=3)
    true_gradient = lambda T: T - x.mean(0)  # noqa: E731
    cfg = nl_config(d=3, privacy_mu=1.0, clip_bound=100.0, num_iterations=5, record_non_private_diagnostics=True)
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
    cfg = nl_config(privacy_mu=1.0, num_iterations=2)
    a, b = DPGIBO(cfg), DPGIBO(cfg)
    Xa, Xb = a.ask(), b.ask()
    assert torch.equal(Xa, Xb)
    a.tell(Xa, obj_a(Xa))
    b.tell(Xb, obj_b(Xb))
    assert not torch.equal(a.theta, b.theta)


def test_training_runs_in_a_shared_ledger_survive_resume(tmp_path):
    """An objective that trains with DP records runs in the loop's ledger; resume keeps them once."""
    from botorch_dp.privacy.ledger import PrivacyLedger

    x, losses = normal_location(n=20, d=2)

    def make_objective(ledger):
        def objective(X):
            for row in X:  # one (pretend) DP-SGD training run per evaluated point
                ledger.record_training_run(
                    run_id=repr(row.tolist()), noise_multiplier=1.1, sample_rate=0.01, steps=100
                )
            return losses(X)

        return objective

    cfg = nl_config(d=2, privacy_mu=1.0, clip_bound=2.0, num_iterations=4, seed=3)
    ref_ledger = PrivacyLedger()
    DPGIBO(cfg, ledger=ref_ledger).run(make_objective(ref_ledger), progress=False)

    ledger = PrivacyLedger()
    opt = DPGIBO(cfg, checkpoint_dir=tmp_path, ledger=ledger)
    opt.run(make_objective(ledger), progress=False, callback=lambda info: info.iteration == 2)
    X = opt.ask()
    make_objective(ledger)(X)  # evaluated (and trained) but the process dies before tell()
    ledger2 = PrivacyLedger()
    opt = DPGIBO.resume(tmp_path, ledger=ledger2)
    assert opt.ledger is ledger2
    opt.run(make_objective(ledger2), progress=False)  # re-evaluates the pending points
    assert len(ledger2.training_runs) == len(ref_ledger.training_runs) == 12
    assert math.isclose(ledger2.training_epsilon(1e-5), ref_ledger.training_epsilon(1e-5))
    assert len(ledger2.validation_steps) == 4
    with pytest.raises(ValueError, match="budget on the ledger"):
        DPGIBO(nl_config(d=2, privacy_budget_mu=1.0), ledger=PrivacyLedger())
