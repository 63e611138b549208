r"""The registry of audit rows: each scenario module registers its audits with ``audit_row``,
and ``audit_all`` runs them in registration order.

A row is one call of a registered audit function with fixed settings and a run count for
the quick and the full audit. A function may be registered several times (e.g. the same
release with ordinary and with overflowing losses); the row's ``name`` is passed to it and
becomes the ``mechanism`` of its ``AuditResult``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from botorch_dp.audit.statistics import AuditResult

__all__ = ["AuditRow", "audit_all", "audit_row", "registered_rows", "run_row"]

_F = TypeVar("_F", bound=Callable[..., AuditResult])


@dataclass(frozen=True)
class AuditRow:
    r"""One registered audit.

    Attributes:
        name: The row's name (``AuditResult.mechanism``).
        audit: The audit function, called as ``audit(num_runs=..., seed=..., name=..., **options)``.
        quick_runs: Runs per dataset of the quick audit.
        full_runs: Runs per dataset of the full audit.
        options: Further keyword arguments of this row.
        description: One line for reports.
    """

    name: str
    audit: Callable[..., AuditResult]
    quick_runs: int
    full_runs: int
    options: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""

    def __call__(self, *, quick: bool = False, seed: int = 0, **overrides: Any) -> AuditResult:
        r"""Run the row (``overrides`` replace its options, e.g. ``num_runs``)."""
        kwargs = {"num_runs": self.quick_runs if quick else self.full_runs, "seed": seed, **self.options, **overrides}
        return self.audit(name=self.name, **kwargs)


_REGISTRY: dict[str, AuditRow] = {}


def audit_row(name: str, *, quick: int, full: int, description: str = "", **options: Any) -> Callable[[_F], _F]:
    r"""Register the decorated audit function as the row ``name`` (the function is returned unchanged).

    Args:
        name: The row's name; unique.
        quick: Runs per dataset of the quick audit.
        full: Runs per dataset of the full audit.
        description: One line for reports.
        **options: Keyword arguments of the function for this row.
    """

    def register(function: _F) -> _F:
        if name in _REGISTRY and _REGISTRY[name].audit is not function:
            raise ValueError(f"An audit row named {name!r} is already registered.")
        _REGISTRY[name] = AuditRow(name, function, int(quick), int(full), dict(options), description)
        return function

    return register


def registered_rows() -> list[AuditRow]:
    r"""Every registered row, in registration order. Importing this module runs the package's
    ``__init__`` first, which imports (and so registers) every scenario module."""
    return list(_REGISTRY.values())


def run_row(name: str, quick: bool, seed: int) -> AuditResult:
    r"""Run the registered row ``name`` and time it (``AuditResult.seconds``); picklable, for worker processes."""
    row = {r.name: r for r in registered_rows()}[name]
    start = time.perf_counter()
    result = row(quick=quick, seed=seed)
    return replace(result, seconds=time.perf_counter() - start)


def audit_all(
    *, quick: bool = False, seed: int = 0, names: list[str] | None = None, jobs: int = 1
) -> list[AuditResult]:
    r"""Run every registered audit row (or those named), each timed.

    Args:
        quick: The quick run counts (about two and a half minutes in one process on a
            2-core machine, half that with ``jobs=2``) instead of the full ones.
        seed: Seed of the audits (rows that draw their noise from OS entropy on purpose
            seed only their own randomness).
        names: Only these rows, in registry order.
        jobs: Run the rows in this many spawned processes of one torch thread each
            (``evaluation.process_pool``); the results are the same, in registry order.

    Returns:
        One ``AuditResult`` per row, with ``seconds`` set.
    """
    rows = registered_rows()
    if names is not None:
        unknown = sorted(set(names) - {row.name for row in rows})
        if unknown:
            raise ValueError(f"Unknown audit rows: {unknown}.")
        rows = [row for row in rows if row.name in names]
    calls = [(row.name, quick, seed) for row in rows]
    if jobs <= 1:
        return [run_row(*call) for call in calls]
    from botorch_dp.evaluation import map_in_order, process_pool

    with process_pool(jobs) as pool:
        return map_in_order(run_row, calls, pool)
