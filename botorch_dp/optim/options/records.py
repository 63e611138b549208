r"""The strategies' run records, and how a strategy saves and checks its own: ``KeepsRunState``.

A run keeps each strategy's record in ``RunRecords``: the noise schedule's ``NoiseState``, the
clip policy's ``ClipState``, the ``SubspaceTrack`` (the projection owns its ``bases`` and
``coordinates``, the step rule its ``preconditioners``, their noise stds and the SENSITIVE
``columns``) and the evaluated selection's choice. A checkpoint stores, under one key, each
family's ``state_json(records)``: exact JSON of that strategy's part (floats as ``float.hex``;
empty values left out by ``compact``, so a strategy without state writes ``{}``). On resume the
families are restored in ``Options``' order (clip, noise, projection, step rule, selection,
batches, fitting): ``restore_state(payload, records, context)`` checks the payload against the
config, the steps taken and the ledger's records (a ``ValueError`` naming the checkpoint field
``strategies.<family>.<key>`` and what is wrong), and returns ``records`` with its part set. A
key it does not know is refused; a key left out is the empty value. A strategy without the pair
is kept by its family's keeper (clip, noise) or keeps no state (its payload must be empty,
``restore_state_of``): a projection, step rule or selection must then declare ``stateless = True``,
else its run is refused a checkpoint (``options.state_keeper``). Nothing here unpickles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from torch import Tensor

from botorch_dp.optim.checkpoint.encoding import float_from_json, tensor_from_json, tensor_to_json
from botorch_dp.optim.options.base import RunPlan

__all__ = [
    "ClipState",
    "KeepsRunState",
    "NoiseState",
    "ResumeContext",
    "RunRecords",
    "SubspaceTrack",
    "compact",
    "floats_from_json",
    "floats_to_json",
    "payload_entries",
    "restore_state_of",
    "state_json_of",
    "tensors_from_json",
    "tensors_to_json",
]


@dataclass(frozen=True)
class ClipState:
    r"""A moving bound's public record: ``B_0..B_t`` and the released counts ``b̃_0..b̃_{t−1}``
    (both empty for a fixed bound)."""

    bounds: tuple[float, ...] = ()
    counts: tuple[float, ...] = ()

    def json_fields(self) -> dict[str, Any]:
        r"""Its values under their keys in a release's JSON (``DPGIBOResult.to_json``)."""
        return {"clip_bounds": list(self.bounds), "clip_counts": list(self.counts)}

    def released(self) -> dict[tuple[int | None, str], Any]:
        r"""What it released, by ``(step, ledger part)``: each step's noisy count (``"clip"``)."""
        return {(step, "clip"): count for step, count in enumerate(self.counts)}

    def charged(self) -> dict[tuple[int | None, str], float | None]:
        r"""The μ of each release it holds (``None``: not held here; the count's is the ledger's)."""
        return dict.fromkeys(self.released())


@dataclass(frozen=True)
class NoiseState:
    r"""The noise schedule's public record, one entry per step.

    Attributes:
        step_mus: ``μ_t`` of each gradient release.
        noise_stds: ``σ_t`` of each gradient release.
        noisy_norms: The released ``N_t`` (``AdaptiveNorm`` only).
        norm_mus: ``μ_N`` of each norm release (``AdaptiveNorm`` only).
        stopped: Whether the filter ended the steps (``AdaptiveNorm`` only).
    """

    step_mus: tuple[float, ...] = ()
    noise_stds: tuple[float, ...] = ()
    noisy_norms: tuple[float, ...] = ()
    norm_mus: tuple[float, ...] = ()
    stopped: bool = False

    def json_fields(self) -> dict[str, Any]:
        r"""Its per-step values under their keys in a release's JSON (``DPGIBOResult.to_json``)."""
        return {name: list(getattr(self, name)) for name in ("step_mus", "noise_stds", "noisy_norms", "norm_mus")}

    def released(self) -> dict[tuple[int | None, str], Any]:
        r"""What it released besides the gradients, by ``(step, ledger part)``: the noisy norms (``"norm"``)."""
        return {(step, "norm"): norm for step, norm in enumerate(self.noisy_norms)}

    def charged(self) -> dict[tuple[int | None, str], float | None]:
        r"""The μ of each gradient (``"grad"``) and norm (``"norm"``) release."""
        charged: dict[tuple[int | None, str], float | None] = {}
        for part, mus in (("grad", self.step_mus), ("norm", self.norm_mus)):
            charged.update({(step, part): mu for step, mu in enumerate(mus)})
        return charged


@dataclass(frozen=True)
class SubspaceTrack:
    r"""What Kairouz et al.'s options add to a DP-GIBO run's state, one entry per step.

    Immutable: the loop replaces it at each step (so a failed ``tell`` restores it).

    Attributes:
        bases: ``Ṽ_t`` (``d x k``, public) of each step; empty without a subspace (the projection's).
        coordinates: ``ũ_t`` (``k``; ``d`` without a subspace), the released coordinates;
            empty unless a subspace or the private preconditioner is on (the projection's).
        preconditioners: The released ``Ĝ_t`` (``k x k``, public); private preconditioner only
            (the step rule's, as the next two).
        preconditioner_noise_stds: ``σ_B(t)`` of those releases (public).
        columns: SENSITIVE clean ``ū_t`` (``k``), the private preconditioner's input
            ``X_t = [ū_1 … ū_t]``; kept only in the run and its (protected) checkpoint.
    """

    bases: tuple[Tensor, ...] = ()
    coordinates: tuple[Tensor, ...] = ()
    preconditioners: tuple[Tensor, ...] = ()
    preconditioner_noise_stds: tuple[float, ...] = ()
    columns: tuple[Tensor, ...] = ()


