r"""A DP-GIBO run's state as one immutable object: ``RunState``, replaced (never mutated) each step.

A failed ``ask`` or ``tell`` keeps the previous object, so rolling a run back is keeping a
reference (the ledger is never rolled back). The state holds the public record of the run
(iterates, evaluation points, batch sizes, traces, released gradients, each strategy's
slice), the told losses while they are held in this process (SENSITIVE), the step rule's
optimizer state, and the evaluated selection's choice.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, Protocol, TypedDict

import torch
from torch import Tensor

from botorch_dp.gradient_gp import GradientGP
from botorch_dp.optim.options import ClipState, NoiseState, RunRecords, StepOutcome, SubspaceTrack
from botorch_dp.optim.users import InMemoryUsers, Users
from botorch_dp.privacy.mechanisms import ReleaseDiagnostics

__all__ = ["CheckpointBook", "Run", "RunGenerators", "RunState", "StepRecords", "rollback_on_error"]


class RunGenerators(NamedTuple):
    r"""A run's two random streams: ``noise`` draws the privacy noise of a seeded run (SENSITIVE: its
    state predicts the noise; ``None`` unseeded, when the mechanisms draw from the OS, or at
    ``μ = ∞``), ``search`` the public candidate search (stream 1)."""

    noise: torch.Generator | None
    search: torch.Generator


@dataclass
class CheckpointBook:
    r"""What a checkpointing run keeps between writes: the config's JSON and the kernel's fingerprint
    as stored, and the files of the last checkpoint written (``committed``); all ``None`` without
    a checkpoint directory."""

    config_json: dict[str, Any] | None = None
    kernel_fingerprint: str | None = None
    committed: dict[str, Any] | None = None


class StepRecords(TypedDict):
    r"""The strategies' records a step starts from (``Options.release_step``'s keywords)."""

    noise: NoiseState
    clip: ClipState
    track: SubspaceTrack
    step: int


@dataclass(frozen=True)
class RunState:
    r"""Everything ``ask``/``tell`` change.

    Attributes:
        theta: ``θ_t`` (public).
        iterates: ``θ_0, …, θ_t``.
        X: The ``N x d`` evaluation points ``D_t``.
        gp: The ``GradientGP`` on ``X``.
        users: The told losses, one block per batch (SENSITIVE; ``None`` before the first
            tell and when the users are held in partitions).
        num_users: ``n`` (``None`` until the first batch is told).
        partitioned: Whether the users are held in partitions (no loss in this process).
        pending: The asked points not told yet.
        batch_sizes, traces, released: Per step: points added, ``tr Σ_D(θ)``, the θ-space release.
        diagnostics: NON-PRIVATE diagnostics per step (only when asked for).
        optimizer: The step rule's ``torch.optim`` state after the last step (a copy).
        records: The strategies' records (``RunRecords``: the noise schedule's, the clip policy's,
            the projection's and step rule's ``SubspaceTrack``, the evaluated selection's choice).
    """

    theta: Tensor
    iterates: tuple[Tensor, ...]
    X: Tensor
    gp: GradientGP
    optimizer: dict[str, Any]
    users: InMemoryUsers | None = None
    num_users: int | None = None
    partitioned: bool = False
    pending: Tensor | None = None
    batch_sizes: tuple[int, ...] = ()
    traces: tuple[float, ...] = ()
    released: tuple[Tensor, ...] = ()
    diagnostics: tuple[ReleaseDiagnostics, ...] = ()
    records: RunRecords = field(default_factory=RunRecords)

    @property
    def iteration(self) -> int:
        r"""Steps taken."""
        return len(self.batch_sizes)

    @property
    def blocks(self) -> list[Tensor]:
        r"""The told loss blocks (empty when none are held here)."""
        return [] if self.users is None else list(self.users.blocks)

    def released_matrix(self, dim: int) -> Tensor:
        r"""The ``t x d`` released gradients (public)."""
        return torch.stack(self.released) if self.released else self.theta.new_empty(0, dim)  # θ's device, float64

    def step_records(self) -> StepRecords:
        r"""The noise schedule's, clip policy's and projection's records and the step's index."""
        r = self.records
        return StepRecords(noise=r.noise, clip=r.clip, track=r.track, step=self.iteration)

    @classmethod
    def initial(cls, theta0: Tensor, gp: GradientGP, optimizer: dict[str, Any], clip: ClipState) -> RunState:
        r"""The state before the first step: ``θ₀`` its only iterate, the points of ``gp`` (none)."""
        return cls(
            theta=theta0.clone(),
            iterates=(theta0.clone(),),
            X=gp.train_X.clone(),
            gp=gp,
            optimizer=optimizer,
            records=RunRecords(clip=clip),
        )

    def stepped(
        self,
        *,
        points: Tensor,
        gp: GradientGP,
        users: Users,
        theta: Tensor,
        trace: float,
        outcome: StepOutcome,
        optimizer: torch.optim.Optimizer,
    ) -> RunState:
        r"""The state after one step: ``outcome`` its releases and records in ``θ``'s coordinates
        (the lifted gradient and track), ``optimizer`` the step rule's after the step. The told
        losses are kept only when held in this process."""
        release = outcome.release
        return replace(
            self,
            theta=theta,
            iterates=(*self.iterates, theta.clone()),
            X=torch.cat([self.X, points]),
            gp=gp,
            users=users if isinstance(users, InMemoryUsers) else None,
            num_users=users.num_users,
            partitioned=not users.raw_losses,
            pending=None,
            batch_sizes=(*self.batch_sizes, points.shape[0]),
            traces=(*self.traces, trace),
            released=(*self.released, release.gradient),
            diagnostics=self.diagnostics if release.diagnostics is None else (*self.diagnostics, release.diagnostics),
            optimizer=copy.deepcopy(optimizer.state_dict()),
            records=replace(self.records, noise=outcome.noise, clip=outcome.clip, track=outcome.track),
        )


class Run(Protocol):
    r"""What the run's helpers (``report``, ``run_state``, ``rollback_on_error``) read and replace
    of a ``DPGIBO``, named here so that they need not import the facade."""

    config: Any
    options: Any
    state: RunState
    ledger: Any
    run_id: str
    kernel: Any
    noise_variance: float
    bounds: Tensor
    search_radius: Tensor
    checkpoint_dir: Any
    step_optimizer: Any
    generators: RunGenerators
    checkpoint_book: CheckpointBook

    @property
    def dim(self) -> int: ...

    @property
    def is_done(self) -> bool: ...

    @property
    def steps_done(self) -> bool: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...

    def plan(self, num_users: int | None = None) -> Any: ...

    def selected_index(self) -> int | None: ...


@contextlib.contextmanager
def rollback_on_error(opt: Run) -> Iterator[None]:
    r"""Run the block; if it raises, put the run back as it was (its ``RunState``, the step rule's
    optimizer, both generators, a refit kernel) and re-raise. The ledger is never rolled back:
    what was drawn stays recorded."""
    saved, (noise_gen, search_gen) = opt.state, opt.generators
    search, noise = search_gen.get_state(), None if noise_gen is None else noise_gen.get_state()
    kernel = None if opt.options.fitting.holds else {k: v.clone() for k, v in opt.kernel.state_dict().items()}
    try:
        yield
    except BaseException:
        opt.state = saved
        opt.step_optimizer = opt.options.step_rule.make_optimizer(saved.theta, opt.config.step_size)
        opt.step_optimizer.load_state_dict(saved.optimizer)
        if noise is not None and noise_gen is not None:  # noise was read from this same generator
            noise_gen.set_state(noise)
        search_gen.set_state(search)
        if kernel is not None:
            opt.kernel.load_state_dict(kernel)
        raise
