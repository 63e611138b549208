r"""DP-GIBO's options as strategy objects, one family per module, each family a ``typing.Protocol``.

| family | protocol | strategies | module |
|---|---|---|---|
| clip | ``ClipPolicy`` | ``FixedClip``, ``QuantileClip``, ``DecayingClip`` | ``clip``, ``decaying_clip`` |
| noise | ``NoisePolicy`` | ``FixedNoise``, ``AdaptiveNorm`` | ``noise`` |
| projection | ``Projection`` | ``NoProjection``, ``Projected`` (over the ``SubspaceOracle``s) | ``projection`` |
| step_rule | ``StepPolicy`` | ``SGD``, ``AdaGrad``, ``FullMatrixAdaGrad`` (``PreconditionerPolicy``) | ``steps`` |
| selection | ``IterateSelection`` | ``Last``, ``MinNoisyNorm``, ``Exponential``, ``NoisyLoss`` | ``selection`` |
| batches | ``BatchRule`` | ``FixedBatches``, ``AdaptiveBatches`` | ``batches`` |
| fitting | ``Fitting`` | ``NoFitting``, ``SensitiveFitting`` (the unsafe opt-out) | ``fitting`` |

A protocol holds the narrow methods ``Options`` and the loop call over a step's context; any
class with them, registered under its family (``@register("noise", "my_schedule")``), plugs in.
Variants compose by wrapping (``QuantileClip`` and ``DecayingClip`` wrap a ``FixedClip``). Adding
one is a module (its class with ``@register``), its name in ``_OPTION_MODULES`` at the end of this
file (one line: the package imports it, so its names resolve in a config and a checkpoint), and a
test module of the same name. Compatibility is declared, not branched: a strategy lists what it ``requires``
and ``provides`` (``CAPABILITIES``), what it ``conflicts`` with and why, and whether it
``needs_finite_mu``; ``Options.check`` applies all of it and names both parties.
"""

from __future__ import annotations

import importlib
import math
import typing
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from botorch_dp.optim.options.base import RunPlan
from botorch_dp.optim.options.batches import AdaptiveBatches, BatchRule, FixedBatches, batch_rule
from botorch_dp.optim.options.budget import BudgetSplit, resolved_mu, room_left
from botorch_dp.optim.options.clip import ClipPolicy, FixedClip, QuantileClip, SavedClipState
from botorch_dp.optim.options.decaying_clip import DecayingClip
from botorch_dp.optim.options.fitting import Fitting, NoFitting, SensitiveFitting
from botorch_dp.optim.options.noise import AdaptiveNorm, FixedNoise, NoisePolicy, SavedNoiseState
from botorch_dp.optim.options.projection import NoProjection, Projected, Projection, ProjectionRecord
from botorch_dp.optim.options.records import (
    ClipState,
    KeepsRunState,
    NoiseState,
    ResumeContext,
    RunRecords,
    SubspaceTrack,
    restore_state_of,
    state_json_of,
)
from botorch_dp.optim.options.registry import (
    Strategy,
    StrategyLike,
    build,
    from_spec,
    is_strategy,
    lookup,
    lookup_family,
    missing_members,
    parameters,
    register,
    registered,
    resolve,
)
from botorch_dp.optim.options.selection import (
    Evaluated,
    EvaluatedSelection,
    Exponential,
    IterateSelection,
    Last,
    MinNoisyNorm,
    NoisyLoss,
    SelectionRecord,
)
from botorch_dp.optim.options.steps import (
    SGD,
    AdaGrad,
    FullMatrixAdaGrad,
    Noisy,
    NoisyDebiased,
    PreconditionerPolicy,
    PreconditionerRecord,
    PrivateGOE,
    StepPolicy,
)
from botorch_dp.optim.users import Users
from botorch_dp.privacy.ledger import Gaussian, Meter
from botorch_dp.privacy.mechanisms import GradientRelease

__all__ = [
    "CAPABILITIES",
    "FAMILY_PROTOCOLS",
    "SGD",
    "AdaGrad",
    "AdaptiveBatches",
    "AdaptiveNorm",
    "BatchRule",
    "BudgetSplit",
    "ClipPolicy",
    "ClipState",
    "DecayingClip",
    "Evaluated",
    "EvaluatedSelection",
    "Exponential",
    "FixedBatches",
    "FixedClip",
    "FixedNoise",
    "Fitting",
    "FullMatrixAdaGrad",
    "IterateSelection",
    "KeepsRunState",
    "Last",
    "MinNoisyNorm",
    "NoFitting",
    "NoProjection",
    "NoiseState",
    "NoisePolicy",
    "NoisyLoss",
    "Noisy",
    "NoisyDebiased",
    "OptionFields",
    "Options",
    "PreconditionerPolicy",
    "PreconditionerRecord",
    "PrivateGOE",
    "Projected",
    "Projection",
    "ProjectionRecord",
    "QuantileClip",
    "ResumeContext",
    "RunPlan",
    "RunRecords",
    "SelectionRecord",
    "SensitiveFitting",
    "StepOutcome",
    "StepPolicy",
    "Strategy",
    "StrategyLike",
    "SubspaceTrack",
    "batch_rule",
    "build",
    "from_spec",
    "is_strategy",
    "lookup",
    "lookup_family",
    "missing_members",
    "parameters",
    "register",
    "registered",
    "resolve",
    "resolved_mu",
    "restore_state_of",
    "state_json_of",
    "state_keeper",
    "state_keepers",
]

