r"""Issue 13 (items 1, 2, 7): seeds, non-finite losses and the validation gaps of DP-GIBO.

Each validation gap: (a) a ValueError whose message names the argument, (b) nothing was
released (no DPGIBO built, or its state, ledger and pending points unchanged), (c) the
corrected call works.
"""

import dataclasses
import json
import math
import warnings

import numpy as np
import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel

import botorch_dp.optim.options.batches as batches_module
from botorch_dp import PrivacyWarning
from botorch_dp.optim.checkpoint import json_fingerprint
from botorch_dp.optim.dp_gibo import DPGIBO, DPGIBOConfig
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.mechanisms import GaussianGradientMechanism
from botorch_dp.privacy.seeding import noise_generator
from botorch_dp.utils import child_seeds

from .loop_helpers import nl_config, normal_location, rbf_kernel
from .state_helpers import same, snapshot

D, N = 2, 10


def config(**kw):
    base = dict(d=D, privacy_mu=1.0, clip_bound=3.0, num_iterations=3, seed=0)
    base.update(kw)
    return nl_config(**base)


def asked(**kw):
    r"""An optimizer with points pending, its objective and a snapshot of its state."""
    _, objective = normal_location(n=N, d=D)
    opt = DPGIBO(config(**kw))
    X = opt.ask()
    return opt, X, objective


def assert_nothing_released(opt, before):
    assert same(snapshot(opt), before)
    assert opt.ledger.validation_mu() == before["validation_mu"]


# ---------------------------------------------------------------- seeds (item 2)
def test_default_seed_is_none_and_draws_noise_from_os_entropy():
    assert DPGIBOConfig.__dataclass_fields__["seed"].default is None
    _, objective = normal_location(n=N, d=D)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)  # no warning without a seed
        a, b = DPGIBO(config(seed=None)), DPGIBO(config(seed=None))
    assert a._noise_gen is None and b._noise_gen is None  # the mechanism uses os.urandom
    # the public search stream is seeded from OS entropy too: two runs differ
    assert not torch.equal(a._search_gen.get_state(), b._search_gen.get_state())
    X = a.ask()
    b.state = dataclasses.replace(b.state, pending=X.clone())  # same points and data, so only the noise can differ
    a.tell(X, objective(X))
    b.tell(X, objective(X))
    assert not torch.equal(a.result().release.released_gradients, b.result().release.released_gradients)


def test_explicit_seed_warns_once_per_construction_and_reproduces():
    cfg = config(seed=7)
    with pytest.warns(PrivacyWarning, match="reproducible") as record:
        a = DPGIBO(cfg)
    assert sum(issubclass(w.category, PrivacyWarning) for w in record) == 1
    with pytest.warns(PrivacyWarning):
        b = DPGIBO(cfg)
    _, objective = normal_location(n=N, d=D)
    ra, rb = a.run(objective, progress=False), b.run(objective, progress=False)
    assert torch.equal(ra.release.released_gradients, rb.release.released_gradients)
    assert torch.equal(ra.release.evaluation_points, rb.release.evaluation_points)


def test_seeded_noise_and_search_are_separate_child_streams():
    with pytest.warns(PrivacyWarning):
        opt = DPGIBO(config(seed=5))
    with pytest.warns(PrivacyWarning):
        expected_noise = noise_generator(5, stream=0)
    assert torch.equal(opt._noise_gen.get_state(), expected_noise.get_state())
    expected_search = torch.Generator().manual_seed(child_seeds([5, 1], 1)[0])
    assert torch.equal(opt._search_gen.get_state(), expected_search.get_state())
    assert not torch.equal(opt._noise_gen.get_state(), opt._search_gen.get_state())


def test_non_private_run_with_a_seed_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)
        opt = DPGIBO(config(privacy_mu=math.inf, seed=3))  # no noise is drawn at all
    assert opt._noise_gen is None


def test_seed_must_be_a_non_negative_integer():
    for bad in (-1, 1.5, "0", True, float("nan")):
        with pytest.raises(ValueError, match="seed"):
            config(seed=bad)
    assert config(seed=np.int64(3)).seed == 3 and type(config(seed=torch.tensor(3)).seed) is int