@dataclass(frozen=True)
class RunRecords:
    r"""The strategies' records of a run (``RunState.records``).

    Attributes:
        noise: The noise schedule's record.
        clip: The clip policy's record.
        track: The projection's and the step rule's fields (see ``SubspaceTrack``).
        selected: The evaluated selection's choice (``None`` until made).
        selection_scores: Its released scores (``NoisyLoss``), else ``None``.
    """

    noise: NoiseState = field(default_factory=NoiseState)
    clip: ClipState = field(default_factory=ClipState)
    track: SubspaceTrack = field(default_factory=SubspaceTrack)
    selected: int | None = None
    selection_scores: Tensor | None = None


@dataclass(frozen=True)
class ResumeContext:
    r"""What a strategy checks its stored state against on resume (all public).

    Attributes:
        steps: ``T``, the steps the run has taken.
        dim: ``d``.
        num_users: ``n`` (``None`` before the first tell).
        plan: The run's ``RunPlan`` for ``n``.
        recorded: The μ of each of the run's ledger records, by key (``budget.recorded_mus``).
        options: The run's ``Options``: a strategy may read the others' protocol members (the
            clip policy's bound of a step, whether the step rule keeps the coordinates).
        step_parts: The ledger parts of each step (``release_key``'s ``parts``).
        run_id: The run's id (for messages).
    """

    steps: int
    dim: int
    num_users: int | None
    plan: RunPlan
    recorded: Mapping[str, list[float]]
    options: Any
    step_parts: tuple[str, ...] = ("grad",)
    run_id: str = ""


@runtime_checkable
class KeepsRunState(Protocol):
    r"""A strategy that saves and checks its own part of a run's records (see the module)."""

    def state_json(self, records: RunRecords) -> dict[str, Any]:
        r"""Its part of ``records`` as exact JSON (``compact``: empty values left out)."""
        ...

    def restore_state(self, payload: dict[str, Any], records: RunRecords, context: ResumeContext) -> RunRecords:
        r"""``records`` with its part decoded from ``payload`` and checked (``ValueError`` naming the field)."""
        ...


def state_json_of(keeper: KeepsRunState | None, records: RunRecords) -> dict[str, Any]:
    r"""``keeper.state_json(records)`` (``Options.state_keeper``), or ``{}`` without one (no state)."""
    return {} if keeper is None else keeper.state_json(records)


def restore_state_of(
    keeper: KeepsRunState | None, family: str, payload: Any, records: RunRecords, context: ResumeContext
) -> RunRecords:
    r"""``keeper.restore_state`` of its family's stored ``payload``; without a keeper the strategy keeps
    no state, so its payload must be empty."""
    if not isinstance(payload, dict):
        raise ValueError(f"Checkpoint field 'strategies.{family}' must be an object, got {type(payload).__name__}.")
    if keeper is not None:
        return keeper.restore_state(payload, records, context)
    if payload:
        raise ValueError(
            f"Checkpoint field 'strategies.{family}' must be empty: its strategy keeps no run state "
            f"(it has no state_json/restore_state), got keys {sorted(payload)}."
        )
    return records


def compact(payload: Mapping[str, Any]) -> dict[str, Any]:
    r"""``payload`` without its empty values (``[]``, ``None``, ``False``)."""
    return {k: v for k, v in payload.items() if not (v is None or v is False or (isinstance(v, list) and not v))}


def payload_entries(payload: Any, defaults: Mapping[str, Any], family: str) -> dict[str, Any]:
    r"""A stored payload's entries, ``defaults`` for those left out; a key not in ``defaults`` is refused."""
    if not isinstance(payload, dict):
        raise ValueError(f"Checkpoint field 'strategies.{family}': expected an object.")
    if unknown := sorted(set(payload) - set(defaults)):
        raise ValueError(
            f"Checkpoint field 'strategies.{family}': unknown keys {unknown} (it may hold {sorted(defaults)})."
        )
    return {**defaults, **payload}


def floats_to_json(values: Sequence[float]) -> list[str]:
    r"""Exact JSON of floats (``float.hex``)."""
    return [float(v).hex() for v in values]


def floats_from_json(values: Any, count: int, name: str) -> list[float]:
    r"""``count`` exact finite floats from the checkpoint field ``name`` (``ValueError`` naming it)."""
    if not isinstance(values, list) or len(values) != count:
        raise ValueError(f"Checkpoint field {name!r} must hold {count} values, got {_size(values)}.")
    return [float_from_json(v, name) for v in values]


def tensors_to_json(values: Sequence[Tensor]) -> list[dict[str, Any]]:
    r"""Exact JSON of tensors (``tensor_to_json``)."""
    return [tensor_to_json(v) for v in values]


def tensors_from_json(values: Any, shapes: Sequence[Sequence[int | None]], name: str) -> tuple[Tensor, ...]:
    r"""One exact finite tensor of each of ``shapes`` (``None``: any size) from the field ``name``."""
    if not isinstance(values, list) or len(values) != len(shapes):
        raise ValueError(f"Checkpoint field {name!r} must hold {len(shapes)} entries, got {_size(values)}.")
    return tuple(tensor_from_json(v, name, shape) for v, shape in zip(values, shapes, strict=True))


def _size(values: Any) -> str:
    return f"{len(values)}" if isinstance(values, list) else type(values).__name__
