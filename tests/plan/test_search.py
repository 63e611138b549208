r"""``botorch_dp.plan.search``: the candidates are the proxy's norm quantiles (recomputed
independently), the recommendation is the best trial, the planned config runs privately at
exactly its budget, a batch rule that is clearly better on the proxy is the one chosen, and bad
arguments are refused before the proxy is called."""

import copy
import math
import warnings

import pytest
import torch

from botorch_dp import DPGIBO
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.optim.config import resolve_model
from botorch_dp.plan import plan_private_run
from botorch_dp.privacy.analysis.gdp import gdp_mu
from botorch_dp.privacy.mechanisms import count_within_clip
from botorch_dp.privacy.seeding import PrivacyWarning
from tests.optim.loop_helpers import normal_location

from .plan_helpers import N_PRIVATE, N_PROXY, D
from .plan_helpers import plan_config as _config


@pytest.fixture(scope="module")
def planned():
    _, proxy = normal_location(n=N_PROXY, d=D, seed=1)
    calls = []

    def counted(X):
        calls.append(X.shape[0])
        return proxy(X)

    plan = plan_private_run(
        counted,
        _config(),
        num_users=N_PRIVATE,
        clip_quantiles=(0.5, 0.9),
        step_sizes=(0.5,),
        num_repeats=1,
    )  # it plans the settings only: the method choice is methods.choice's (tests/methods/test_choice.py)
    return plan, proxy, calls


def test_candidates_are_the_proxy_norm_quantiles(planned):
    plan, proxy, _ = planned
    config = plan.config
    kernel, noise, _ = resolve_model(config)
    theta0 = config.theta0
    A = GradientGP(plan.gradient_points, kernel, noise, jitter=config.jitter).gradient_weights(theta0)
    Y = proxy(plan.gradient_points)
    norms = (A @ Y).norm(dim=0)
    for gamma, bound in plan.norm_quantiles.items():
        assert bound == pytest.approx(float(torch.quantile(norms, gamma)), rel=1e-12)
        assert count_within_clip(A, Y, bound) >= math.ceil(gamma * N_PROXY) - 1
    assert [t.clip_bound for t in plan.trials] == list(plan.norm_quantiles.values())
    assert plan.num_proxy_users == N_PROXY and plan.num_users == N_PRIVATE


def test_recommendation_is_the_best_trial_and_the_noise_is_the_private_one(planned):
    plan, _, calls = planned
    assert len(plan.trials) == 2 and all(len(t.proxy_losses) == 1 for t in plan.trials)
    best = plan.trials[plan.best]
    assert best.mean_proxy_loss == min(t.mean_proxy_loss for t in plan.trials)
    c = plan.config
    assert (c.clip_bound, c.step_size, c.num_iterations) == (best.clip_bound, best.step_size, best.num_iterations)
    assert (c.epsilon, c.delta, c.seed) == (1.0, 1e-5, None)  # the private settings are kept
    assert (c.batch_size, c.bias_tolerance) == (3, None) and all(t.bias_tolerance is None for t in plan.trials)
    mu = gdp_mu(1.0, 1e-5)
    for t in plan.trials:  # σ = 2B√T/(nμ) at the PRIVATE n and μ
        assert t.noise_std == pytest.approx(
            2 * t.clip_bound * math.sqrt(t.num_iterations) / (N_PRIVATE * mu), rel=1e-12
        )
    assert "*" in plan.table() and f"{N_PROXY} users" in str(plan)
    # without the method choice DP-GIBO with the planned config is the method, and nothing is compared
    assert plan.methods is None and plan.recommended_method.config is plan.config
    assert plan.recommended_method.name == "dp_gibo" and "method choice" not in str(plan)
    # the proxy answers: the 10 d kernel-fit points, one probe batch, then per run T batches
    # and the returned iterate; then the settings passed in: a probe batch and one run
    assert calls[0] == 10 * D and len(calls) == 2 + len(plan.trials) * (2 + 1) + 1 + (2 + 1)


def test_the_planned_config_runs_privately_at_exactly_its_budget(planned):
    plan, _, _ = planned
    _, private = normal_location(n=N_PRIVATE, d=D, seed=2)
    opt = DPGIBO(plan.config)
    result = opt.run(private, progress=False)
    assert result.release.guarantee.epsilon == pytest.approx(1.0, rel=1e-9)
    assert result.release.noise_stds[0] == pytest.approx(plan.trials[plan.best].noise_std, rel=1e-12)


