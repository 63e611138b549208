r"""The decaying clip (botorch_dp/optim/options/decaying_clip.py): step ``t`` clips at ``B_t = B·ρ^t``
(closed form), a public schedule that releases nothing of its own, so each gradient release is
``μ/√T``-GDP at sensitivity ``Δ_t = 2B_t/n`` (noise ``σ_t = 2B_t√T/(nμ)``); it runs in ``Options``
and through ``DPGIBO``, is rebuilt from its ``spec()``, refuses bad settings naming the field and
does not combine with the private preconditioner. The config holds it as its ``clip`` and a
checkpoint stores it by its spec."""

import json
import math
import warnings

import pytest
import torch

from botorch_dp.optim import DPGIBO, DPGIBOConfig
from botorch_dp.optim.options import DecayingClip, FixedClip, Options, from_spec, lookup
from botorch_dp.optim.options.base import RunPlan
from botorch_dp.optim.options.budget import BudgetSplit
from botorch_dp.optim.options.clip import ClipState
from botorch_dp.optim.options.noise import NoiseState
from botorch_dp.optim.options.projection import SubspaceTrack
from botorch_dp.optim.stored_config import config_to_json, encode_value
from botorch_dp.optim.users import InMemoryUsers
from botorch_dp.privacy.ledger import Gaussian, PrivacyLedger, parse_release_key
from botorch_dp.privacy.mechanisms import GaussianGradientMechanism
from tests.optim.options.strategy_config import config_with
from tests.test_option_pins import N, _objective, _settings

B, RHO, MU, T = 3.0, 0.5, 1.0, 3


def _closed_form(t: int) -> float:
    return B * RHO**t


