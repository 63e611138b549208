"""Kairouz et al. inside DP-GIBO: subspace releases, full-matrix AdaGrad, the private preconditioner."""

import math
import warnings

import numpy as np
import pytest
import torch

from botorch_dp.gradient_gp import GradientGP
from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.optim.stored_config import check_same_run
from botorch_dp.optim.subspace import (
    FixedSubspace,
    PosteriorGradientCovarianceSubspace,
    SubspaceOracle,
    orthonormal_basis,
)
from botorch_dp.privacy.ledger import PrivacyBudgetExceeded
from botorch_dp.utils import project_to_box

from .loop_helpers import nl_config as _nl_config
from .loop_helpers import normal_location
from .state_helpers import flat_config_json, same, snapshot, version_3_meta

F64 = torch.float64
V42 = orthonormal_basis(torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [0.5, -1.0]], dtype=F64))


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seeded noise warns; optimize_acqf may warn
        yield


def nl_config(**kw):
    """The loop tests' config with the fast greedy batch search (joint search is ~20x slower)."""
    return _nl_config(**{"batch_search": "greedy", "num_restarts": 1, "raw_samples": 16, **kw})


def in_span(V, x, atol=1e-12):
    return torch.allclose(V @ (V.T @ x), x, rtol=0, atol=atol)


# --------------------------------------------------------------------------- reductions
@pytest.mark.parametrize("rule", ["sgd", "adagrad"])
def test_identity_subspace_reproduces_plain_dp_gibo_bit_for_bit(rule):
    _, objective = normal_location(n=15, d=3)
    base = dict(d=3, privacy_mu=1.0, clip_bound=2.0, num_iterations=4, seed=5, step_rule=rule)
    plain = DPGIBO(nl_config(**base)).run(objective, progress=False).release
    projected = DPGIBO(nl_config(**base, subspace=FixedSubspace(torch.eye(3)))).run(objective, progress=False).release
    assert torch.equal(projected.iterates, plain.iterates)
    assert torch.equal(projected.evaluation_points, plain.evaluation_points)
    assert torch.equal(projected.released_gradients, plain.released_gradients)
    assert projected.guarantee == plain.guarantee
    assert projected.subspace_dims == [3] * 4 and plain.subspace_bases == [] and plain.released_coordinates == []
    assert all(torch.equal(u, g) for u, g in zip(projected.released_coordinates, plain.released_gradients, strict=True))


def pinv_root(X):
    U, s, _ = np.linalg.svd(X, full_matrices=False)
    keep = s > 1e-10 * s.max()
    return (U[:, keep] / s[keep]) @ U[:, keep].T


def assert_full_adagrad_path(release, bounds, eta):
    """θ_{t+1} = Π_Θ(θ_t − η (Σ_{s≤t} g_s g_sᵀ)^{+1/2} g_t) on the run's own released g_t (numpy SVD)."""
    G = release.released_gradients.numpy()
    theta = release.iterates[0]
    for t in range(G.shape[0]):
        theta = project_to_box(theta - eta * torch.from_numpy(pinv_root(G[: t + 1].T) @ G[t]), bounds)
        torch.testing.assert_close(release.iterates[t + 1], theta, rtol=0, atol=1e-7)


@pytest.mark.parametrize(
    "options",
    [
        dict(),  # preconditioner "noisy" by default
        dict(preconditioner="noisy_debiased", subspace=FixedSubspace(torch.eye(3))),
        dict(preconditioner="private"),  # without noise Ĝ_t is the clean SVD root of the clipped means
    ],
    ids=["noisy", "debiased-identity", "private"],
)
def test_no_noise_full_matrix_adagrad_is_the_reference_on_the_released_gradients(options):
    _, objective = normal_location(n=15, d=3)
    cfg = nl_config(
        d=3, privacy_mu=math.inf, num_iterations=5, step_rule="adagrad_full", step_size=0.3, seed=0, **options
    )
    assert cfg.preconditioner == options.get("preconditioner", "noisy")
    release = DPGIBO(cfg).run(objective, progress=False).release
    assert_full_adagrad_path(release, cfg.bounds, 0.3)


