r"""botorch_dp.integrations.ax (issue 32, item 4): the GIBO acquisition in Ax with joint batches, a
centre that moves without rebuilding, no fit on the outcomes, settings checked with their values,
and the how-to page that runs; its private run (issue 43 item 5: DP-GIBO's ask/tell decides, the
ledger charges, Ax tracks the trials without their losses) is run here as written.

ax-platform is a test dependency (the ``dev`` extra): nothing here is skipped.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import math
import warnings
from pathlib import Path

import pytest
import torch
from ax.api.client import Client
from ax.api.configs import RangeParameterConfig
from ax.core.parameter import ParameterType, RangeParameter
from ax.core.search_space import SearchSpace
from ax.generators.torch.botorch_modular import acquisition as ax_acquisition

from botorch_dp.acquisition import qGradientInformation
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.integrations import ax as integration
from botorch_dp.integrations.ax import MIN_NOISE, AxGIBO, PublicKernelGP, default_kernel
from botorch_dp.privacy.analysis.gdp import gdp_mu
from botorch_dp.utils import torch_threads

from ..test_docs import RUN_IN, python_blocks
from .test_ax_theta import space_lr_dropout

F64 = torch.float64
ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------- settings
def test_settings_are_checked_before_anything_is_built():
    space = space_lr_dropout()
    zero = default_kernel(2)
    zero.outputscale = 0.0
    with pytest.raises(ValueError, match=r"kernel has outputscale 0\.0: the prior has no variance"):
        AxGIBO(space, {"lr": 1e-3, "dropout": 0.2}, kernel=zero)
    with pytest.raises(ValueError, match="ard_num_dims=3, the search space has d=2"):
        AxGIBO(space, {"lr": 1e-3, "dropout": 0.2}, kernel=default_kernel(3))
    with pytest.raises(ValueError, match=r"search_radius must be .* got -0\.1"):
        AxGIBO(space, {"lr": 1e-3, "dropout": 0.2}, search_radius=-0.1)
    with pytest.raises(ValueError, match="batch_size must be a positive integer, got 0"):
        AxGIBO(space, {"lr": 1e-3, "dropout": 0.2}, batch_size=0)
    with pytest.raises(ValueError, match=r"noise_variance must be a finite number >= 0, got -1"):
        AxGIBO(space, {"lr": 1e-3, "dropout": 0.2}, noise_variance=-1)
    with pytest.raises(ValueError, match=r"theta\[0\] \(lr\) = 0\.5 in Ax units"):
        AxGIBO(space, [0.5, 0.5], units="ax")
    with pytest.raises(RuntimeError, match=r"client\.set_generation_strategy\(gibo\.generation_strategy\) first"):
        AxGIBO(space, {"lr": 1e-3, "dropout": 0.2}).get_next_trials()
    other = _client()
    gibo = AxGIBO(space_lr_dropout(with_fixed=False), {"lr": 1e-3, "dropout": 0.2})
    other.set_generation_strategy(gibo.generation_strategy)
    gibo.get_next_trials(1)  # the client's space is this one
    narrower = AxGIBO(
        SearchSpace(
            parameters=[
                RangeParameter("lr", ParameterType.FLOAT, 1e-4, 1e-2, log_scale=True),
                RangeParameter("dropout", ParameterType.FLOAT, 0.0, 0.5),
            ]
        ),
        {"lr": 1e-3, "dropout": 0.2},
    )
    other.set_generation_strategy(narrower.generation_strategy)
    with pytest.raises(
        ValueError,
        match=r"search space AxThetaSpace\(\[lr in \[0\.0001, 0\.1\] \(log scale\), dropout in \[0, 0\.5\]\], "
        r"fixed=\{\}\) is not the one AxGIBO was built for, AxThetaSpace\(\[lr in \[0\.0001, 0\.01\]",
    ):
        narrower.get_next_trials()


# ---------------------------------------------------------------------- Ax runs
def _loss(p: dict) -> float:
    r"""Closed form, minimum at lr = 1e-2, dropout = 0.1 (unit cube (2/3, 0.2))."""
    return (math.log10(p["lr"]) + 2.0) ** 2 + 4.0 * (p["dropout"] - 0.1) ** 2


def _client(seed: int = 0) -> Client:
    client = Client(random_seed=seed)
    client.configure_experiment(
        parameters=[
            RangeParameterConfig(name="lr", parameter_type="float", bounds=(1e-4, 1e-1), scaling="log"),
            RangeParameterConfig(name="dropout", parameter_type="float", bounds=(0.0, 0.5)),
        ]
    )
    client.configure_optimization(objective="-loss")
    return client


class _CountingOptimizer:
    r"""Wraps ``optimize_acqf``: how often it runs, with which ``q``, bounds and acquisition."""

    def __init__(self, original):
        self.original, self.calls = original, []

    def __call__(self, *args, **kwargs):
        acqf = kwargs.get("acq_function", args[0] if args else None)
        bounds = kwargs.get("bounds", args[1] if len(args) > 1 else None)
        self.calls.append(
            {"q": kwargs["q"], "sequential": kwargs.get("sequential", False), "acqf": acqf, "bounds": bounds.clone()}
        )
        return self.original(*args, **kwargs)


@pytest.fixture
def counting(monkeypatch):
    r"""Count both paths' ``optimize_acqf`` calls (the prior batch's and Ax's ``Acquisition.optimize``)."""
    ours, axs = _CountingOptimizer(integration.optimize_acqf), _CountingOptimizer(ax_acquisition.optimize_acqf)
    monkeypatch.setattr(integration, "optimize_acqf", ours)
    monkeypatch.setattr(ax_acquisition, "optimize_acqf", axs)
    return ours, axs


