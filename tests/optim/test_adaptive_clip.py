r"""``clip_bound="adaptive"`` (Andrew et al. 2021): the quantile update's fixed point, the ledger's
totals in closed form, and checkpoint/resume (the count mechanism is tested in
``tests/privacy/mechanisms/test_counts.py``)."""

import dataclasses
import json
import math
import warnings

import pytest
import torch

from botorch_dp.optim.adaptive_clip import clip_bounds_from_counts, next_clip_bound
from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.optim.options import FixedClip
from botorch_dp.privacy.analysis.gdp import gdp_mu
from botorch_dp.privacy.ledger import PrivacyBudgetExceeded
from botorch_dp.privacy.mechanisms import GaussianClipCountMechanism
from botorch_dp.privacy.seeding import PrivacyWarning
from tests.optim.loop_helpers import nl_config, normal_location

D, N = 2, 40


@pytest.fixture(autouse=True)
def _quiet_seeds():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=PrivacyWarning)
        yield


def _cfg(**kw):
    base = dict(
        privacy_mu=1.0,
        clip_bound="adaptive",
        clip_init=2.0,
        num_iterations=3,
        seed=3,
        batch_size=3,
        num_restarts=1,
        raw_samples=16,
    )
    base.update(kw)
    return nl_config(d=D, **base)


def _run(cfg, steps=None, **kw):
    _, objective = normal_location(n=N, d=D)
    opt = DPGIBO(cfg, **kw)
    for _ in range(cfg.num_iterations if steps is None else steps):
        X = opt.ask()
        opt.tell(X, objective(X))
    return opt, objective


# ------------------------------------------------------------------------ the quantile update
@pytest.mark.parametrize("quantile", [0.3, 0.5, 0.9])
def test_update_converges_to_the_target_quantile_with_negligible_noise(quantile):
    g = torch.Generator().manual_seed(4)
    n = 1000
    A = torch.eye(3, dtype=torch.float64)
    Y = torch.randn(3, n, generator=g, dtype=torch.float64) * torch.rand(n, generator=g, dtype=torch.float64).mul(3)
    norms = Y.norm(dim=0)
    mech = GaussianClipCountMechanism(num_users=n, generator=torch.Generator().manual_seed(6))
    bound = 50.0  # far above every norm
    for _ in range(150):
        count = mech.release(A, Y, bound, 1e9).count  # noise std 1e-9
        bound = next_clip_bound(bound, count, n, quantile, 0.2)
    fraction = float((norms <= bound).float().mean())
    assert abs(fraction - quantile) <= 0.01  # the geometric update's fixed point is the γ-quantile
    lo, hi = torch.quantile(norms, torch.tensor([quantile - 0.01, quantile + 0.01], dtype=torch.float64))
    assert lo <= bound <= hi


def test_update_rule_closed_form():
    assert next_clip_bound(2.0, 30.0, 100, 0.5, 0.2) == 2.0 * math.exp(-0.2 * (0.3 - 0.5))
    assert clip_bounds_from_counts(1.0, [10.0, 90.0], 100, 0.5, 1.0) == [
        1.0,
        math.exp(0.4),
        math.exp(0.4) * math.exp(-0.4),
    ]


# ------------------------------------------------------------------------ config
def test_config_fills_the_defaults_and_splits_the_budget():
    cfg = _cfg(clip_init=None)
    assert (cfg.clip_init, cfg.clip_quantile, cfg.clip_learning_rate, cfg.clip_mu_fraction) == (1.0, 0.5, 0.2, 0.1)
    mu_g, mu_c = cfg.mu_split.gradient_mu, cfg.mu_split.clip_mu
    assert mu_g == pytest.approx(math.sqrt(0.9)) and mu_c == pytest.approx(math.sqrt(0.1))
    assert math.hypot(mu_g, mu_c) == pytest.approx(1.0, rel=1e-15)
    assert nl_config(d=D).mu_split.clip_mu is None


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        (dict(clip_bound=1.0, clip_init=None, clip_quantile=0.5), "clip_quantile"),
        (dict(clip_bound=1.0), "clip_init"),
        (dict(clip_quantile=1.0), "clip_quantile"),
        (dict(clip_mu_fraction=0.0), "clip_mu_fraction"),
        (dict(clip_learning_rate=-0.1), "clip_learning_rate"),
        (dict(clip_init=math.inf), "clip_init"),
        (dict(privacy_mu=math.inf), "privacy_mu"),
        (dict(clip_bound="auto"), "clip_bound"),
    ],
)
def test_config_refuses_bad_adaptive_clip_settings_naming_the_field(kw, field):
    with pytest.raises(ValueError, match=field):
        _cfg(**kw)