# --------------------------------------------------------------------------- projected runs
def test_fixed_subspace_run_moves_in_the_span_and_releases_k_coordinates():
    _, objective = normal_location(n=20, d=4)
    cfg = nl_config(
        d=4,
        privacy_mu=1.0,
        clip_bound=3.0,
        num_iterations=4,
        seed=1,
        subspace=FixedSubspace(V42),
        record_non_private_diagnostics=True,
    )
    res = DPGIBO(cfg).run(objective, progress=False)
    rel = res.release
    V = cfg.subspace.basis  # QR of V42 (equal up to rounding)
    assert rel.subspace_dims == [2] * 4 and all(torch.equal(B, V) for B in rel.subspace_bases)
    assert all(u.shape == (2,) for u in rel.released_coordinates)
    for t in range(4):
        assert torch.equal(rel.released_gradients[t], V @ rel.released_coordinates[t])
        assert in_span(V42, rel.iterates[t + 1] - rel.iterates[0])  # the box is inactive here
        assert in_span(V42, res.diagnostics.unnoised_gradients[t])  # diagnostics in θ-space too
    assert rel.guarantee.mu == pytest.approx(1.0) and rel.guarantee.noise_std == pytest.approx(2 * 3.0 * 2 / (20 * 1.0))


def test_posterior_covariance_subspace_uses_the_points_before_each_batch():
    _, objective = normal_location(n=20, d=4)
    cfg = nl_config(
        d=4,
        privacy_mu=2.0,
        num_iterations=3,
        seed=2,
        subspace=PosteriorGradientCovarianceSubspace(2),
        noise_variance=1e-4,
    )
    opt = DPGIBO(cfg)
    rel = opt.run(objective, progress=False).release
    kernel = opt.kernel  # the loop's frozen float64 copy
    start = 0
    for t, b in enumerate(rel.batch_sizes):
        gp = GradientGP(rel.evaluation_points[:start], kernel, 1e-4)  # D before step t's batch, refactorized
        expected = PosteriorGradientCovarianceSubspace(2)(rel.iterates[t], gp)
        torch.testing.assert_close(
            rel.subspace_bases[t] @ rel.subspace_bases[t].T, expected @ expected.T, rtol=0, atol=1e-6
        )
        assert in_span(rel.subspace_bases[t], rel.released_gradients[t])
        start += b


# --------------------------------------------------------------------------- private preconditioner
def test_private_preconditioner_releases_twice_per_step_and_composes_to_mu():
    _, objective = normal_location(n=20, d=4)
    T = 4
    cfg = nl_config(
        d=4,
        privacy_mu=1.0,
        clip_bound=3.0,
        num_iterations=T,
        seed=3,
        step_rule="adagrad_full",
        preconditioner="private",
        subspace=FixedSubspace(V42),
    )
    opt = DPGIBO(cfg)
    rel = opt.run(objective, progress=False).release
    keys = [r.key for r in opt.ledger.validation.records()]  # in the order of the draws
    assert keys == [k for t in range(T) for k in (f"step-{t:04d}", f"step-{t:04d}/precond")]
    mus = opt.ledger.validation.steps()
    assert all(mu == pytest.approx(1 / math.sqrt(2) / 2) for mu in mus.values())  # μ_g/√T = μ_H/√T
    assert rel.guarantee.mu == pytest.approx(1.0, rel=1e-12)
    assert rel.guarantee.epsilon == pytest.approx(4.3772, abs=5e-5)
    delta = 2 * 3.0 / 20
    assert rel.guarantee.noise_std == pytest.approx(math.sqrt(T) * delta / (1 / math.sqrt(2)))  # σ_b with μ_g
    stds = opt.state.records.track.preconditioner_noise_stds
    assert list(stds) == pytest.approx([math.sqrt(t * T) * delta * math.sqrt(2) for t in range(1, T + 1)])
    assert len(rel.released_preconditioners) == T
    assert all(G.shape == (2, 2) and torch.equal(G, G.T) for G in rel.released_preconditioners)
    for t in range(T):
        assert in_span(V42, rel.iterates[t + 1] - rel.iterates[0])
    # a different share of μ²: μ_H = μ√f
    cfg = nl_config(
        d=4,
        privacy_mu=1.0,
        num_iterations=2,
        step_rule="adagrad_full",
        preconditioner="private",
        preconditioner_mu_fraction=0.2,
    )
    opt = DPGIBO(cfg)
    opt.run(objective, progress=False)
    grad_mu, precond_mu = [opt.ledger.validation.steps()[(opt.run_id, k)] for k in ("step-0000", "step-0000/precond")]
    assert (grad_mu, precond_mu) == pytest.approx((math.sqrt(0.8) / math.sqrt(2), math.sqrt(0.2) / math.sqrt(2)))
    assert opt.guarantee().mu == pytest.approx(1.0)
    assert opt.result().release.subspace_bases == [] and len(opt.result().release.released_preconditioners) == 2


