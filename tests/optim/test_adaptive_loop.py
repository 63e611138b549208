r"""DP-GIBO with Menart et al.'s options: ``noise_schedule="adaptive_norm"`` and ``selection``.

Oracles: the release reproduced by hand from the generator's normals and the schedule's
closed form (accounting from the realised ``σ_t``); the ledger (keys, exact spend,
idempotent re-recording after resume); the explicit budget split of the selections;
checkpoints that resume to the uninterrupted run bit for bit. Batches are uniform points
from the public search generator (as in ``test_fuzz``): batch selection is not what is
tested here, and ``optimize_acqf`` would make the file slow.
"""

from __future__ import annotations

import dataclasses
import json
import math
import warnings

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import botorch_dp.optim.options.batches as batches_module
from botorch_dp.optim.checkpoint import json_fingerprint
from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.optim.options import AdaptiveNorm, FixedNoise, Last
from botorch_dp.optim.options.noise import default_snr_factor
from botorch_dp.privacy.analysis.gdp import pure_dp_to_gdp_mu
from botorch_dp.privacy.ledger import PrivacyBudgetExceeded, PrivacyLedger, PureDP
from botorch_dp.privacy.mechanisms import ClippedMean, NormRelease, PrivacyCost, clipped_mean_gradient
from botorch_dp.privacy.mechanisms._noise import release_gaussian
from botorch_dp.privacy.seeding import noise_generator

from .loop_helpers import nl_config, normal_location, resumed_each
from .state_helpers import flat_config_json, same, snapshot, version_3_meta

D, N = 2, 40


@pytest.fixture(autouse=True)
def cheap_batches(monkeypatch):
    def search_batch(gp, theta, local_box, generator, *, batch_size, **_):
        u = torch.rand(batch_size, theta.shape[0], generator=generator, dtype=torch.float64)
        return local_box[0] + (local_box[1] - local_box[0]) * u

    monkeypatch.setattr(batches_module, "search_batch", search_batch)


@pytest.fixture(autouse=True)
def quiet_seed_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seeded noise warns; these tests need reproducible runs
        yield


def _cfg(**kw):
    settings = dict(d=D, privacy_mu=1.0, clip_bound=2.0, num_iterations=12, seed=4, noise_schedule="adaptive_norm")
    settings.update(kw)
    return nl_config(**settings)


def _run(cfg, **kwargs):
    _, objective = normal_location(n=N, d=D)
    opt = DPGIBO(cfg, **kwargs)
    return opt, opt.run(objective, progress=False)


# ------------------------------------------------------------------------ adaptive noise
def test_adaptive_run_spends_exactly_its_budget_with_one_norm_and_one_gradient_key_per_step():
    opt, result = _run(_cfg())
    r = result.release
    T = len(r.step_mus)
    assert 1 <= T <= 12 and opt.is_done and (opt.state.records.noise.stopped or T == 12)
    keys = [key for (_, key) in opt.ledger.validation.steps()]
    assert keys == [f"step-{t:04d}/{kind}" for t in range(T) for kind in ("norm", "grad")]
    recorded = list(opt.ledger.validation.steps().values())
    assert recorded[0::2] == r.norm_mus and recorded[1::2] == r.step_mus
    assert r.guarantee.mu == pytest.approx(1.0, rel=1e-9)  # the last step spent exactly the rest
    assert r.guarantee.rho == pytest.approx(0.5, rel=1e-9)
    delta = 2 * 2.0 / N
    assert r.noise_stds == [pytest.approx(delta / m, rel=1e-15) for m in r.step_mus]
    assert r.guarantee.noise_std == r.noise_stds[-1] and r.guarantee.num_steps == T
    assert r.selected_index == T and torch.equal(r.theta, r.iterates[-1])
    assert r.iterates.shape == (T + 1, D) and r.released_gradients.shape == (T, D) and len(r.noisy_norms) == T
    with pytest.raises(RuntimeError, match="finished"):
        opt.ask()


