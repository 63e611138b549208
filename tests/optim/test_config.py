r"""DPGIBOConfig's checks (issue 13 item 7, issue 16 item 1): each config gap is refused with a
ValueError naming the field before anything is built, and the corrected value runs; a target
(ε, δ) resolves to the exact GDP μ, is refused when incomplete, and survives copies and a
checkpoint round trip. (The seeds, non-finite losses and tell gaps are in test_inputs.py.)
"""

import dataclasses
import json
import math

import numpy as np
import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel

from botorch_dp.optim.config import DPGIBOConfig
from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.privacy.ledger import PrivacyLedger

from .loop_helpers import nl_config, normal_location, rbf_kernel

D, N = 2, 10


def config(**kw):
    base = dict(d=D, privacy_mu=1.0, num_iterations=3, seed=0)
    if not any(name.startswith("clip") for name in kw):  # B = 3, in the spelling the test uses
        base["clip"] = 3.0
    base.update(kw)
    return nl_config(**base)


# ---------------------------------------------------------------- config gaps (item 7)
CONFIG_GAPS = [
    ("user_chunk_size", 0, 2),
    ("user_chunk_size", -5, 2),
    ("user_chunk_size", 2.5, 2),
    ("theta0", torch.tensor([float("nan"), 0.0], dtype=torch.float64), torch.zeros(D, dtype=torch.float64)),
    ("search_radius", float("nan"), 0.5),
    ("search_radius", torch.tensor([0.5, float("nan")]), torch.tensor([0.5, 0.3])),
    ("step_size", math.inf, 0.5),
    ("noise_variance", math.inf, 1e-6),
    ("num_restarts", 0, 2),
    ("raw_samples", 1.5, 32),
    ("jitter", -1.0, 1e-8),
]


@pytest.mark.parametrize("field,bad,good", CONFIG_GAPS, ids=[f"{f}={b!r}"[:40] for f, b, _ in CONFIG_GAPS])
def test_config_gaps_are_refused_naming_the_field(field, bad, good):
    with pytest.raises(ValueError, match=field):
        config(**{field: bad})
    _, objective = normal_location(n=N, d=D)
    opt = DPGIBO(config(**{field: good}))
    X = opt.ask()
    assert opt.tell(X, objective(X)).iteration == 1


def test_small_user_chunks_give_the_same_release():
    _, objective = normal_location(n=N, d=D)
    runs = [DPGIBO(config(user_chunk_size=c)).run(objective, progress=False) for c in (1, 3, 4096)]
    # the chunked sums differ in their last bits; the warm-started search stops after WARM_MAXITER
    # iterations, before L-BFGS-B's convergence would damp that, so later steps differ by ~1e-11 relative
    for r in runs[1:]:
        torch.testing.assert_close(
            r.release.released_gradients[0], runs[0].release.released_gradients[0], rtol=1e-12, atol=1e-14
        )
        torch.testing.assert_close(
            r.release.released_gradients, runs[0].release.released_gradients, rtol=1e-9, atol=1e-11
        )


def test_infinite_bias_tolerance_is_refused():
    with pytest.raises(ValueError, match="bias_tolerance"):
        config(batch_size=None, bias_tolerance=math.inf)


def test_bias_tolerance_at_or_above_the_prior_trace_is_refused_before_anything():
    kernel = rbf_kernel(D, 0.5)
    with torch.no_grad():  # tr of the RBF prior gradient covariance at θ₀: d / ℓ² (+ jitter)
        fixed = DPGIBO(config(kernel=kernel, noise_variance=1e-4))
        prior = float(fixed.state.gp.posterior_trace(fixed.theta))
    assert math.isclose(prior, D / 0.5**2, rel_tol=1e-6)
    ledger = PrivacyLedger()
    for eps in (prior, 2 * prior):
        cfg = config(kernel=kernel, batch_size=None, bias_tolerance=eps, noise_variance=1e-4)
        with pytest.raises(ValueError, match="bias_tolerance"):
            DPGIBO(cfg, ledger=ledger)
    assert ledger.validation.mu() == 0.0
    _, objective = normal_location(n=N, d=D)
    opt = DPGIBO(config(kernel=kernel, batch_size=None, bias_tolerance=prior / 2, noise_variance=1e-4), ledger=ledger)
    X = opt.ask()
    assert X.shape[0] >= 1 and opt.tell(X, objective(X)).iteration == 1


def test_kernel_with_wrong_ard_num_dims_is_refused():
    for kernel in (RBFKernel(ard_num_dims=D + 1), ScaleKernel(RBFKernel(ard_num_dims=D - 1))):
        with pytest.raises(ValueError, match="kernel.*ard_num_dims"):
            config(kernel=kernel)
    _, objective = normal_location(n=N, d=D)
    opt = DPGIBO(config(kernel=ScaleKernel(rbf_kernel(D))))
    X = opt.ask()
    assert opt.tell(X, objective(X)).iteration == 1