def test_budget_filter_counts_both_releases_before_either():
    _, objective = normal_location(n=10, d=2)
    # each step is √(μ_g² + μ_H²)/√T = 0.5: one step fits a budget of 0.65, a second (0.707) does not,
    # although the gradient alone (√(0.25 + 0.125) = 0.61) would
    cfg = nl_config(
        d=2,
        privacy_mu=1.0,
        num_iterations=4,
        seed=4,
        step_rule="adagrad_full",
        preconditioner="private",
        validation_mu_budget=0.65,
    )
    opt = DPGIBO(cfg)
    X = opt.ask()
    opt.tell(X, objective(X))
    before = snapshot(opt)
    with pytest.raises(PrivacyBudgetExceeded, match=r"step 1 of run .* would bring the total to mu=0\.707"):
        opt.ask()  # both releases' worst case, before the batch is searched for
    assert same(snapshot(opt), before)
    assert len(opt.ledger.validation.steps()) == 2


class DriftingBasis(SubspaceOracle):
    """Claims to be fixed but is not."""

    fixed = True

    def __init__(self):
        self.calls = 0

    def __call__(self, theta, gp):
        self.calls += 1
        return orthonormal_basis(torch.tensor([[1.0], [0.1 * self.calls]], dtype=F64))

    def spec(self):
        return {"kind": "drifting"}


class NotOrthonormal(DriftingBasis):
    def __call__(self, theta, gp):
        return torch.tensor([[2.0], [0.0]], dtype=F64)


def test_bad_oracle_output_is_refused_before_release():
    _, objective = normal_location(n=10, d=2)
    opt = DPGIBO(nl_config(d=2, privacy_mu=1.0, num_iterations=3, seed=6, subspace=NotOrthonormal()))
    X = opt.ask()
    before = snapshot(opt)
    with pytest.raises(ValueError, match="not orthonormal"):
        opt.tell(X, objective(X))
    assert same(snapshot(opt), before)
    cfg = nl_config(
        d=2,
        privacy_mu=1.0,
        num_iterations=3,
        seed=6,
        subspace=DriftingBasis(),
        step_rule="adagrad_full",
        preconditioner="private",
    )
    opt = DPGIBO(cfg)
    X = opt.ask()
    opt.tell(X, objective(X))
    X = opt.ask()
    before = snapshot(opt)
    with pytest.raises(ValueError, match="fixed one"):
        opt.tell(X, objective(X))
    assert same(snapshot(opt), before)


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(preconditioner="noisy"), "only used with step_rule='adagrad_full'"),
        (dict(step_rule="adagrad_full", preconditioner="exact"), "preconditioner must be one of"),
        (dict(step_rule="adagrad_full", preconditioner_mu_fraction=0.5), "only used with preconditioner='private'"),
        (dict(step_rule="adagrad_full", preconditioner="private", preconditioner_mu_fraction=1.0), r"\(0, 1\)"),
        (dict(step_rule="adagrad_full", preconditioner="private", preconditioner_mu_fraction=0.0), "fraction"),
        (
            dict(step_rule="adagrad_full", preconditioner="private", subspace=PosteriorGradientCovarianceSubspace(2)),
            "needs one basis for every step .* a fixed SubspaceOracle",
        ),
        (dict(subspace=torch.eye(5)), "SubspaceOracle"),
        (dict(subspace=FixedSubspace(torch.eye(4))), "d = 5"),
        (dict(subspace=PosteriorGradientCovarianceSubspace(6)), "exceeds d"),
    ],
)
def test_config_refusals(kw, match):
    with pytest.raises(ValueError, match=match):
        nl_config(**kw)