def _complete(client: Client, trials: dict, scale: float = 1.0, shift: float = 0.0) -> None:
    for index, params in trials.items():
        client.complete_trial(index, raw_data={"loss": scale * _loss(params) + shift})


def test_each_batch_is_one_joint_optimization_and_moving_theta_rebuilds_nothing(counting):
    ours, axs = counting
    torch.manual_seed(0)
    client = _client()
    gibo = AxGIBO(
        client, {"lr": 1e-3, "dropout": 0.2}, batch_size=4, noise_variance=1e-2, num_restarts=2, raw_samples=32
    )
    strategy, spec = gibo.generation_strategy, gibo._spec
    first = gibo.get_next_trials()  # no data yet: the prior's batch
    assert len(first) == 4 and [(c["q"], c["sequential"]) for c in ours.calls] == [(4, False)] and axs.calls == []
    _complete(client, first)
    theta = gibo.move_to({"lr": 2e-3, "dropout": 0.25})
    torch.testing.assert_close(theta, torch.tensor([(math.log10(2e-3) + 4) / 3, 0.5], dtype=F64))
    assert gibo.generation_strategy is strategy and gibo._spec is spec  # nothing rebuilt
    assert spec.generator_gen_kwargs["model_gen_options"]["acquisition_function_kwargs"]["theta"] == theta.tolist()
    second = gibo.get_next_trials()  # Ax's BoTorchGenerator: one optimize_acqf call for 4 points
    assert [(c["q"], c["sequential"]) for c in axs.calls] == [(4, False)] and len(ours.calls) == 1
    assert len(second) == 4 and not set(second) & set(first)
    box = torch.stack([theta - 0.1, theta + 0.1])
    torch.testing.assert_close(axs.calls[0]["bounds"], box)  # the local box around the NEW θ
    for index, params in second.items():
        u = gibo.space.to_unit(params)
        assert ((u >= box[0] - 1e-9) & (u <= box[1] + 1e-9)).all()
        trial = client._experiment.trials[index]
        assert trial.status.is_running and trial.generator_runs[0]._generation_node_name == "gibo"
        assert trial.generator_runs[0].gen_metadata == {
            "gibo_theta": theta.tolist(),
            "gibo_batch_size": 4,
            "gibo_source": "ax",
        }
    # Ax's own Client.get_next_trials builds a batch one point at a time: the reason for gibo.get_next_trials
    _complete(client, second)
    client.get_next_trials(max_trials=3)
    assert [c["q"] for c in axs.calls[1:]] == [1, 1, 1]