def test_numpy_bounds_and_numpy_or_tensor_integers_are_accepted():
    cfg = config(
        bounds=np.array([[-2.0] * D, [4.0] * D]),
        num_iterations=np.int64(2),
        batch_size=torch.tensor(3),
        user_chunk_size=np.int32(4),
        num_restarts=np.int16(2),
        raw_samples=torch.tensor(32),
        theta0=np.zeros(D),
    )
    assert isinstance(cfg.bounds, torch.Tensor) and cfg.bounds.dtype == torch.float64
    assert all(type(getattr(cfg, f)) is int for f in ("num_iterations", "user_chunk_size", "raw_samples"))
    assert type(cfg.batches.size) is int  # FixedBatches normalizes its own values
    _, objective = normal_location(n=N, d=D)
    result = DPGIBO(cfg).run(objective, progress=False)
    assert result.release.batch_sizes == [3, 3]
    with pytest.raises(ValueError, match="batch_size"):
        config(batch_size=torch.tensor(3.5))
    with pytest.raises(ValueError, match="num_iterations"):
        config(num_iterations=torch.tensor([2, 3]))


def test_config_does_not_alias_the_callers_tensors():
    bounds = torch.tensor([[-2.0] * D, [4.0] * D], dtype=torch.float64)
    theta0 = torch.zeros(D, dtype=torch.float64)
    cfg = config(bounds=bounds, theta0=theta0)
    bounds[0, 0], theta0[0] = -100.0, float("nan")
    assert cfg.bounds[0, 0] == -2.0 and cfg.theta0[0] == 0.0


# ---------------------------------------------------------------- target (ε, δ) (issue 16 item 1)
def test_target_epsilon_delta_resolves_to_the_exact_gdp_mu_and_the_run_reports_it():
    from botorch_dp.privacy.analysis.gdp import gdp_delta

    cfg = config(privacy_mu=None, epsilon=1.0, delta=1e-5)
    # μ is the largest one whose privacy profile reaches δ at ε (Dong, Roth & Su): δ_μ(ε) = δ,
    # and slightly larger μ would break it (the profile increases in μ)
    assert cfg.privacy_mu == pytest.approx(0.26805, abs=1e-5)
    assert gdp_delta(cfg.privacy_mu, 1.0) == pytest.approx(1e-5, rel=1e-9)
    assert gdp_delta(cfg.privacy_mu * (1 + 1e-6), 1.0) > 1e-5
    assert (cfg.epsilon, cfg.delta, cfg.target_delta) == (1.0, 1e-5, 1e-5)
    # the resolved μ is what the loop runs with: same noise as the equivalent privacy_mu config
    by_mu = config(privacy_mu=cfg.privacy_mu, num_iterations=2)
    _, objective = normal_location(n=N, d=D)
    a = DPGIBO(dataclasses.replace(cfg, num_iterations=2)).run(objective, progress=False).release
    b = DPGIBO(by_mu).run(objective, progress=False).release
    assert torch.equal(a.released_gradients, b.released_gradients)
    assert a.guarantee.mu == pytest.approx(cfg.privacy_mu, rel=1e-12)
    assert a.guarantee.epsilon == pytest.approx(1.0, rel=1e-9) and a.guarantee.delta == 1e-5
    assert config(privacy_mu=None, epsilon=math.inf, delta=1e-5).privacy_mu == math.inf
    assert config(privacy_mu=None).privacy_mu == 1.0 and config(privacy_mu=None).target_delta == 1e-5


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(privacy_mu=1.0, epsilon=1.0, delta=1e-5), r"either privacy_mu .* or epsilon and delta"),
        (dict(privacy_mu=None, epsilon=1.0), r"epsilon \(ε\) needs delta"),
        (dict(privacy_mu=None, delta=1e-5), r"delta \(δ\) was given without epsilon"),
        (dict(privacy_mu=None, epsilon=-1.0, delta=1e-5), r"epsilon \(ε\) must be positive"),
        (dict(privacy_mu=None, epsilon=1.0, delta=1.5), r"delta"),
        (dict(privacy_mu=None, epsilon=float("nan"), delta=1e-5), r"epsilon"),
    ],
)
def test_bad_target_epsilon_delta_is_refused_naming_the_fields(kw, match):
    with pytest.raises(ValueError, match=match):
        config(**kw)