# --------------------------------------------------------------------------- checkpoints
def test_resume_reproduces_a_private_preconditioner_run_and_refuses_changes(tmp_path):
    _, objective = normal_location(n=12, d=4)
    cfg = nl_config(
        d=4,
        privacy_mu=1.0,
        clip_bound=3.0,
        num_iterations=4,
        seed=7,
        step_rule="adagrad_full",
        preconditioner="private",
        subspace=FixedSubspace(V42),
    )
    full = DPGIBO(cfg).run(objective, progress=False).release
    opt = DPGIBO(cfg, checkpoint_dir=tmp_path)
    opt.run(objective, progress=False, callback=lambda info: info.iteration == 2)
    assert opt.state_dict()["meta"]["strategies"]["step_rule"]["columns"]  # the sensitive X_t is in the checkpoint
    del opt
    for changed, field in [
        (dict(subspace=FixedSubspace(V42[:, :1])), "'projection'"),
        (dict(subspace=None), "'projection'"),
        (dict(preconditioner="noisy"), "'step_rule'"),
        (dict(preconditioner_mu_fraction=0.3), "'step_rule'"),
    ]:
        base = dict(
            d=4,
            privacy_mu=1.0,
            clip_bound=3.0,
            num_iterations=4,
            seed=7,
            step_rule="adagrad_full",
            preconditioner="private",
            subspace=FixedSubspace(V42),
        )
        with pytest.raises(ValueError, match=field):
            DPGIBO.resume(tmp_path, nl_config(**{**base, **changed}))
    resumed = DPGIBO.resume(tmp_path)  # the config (and its subspace) rebuilt from the checkpoint
    assert torch.equal(resumed.config.projection.oracle.basis, cfg.projection.oracle.basis)
    assert len(resumed.state.records.track.columns) == 2  # the sensitive X_t survives
    rel = resumed.run(objective, progress=False).release
    assert torch.equal(rel.iterates, full.iterates)
    assert all(
        torch.equal(a, b) for a, b in zip(rel.released_preconditioners, full.released_preconditioners, strict=True)
    )
    assert len(resumed.ledger.validation.steps()) == 8 and resumed.guarantee().mu == pytest.approx(1.0)


def test_resume_with_a_changing_subspace_and_damaged_track_refused(tmp_path):
    _, objective = normal_location(n=12, d=3)
    cfg = nl_config(
        d=3,
        privacy_mu=1.0,
        num_iterations=3,
        seed=8,
        subspace=PosteriorGradientCovarianceSubspace(2),
        step_rule="adagrad_full",
        preconditioner="noisy_debiased",
    )
    full = DPGIBO(cfg).run(objective, progress=False).release
    opt = DPGIBO(cfg, checkpoint_dir=tmp_path)
    opt.run(objective, progress=False, callback=lambda info: info.iteration == 1)
    state = opt.state_dict()
    opt.close()
    resumed = DPGIBO.resume(tmp_path)
    assert isinstance(resumed.config.subspace, PosteriorGradientCovarianceSubspace)
    assert torch.equal(resumed.run(objective, progress=False).release.iterates, full.iterates)
    strategies = state["meta"]["strategies"]
    bad = {**state, "meta": {**state["meta"], "strategies": {**strategies, "projection": {"coordinates": []}}}}
    with pytest.raises(ValueError, match="'strategies.projection.bases' must hold 1 entries, got 0"):
        DPGIBO(cfg).load_state_dict(bad)


def test_a_checkpoint_written_before_the_subspace_fields_still_loads():
    _, objective = normal_location(n=10, d=2)
    cfg = nl_config(d=2, privacy_mu=1.0, num_iterations=3, seed=9)
    opt = DPGIBO(cfg)
    X = opt.ask()
    opt.tell(X, objective(X))
    state = opt.state_dict()
    meta = {k: v for k, v in version_3_meta(state["meta"]).items() if k != "subspace"}
    meta["config"] = {
        k: v
        for k, v in flat_config_json(cfg).items()  # the flat fields, as before issue 42
        if k not in ("subspace", "preconditioner", "preconditioner_mu_fraction", "subspace_acquisition")
    }
    other = DPGIBO(cfg)
    other.load_state_dict({**state, "meta": meta})
    assert (
        torch.equal(other.theta, opt.theta)
        and other.iteration == 1
        and other.state.records.track == opt.state.records.track
    )
    check_same_run(meta, cfg)  # resuming it with the same config is allowed: the new fields read as not given
    with pytest.raises(ValueError, match="'projection'"):  # a new field given a value is a change
        check_same_run(
            meta,
            nl_config(
                d=2,
                privacy_mu=1.0,
                num_iterations=3,
                seed=9,
                subspace=FixedSubspace(torch.eye(2)),
                subspace_acquisition=True,
            ),
        )
    # a run with a subspace needs its record
    with_subspace = nl_config(d=2, privacy_mu=1.0, num_iterations=3, seed=9, subspace=FixedSubspace(torch.eye(2)))
    with pytest.raises(ValueError, match="strategies.projection.bases"):
        DPGIBO(with_subspace).load_state_dict({**state, "meta": meta})