def test_axs_acquisition_is_the_criterion_on_the_unit_cube_with_the_public_kernel(counting):
    _, axs = counting
    torch.manual_seed(1)
    client = _client()
    kernel = default_kernel(2, lengthscale=0.3, outputscale=2.0)
    gibo = AxGIBO(
        client,
        [0.4, 0.6],
        units="unit",
        kernel=kernel,
        noise_variance=0.05,
        search_radius=[0.1, 0.2],
        batch_size=3,
        num_restarts=2,
        raw_samples=32,
    )
    done = gibo.get_next_trials()
    _complete(client, done)
    gibo.get_next_trials()
    acqf = axs.calls[0]["acqf"]
    assert isinstance(acqf, qGradientInformation)
    torch.testing.assert_close(axs.calls[0]["bounds"], torch.tensor([[0.3, 0.4], [0.5, 0.8]], dtype=F64))
    # the same criterion computed independently: a GradientGP on the evaluated points in unit-cube coordinates
    X = torch.stack([gibo.space.to_unit(p) for p in done.values()])
    direct = qGradientInformation(GradientGP(X, kernel, 0.05), torch.tensor([0.4, 0.6], dtype=F64))
    Z = torch.rand(16, 3, 2, generator=torch.Generator().manual_seed(2), dtype=F64)
    with torch.no_grad():
        torch.testing.assert_close(acqf(Z), direct(Z), rtol=1e-8, atol=1e-12)
    # Ax did not fit the public hyperparameters to the outcomes
    model = gibo._spec.fitted_adapter.generator.surrogate.model
    assert isinstance(model, PublicKernelGP)
    torch.testing.assert_close(model.covar_module.base_kernel.lengthscale, torch.full((1, 2), 0.3, dtype=F64))
    torch.testing.assert_close(model.covar_module.outputscale, torch.tensor(2.0, dtype=F64))
    torch.testing.assert_close(model.likelihood.noise, torch.full((3,), 0.05, dtype=F64))


def test_the_points_chosen_do_not_depend_on_the_outcomes():
    batches = []
    for scale, shift in ((1.0, 0.0), (1000.0, 7.0)):
        torch.manual_seed(3)
        client = _client()
        gibo = AxGIBO(
            client, {"lr": 1e-3, "dropout": 0.2}, batch_size=3, noise_variance=MIN_NOISE, num_restarts=2, raw_samples=32
        )
        _complete(client, gibo.get_next_trials(), scale, shift)
        batches.append([gibo.space.to_unit(p) for p in gibo.get_next_trials().values()])
    torch.testing.assert_close(torch.stack(batches[0]), torch.stack(batches[1]), rtol=0, atol=0)


def test_a_client_run_moves_the_centre_down_a_closed_form_loss():
    r"""GIBO through Ax: each round a joint batch, the GP's gradient at θ, a step, ``move_to``."""
    torch.manual_seed(4)
    client = _client()
    gibo = AxGIBO(
        client, {"lr": 1e-3, "dropout": 0.4}, batch_size=3, noise_variance=1e-4, num_restarts=2, raw_samples=32
    )
    X, Y, losses = [], [], [_loss(gibo.parameters)]
    for _ in range(4):
        centre = gibo.theta.clone()
        for index, params in gibo.get_next_trials().items():
            u = gibo.space.to_unit(params)
            assert (u - centre).abs().max() <= 0.1 + 1e-9  # inside the box around this round's θ
            y = _loss(params)
            client.complete_trial(index, raw_data={"loss": y})
            X.append(u)
            Y.append(y)
        Yt = torch.tensor(Y, dtype=F64)
        gp = GradientGP(torch.stack(X), gibo.kernel, 1e-4, Yt, mean_constant=float(Yt.mean()))
        g = gp.posterior(gibo.theta).mean
        gibo.move_to((gibo.theta - 0.1 * g / g.norm()).clamp(0, 1), units="unit")
        losses.append(_loss(gibo.parameters))
    assert all(b < a for a, b in itertools.pairwise(losses)), losses
    assert losses[-1] < 0.5 * losses[0], losses
    assert len(client._experiment.trials) == 12
    optimum = torch.tensor([2 / 3, 0.2], dtype=F64)
    assert (gibo.theta - optimum).norm() < (torch.tensor([1 / 3, 0.8], dtype=F64) - optimum).norm() - 0.2