def test_privacy_warning_is_exported_at_top_level():
    import botorch_dp

    assert "PrivacyWarning" in botorch_dp.__all__ and issubclass(botorch_dp.PrivacyWarning, UserWarning)


# ---------------------------------------------------------------- non-finite losses (item 1)
def test_nonfinite_losses_are_refused_by_default_before_any_release():
    opt, X, objective = asked()
    before = snapshot(opt)
    losses = objective(X)
    losses[1, 4] = float("inf")
    with pytest.raises(ValueError, match=r"point\(s\) \[1\].*reveals that some user's loss") as err:
        opt.tell(X, losses)
    assert "nonfinite_losses='zero_user'" in str(err.value)
    assert_nothing_released(opt, before)
    opt.tell(X, objective(X))
    assert opt.iteration == 1


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_zero_user_release_equals_the_release_with_that_users_losses_zeroed(bad):
    _, objective = normal_location(n=N, d=D)
    runs = {}
    for name in ("nan", "zeros"):
        opt = DPGIBO(config(nonfinite_losses="zero_user"))
        for _ in range(2):  # the second step uses both batches: user 0 stays at 0
            X = opt.ask()
            losses = objective(X)
            if name == "zeros":
                losses[:, 0] = 0.0  # D': user 0's losses replaced by zeros
            elif opt.iteration == 0:
                losses[1, 0] = bad  # D: one non-finite loss of user 0
            opt.tell(X, losses)
        runs[name] = opt
    a, b = runs["nan"].result().release, runs["zeros"].result().release
    assert torch.isfinite(a.released_gradients).all()
    assert same(a.released_gradients, b.released_gradients) and same(a.iterates, b.iterates)
    assert a.guarantee == b.guarantee  # n unchanged: same sensitivity, noise and μ
    assert math.isclose(a.guarantee.noise_std, 2 * 3.0 * math.sqrt(3) / (N * 1.0), rel_tol=1e-15)


def test_zero_user_mechanism_masks_users_with_any_nonfinite_loss():
    g = torch.Generator().manual_seed(0)
    A = torch.randn(3, 4, generator=g, dtype=torch.float64)
    Y = torch.randn(4, 6, generator=g, dtype=torch.float64)
    Y_bad, Y_zero = Y.clone(), Y.clone()
    Y_bad[2, 1], Y_bad[0, 4] = float("nan"), float("-inf")
    Y_zero[:, [1, 4]] = 0.0

    def mech():
        return GaussianGradientMechanism(clip_bound=1.0, num_users=6, privacy_mu=1.0, num_steps=2,
                                         generator=torch.Generator().manual_seed(1), chunk_size=4)

    with pytest.raises(ValueError, match="not finite"):
        mech().release(A, Y_bad)
    got = mech().release(A, Y_bad, nonfinite="zero_user", diagnostics=True)
    want = mech().release(A, Y_zero, diagnostics=True)
    assert same(got.gradient, want.gradient) and got.cost == want.cost
    assert same(got.diagnostics.unnoised_gradient, want.diagnostics.unnoised_gradient)


def test_nonfinite_losses_option_is_checked():
    with pytest.raises(ValueError, match="nonfinite_losses"):
        config(nonfinite_losses="ignore")


# ---------------------------------------------------------------- tell copies, empty first batch
def test_tell_copies_the_callers_losses():
    opt, X, objective = asked()
    buffer = objective(X)
    kept = buffer.clone()
    opt.tell(X, buffer)
    released = opt.result().release.released_gradients.clone()
    buffer.fill_(1e6)  # the caller reuses its output buffer
    assert torch.equal(torch.cat(list(opt.state.blocks)), kept)
    assert torch.equal(opt.result().release.released_gradients, released)
    # also for numpy input (torch.as_tensor would share its memory)
    X = opt.ask()
    array = objective(X).numpy().copy()
    opt.tell(X, array)
    array[:] = 1e6
    assert torch.equal(torch.cat(list(opt.state.blocks))[-X.shape[0]:], objective(X))