def test_resolved_config_survives_copies_and_checkpoint_round_trip(tmp_path):
    from botorch_dp.optim.stored_config import config_to_json

    cfg = config(privacy_mu=None, epsilon=2.0, delta=1e-6, num_iterations=4)
    assert dataclasses.replace(cfg, num_restarts=3).privacy_mu == cfg.privacy_mu  # re-validated, same μ
    with pytest.raises(ValueError, match="not both"):
        dataclasses.replace(cfg, epsilon=3.0)  # the old μ next to a new target
    assert dataclasses.replace(cfg, epsilon=3.0, privacy_mu=None).privacy_mu > cfg.privacy_mu
    stored = json.loads(json.dumps(config_to_json(cfg)))  # what state.json holds
    assert stored["privacy_mu"] == {"float": cfg.privacy_mu.hex()} and stored["epsilon"] == {"float": (2.0).hex()}
    _, objective = normal_location(n=N, d=D)
    opt = DPGIBO(cfg, checkpoint_dir=tmp_path)
    X = opt.ask()
    opt.tell(X, objective(X))
    opt.close()
    with DPGIBO.resume(tmp_path, cfg) as same:
        assert same.iteration == 1
    for changed in (
        dict(epsilon=1.0, privacy_mu=None),
        dict(delta=1e-5, privacy_mu=None),
        dict(epsilon=None, delta=None),  # same μ, stated directly: a different config all the same
    ):
        with pytest.raises(ValueError, match="differs from the checkpoint"):
            DPGIBO.resume(tmp_path, dataclasses.replace(cfg, **changed))
    again = DPGIBO.resume(tmp_path)  # config rebuilt from the checkpoint's JSON
    assert (again.config.privacy_mu, again.config.epsilon, again.config.delta) == (cfg.privacy_mu, 2.0, 1e-6)
    done = again.run(objective, progress=False).release.guarantee
    assert done.epsilon == pytest.approx(2.0, rel=1e-9) and done.delta == 1e-6


def test_the_config_stores_the_strategy_objects_given_and_resolves_names_once():
    from botorch_dp.optim.options import AdaGrad, AdaptiveNorm, FixedClip, NoisyLoss, Projected, QuantileClip
    from botorch_dp.optim.subspace import FixedSubspace

    clip, selection = QuantileClip(2.0, quantile=0.7), NoisyLoss(0.2, 3.0)
    cfg = config(clip=clip, selection=selection, noise="adaptive_norm", step_rule="adagrad")
    assert cfg.clip is clip and cfg.selection is selection  # stored as given, not rebuilt from fields
    assert cfg.noise == AdaptiveNorm() and cfg.step_rule == AdaGrad()  # a registered name, resolved once
    assert cfg.options.clip is clip and cfg.options.selection is selection  # the config's own objects
    assert set(vars(cfg)) == {f.name for f in dataclasses.fields(cfg)}  # nothing but the fields (tutorial 05)
    copy = DPGIBOConfig(**{**vars(cfg), "seed": 0})
    assert copy.clip is clip and copy.options.describe() == cfg.options.describe()
    assert config(clip=2.5).clip == FixedClip(2.5)  # the shorthands: a number B, a bare oracle
    oracle = FixedSubspace(torch.eye(D)[:, :1])
    assert config(projection=oracle).projection == Projected(oracle)
    with pytest.raises(ValueError, match=r"^noise must be one of \['adaptive_norm', 'fixed'.*got 'adaptiv'"):
        config(noise="adaptiv")
    with pytest.raises(ValueError, match=r"^clip must be a clip strategy .* got AdaptiveNorm"):
        config(clip=AdaptiveNorm())
    with pytest.raises(ValueError, match=r"clip_quantile \(γ\)"):  # each value is checked by its strategy
        QuantileClip(quantile=1.5)
    assert dataclasses.replace(cfg, clip=3.0).clip == FixedClip(3.0)


@pytest.mark.parametrize(
    ("field", "name", "needs"),
    [
        ("selection", "exponential", "epsilon"),
        ("selection", "noisy_loss", "mu"),
        ("batches", "adaptive", "bias_tolerance"),
    ],
)
def test_a_name_that_would_leave_a_privacy_or_sensitivity_setting_to_a_class_default_is_refused(field, name, needs):
    r"""``selection="exponential"`` alone would run at the class's ε = 1 and C = 1 (and
    ``batches="adaptive"`` at a tolerance nobody chose): the name is refused, naming what it needs and
    the object to pass; the old keywords that give the values still build it."""
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    with pytest.raises(ValueError, match=rf"{field}={name!r} needs its {needs}"):
        DPGIBOConfig(bounds=bounds, kernel=RBFKernel(), **{field: name})
    with pytest.raises(ValueError, match="projection='subspace' cannot be built from its name alone"):
        DPGIBOConfig(bounds=bounds, kernel=RBFKernel(), projection="subspace")
