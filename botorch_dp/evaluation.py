r"""Evaluate an objective's candidate rows over any ``concurrent.futures.Executor``.

``evaluate_rows(objective, X, executor=...)`` sends groups of rows of a ``q x d`` tensor to
an executor (a process pool, ``dask.distributed.Client.get_executor()``, Ray's executor,
``SerialExecutor``) and stacks the ``q x n`` per-user losses in row order, whatever order
the tasks finish in. ``map_in_order`` is the same for any function and list of arguments.
``DPGIBO.run``, the baselines and ``benchmarks.jobs.run_jobs`` take an ``executor=``.

The losses are SENSITIVE: they travel from the workers to this process, so the channel
must be as trusted as the process itself (``botorch_dp.distributed`` keeps them on the
workers instead).

Objectives that train on private data (``ChargedObjective``: the tuning objectives with
DP-SGD or objective perturbation) are charged HERE, in the process that holds the ledger:
``evaluate_rows`` calls ``objective.charge_rows(X)`` once for the whole batch (admitted or
refused whole before any row trains, every run recorded before it is dispatched), and each
task runs ``objective.evaluate_charged(rows, tickets)``, which touches no ledger. A worker
that fails after the charge leaves its runs recorded (an over-count, never an
under-count); the caller's ledger holds every run, whatever the executor.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import threading
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

import torch
from torch import Tensor

from botorch_dp.objectives.per_user_problem import PerUserProblem

__all__ = [
    "ChargedObjective",
    "SerialExecutor",
    "evaluate_rows",
    "init_one_thread_worker",
    "map_in_order",
    "process_pool",
]

T = TypeVar("T")


class SerialExecutor(cf.Executor):
    r"""An executor that runs each call in this process when it is submitted.

    ``submit`` returns a finished ``Future`` (its exception, if the call raised, is
    stored in it as a pool would). Useful as the default of code written for executors.
    """

    def __init__(self) -> None:
        self._shutdown = False
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> cf.Future:
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new futures after shutdown")
        future: cf.Future = cf.Future()
        future.set_running_or_notify_cancel()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as err:  # noqa: BLE001 - stored, re-raised by future.result()
            future.set_exception(err)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shutdown = True


def init_one_thread_worker() -> None:
    r"""Process-pool initializer: one torch thread and no optimizer warnings in the worker."""
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message=".*(optimization|Optimization).*")


def process_pool(workers: int, initializer: Callable[[], None] = init_one_thread_worker) -> cf.ProcessPoolExecutor:
    r"""``workers`` spawned processes with one torch thread each.

    Args:
        workers: The number of processes (``>= 1``).
        initializer: Run once in each process; the default sets one torch thread. Another
            one should call ``init_one_thread_worker`` itself.

    Returns:
        A ``ProcessPoolExecutor`` (shut it down, e.g. with ``with process_pool(2) as pool:``).
    """
    return cf.ProcessPoolExecutor(
        max_workers=workers, mp_context=multiprocessing.get_context("spawn"), initializer=initializer
    )


def map_in_order(
    fn: Callable[..., T], args: Iterable[Sequence[Any]], executor: cf.Executor, *, max_in_flight: int | None = None
) -> list[T]:
    r"""``[fn(*a) for a in args]`` computed on ``executor``, returned in the order of ``args``.

    At most ``max_in_flight`` calls are submitted at a time (``None``: all at once). If a
    call raises, the calls not yet started are cancelled and the first exception in
    argument order is raised.

    Args:
        fn: A function (picklable for process or cluster executors).
        args: One argument tuple per call.
        executor: Any ``concurrent.futures.Executor``; it is not shut down here.
        max_in_flight: Bound on the submitted, unfinished calls (``>= 1``).

    Returns:
        The results, one per argument tuple, in order.
    """
    args = [tuple(a) for a in args]
    if max_in_flight is not None and max_in_flight < 1:
        raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}.")
    limit = len(args) if max_in_flight is None else max_in_flight
    futures: list[cf.Future | None] = [None] * len(args)
    results: list[Any] = [None] * len(args)
    next_index = 0
    try:
        while next_index < len(args) or any(f is not None for f in futures):
            while next_index < len(args) and sum(f is not None for f in futures) < limit:
                futures[next_index] = executor.submit(fn, *args[next_index])
                next_index += 1
            running = [f for f in futures if f is not None]
            cf.wait(running, return_when=cf.FIRST_COMPLETED)
            for i, f in enumerate(futures):
                if f is not None and f.done():
                    results[i] = f.result()  # raises the call's exception
                    futures[i] = None
    except BaseException:
        for f in futures:
            if f is not None:
                f.cancel()
        raise
    return results


@runtime_checkable
class ChargedObjective(Protocol):
    r"""An objective whose evaluation spends privacy (trains on private data), in two halves.

    ``charge_rows(X)`` runs where the ledger is: it charges one training run per row of the
    ``q x d`` tensor ``X`` (one charge for the batch, before anything trains) and returns ``q``
    public tickets. ``evaluate_charged(X, tickets)`` runs anywhere (a pickled copy on a
    worker) and returns the ``q x n`` losses of the rows trained under their tickets,
    touching no ledger. ``objective(X)`` must equal ``evaluate_charged(X, charge_rows(X))``.
    ``objectives.charged.ChargedTraining`` implements it.
    """

    def charge_rows(self, X: Tensor) -> Sequence[Any]: ...

    def evaluate_charged(self, X: Tensor, tickets: Sequence[Any]) -> Tensor: ...


def _check_row_independent(objective: Callable[[Tensor], Tensor]) -> None:
    r"""``ValueError`` for an objective whose rows depend on its own random state."""
    if isinstance(objective, PerUserProblem) and objective.observation_noise_std > 0:
        raise ValueError(
            "objective: a PerUserProblem with observation_noise_std > 0 draws its observation noise "
            "from its own generator, which worker processes cannot share (every worker would draw "
            "the same noise); evaluate it without an executor."
        )


def _evaluate_group(objective: Callable[[Tensor], Tensor], X: Tensor) -> Tensor:
    r"""``objective(X)`` as a ``q x n`` float64 tensor (runs on a worker)."""
    losses = torch.as_tensor(objective(X))
    if losses.dim() == 1 and X.shape[0] == 1:
        losses = losses.unsqueeze(0)
    return losses.detach().to(dtype=torch.float64, device="cpu")


def _evaluate_charged_group(objective: ChargedObjective, X: Tensor, tickets: Sequence[Any]) -> Tensor:
    r"""``objective.evaluate_charged(X, tickets)`` as a float64 CPU tensor (runs on a worker)."""
    return torch.as_tensor(objective.evaluate_charged(X, tickets)).detach().to(dtype=torch.float64, device="cpu")


def evaluate_rows(
    objective: Callable[[Tensor], Tensor],
    X: Tensor,
    *,
    executor: cf.Executor | None = None,
    rows_per_task: int = 1,
    max_in_flight: int | None = None,
) -> Tensor:
    r"""The per-user losses ``objective(X)`` with the rows of ``X`` evaluated on ``executor``.

    Without an executor this is ``objective(X)`` itself. With one, ``X`` is split into
    groups of ``rows_per_task`` rows, each group is one call ``objective(group)`` on the
    executor, and the ``group x n`` results are stacked in row order. That equals
    ``objective(X)`` when the objective computes each row on its own (as a loop over
    candidates does; a batched product may differ in the last bits) and holds no random
    state that changes between calls (a ``PerUserProblem`` with observation noise is
    refused with a ``ValueError``). A ``ChargedObjective`` is charged here first, for all
    of ``X`` (``charge_rows``), and each group is ``evaluate_charged(group, its tickets)``.

    Args:
        objective: Maps a ``q x d`` tensor to ``q x n`` per-user losses (SENSITIVE);
            picklable for process or cluster executors.
        X: A ``q x d`` tensor of candidates (public).
        executor: Any ``concurrent.futures.Executor``, or ``None``.
        rows_per_task: Rows of ``X`` per call (``>= 1``).
        max_in_flight: Bound on the calls submitted at once (``None``: all).

    Returns:
        The ``q x n`` losses (float64 on the CPU with an executor; whatever ``objective``
        returns without one). Shape and finiteness are the caller's checks.
    """
    if executor is None:
        return objective(X)
    if not isinstance(rows_per_task, int) or rows_per_task < 1:
        raise ValueError(f"rows_per_task must be an integer >= 1, got {rows_per_task!r}.")
    _check_row_independent(objective)
    if X.dim() != 2:
        raise ValueError(f"X must be a q x d tensor, got shape {tuple(X.shape)}.")
    if X.shape[0] == 0:
        return objective(X)
    if isinstance(objective, ChargedObjective):
        tickets = list(objective.charge_rows(X))  # in this process, before any row trains
        groups = [
            (objective, g.detach().clone(), tickets[i : i + rows_per_task])
            for i, g in zip(range(0, X.shape[0], rows_per_task), X.split(rows_per_task), strict=True)
        ]
        blocks = map_in_order(_evaluate_charged_group, groups, executor, max_in_flight=max_in_flight)
    else:
        groups = [(objective, g.detach().clone()) for g in X.split(rows_per_task)]
        blocks = map_in_order(_evaluate_group, groups, executor, max_in_flight=max_in_flight)
    widths = {b.shape[-1] for b in blocks}
    if len(widths) != 1 or any(
        b.dim() != 2 or b.shape[0] != g[1].shape[0] for b, g in zip(blocks, groups, strict=True)
    ):
        shapes = [tuple(b.shape) for b in blocks]
        raise ValueError(f"objective: each group of rows must give group x n losses with one n, got {shapes}.")
    return torch.cat(blocks)