def test_adaptive_clip_plans_the_starting_bound():
    _, proxy = normal_location(n=N_PROXY, d=D, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)  # the plan's simulated seeds stay silent
        plan = plan_private_run(
            proxy,
            _config(clip_bound="adaptive"),
            num_users=N_PRIVATE,
            clip_quantiles=(0.5,),
            step_sizes=(0.5,),
            num_repeats=1,
        )
    assert plan.config.clip_bound == "adaptive" and plan.config.clip_init == plan.norm_quantiles[0.5]


def test_a_clearly_better_batch_rule_is_chosen():
    # b = 1 point per step pins down a 2-d gradient badly; a tiny bias tolerance asks for
    # b_max = d + 1 = 3 per step: the fixed rule (tried first, so ties would pick it) loses
    _, proxy = normal_location(n=N_PROXY, d=D, seed=1)
    config = _config(num_iterations=2, batch_size=1, acqf_maxiter=20)
    user_kernel = copy.deepcopy(config.kernel.state_dict())
    plan = plan_private_run(
        proxy,
        config,
        num_users=N_PRIVATE,
        clip_quantiles=(0.9,),
        step_sizes=(0.5,),
        num_repeats=1,
        bias_tolerances=(None, 1e-3),
        fit_kernel=False,
    )
    fixed, adaptive = plan.trials
    assert (fixed.bias_tolerance, adaptive.bias_tolerance) == (None, 1e-3)
    assert adaptive.mean_proxy_loss < fixed.mean_proxy_loss - 0.2
    assert plan.best == 1 and (plan.config.bias_tolerance, plan.config.batch_size) == (1e-3, None)
    assert plan.config.clip_bound == adaptive.clip_bound and "tol 0.001" in plan.table()
    # without the fit the config's kernel is kept as it was
    assert plan.kernel_fit is None and all(
        torch.equal(user_kernel[k], v) for k, v in plan.config.kernel.state_dict().items()
    )
    assert "not fitted" in str(plan)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (dict(num_users=1), "num_users"),
        (dict(clip_quantiles=()), "clip_quantiles"),
        (dict(clip_quantiles=(1.5,)), "clip_quantiles"),
        (dict(step_sizes=(-1.0,)), "step_sizes"),
        (dict(num_iterations=(0,)), "num_iterations"),
        (dict(num_repeats=0), "num_repeats"),
        (dict(seed=-1), "seed"),
        (dict(bias_tolerances=()), "bias_tolerances"),
        (dict(bias_tolerances=(None, -1.0)), "bias_tolerances"),
        (dict(bias_tolerances=(math.nan,)), "bias_tolerances"),
        (dict(bias_tolerances=(100.0,)), "bias_tolerances"),  # above the prior gradient trace
        (dict(fit_kernel="yes"), "fit_kernel"),
        (dict(choose_method=1), "choose_method"),
        (dict(methods=()), "methods"),
        (dict(methods=("dp_gibo",)), "methods"),
        (dict(kernel_fit_points=1), "kernel_fit_points"),
        (dict(kernel_fit_points=2.5), "kernel_fit_points"),
        (dict(kernel_fit_radius=-1.0), "kernel_fit_radius"),
        (dict(kernel_fit_radius=torch.ones(3)), "kernel_fit_radius"),
    ],
)
def test_bad_arguments_are_refused_naming_them(kw, match):
    _, proxy = normal_location(n=N_PROXY, d=D)
    calls = []

    def counted(X):
        calls.append(X.shape[0])
        return proxy(X)

    args = dict(num_users=N_PRIVATE) | kw
    with pytest.raises(ValueError, match=match):
        plan_private_run(counted, _config(), **args)
    # refused before the proxy is called, except the trace check, which needs the fitted kernel
    assert calls == ([10 * D] if kw.get("bias_tolerances") == (100.0,) else [])