# ------------------------------------------------------------------------ the loop
def test_ledger_total_equals_the_planned_budget_in_closed_form():
    mu, f, T = 0.7, 0.2, 3
    opt, _ = _run(_cfg(privacy_mu=mu, clip_mu_fraction=f, num_iterations=T))
    steps = {key: m for (run, key), m in opt.ledger.validation.steps().items() if run == opt.run_id}
    assert sorted(steps) == sorted(f"step-{t:04d}/{kind}" for t in range(T) for kind in ("grad", "clip"))
    for t in range(T):
        assert steps[f"step-{t:04d}/grad"] == pytest.approx(mu * math.sqrt((1 - f) / T), rel=1e-15)
        assert steps[f"step-{t:04d}/clip"] == pytest.approx(mu * math.sqrt(f / T), rel=1e-15)
    assert opt.ledger.validation.mu() == pytest.approx(mu, rel=1e-12)
    release = opt.result().release
    assert release.guarantee.mu == pytest.approx(mu, rel=1e-12)
    # σ_t = 2 B_t √T/(n μ_g), B_t public and following the released counts
    assert release.clip_bounds == clip_bounds_from_counts(2.0, release.clip_counts, N, 0.5, 0.2)
    for std, bound in zip(release.noise_stds, release.clip_bounds[:T], strict=True):
        assert std == pytest.approx(2 * bound * math.sqrt(T) / (N * mu * math.sqrt(1 - f)), rel=1e-14)


def test_target_epsilon_delta_with_a_noisy_loss_selection_spends_exactly_the_target():
    cfg = _cfg(privacy_mu=None, epsilon=1.0, delta=1e-5, selection="noisy_loss", selection_mu=0.1, loss_clip=50.0)
    opt, objective = _run(cfg)
    X = opt.ask()  # the iterates
    opt.tell(X, objective(X))
    assert opt.ledger.validation.mu() == pytest.approx(gdp_mu(1.0, 1e-5), rel=1e-12)
    assert opt.result().release.guarantee.epsilon == pytest.approx(1.0, rel=1e-9)


def test_released_counts_are_the_true_counts_with_negligible_noise():
    # two independent computations agree: the count mechanism's (noise std ~1e-8) and the
    # gradient release's clip decisions (NON-PRIVATE diagnostics, test only)
    opt, _ = _run(_cfg(privacy_mu=1e8, record_non_private_diagnostics=True, clip_init=3.0, clip_learning_rate=1.0))
    result = opt.result()
    within = [round(N * (1 - frac)) for frac in result.diagnostics.clip_fractions]
    assert [round(c) for c in result.release.clip_counts] == within
    assert all(abs(c - round(c)) < 1e-6 for c in result.release.clip_counts)
    assert len(set(result.release.clip_bounds)) == len(result.release.clip_bounds)  # B moved every step


def test_budget_filter_refuses_the_step_before_anything_is_released():
    cfg = _cfg(privacy_mu=1.0, num_iterations=4, validation_mu_budget=0.6)  # room for 1 of the 4 steps (μ/√4 each)
    _, objective = normal_location(n=N, d=D)
    opt = DPGIBO(cfg)
    X = opt.ask()
    opt.tell(X, objective(X))
    spent = dict(opt.ledger.validation.steps())
    with pytest.raises(PrivacyBudgetExceeded, match="step 1 of run"):  # the count and the gradient together
        opt.ask()
    assert opt.ledger.validation.steps() == spent and opt.result().release.clip_counts.__len__() == 1


def test_resume_continues_bit_identically_and_refuses_a_changed_setting(tmp_path):
    cfg = _cfg()
    full, _ = _run(cfg)
    partial, _ = _run(cfg, steps=2, checkpoint_dir=tmp_path)
    partial.close()  # one owner per directory: the interrupted run gives it up
    resumed = DPGIBO.resume(tmp_path)
    assert resumed.result().release.clip_bounds == full.result().release.clip_bounds[:3]
    assert resumed.iteration == 2 and resumed.guarantee() == partial.guarantee()  # σ of B_1, the latest release's
    _, objective = normal_location(n=N, d=D)
    resumed.run(objective, progress=False)
    a, b = resumed.result().release, full.result().release
    assert a.clip_bounds == b.clip_bounds and a.clip_counts == b.clip_counts
    assert torch.equal(a.released_gradients, b.released_gradients) and torch.equal(a.theta, b.theta)
    resumed.close()
    clip = cfg.clip
    for changed_clip in (
        dataclasses.replace(clip, quantile=0.6),
        dataclasses.replace(clip, fraction=0.2),
        dataclasses.replace(clip, bound=1.0),
        FixedClip(2.0),
    ):
        with pytest.raises(ValueError, match="'clip' differs from the checkpoint"):
            DPGIBO.resume(tmp_path, dataclasses.replace(cfg, clip=changed_clip))


def test_a_damaged_clip_record_is_refused(tmp_path):
    _run(_cfg(), steps=2, checkpoint_dir=tmp_path)
    state_file = tmp_path / "state.json"
    good = json.loads(state_file.read_text())
    for damage in (
        lambda s: s["adaptive_clip"]["bounds"].__setitem__(1, (7.0).hex()),
        lambda s: s["adaptive_clip"]["counts"].pop(),
        lambda s: s.__setitem__("adaptive_clip", None),
    ):
        state = json.loads(json.dumps(good))
        damage(state)
        state_file.write_text(json.dumps(state))
        with pytest.raises(ValueError, match="adaptive_clip"):
            DPGIBO.resume(tmp_path)