def test_losses_with_requires_grad_are_detached_before_the_release(tmp_path):
    _, objective = normal_location(n=N, d=D)
    opt = DPGIBO(config(), checkpoint_dir=tmp_path)
    X = opt.ask()
    w = torch.ones((), dtype=torch.float64, requires_grad=True)
    info = opt.tell(X, objective(X) * w)  # a non-leaf tensor: used to fail in the checkpoint
    assert info.iteration == 1 and not torch.cat(list(opt.state.blocks)).requires_grad
    assert not opt.result().release.released_gradients.requires_grad
    resumed = DPGIBO.resume(tmp_path)
    assert resumed.iteration == 1 and torch.equal(
        torch.cat(list(resumed.state.blocks)), torch.cat(list(opt.state.blocks))
    )


def test_empty_first_adaptive_batch_uses_the_real_number_of_users(monkeypatch):
    _, objective = normal_location(n=N, d=D)
    real_select = batches_module.search_batch
    calls = []

    def first_empty(gp, *args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            return torch.empty(0, D, dtype=torch.float64)
        return real_select(gp, *args, **kwargs)

    monkeypatch.setattr(batches_module, "search_batch", first_empty)
    opt = DPGIBO(config(batch_size=None, bias_tolerance=0.5, max_batch_size=3, num_iterations=2))
    result = opt.run(objective, progress=False)
    assert result.release.batch_sizes[0] == 0 and opt.num_users == N
    assert math.isclose(result.release.guarantee.noise_std, 2 * 3.0 * math.sqrt(2) / (N * 1.0), rel_tol=1e-15)
    # an objective that cannot say n on an empty batch is refused before any release
    monkeypatch.setattr(batches_module, "search_batch", lambda *a, **k: torch.empty(0, D, dtype=torch.float64))
    opt = DPGIBO(config(batch_size=None, bias_tolerance=0.5, max_batch_size=3, num_iterations=2))

    def no_empty(X):
        if X.shape[0] == 0:
            raise IndexError("empty")
        return objective(X)

    with pytest.raises(ValueError, match="first batch is empty"):
        opt.run(no_empty, progress=False)
    assert opt.iteration == 0 and opt.ledger.validation_mu() == 0.0


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
    assert ledger.validation_mu() == 0.0
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
    assert all(type(getattr(cfg, f)) is int for f in ("num_iterations", "batch_size", "user_chunk_size", "raw_samples"))
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


# ---------------------------------------------------------------- tell gaps (item 7)
TELL_GAPS = [
    ("losses", lambda L: L.tolist()[:-1], "losses"),  # a list with one point missing
    ("losses", lambda L: [[1.0, 2.0], [3.0]], "losses"),  # ragged
    ("losses", lambda L: "losses", "losses"),
    ("losses", lambda L: None, "losses"),
    ("losses", lambda L: L.to(torch.complex128), "floating point"),
    ("losses", lambda L: L.to(torch.int64), "floating point"),
    ("losses", lambda L: L > 0, "floating point"),
    ("losses", lambda L: L[:, :0], "user"),
    ("losses", lambda L: L[None], "shape"),
]


@pytest.mark.parametrize("name,make,match", TELL_GAPS, ids=[str(i) for i in range(len(TELL_GAPS))])
def test_malformed_losses_are_refused_before_anything(name, make, match):
    opt, X, objective = asked()
    losses = objective(X)
    before = snapshot(opt)
    with pytest.raises(ValueError, match=match):
        opt.tell(X, make(losses))
    assert_nothing_released(opt, before)
    assert torch.equal(opt.ask(), X)
    assert opt.tell(X, losses).iteration == 1


def test_malformed_points_are_refused_before_anything():
    opt, X, objective = asked()
    before = snapshot(opt)
    for bad in ("x", None, X + 1, X[:1], torch.full_like(X, float("nan"))):
        with pytest.raises(ValueError, match="points"):
            opt.tell(bad, objective(X))
    assert_nothing_released(opt, before)
    assert opt.tell(X.numpy(), objective(X)).iteration == 1  # numpy points are fine


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
    again = DPGIBO.resume(tmp_path)  # config rebuilt from the checkpoint's JSON
    assert (again.config.privacy_mu, again.config.epsilon, again.config.delta) == (cfg.privacy_mu, 2.0, 1e-6)
    assert DPGIBO.resume(tmp_path, cfg).iteration == 1
    for changed in (
        dict(epsilon=1.0, privacy_mu=None),
        dict(delta=1e-5, privacy_mu=None),
        dict(epsilon=None, delta=None),  # same μ, stated directly: a different config all the same
    ):
        with pytest.raises(ValueError, match="differs from the checkpoint"):
            DPGIBO.resume(tmp_path, dataclasses.replace(cfg, **changed))
    done = again.run(objective, progress=False).release.guarantee
    assert done.epsilon == pytest.approx(2.0, rel=1e-9) and done.delta == 1e-6


# ---------------------------------------------------------------- per-user losses (issue 16 item 4)
@pytest.mark.parametrize("reduce", ["mean", "single_user"])
def test_fewer_than_two_users_are_refused_with_an_explanation(reduce):
    opt, X, objective = asked()
    losses = objective(X)
    bad = losses.mean(-1, keepdim=True) if reduce == "mean" else losses[:, :1]
    before = snapshot(opt)
    with pytest.raises(ValueError, match=r"1 column\(s\), but a private run needs per-user losses") as info:
        opt.tell(X, bad)
    assert "mean loss" in str(info.value) and "reduction='none'" in str(info.value)
    assert_nothing_released(opt, before)
    with pytest.raises(ValueError, match="per-user losses"):
        DPGIBO(config()).run(lambda X: objective(X).mean(-1, keepdim=True), progress=False)
    assert opt.tell(X, losses[:, :2]).iteration == 1  # two users are enough
    # a non-private run (μ = inf) may optimise one scalar objective
    free = DPGIBO(config(privacy_mu=math.inf))
    Xf = free.ask()
    assert free.tell(Xf, objective(Xf).mean(-1, keepdim=True)).iteration == 1


def test_max_evaluations_bounds_what_a_run_asks_for():
    _, objective = normal_location(n=N, d=D)
    fixed = config(num_iterations=3, batch_size=2)
    assert fixed.max_evaluations == 6 == len(DPGIBO(fixed).run(objective, progress=False).release.evaluation_points)
    assert config(num_iterations=3, batch_size=None).max_evaluations == 3 * (D + 1)  # default b = d + 1
    adaptive = config(num_iterations=3, batch_size=None, bias_tolerance=0.05, max_batch_size=4)
    assert adaptive.max_evaluations == 12
    asked_for = DPGIBO(adaptive).run(objective, progress=False).release.batch_sizes
    assert max(asked_for) <= 4 and sum(asked_for) <= 12


def test_checkpoint_written_before_the_target_fields_still_resumes(tmp_path):
    _, objective = normal_location(n=N, d=D)
    cfg = config(num_iterations=3)
    opt = DPGIBO(cfg, checkpoint_dir=tmp_path)
    X = opt.ask()
    opt.tell(X, objective(X))
    state_file = tmp_path / "state.json"
    state = json.loads(state_file.read_text())
    for name in ("epsilon", "delta"):  # what an older version wrote
        del state["config"][name]
    state["config_fingerprint"] = json_fingerprint(state["config"])  # of the config it wrote
    state_file.write_text(json.dumps(state))
    for resumed in (DPGIBO.resume(tmp_path), DPGIBO.resume(tmp_path, cfg)):
        assert resumed.iteration == 1 and resumed.config.epsilon is None and resumed.config.privacy_mu == 1.0
    with pytest.raises(ValueError, match="differs from the checkpoint"):
        DPGIBO.resume(tmp_path, dataclasses.replace(cfg, privacy_mu=None, epsilon=4.377, delta=1e-5))


def test_resume_accepts_another_user_chunk_size(tmp_path):
    # a memory knob, not a privacy setting: checkpoints written with the old default (4096)
    # resume under the new one (None: chosen from n and d), and vice versa
    _, objective = normal_location(n=N, d=D)
    cfg = config(num_iterations=3, user_chunk_size=4096)
    opt = DPGIBO(cfg, checkpoint_dir=tmp_path)
    X = opt.ask()
    opt.tell(X, objective(X))
    resumed = DPGIBO.resume(tmp_path, dataclasses.replace(cfg, user_chunk_size=None))
    assert resumed.iteration == 1 and resumed.config.user_chunk_size is None
    assert DPGIBO.resume(tmp_path).config.user_chunk_size == 4096
    with pytest.raises(ValueError, match="'num_iterations' differs from the checkpoint"):
        DPGIBO.resume(tmp_path, dataclasses.replace(cfg, user_chunk_size=None, num_iterations=4))