def test_releases_are_the_clipped_mean_plus_realised_noise_from_the_schedule():
    r"""Reproduce every release by hand: ``N_t = ‖ḡ_t‖`` released at ``μ_N``, then ``μ_t`` from the
    closed form ``σ_t = max(max(N_t, 0)/(c√d), Δ/μ_max)`` (or the rest, at the last step)
    and ``g̃_t = ḡ_t`` released at ``μ_t`` (``release_gaussian`` on the seeded generator)."""
    cfg = _cfg(record_non_private_diagnostics=True, num_iterations=30)
    opt, result = _run(cfg)
    r, diag = result.release, result.diagnostics
    T, delta = len(r.step_mus), 2 * 2.0 / N
    gen = noise_generator(4, stream=0)
    mu_n = math.sqrt(0.1 / 30)
    c_snr = default_snr_factor(N, 1.0)
    mu_max, mu_min = min(0.5, 2 / math.sqrt(30)), 1 / (2 * math.sqrt(30))
    spent = 0.0
    for t in range(T):
        g_bar = diag.unnoised_gradients[t]
        common = dict(sensitivity=delta, generator=gen, secure_rng=False, magnitude_bound=2.0)
        n_t = float(release_gaussian(g_bar.norm().reshape(1), mu=mu_n, **common)[0][0])
        assert r.noisy_norms[t] == pytest.approx(n_t, rel=1e-12, abs=1e-15) and r.norm_mus[t] == pytest.approx(mu_n)
        spent += mu_n**2
        sigma = max(max(n_t, 0.0) / (c_snr * math.sqrt(D)), delta / mu_max)
        target = max(delta / sigma, mu_min)
        rest = 1.0 - spent
        final = target**2 > rest - (mu_n**2 + mu_min**2) or t == 29
        mu_t = math.sqrt(rest) if final else target
        assert r.step_mus[t] == pytest.approx(mu_t, rel=1e-12)
        expected, _ = release_gaussian(g_bar, mu=r.step_mus[t], **common)
        assert torch.equal(r.released_gradients[t], expected)
        spent += mu_t**2
        assert final == (t == T - 1)
    assert T >= 3  # the closed form was exercised over several steps