# --------------------------------------------------------------------------- projected acquisition (A5)
def test_projected_acquisition_defaults_to_k_plus_one_points_and_stops_on_the_projected_trace():
    _, objective = normal_location(n=12, d=4)
    fixed = DPGIBO(
        nl_config(
            d=4,
            privacy_mu=1.0,
            num_iterations=2,
            seed=10,
            batch_size=None,
            subspace=FixedSubspace(V42),
            subspace_acquisition=True,
        )
    )
    assert fixed.ask().shape[0] == 3 and fixed.config.max_evaluations == 2 * 3  # k + 1, not d + 1
    assert fixed.run(objective, progress=False).release.batch_sizes == [3, 3]
    tolerance = 0.05
    cfg = nl_config(
        d=4,
        privacy_mu=1.0,
        num_iterations=3,
        seed=11,
        batch_size=None,
        bias_tolerance=tolerance,
        kernel=_nl_config(d=4).kernel,
        subspace=FixedSubspace(V42),
        subspace_acquisition=True,
        noise_variance=1e-4,
    )
    opt = DPGIBO(cfg)
    assert cfg.max_evaluations == 3 * 3  # b_max = k + 1
    rel = opt.run(objective, progress=False).release
    V, start = cfg.subspace.basis, 0
    for t, b in enumerate(rel.batch_sizes):
        start += b
        gp = GradientGP(rel.evaluation_points[:start], opt.kernel, 1e-4)
        projected = float(gp.posterior_trace(rel.iterates[t], V))
        assert projected <= tolerance * (1 + 1e-6) or b == 3
        assert projected <= rel.posterior_traces[t] + 1e-9  # the reported trace is the full one
    with pytest.raises(ValueError, match="needs a subspace"):
        nl_config(d=4, subspace_acquisition=True)
    with pytest.raises(ValueError, match="True or False"):
        nl_config(d=4, subspace=FixedSubspace(V42), subspace_acquisition="yes")


# --------------------------------------------------------------------------- with Menart et al.'s options
def test_subspace_with_the_adaptive_schedule_releases_k_coordinates():
    _, objective = normal_location(n=30, d=4)
    cfg = nl_config(
        d=4,
        privacy_mu=2.0,
        num_iterations=4,
        seed=12,
        subspace=FixedSubspace(V42),
        noise_schedule="adaptive_norm",
        step_rule="adagrad_full",
        preconditioner="noisy_debiased",
    )
    opt = DPGIBO(cfg)
    rel = opt.run(objective, progress=False).release
    t = len(rel.step_mus)
    V = cfg.subspace.basis
    assert t >= 1 and rel.subspace_dims == [2] * t and all(u.shape == (2,) for u in rel.released_coordinates)
    for s in range(t):
        assert torch.equal(rel.released_gradients[s], V @ rel.released_coordinates[s])
        assert in_span(V, rel.iterates[s + 1] - rel.iterates[0])
    keys = [key for (_, key) in opt.ledger.validation.steps()]
    assert keys == [k for s in range(t) for k in (f"step-{s:04d}/norm", f"step-{s:04d}/grad")]
    assert rel.guarantee.mu <= 2.0 * (1 + 1e-12)
    with pytest.raises(
        ValueError, match="preconditioner='private' does not combine with noise_schedule='adaptive_norm'"
    ):
        nl_config(
            d=4, privacy_mu=2.0, noise_schedule="adaptive_norm", step_rule="adagrad_full", preconditioner="private"
        )
