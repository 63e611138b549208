r"""``PrivateRelease.records``: each strategy's public record, made by the strategy, in one mapping.

Two tiny runs cover every family's record: A (adaptive clipping, the adaptive noise schedule, a
fixed subspace, ``"min_noisy_norm"``) and B (the private preconditioner, the fixed schedule,
``"noisy_loss"``). Each record is checked against a closed form or an independent computation
from the release itself; the former fields read the same values with a ``DeprecationWarning``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import warnings

import pytest
import torch

from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.optim.options.clip import next_clip_bound
from botorch_dp.optim.results import MOVED_FIELDS, PrivateRelease
from botorch_dp.optim.subspace import FixedSubspace
from tests.optim.loop_helpers import nl_config, normal_location

N, D, T, MU = 40, 2, 3, 2.0
FAMILIES = {"clip", "noise", "projection", "step_rule", "selection"}
#: The fields ``PrivateRelease`` had before the records, and where each value is now (written out
#: here, not read from ``MOVED_FIELDS``, so that a wrong mapping there fails).
OLD_FIELDS = {
    "step_mus": ("noise", "step_mus"),
    "noise_stds": ("noise", "noise_stds"),
    "noisy_norms": ("noise", "noisy_norms"),
    "norm_mus": ("noise", "norm_mus"),
    "selection_scores": ("selection", "scores"),
    "subspace_bases": ("projection", "bases"),
    "subspace_dims": ("projection", "dims"),
    "released_coordinates": ("projection", "coordinates"),
    "released_preconditioners": ("step_rule", "preconditioners"),
    "preconditioner_mus": ("step_rule", "mus"),
    "preconditioner_noise_stds": ("step_rule", "noise_stds"),
    "clip_bounds": ("clip", "bounds"),
    "clip_counts": ("clip", "counts"),
}


def _run(**settings):
    _, objective = normal_location(n=N, d=D, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the seeded noise warns; old keywords may warn
        opt = DPGIBO(nl_config(d=D, num_iterations=T, privacy_mu=MU, seed=0, **{"clip_bound": 5.0, **settings}))
        result = opt.run(objective, progress=False)
    return opt, result


@pytest.fixture(scope="module")
def run_a():
    settings = dict(
        clip_bound="adaptive",
        clip_init=1.0,
        clip_quantile=0.5,
        clip_learning_rate=0.2,
        clip_mu_fraction=0.1,
        noise_schedule="adaptive_norm",
        selection="min_noisy_norm",
        subspace=FixedSubspace(torch.tensor([[1.0], [1.0]], dtype=torch.float64)),
    )
    return _run(**settings)


@pytest.fixture(scope="module")
def run_b():
    settings = dict(
        step_rule="adagrad_full",
        preconditioner="private",
        preconditioner_mu_fraction=0.5,
        selection="noisy_loss",
        selection_mu=0.5,
        loss_clip=100.0,
    )
    return _run(**settings)


def test_every_family_records_what_its_strategy_released_run_a(run_a):
    opt, result = run_a
    r = result.release
    t = r.released_gradients.shape[0]
    assert set(r.records) == FAMILIES and t >= 1
    # clip: B_0 = clip_init, and each next bound is the geometric update of the released count
    clip = r.records["clip"]
    assert len(clip.bounds) == t + 1 and len(clip.counts) == t and clip.bounds[0] == 1.0
    for j in range(t):
        assert clip.bounds[j + 1] == next_clip_bound(clip.bounds[j], clip.counts[j], N, 0.5, 0.2)
    # noise: every norm at μ_N = μ_g √(f_N/T_max), μ_g = μ √(1 − f_C); and what the ledger recorded
    noise = r.records["noise"]
    mu_g = MU * math.sqrt(1.0 - 0.1)
    mu_n = mu_g * math.sqrt(opt.options.noise.norm_mu_fraction / T)
    assert len(noise.noisy_norms) == len(noise.norm_mus) == len(noise.step_mus) == len(noise.noise_stds) == t
    assert noise.norm_mus == pytest.approx([mu_n] * t, rel=1e-12)
    recorded: dict[str, list[float]] = {}
    for record in opt.ledger.validation.records(opt.run_id):  # keys "step-0000/norm", ...
        recorded.setdefault(record.key.split("/")[-1], []).append(record.event.mu)
    assert tuple(recorded["norm"]) == noise.norm_mus and tuple(recorded["grad"]) == noise.step_mus
    # projection: the fixed basis each step, and released gradients Ṽ_t ũ_t
    projection = r.records["projection"]
    basis = opt.options.projection.oracle.basis
    assert projection.dims == (1,) * t and all(torch.equal(V, basis) for V in projection.bases)
    for j in range(t):
        assert torch.equal(r.released_gradients[j], projection.bases[j] @ projection.coordinates[j])
    # step rule: SGD releases nothing; selection: the argmin of the released norms, and θ is that iterate
    assert r.records["step_rule"].preconditioners == () and r.records["step_rule"].mus == ()
    index = int(torch.tensor(noise.noisy_norms).argmin())
    assert r.records["selection"].index == r.selected_index == index and r.records["selection"].scores is None
    assert torch.equal(r.theta, r.iterates[index])


def test_every_family_records_what_its_strategy_released_run_b(run_b):
    opt, result = run_b
    r = result.release
    t = r.released_gradients.shape[0]
    assert set(r.records) == FAMILIES and t == T
    steps_mu = math.sqrt(MU * MU - 0.5 * 0.5)
    mu_g, mu_h = steps_mu * math.sqrt(0.5), steps_mu * math.sqrt(0.5)
    # noise: the fixed schedule, μ_g/√T per step with σ = 2B√T/(n μ_g)
    noise = r.records["noise"]
    assert noise.step_mus == pytest.approx([mu_g / math.sqrt(T)] * T, rel=1e-12)
    assert noise.noise_stds == pytest.approx([2 * 5.0 * math.sqrt(T) / (N * mu_g)] * T, rel=1e-12)
    assert noise.noisy_norms == () and noise.norm_mus == ()
    # step rule: one symmetric d x d Ĝ_t per step at μ_H/√T, as the ledger recorded it
    rule = r.records["step_rule"]
    assert rule.mus == pytest.approx([mu_h / math.sqrt(T)] * T, rel=1e-12)
    precond = [x.event.mu for x in opt.ledger.validation.records(opt.run_id) if x.key.endswith("/precond")]
    assert tuple(precond) == rule.mus
    assert len(rule.preconditioners) == len(rule.noise_stds) == T
    assert all(G.shape == (D, D) and torch.equal(G, G.T) for G in rule.preconditioners)
    # projection: no basis; the d released coordinates are the released gradients
    projection = r.records["projection"]
    assert projection.bases == () and projection.dims == ()
    assert torch.equal(torch.stack(projection.coordinates), r.released_gradients)
    # selection: the released noisy losses of θ_0..θ_T, the smallest wins
    selection = r.records["selection"]
    assert selection.scores.shape == (T + 1,) and selection.index == int(selection.scores.argmin())
    assert r.records["clip"].bounds == () and r.records["clip"].counts == ()


def test_no_record_holds_the_preconditioners_sensitive_columns(run_b):
    r"""The private preconditioner keeps the clean ``ū_t`` (SENSITIVE) in the run's track; the records
    made from that track hold none of them."""
    opt, result = run_b
    columns = opt.state.records.track.columns
    assert len(columns) == T
    held = [
        value
        for record in result.release.records.values()
        for f in dataclasses.fields(record)
        for value in (getattr(record, f.name) if isinstance(getattr(record, f.name), tuple) else ())
        if isinstance(value, torch.Tensor)
    ]
    assert held and not any(torch.equal(value, column) for value in held for column in columns)


def test_every_former_field_is_kept_as_a_property():
    assert set(MOVED_FIELDS) == set(OLD_FIELDS)
    assert all(isinstance(getattr(PrivateRelease, old), property) for old in OLD_FIELDS)


@pytest.mark.parametrize("old", sorted(OLD_FIELDS))
def test_the_former_fields_warn_and_return_the_records_values(run_a, run_b, old):
    family, attribute = OLD_FIELDS[old]
    for _, result in (run_a, run_b):
        release = result.release
        warned = rf"PrivateRelease\.{old} is deprecated; use PrivateRelease\.records\['{family}'\]\.{attribute}"
        with pytest.warns(DeprecationWarning, match=warned):
            value = getattr(release, old)
        new = getattr(release.records[family], attribute)
        if new is None or isinstance(new, torch.Tensor):  # the selection's scores
            assert value is new
        else:
            assert isinstance(value, list) and len(value) == len(new)
            assert all(a is b for a, b in zip(value, new, strict=True))  # the same numbers and tensors


def test_the_former_fields_are_read_only(run_a):
    release = run_a[1].release
    with pytest.raises(AttributeError):
        release.clip_bounds = []


def test_a_release_without_a_record_reads_empty_values():
    r"""A record a release does not hold reads as empty (a release made by hand, or a family whose
    strategy keeps no such value)."""
    zero = torch.zeros(0, 2, dtype=torch.float64)
    release = PrivateRelease(torch.zeros(2), torch.zeros(1, 2), zero, [], [], zero, guarantee=None)
    assert release.selected_index is None and release.recorded("noise", "step_mus") == ()
    assert release.field_value("clip_counts") == [] and release.field_value("selection_scores") is None


def test_json_and_released_values_read_the_records_without_a_deprecation_warning(run_a, run_b):
    for _, result in (run_a, run_b):
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)
            text = result.to_json()
            rows = result.released_values(as_frame=False)
        released = json.loads(text)["release"]
        r = result.release
        assert released["clip_counts"] == list(r.records["clip"].counts)
        assert released["noisy_norms"] == list(r.records["noise"].noisy_norms)
        assert released["subspace_dims"] == list(r.records["projection"].dims)
        assert released["selected_index"] == r.selected_index
        assert released["preconditioner_mus"] == list(r.records["step_rule"].mus)
        counts = [row["value"] for row in rows if row["quantity"] == "clip_count"]
        assert counts == list(r.records["clip"].counts)
        preconditioners = [row["value"] for row in rows if row["quantity"] == "preconditioner"]
        assert preconditioners == [G.tolist() for G in r.records["step_rule"].preconditioners]