@settings(max_examples=10, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(
    norms=st.lists(
        st.sampled_from([-1e300, -3.0, -1e-300, 0.0, 5e-324, 1e-9, 0.05, 1.0, 1e300]), min_size=6, max_size=6
    )
)
def test_adversarial_released_norms_never_overspend_the_loop(norms):
    r"""Whatever the released norms are (a mechanism double returns them), the loop's
    ledger never exceeds μ and the run ends with a step that spends exactly the rest."""
    released = iter(norms)
    original = ClippedMean.release_norm

    def adversarial(self, mu, **kwargs):
        original(self, mu, **kwargs)  # the real release, then an adversarial value in its place
        return NormRelease(norm=next(released), cost=PrivacyCost(mu=mu), noise_std=0.0)

    ClippedMean.release_norm = adversarial
    try:
        opt, result = _run(_cfg(num_iterations=6, privacy_mu=0.7))
    finally:
        ClippedMean.release_norm = original
    total = math.fsum(mu * mu for mu in opt.ledger.validation.steps().values())
    assert total <= 0.49 * (1 + 1e-9) and total == pytest.approx(0.49, rel=1e-9)
    assert opt.is_done and len(result.release.step_mus) <= 6


def test_the_released_noise_uses_the_modules_clipped_mean():
    r"""The un-noised value behind each release is ``clipped_mean_gradient`` of the GP's
    weights at ``θ_t`` (the module's one clipped mean, not a copy)."""
    cfg = _cfg(record_non_private_diagnostics=True, num_iterations=3, privacy_mu=2.0)
    opt, result = _run(cfg)
    from botorch_dp.gradient_gp import GradientGP

    X, Y = result.release.evaluation_points, torch.cat(list(opt.state.blocks))
    sizes = result.release.batch_sizes
    for t in range(len(sizes)):
        rows = sum(sizes[: t + 1])
        gp = GradientGP(X[:rows], opt.kernel, opt.noise_variance, jitter=cfg.jitter)
        A = gp.gradient_weights(result.release.iterates[t])
        expected, _ = clipped_mean_gradient(A, Y[:rows], 2.0)
        torch.testing.assert_close(result.diagnostics.unnoised_gradients[t], expected, rtol=1e-10, atol=1e-12)


def test_fixed_schedule_reports_its_constant_noise_per_step():
    opt, result = _run(_cfg(noise_schedule="fixed", num_iterations=4))
    r = result.release
    assert r.step_mus == [pytest.approx(0.5)] * 4 and r.noise_stds == [pytest.approx(2 * 2.0 * 2 / (N * 1.0))] * 4
    assert r.noisy_norms == [] and r.norm_mus == [] and r.selected_index == 4
    assert [key for (_, key) in opt.ledger.validation.steps()] == [f"step-{t:04d}" for t in range(4)]


def test_a_tight_ledger_caps_the_schedule_and_then_refuses_before_anything_is_recorded():
    r"""A ledger budget below the schedule's total is one check with the schedule's filter:
    the run plans with what the ledger has left and its last step spends exactly that, so no
    step is refused half way (after its norm release). Another run on the spent ledger is
    refused before anything is drawn: no record, no state change."""
    ledger = PrivacyLedger(validation_mu_budget=0.5)
    _, objective = normal_location(n=N, d=D)
    opt = DPGIBO(_cfg(), ledger=ledger)
    opt.run(objective, progress=False)
    assert opt.is_done
    assert ledger.validation.mu() == pytest.approx(0.5, rel=1e-9) and ledger.validation.mu() <= 0.5 * (1 + 1e-9)
    keys = [r.key for r in ledger.validation.records()]
    assert keys == [f"step-{t:04d}/{part}" for t in range(len(keys) // 2) for part in ("norm", "grad")]
    other = DPGIBO(_cfg(), ledger=ledger)
    before, records = snapshot(other), ledger.validation.records()
    with pytest.raises(PrivacyBudgetExceeded, match="Nothing was released"):
        other.ask()  # before its batch is searched for or evaluated
    assert same(snapshot(other), before) and ledger.validation.records() == records


# -------------------------------------------------------------------------- selection
def test_min_noisy_norm_costs_nothing_and_returns_the_argmin():
    opt_last, last = _run(_cfg())
    opt_min, chosen = _run(_cfg(selection="min_noisy_norm"))
    assert list(opt_min.ledger.validation.steps().values()) == list(opt_last.ledger.validation.steps().values())
    assert torch.equal(chosen.release.iterates, last.release.iterates)
    j = chosen.release.selected_index
    assert chosen.release.noisy_norms[j] == min(chosen.release.noisy_norms)
    assert torch.equal(chosen.release.theta, chosen.release.iterates[j])
    assert chosen.release.guarantee.mu == last.release.guarantee.mu


@pytest.mark.parametrize("schedule", ["fixed", "adaptive_norm"])
@pytest.mark.parametrize("selection", ["exponential", "noisy_loss"])
def test_evaluated_selection_asks_for_the_iterates_and_is_charged(selection, schedule):
    extra = {"selection_epsilon": 0.4} if selection == "exponential" else {"selection_mu": 0.3}
    cfg = _cfg(noise_schedule=schedule, num_iterations=5, selection=selection, loss_clip=20.0, **extra)
    mu_sel = pure_dp_to_gdp_mu(0.4) if selection == "exponential" else 0.3
    assert cfg.mu_split.selection_mu == mu_sel and cfg.mu_split.steps_mu == pytest.approx(math.sqrt(1 - mu_sel**2))
    _, objective = normal_location(n=N, d=D)
    opt = DPGIBO(cfg)
    infos = []
    while not opt.is_done:
        X = opt.ask()
        if opt.steps_done:  # the selection batch: the iterates themselves
            assert torch.equal(X, torch.stack(list(opt.state.iterates)))
        infos.append(opt.tell(X, objective(X)))
    r = opt.result().release
    T = r.iterates.shape[0] - 1
    assert infos[-1].selected_index == r.selected_index and math.isnan(infos[-1].posterior_trace)
    assert all(info.selected_index is None for info in infos[:-1]) and infos[-1].batch_size == T + 1
    assert torch.equal(r.theta, r.iterates[r.selected_index])
    steps = [(key, mu) for (_, key), mu in opt.ledger.validation.steps().items() if key != "select"]
    assert math.fsum(mu * mu for _, mu in steps) == pytest.approx(cfg.mu_split.steps_mu**2, rel=1e-9)
    assert opt.ledger.validation.steps()[(opt.run_id, "select")] == pytest.approx(mu_sel, rel=1e-12)
    assert r.guarantee.mu == pytest.approx(1.0, rel=1e-9)
    if selection == "exponential":
        assert [(r.key, r.event) for r in opt.ledger.validation.records() if r.key == "select"] == [
            ("select", PureDP(0.4))
        ]
        assert r.selection_scores is None
    else:
        assert r.selection_scores.shape == (T + 1,) and r.selected_index == int(torch.argmin(r.selection_scores))
    if schedule == "fixed":  # the steps' noise is calibrated to μ_steps
        assert r.noise_stds[0] == pytest.approx(2 * 2.0 * math.sqrt(5) / (N * cfg.mu_split.steps_mu), rel=1e-12)
    assert len(r.evaluation_points) + T + 1 <= cfg.max_evaluations


def test_run_calls_back_with_the_selection():
    cfg = _cfg(num_iterations=3, selection="exponential", selection_epsilon=0.5, loss_clip=20.0)
    _, objective = normal_location(n=N, d=D)
    seen = []
    result = DPGIBO(cfg).run(objective, progress=False, callback=seen.append)
    assert seen[-1].selected_index == result.release.selected_index is not None
    assert [s.iteration for s in seen[:-1]] == list(range(1, len(seen)))


# ------------------------------------------------------------------------ configuration
@pytest.mark.parametrize(
    "kw, match",
    [
        ({"privacy_mu": math.inf}, "needs a finite privacy_mu"),
        ({"noise_schedule": "fixed", "max_iterations": 5}, "max_iterations is only used"),
        ({"noise_schedule": "fixed", "norm_mu_fraction": 0.2}, "norm_mu_fraction is only used"),
        ({"noise_schedule": "fixed", "snr_factor": 2.0}, "snr_factor is only used"),
        ({"noise_schedule": "fixed", "selection": "min_noisy_norm"}, "only noise_schedule='adaptive_norm'"),
        ({"noise_schedule": "bursty"}, "noise_schedule must be one of"),
        ({"norm_mu_fraction": 1.5}, "norm_mu_fraction"),
        ({"max_step_mu": 2.0}, "max_step_mu"),
        ({"max_iterations": 0}, "max_iterations"),
        ({"max_iterations": 1, "norm_mu_fraction": 0.9}, "One step needs"),
        ({"selection": "exponential", "loss_clip": 1.0}, "needs selection_epsilon"),
        ({"selection": "noisy_loss", "selection_mu": 1.0, "loss_clip": 1.0}, "must be below privacy_mu"),
        ({"selection": "last", "selection_mu": 0.1}, "selection_mu is only used"),
    ],
)
def test_bad_options_are_refused_naming_the_field(kw, match):
    with pytest.raises(ValueError, match=match):
        _cfg(**kw)


def test_max_iterations_caps_the_adaptive_steps_and_the_evaluations():
    cfg = _cfg(max_iterations=3, batch_size=2, norm_mu_fraction=0.05, max_step_mu=0.05)
    assert cfg.iteration_cap == 3 and cfg.max_evaluations == 6
    _, result = _run(cfg)
    assert len(result.release.step_mus) == 3 and result.release.guarantee.mu == pytest.approx(1.0, rel=1e-9)
    assert result.release.step_mus[-1] > 0.05  # the third step, the last allowed, took the rest


# ---------------------------------------------------------------------- checkpoint/resume
@pytest.mark.parametrize("selection", ["min_noisy_norm", "noisy_loss"])
def test_resume_reproduces_the_uninterrupted_run_with_two_releases_per_step(tmp_path, selection):
    extra = {"selection_mu": 0.3, "loss_clip": 20.0} if selection == "noisy_loss" else {}
    cfg = _cfg(selection=selection, **extra)
    _, objective = normal_location(n=N, d=D)
    full = DPGIBO(cfg).run(objective, progress=False).release
    opt = DPGIBO(cfg, checkpoint_dir=tmp_path)
    opt.run(objective, progress=False, callback=lambda info: info.iteration == 2)
    X = opt.ask()  # crash after ask, before tell
    del opt
    opt = DPGIBO.resume(tmp_path)
    assert torch.equal(opt.ask(), X)
    while not opt.steps_done:
        X = opt.ask()
        opt.tell(X, objective(X))
    if selection == "noisy_loss":  # crash in the selection phase, after its ask
        opt.ask()
        opt.close()
        opt = DPGIBO.resume(tmp_path)
        assert opt.steps_done and not opt.is_done
    resumed = opt.run(objective, progress=False).release
    for name in (
        "iterates",
        "released_gradients",
        "step_mus",
        "noise_stds",
        "noisy_norms",
        "norm_mus",
        "selected_index",
    ):
        assert same(getattr(resumed, name), getattr(full, name)), name
    assert same(resumed.selection_scores, full.selection_scores)
    assert resumed.guarantee.mu == pytest.approx(1.0, rel=1e-9)
    T = len(full.step_mus)
    # one record per release made: the checkpoint's records were merged, none counted twice
    assert len(opt.ledger.validation.records()) == 2 * T + (selection == "noisy_loss")
    assert len({r.release_id for r in opt.ledger.validation.records()}) == 2 * T + (selection == "noisy_loss")


def test_finished_adaptive_run_resumes_as_finished(tmp_path):
    cfg = _cfg(selection="min_noisy_norm")
    opt, result = _run(cfg, checkpoint_dir=tmp_path)
    opt.close()
    resumed = DPGIBO.resume(tmp_path)
    assert resumed.is_done and resumed.state.records.noise.stopped == opt.state.records.noise.stopped
    assert same(resumed.result().release.selected_index, result.release.selected_index)


def test_a_damaged_noise_record_is_refused(tmp_path):
    opt, _ = _run(_cfg(num_iterations=4), checkpoint_dir=tmp_path)
    opt.close()
    state_file = tmp_path / "state.json"
    good = json.loads(state_file.read_text())
    for family, field, value in [
        ("noise", "step_mus", [(0.3).hex()] * len(good["strategies"]["noise"]["step_mus"])),
        ("noise", "noisy_norms", []),
        ("noise", "stopped", "yes"),
        ("selection", "selected_index", 1),  # min_noisy_norm keeps no state
    ]:
        state = json.loads(json.dumps(good))
        state["strategies"][family][field] = value
        state_file.write_text(json.dumps(state))
        with pytest.raises(ValueError, match=f"strategies.{family}"):
            DPGIBO.resume(tmp_path)


def test_checkpoint_written_before_the_seed_003_fields_still_resumes(tmp_path):
    cfg = _cfg(noise_schedule="fixed", num_iterations=3)
    _, objective = normal_location(n=N, d=D)
    opt = DPGIBO(cfg, checkpoint_dir=tmp_path)
    X = opt.ask()
    opt.tell(X, objective(X))
    opt.close()
    state_file = tmp_path / "state.json"
    state = json.loads(state_file.read_text())
    state["config"] = flat_config_json(cfg)  # the flat fields, as before issue 42
    for name in (
        "noise_schedule",
        "max_iterations",
        "norm_mu_fraction",
        "snr_factor",
        "max_step_mu",
        "selection",
        "selection_epsilon",
        "selection_mu",
        "loss_clip",
    ):
        del state["config"][name]
    state = version_3_meta(state)
    del state["noise_and_selection"]  # what an older version wrote
    state["config_fingerprint"] = json_fingerprint(state["config"])  # of the config it wrote
    state_file.write_text(json.dumps(state))
    for resumed in resumed_each(tmp_path, None, cfg):
        assert resumed.iteration == 1 and resumed.config.noise == FixedNoise() and resumed.config.selection == Last()
        assert resumed.result().release.step_mus == [pytest.approx(1.0 / math.sqrt(3))]
    with pytest.raises(ValueError, match="differs from the checkpoint"):
        DPGIBO.resume(tmp_path, dataclasses.replace(cfg, noise=AdaptiveNorm()))