# ---------------------------------------------------------------------- packaging and docs
def test_ax_is_an_extra_and_ci_installs_it():
    from setuptools.config.setupcfg import read_configuration

    extras = read_configuration(ROOT / "setup.cfg")["options"]["extras_require"]
    assert "ax-platform>=1.3,<2" in extras["ax"] and "ax-platform>=1.3,<2" in extras["dev"]


@pytest.mark.privacy_fast
def test_the_model_ax_builds_is_never_fitted_and_its_criterion_reads_no_outcome():
    # the fast twin of test_the_points_chosen_do_not_depend_on_the_outcomes (issue 40, item 6): the model
    # Ax builds from two sets of outcomes, after the fit Ax runs on every model it builds, keeps the public
    # kernel, and the criterion's values (which choose the points) are the same bit for bit
    from ax.generators.torch.botorch_modular.utils import fit_botorch_model
    from gpytorch.mlls import ExactMarginalLogLikelihood

    g = torch.Generator().manual_seed(0)
    X = torch.rand(6, 2, generator=g, dtype=F64)
    kernel = default_kernel(2, lengthscale=0.3, outputscale=2.0)
    theta = torch.tensor([0.4, 0.6], dtype=F64)
    candidates = torch.rand(5, 3, 2, generator=g, dtype=F64)  # 5 batches of q = 3 points
    values = []
    for Y in (X.sum(-1, keepdim=True), 1000.0 * torch.randn(6, 1, generator=g, dtype=F64) + 7.0):
        model = PublicKernelGP(
            **PublicKernelGP.construct_inputs(_TrainingData(X, Y), kernel=kernel, noise_variance=0.05)
        )
        fit_botorch_model(model, mll_class=ExactMarginalLogLikelihood)
        torch.testing.assert_close(model.covar_module.base_kernel.lengthscale, torch.full((1, 2), 0.3, dtype=F64))
        torch.testing.assert_close(model.covar_module.outputscale, torch.tensor(2.0, dtype=F64))
        values.append(qGradientInformation(model, theta)(candidates))
    torch.testing.assert_close(values[0], values[1], rtol=0, atol=0)


class _TrainingData:
    r"""What ``PublicKernelGP.construct_inputs`` reads of Ax's training data: ``X`` and ``Y``."""

    def __init__(self, X, Y):
        self.X, self.Y = X, Y


def test_the_pages_private_run_tracks_in_ax_only_the_asked_points_and_charges_the_target():
    r"""docs/how-to/ax.md's private run, as written: Ax holds exactly the points DP-GIBO asked, in
    order and with no loss; the ledger holds one Gaussian release per step, composed to the target."""
    page = "docs/how-to/ax.md"
    (code,) = [code for _, above, code in python_blocks(page) if RUN_IN.search(above)]
    namespace: dict = {"__name__": "ax_private_run"}
    out = io.StringIO()
    with torch_threads(1), contextlib.redirect_stdout(out), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(code, str(ROOT / page), "exec"), namespace)
    opt, client, space, result = (namespace[k] for k in ("opt", "client", "space", "result"))
    summary = client.summarize()
    assert list(summary.columns) == ["trial_index", "arm_name", "trial_status", "lr", "dropout"]  # no loss
    assert (summary["trial_status"] == "COMPLETED").all()
    asked = [space.parameters(x) for x in opt.evaluation_points]
    assert len(asked) == 18 and summary[["lr", "dropout"]].to_dict("records") == asked
    assert summary["arm_name"].tolist()[:4] == ["step0_0", "step0_1", "step0_2", "step1_0"]
    ledger = opt.ledger
    assert len(ledger.validation.steps()) == 6 and ledger.validation.mu() == pytest.approx(gdp_mu(1.0, 1e-5), rel=1e-12)
    assert result.release.guarantee.epsilon == pytest.approx(1.0, rel=1e-9)
    released = space.parameters(result.release.theta)
    assert out.getvalue().startswith(f"{released}\n{result.guarantee_report()}\n")
    assert 1e-4 <= released["lr"] <= 1e-1 and 0.0 <= released["dropout"] <= 0.5