#: What a strategy may ``require`` of the others, as an error message describes it.
CAPABILITIES: dict[str, str] = {
    "noisy_norms": "the released noisy gradient norms, which only noise_schedule='adaptive_norm' releases",
    "fixed_basis": (
        "one basis for every step (its released matrices share coordinates): no subspace, or a fixed SubspaceOracle"
    ),
    "fixed_clip_bound": (
        "one clip bound for every step (its released matrix sums every step's clipped mean under one sensitivity "
        "2B/n): clip_bound=<a number> (FixedClip)"
    ),
}


@dataclass(frozen=True)
class StepOutcome:
    r"""What one step's releases give: the gradient release (in the released coordinates) and
    the noise schedule's, clip policy's and step rule's records after it (all public)."""

    release: GradientRelease
    noise: NoiseState
    clip: ClipState
    track: SubspaceTrack


@dataclass(frozen=True, kw_only=True)
class OptionFields:
    r"""One strategy per family, each field annotated with its family's protocol: the one declaration
    of the fields, their defaults and checks, shared by ``Options`` and ``DPGIBOConfig``. A strategy
    of another family, or one that lacks a member of its protocol, is refused (``TypeError`` naming
    the field)."""

    clip: ClipPolicy = FixedClip()
    noise: NoisePolicy = FixedNoise()
    projection: Projection = NoProjection()
    step_rule: StepPolicy = SGD()
    selection: IterateSelection = Last()
    batches: BatchRule = FixedBatches()
    fitting: Fitting = NoFitting()

    def __post_init__(self) -> None:
        for name, protocol in FAMILY_PROTOCOLS.items():
            strategy = getattr(self, name)
            family = getattr(strategy, "family", None)
            if family != name:
                raise TypeError(
                    f"Options.{name} needs a {name} strategy (one registered with @register({name!r}, "
                    f"name)), got {type(strategy).__name__} of family {family!r}."
                )
            if missing := missing_members(strategy, protocol):
                raise TypeError(
                    f"Options.{name}: {type(strategy).__name__} does not implement {protocol.__name__}; "
                    f"it lacks {', '.join(missing)}."
                )

    def strategies(self) -> list[StrategyLike]:
        return [getattr(self, name) for name in FAMILY_PROTOCOLS]


#: Each family (an ``OptionFields`` field, named as the family) and its protocol.
FAMILY_PROTOCOLS: dict[str, type] = typing.get_type_hints(OptionFields)
#: The keeper of a strategy's run state where the strategy has no ``state_json``/``restore_state`` of its own
#: (a user's): its family's generic one, which reads the strategy only through the family's protocol.
FAMILY_KEEPERS: dict[str, Any] = {"clip": SavedClipState, "noise": SavedNoiseState}
#: The families whose strategies write run records (``RunRecords``) but have no generic keeper: each of their
#: strategies has the ``KeepsRunState`` pair or declares ``stateless = True`` (it writes no records).
RECORDING_FAMILIES = ("projection", "step_rule", "selection")


def state_keeper(strategy: Any) -> KeepsRunState | None:
    r"""What saves and checks ``strategy``'s part of a run's state: the strategy itself when it has the
    ``KeepsRunState`` pair, else its family's keeper (``FAMILY_KEEPERS``), else ``None`` (no state: a
    strategy of batches or fitting, or one of ``RECORDING_FAMILIES`` that declares ``stateless = True``).
    ``TypeError`` for a strategy of ``RECORDING_FAMILIES`` with neither: its records would not be saved,
    and a resumed run would silently lose them."""
    missing = [name for name in ("restore_state", "state_json") if not callable(getattr(strategy, name, None))]
    if not missing:  # (not isinstance: a Protocol's isinstance caches a class's answer)
        return typing.cast(KeepsRunState, strategy)
    keeper = FAMILY_KEEPERS.get(strategy.family)
    if keeper is not None:
        return keeper(strategy)
    if strategy.family in RECORDING_FAMILIES and getattr(strategy, "stateless", False) is not True:
        raise TypeError(
            f"{type(strategy).__name__} ({strategy.family}) cannot be checkpointed: it lacks "
            f"{', '.join(missing)} (KeepsRunState), so its part of the run's "
            "records would be lost on resume. Implement state_json/restore_state, or set stateless = True "
            "if it writes no run records."
        )
    return None