def test_the_decaying_clip_is_registered_and_rebuilt_from_its_spec():
    clip = DecayingClip(2.5, 0.8)
    assert lookup("clip", "decaying") is DecayingClip and clip.key == "clip:decaying"
    assert clip.spec() == {"kind": "decaying", "bound": 2.5, "decay": 0.8}
    assert from_spec("clip", json.loads(json.dumps(clip.spec()))) == clip
    assert not isinstance(clip, FixedClip) and clip.base == FixedClip(2.5)  # it wraps a fixed clip


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: DecayingClip(0.0), r"bound \(B\)"),
        (lambda: DecayingClip(math.inf), r"bound \(B\)"),
        (lambda: DecayingClip(1.0, 0.0), r"decay \(ρ\)"),
        (lambda: DecayingClip(1.0, math.nan), r"decay \(ρ\)"),
        (lambda: DecayingClip(1.0, 1.5), r"decay \(ρ\) must lie in \(0, 1\], got 1.5"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(make, named):
    with pytest.raises(ValueError, match=named):
        make()


def test_the_bound_follows_its_closed_form_and_releases_nothing():
    clip = DecayingClip(B, RHO)
    plan = RunPlan(T, T, 2, 40, BudgetSplit(MU))
    state = clip.initial_state()
    assert clip.mu_fraction is None and clip.bound_parts(plan) == {} and clip.needs_finite_mu is None
    for t in range(5):
        assert clip.current(state) == _closed_form(t) == clip.at(t)
        state = clip.update(None, plan, state, meter=None)  # no release: the sum and the meter are not read
    assert state == ClipState(bounds=tuple(_closed_form(t) for t in range(6)), counts=())
    with pytest.raises(ValueError, match="underflows to 0"):
        DecayingClip(1.0, 1e-200).at(2)


def test_each_step_releases_the_gradient_at_sensitivity_2b_t_over_n_through_options():
    r"""``Options`` with the decaying clip: the step bound holds the gradient alone at ``μ/√T``, and
    each release equals the Gaussian mechanism's at ``B_t`` on the users' sum clipped at ``B_t``
    (an independent computation with the same seeded noise), bit for bit."""
    n = 40
    g = torch.Generator().manual_seed(5)
    users = InMemoryUsers((3.0 * torch.randn(4, n, generator=g, dtype=torch.float64),))
    W = torch.randn(2, 4, generator=g, dtype=torch.float64)
    options = Options(clip=DecayingClip(B, RHO))
    options.check(MU, 2, T)
    plan = RunPlan(T, T, 2, n, options.split(MU), generator=torch.Generator().manual_seed(7))
    reference = torch.Generator().manual_seed(7)
    ledger, noise, clip, track = PrivacyLedger(), NoiseState(), options.clip.initial_state(), SubspaceTrack()
    for t in range(T):
        bound = options.step_bound(plan, noise, [], math.inf)
        assert bound == {"grad": Gaussian(MU / math.sqrt(T))}  # no clip part: the schedule is free
        with ledger.charge(bound, run_id="run", step=t) as meter:
            out = options.release_step(
                users, W, plan, noise=noise, clip=clip, track=track, meter=meter, step=t, spent=[], room=math.inf
            )
        noise, clip = out.noise, out.clip
        mechanism = GaussianGradientMechanism(
            clip_bound=_closed_form(t), num_users=n, privacy_mu=MU, num_steps=T, generator=reference
        )
        expected = mechanism.release_sum(users.clipped_sum(W, _closed_form(t)))
        assert mechanism.sensitivity == 2.0 * _closed_form(t) / n
        torch.testing.assert_close(out.release.gradient, expected.gradient, rtol=0, atol=0)
        assert noise.noise_stds[-1] == mechanism.noise_std and noise.step_mus[-1] == MU / math.sqrt(T)
    assert clip.bounds == tuple(_closed_form(t) for t in range(T + 1))
    assert ledger.validation.mu() == pytest.approx(MU, rel=1e-12)


def test_a_dpgibo_run_clips_step_t_at_b_rho_t_and_charges_only_the_gradients():
    config = config_with(
        _settings({"num_iterations": T, "record_non_private_diagnostics": True}), clip=DecayingClip(B, RHO)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the diagnostics' and the seed's warnings
        opt = DPGIBO(config)
        release = opt.run(_objective, progress=False).release
    bounds = [_closed_form(t) for t in range(T + 1)]
    assert release.clip_bounds == bounds and release.clip_counts == []
    # σ_t = Δ_t √T / μ with Δ_t = 2 B_t / n: the noise is calibrated to the step's bound
    expected = [2.0 * bounds[t] / N * math.sqrt(T) / MU for t in range(T)]
    assert release.noise_stds == pytest.approx(expected, rel=1e-12)
    assert release.step_mus == pytest.approx([MU / math.sqrt(T)] * T, rel=1e-12)
    records = opt.ledger.validation.records(opt.run_id)
    assert [parse_release_key(r.key) for r in records] == [(t, "grad") for t in range(T)]
    assert all(r.event.mu == pytest.approx(MU / math.sqrt(T), rel=1e-12) for r in records)
    assert release.guarantee.mu == pytest.approx(MU, rel=1e-12)
    assert release.guarantee.noise_std == pytest.approx(expected[-1], rel=1e-12)
    diagnostics = opt.result().diagnostics
    assert diagnostics is not None
    for t in range(T):  # the released step's clean mean is a mean of vectors clipped at B_t
        assert float(diagnostics.unnoised_gradients[t].norm()) <= bounds[t] * (1 + 1e-12)
    assert diagnostics.clip_fractions[0] < diagnostics.clip_fractions[-1]  # the shrinking bound clips more users


def test_it_does_not_combine_with_the_private_preconditioner():
    assert "fixed_clip_bound" not in DecayingClip().provides and "fixed_clip_bound" in FixedClip().provides
    with pytest.raises(ValueError, match=r"preconditioner='private' needs one clip bound for every step"):
        config_with(_settings({"step_rule": "adagrad_full", "preconditioner": "private"}), clip=DecayingClip(B, RHO))


def test_the_config_holds_it_and_stores_it_by_its_spec():
    config = config_with(_settings({}), clip=DecayingClip(B, RHO))
    assert config.clip == config.options.clip == DecayingClip(B, RHO)
    assert json.loads(json.dumps(config_to_json(config)))["clip"] == encode_value(DecayingClip(B, RHO).spec())
    with pytest.warns(DeprecationWarning, match=r"use clip=DecayingClip"):  # the old field took strategy objects too
        assert DPGIBOConfig(**_settings({"clip_bound": DecayingClip(B, RHO)})).clip == DecayingClip(B, RHO)


def test_a_checkpoint_stores_it_by_its_spec_and_resumes_without_the_config(tmp_path):
    config = config_with(_settings({"num_iterations": T}), clip=DecayingClip(B, RHO))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the seed's warning
        full = DPGIBO(config).run(_objective, progress=False).release
        opt = DPGIBO(config, checkpoint_dir=tmp_path / "ck")
        opt.run(_objective, progress=False, callback=lambda info: info.iteration == 1)
        opt.close()
        resumed = DPGIBO.resume(tmp_path / "ck")  # the clip rebuilt from its spec through the registry
        assert resumed.config.clip == DecayingClip(B, RHO) and resumed.iteration == 1
        release = resumed.run(_objective, progress=False).release
    assert release.clip_bounds == full.clip_bounds == [_closed_form(t) for t in range(T + 1)]
    assert torch.equal(release.released_gradients, full.released_gradients)
