r"""The strategies' run records and the ``KeepsRunState`` pair (botorch_dp/optim/options/records.py): each
strategy writes its own part of the records as exact JSON (a strategy without state writes ``{}``), and
restores it checked against the steps taken, the config and the ledger's records, refusing a wrong count,
a value the ledger disagrees with or a key it does not know, naming the field ``strategies.<family>.<key>``.
(Through whole runs and the old checkpoints: tests/optim/test_run_state.py, test_clip.py,
test_adaptive_loop.py, test_subspace_loop.py.)"""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest
import torch

from botorch_dp.optim.options import (
    SGD,
    AdaptiveNorm,
    Exponential,
    FixedClip,
    FixedNoise,
    FullMatrixAdaGrad,
    KeepsRunState,
    Last,
    NoisyLoss,
    NoProjection,
    Projected,
    RunRecords,
    restore_state_of,
    state_json_of,
    state_keeper,
)
from botorch_dp.optim.options.base import RunPlan
from botorch_dp.optim.options.budget import BudgetSplit
from botorch_dp.optim.options.clip import SavedClipState
from botorch_dp.optim.options.noise import SavedNoiseState
from botorch_dp.optim.options.records import (
    NoiseState,
    ResumeContext,
    SubspaceTrack,
    compact,
    floats_from_json,
    payload_entries,
)
from botorch_dp.optim.subspace import FixedSubspace
from botorch_dp.privacy.mechanisms import GaussianGradientMechanism
from tests.optim.state_helpers import same

MU, T, N, B = 1.0, 4, 10, 2.0


def _context(steps=1, recorded=None, **options):
    plan = RunPlan(T, T, 2, N, BudgetSplit(MU))
    family = {"clip": FixedClip(B), "step_rule": SGD(), **options}
    return ResumeContext(steps, 2, N, plan, recorded or {}, SimpleNamespace(**family), run_id="run")


def _round_trip(strategy, records, context):
    payload = json.loads(json.dumps(strategy.state_json(records)))
    return strategy.restore_state(payload, RunRecords(), context)


def test_compact_leaves_out_empty_values_but_keeps_a_zero_index():
    assert compact({"a": [], "b": None, "c": False, "d": 0, "e": [1], "f": True}) == {"d": 0, "e": [1], "f": True}
    assert payload_entries({"a": 1}, {"a": 0, "b": []}, "x") == {"a": 1, "b": []}
    with pytest.raises(ValueError, match=r"'strategies.x': unknown keys \['c'\] \(it may hold \['a'\]\)"):
        payload_entries({"c": 1}, {"a": 0}, "x")
    with pytest.raises(ValueError, match="'f' must hold 2 values, got 1"):
        floats_from_json([(1.0).hex()], 2, "f")


def test_the_fixed_schedule_stores_nothing_and_rebuilds_each_steps_noise_from_the_clip_bound():
    mechanism = GaussianGradientMechanism(clip_bound=B, num_users=N, privacy_mu=MU, num_steps=T)
    charged = {"step-0000": [mechanism.step_mu], "step-0001": [mechanism.step_mu]}  # MU/√T each
    records = _round_trip(FixedNoise(), RunRecords(), _context(steps=2, recorded=charged))
    with pytest.raises(ValueError, match="release 'step-0001' of run 'run' was not charged mu=0.5"):
        FixedNoise().restore_state({}, RunRecords(), _context(steps=2, recorded={**charged, "step-0001": [0.1]}))
    assert FixedNoise().state_json(RunRecords(noise=NoiseState((0.5,), (1.0,)))) == {}
    assert records.noise == NoiseState((mechanism.step_mu,) * 2, (mechanism.noise_std,) * 2)
    with pytest.raises(ValueError, match=r"'strategies.noise': unknown keys \['stopped'\]"):
        FixedNoise().restore_state({"stopped": True}, RunRecords(), _context())


def test_the_adaptive_schedules_stored_values_must_be_the_ledgers():
    stored = NoiseState((0.5,), (3.0,), (-0.1,), (0.2,), True)
    context = _context(recorded={"step-0000/norm": [0.2], "step-0000/grad": [0.5]})
    assert _round_trip(AdaptiveNorm(), RunRecords(noise=stored), context) == RunRecords(noise=stored)
    entry = AdaptiveNorm().state_json(RunRecords(noise=stored))
    for name, value, match in [
        ("norm_mus", [(0.25).hex()], "'strategies.noise.norm_mus' disagrees with the ledger at step 0"),
        ("step_mus", [], "'strategies.noise.step_mus' must hold 1 values, got 0"),
        ("noise_stds", [(-3.0).hex()], "'strategies.noise.noise_stds' must hold positive values"),
        ("stopped", "yes", "'strategies.noise.stopped' must be a bool, got 'yes'"),
        ("selected_index", 0, r"'strategies.noise': unknown keys \['selected_index'\]"),
    ]:
        with pytest.raises(ValueError, match=match):
            AdaptiveNorm().restore_state({**entry, name: value}, RunRecords(), context)