def state_keepers(options: OptionFields) -> dict[str, KeepsRunState | None]:
    r"""Each family's ``state_keeper`` (``TypeError`` naming a strategy whose state could not be kept)."""
    return {strategy.family: state_keeper(strategy) for strategy in options.strategies()}


@dataclass(frozen=True, kw_only=True)
class Options(OptionFields):
    r"""One strategy per family (``OptionFields``) and what a run does with them beyond the plain
    DP-GIBO step. ``EvaluatedSelection`` narrows the selection when it evaluates the iterates."""

    def split(self, privacy_mu: float | None) -> BudgetSplit:
        r"""The run's ``BudgetSplit`` of ``privacy_mu`` (a config's, resolved: ``None`` is refused)."""
        return BudgetSplit(
            resolved_mu(privacy_mu),
            selection_mu=self.selection.charge,
            clip_fraction=self.clip.mu_fraction,
            precond_fraction=self.step_rule.mu_fraction,
        )

    def check(self, privacy_mu: float | None, dim: int, num_iterations: int) -> None:
        r"""Refuse options that cannot run together (``ValueError`` naming both parties and why), by what
        each strategy declares; ``privacy_mu`` is a config's, resolved (``None`` is refused)."""
        privacy_mu = resolved_mu(privacy_mu)
        strategies = self.strategies()
        provided = frozenset().union(*(s.provides for s in strategies))
        for strategy in strategies:  # a named conflict first: it says more than a missing capability
            for other in strategies:
                reason = strategy.conflicts().get(other.key)
                if reason is not None:
                    raise ValueError(f"{strategy.label} does not combine with {other.label}: {reason}.")
            for capability in sorted(strategy.requires - provided):
                raise ValueError(f"{strategy.label} needs {CAPABILITIES.get(capability, capability)}.")
            if strategy.needs_finite_mu is not None and math.isinf(privacy_mu):
                raise ValueError(f"{strategy.label} {strategy.needs_finite_mu}; it needs a finite privacy_mu (μ).")
        if self.selection.charge and not self.selection.charge < privacy_mu:
            raise ValueError(
                f"The selection's charge μ_sel = {self.selection.charge:.6g} must be below privacy_mu (μ) = "
                f"{privacy_mu:.6g}: the gradient steps get √(μ² − μ_sel²)."
            )
        self.projection.check(dim)
        self.noise.check(self.split(privacy_mu), dim, num_iterations)

    def iteration_cap(self, num_iterations: int) -> int:
        return self.noise.iteration_cap(num_iterations)

    def step_bound(self, plan: RunPlan, noise: NoiseState, spent: list[float], room: float) -> dict[str, Gaussian]:
        r"""Everything one step may release, at its largest cost (public), for the ledger's
        ``charge`` before any noise is drawn: the clip policy's and the step rule's parts, and the
        noise schedule's within what they leave of ``room`` (``spent``: the run's norm and gradient
        μ's so far, which an adaptive schedule's filter reads)."""
        others = {**self.clip.bound_parts(plan), **self.step_rule.bound_parts(plan)}
        # the unsafe fit's μ = inf part stays out of the noise schedule's room (it is no noise to plan)
        return {**self.noise.bound(plan, noise, spent, room_left(room, others)), **others, **self.fitting.bound_parts()}

    def release_step(
        self,
        users: Users,
        W: Tensor,
        plan: RunPlan,
        *,
        noise: NoiseState,
        clip: ClipState,
        track: SubspaceTrack,
        meter: Meter,
        step: int,
        spent: list[float],
        room: float,
    ) -> StepOutcome:
        r"""One step's releases inside a charge (``meter``): the users' clipped sum of ``W y_i`` at
        the clip policy's bound (one pass), the gradient by the noise schedule, then what the clip
        policy (a count) and the step rule (a preconditioner) release from the same sum. Each
        release is recorded just before its draw; the strategies see only the ``ClippedSum``."""
        summed = self.clip.aggregate(users, W, clip)
        others = {**self.clip.bound_parts(plan), **self.step_rule.bound_parts(plan)}
        release, noise = self.noise.release(
            summed, plan, noise, meter, step=step, dim=W.shape[0], spent=spent, room=room_left(room, others)
        )
        clip = self.clip.update(summed, plan, clip, meter)
        track = self.step_rule.observe(summed, plan, track, meter)
        return StepOutcome(release, noise, clip, track)

    def describe(self) -> dict[str, Any]:
        r"""Each family's ``spec()``."""
        return {s.family: s.spec() for s in self.strategies()}


#: The modules that add options to a family (each registers its strategies with ``@register`` when
#: imported), one line each; their classes are imported from their modules (``DecayingClip`` is
#: also imported above, as it was before this list).
_OPTION_MODULES = [
    "decaying_clip",
    "capped_clip",
]
for _module in _OPTION_MODULES:
    importlib.import_module(f"{__name__}.{_module}")