def test_a_plan_whose_best_setting_is_mostly_noise_warns_with_its_ratio():
    from botorch_dp.optim.public_checks import SettingsWarning

    _, proxy = normal_location(n=N_PROXY, d=D, seed=1)
    kw = dict(num_users=N_PRIVATE, clip_quantiles=(0.5, 0.9), step_sizes=(0.5,), num_repeats=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan = plan_private_run(proxy, _config(epsilon=0.05), **kw)  # μ ≈ 0.012 for 120 users
    noisy = [str(w.message) for w in caught if issubclass(w.category, SettingsWarning)]
    ratio = plan.trials[plan.best].noise_to_signal
    assert ratio >= 1 and len(noisy) == 1 and f"noise-to-signal ratio {ratio:.3g}" in noisy[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan = plan_private_run(proxy, _config(epsilon=8.0), **kw)
    assert plan.trials[plan.best].noise_to_signal < 1
    assert not [w for w in caught if issubclass(w.category, SettingsWarning)]


def test_the_settings_passed_in_are_simulated_as_they_are_and_shown_next_to_the_recommendation(capsys):
    from botorch_dp.methods.proxy import simulation_config
    from botorch_dp.utils import child_seeds

    _, proxy = normal_location(n=N_PROXY, d=D, seed=1)
    config = _config(clip_bound=0.7, step_size=0.25)
    plan = plan_private_run(
        proxy,
        config,
        num_users=N_PRIVATE,
        clip_quantiles=(0.5, 0.9),
        step_sizes=(0.5,),
        num_repeats=2,
        progress=True,
    )
    given = plan.given
    assert (given.clip_bound, given.step_size, given.num_iterations) == (0.7, 0.25, config.num_iterations)
    # brute force: the same simulated runs by hand (the config's own kernel, not the fitted one)
    expected = []
    for s in child_seeds([0], 2):
        sim = simulation_config(config, N_PRIVATE, N_PROXY, seed=s, clip_bound=0.7)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theta = DPGIBO(sim).run(proxy, progress=False).release.theta
        expected.append(float(proxy(theta.unsqueeze(0)).mean()))
    assert given.proxy_losses == tuple(expected)
    assert plan.table().splitlines()[-1].startswith("g ") and "the settings passed (g)" in str(plan)
    se = math.sqrt(sum((x - given.mean_proxy_loss) ** 2 for x in expected) / 2)  # sd/√r with r = 2
    assert f"{given.mean_proxy_loss:.5g} +- {se:.2g}" in str(plan)
    assert "planning on the proxy" in capsys.readouterr().err  # the progress bar
    one = plan_private_run(
        proxy,
        config,
        num_users=N_PRIVATE,
        clip_quantiles=(0.5,),
        step_sizes=(0.5,),
        num_repeats=1,
        progress=False,
    )
    assert " n/a " in one.table()  # one repeat has no spread to show


def _spied(monkeypatch):
    r"""Every method's ``simulate`` and the comparison entry (``methods.choice.compare_in_context``) record
    their calls; the real ones run."""
    import botorch_dp.methods.choice as choice
    from botorch_dp.methods.dp_gibo import DPGIBOMethod
    from botorch_dp.methods.dp_hypo import DPHyPOMethod
    from botorch_dp.methods.private_random_search import PrivateRandomSearchMethod

    calls = []
    for cls in (DPGIBOMethod, PrivateRandomSearchMethod, DPHyPOMethod):

        def simulate(self, *args, _original=cls.simulate, **kwargs):
            calls.append(("simulate", self.name))
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "simulate", simulate)

    def compare(*args, _original=choice.compare_in_context, **kwargs):
        calls.append(("compare", None))
        return _original(*args, **kwargs)

    monkeypatch.setattr(choice, "compare_in_context", compare)
    return calls


def test_the_plan_plans_settings_only_and_the_old_method_switch_is_deprecated(monkeypatch):
    from botorch_dp.methods.proxy_split import ProxySplit
    from botorch_dp.tuning.mixed_methods import plan_and_compare

    calls = _spied(monkeypatch)
    _, proxy = normal_location(n=N_PROXY, d=D, seed=1)
    kw = dict(num_users=N_PRIVATE, clip_quantiles=(0.9,), step_sizes=(0.5,), num_repeats=2, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        warnings.simplefilter("error", DeprecationWarning)  # the default path uses nothing deprecated
        plan = plan_private_run(proxy, _config(), **kw)
    # DP-GIBO's settings only: no method simulated, nothing compared, every proxy user read (no split)
    assert calls == [] and plan.methods is None and plan.proxy_split is None and plan.num_proxy_users == N_PROXY
    assert plan.recommended_method.name == "dp_gibo" and plan.recommended_method.config is plan.config
    # the old switch still works, with a DeprecationWarning, through the methods layer: the same plan
    # and comparison as tune's (tuning.mixed_methods.plan_and_compare -> methods.choice.plan_then_compare)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        with pytest.warns(DeprecationWarning, match=r"plan_private_run\(choose_method"):
            old = plan_private_run(proxy, _config(), choose_method=True, **kw)
        assert ("compare", None) in calls and ("simulate", "private_random_search") in calls
        new = plan_and_compare(proxy, _config(), **kw)
    assert old.proxy_split == new.proxy_split == ProxySplit(0) and old.num_proxy_users == N_PROXY // 2
    assert [t.proxy_losses for t in old.trials] == [t.proxy_losses for t in new.trials]
    assert [(s.name, s.proxy_losses, s.evaluations) for s in old.methods.scores] == [
        (s.name, s.proxy_losses, s.evaluations) for s in new.methods.scores
    ]
    assert old.methods.best == new.methods.best and old.methods.table() == new.methods.table()
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="choose_method must be True or False"):
        plan_private_run(proxy, _config(), choose_method="yes", **kw)