def test_an_evaluated_selection_keeps_its_choice_and_only_a_scoring_rule_its_scores():
    scores = torch.tensor([0.3, 0.1], dtype=torch.float64)
    context = _context(recorded={"select": [0.3]})
    made = RunRecords(selected=1, selection_scores=scores)
    restored = _round_trip(NoisyLoss(0.3, 1.0), made, context)
    assert restored.selected == 1 and torch.equal(restored.selection_scores, scores)
    assert _round_trip(Exponential(1.0, 1.0), RunRecords(selected=0), context) == RunRecords(selected=0)
    assert NoisyLoss(0.3, 1.0).state_json(RunRecords()) == {}  # nothing chosen yet
    with pytest.raises(ValueError, match="'strategies.selection.selection_scores' must be given exactly"):
        Exponential(1.0, 1.0).restore_state(NoisyLoss(0.3, 1.0).state_json(made), RunRecords(), context)
    with pytest.raises(ValueError, match=r"'strategies.selection.selected_index' must be None or an index in \[0, 1\]"):
        NoisyLoss(0.3, 1.0).restore_state({"selected_index": 1}, RunRecords(), _context())  # no "select" record
    assert not isinstance(Last(), KeepsRunState)  # a free rule keeps no state: its payload must be empty
    with pytest.raises(ValueError, match="'strategies.selection' must be empty: its strategy keeps no run state"):
        restore_state_of(state_keeper(Last()), "selection", {"selected_index": 0}, RunRecords(), context)
    assert state_keeper(Last()) is None and state_json_of(None, made) == {}


def test_the_projection_and_the_step_rule_each_restore_their_part_of_the_track():
    V = torch.eye(2, dtype=torch.float64)[:, :1]
    u, G, x = torch.tensor([0.5], dtype=torch.float64), torch.tensor([[2.0]], dtype=torch.float64), 0.25
    track = SubspaceTrack(bases=(V,), coordinates=(u,), preconditioners=(G,), preconditioner_noise_stds=(x,))
    track = dataclasses.replace(track, columns=(u,))
    private, projected = FullMatrixAdaGrad("private"), Projected(FixedSubspace(V))
    context = _context(step_rule=private)
    assert set(projected.state_json(RunRecords(track=track))) == {"bases", "coordinates"}
    assert set(private.state_json(RunRecords(track=track))) == {
        "preconditioners",
        "preconditioner_noise_stds",
        "columns",
    }
    records = _round_trip(projected, RunRecords(track=track), context)
    records = private.restore_state(
        json.loads(json.dumps(private.state_json(RunRecords(track=track)))), records, context
    )
    assert same(records.track, track)
    assert records.track.preconditioner_noise_stds == (x,)
    with pytest.raises(ValueError, match="'strategies.projection.bases' must hold 1 entries, got 0"):
        projected.restore_state({}, RunRecords(), context)
    rotated = torch.tensor([[1.0], [1.0]], dtype=torch.float64)  # not orthonormal
    with pytest.raises(ValueError, match="strategies.projection.bases"):
        projected.restore_state(
            projected.state_json(RunRecords(track=SubspaceTrack((rotated,), (u,)))), RunRecords(), context
        )
    # without a basis the coordinates are kept (d of them) only for a rule that keeps them
    plain = SubspaceTrack(coordinates=(torch.zeros(2, dtype=torch.float64),))
    assert NoProjection().state_json(RunRecords()) == {}
    assert _round_trip(NoProjection(), RunRecords(track=plain), context).track.coordinates[0].shape == (2,)
    with pytest.raises(ValueError, match="'strategies.projection.coordinates' must hold 0 entries, got 1"):
        NoProjection().restore_state(NoProjection().state_json(RunRecords(track=plain)), RunRecords(), _context())
    wrong = dataclasses.replace(track, preconditioners=(torch.eye(2, dtype=torch.float64),))  # k = 1
    with pytest.raises(ValueError, match="strategies.step_rule.preconditioners"):
        private.restore_state(private.state_json(RunRecords(track=wrong)), records, context)
    assert FullMatrixAdaGrad("noisy").state_json(RunRecords()) == {} and not isinstance(SGD(), KeepsRunState)


def test_a_users_schedule_or_clip_policy_without_the_pair_is_kept_by_its_familys_keeper():
    r"""``state_keeper``: a strategy without ``state_json``/``restore_state`` gets its family's keeper
    (clip, noise), which checks the stored values as the package's do; other families keep no state."""
    user_noise = SimpleNamespace(family="noise")  # no pair: the noise family's keeper
    keeper = state_keeper(user_noise)
    assert isinstance(keeper, SavedNoiseState) and state_keeper(SimpleNamespace(family="batches")) is None
    stored = NoiseState(step_mus=(0.5, 0.25), noise_stds=(2.0, 4.0))  # no norms: a schedule that releases none
    context = _context(steps=2, recorded={"step-0000": [0.5], "step-0001": [0.25]})
    assert _round_trip(keeper, RunRecords(noise=stored), context) == RunRecords(noise=stored)
    with pytest.raises(ValueError, match="'strategies.noise.step_mus' disagrees with the ledger at step 1"):
        _round_trip(keeper, RunRecords(noise=dataclasses.replace(stored, step_mus=(0.5, 0.3))), context)
    with pytest.raises(ValueError, match="'strategies.noise.noise_stds' must hold 2 values, got 1"):
        _round_trip(keeper, RunRecords(noise=dataclasses.replace(stored, noise_stds=(2.0,))), context)
    assert isinstance(state_keeper(SimpleNamespace(family="clip")), SavedClipState)
