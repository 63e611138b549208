r"""Small helpers shared across the package: seed derivation, torch threads, the box, plain JSON values,
progress bars that stay plain off a terminal, one overall bar over a multi-stage task (``overall_progress``),
and the warning of a renamed name (``warn_renamed``)."""

from __future__ import annotations

import contextlib
import contextvars
import math
import sys
import time
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch import Tensor


def warn_renamed(old: str, new: str, stacklevel: int = 3) -> None:
    r"""The ``DeprecationWarning`` of a renamed name: ``"<old> is deprecated; use <new> instead."``
    (``stacklevel`` 3: the caller of the function that warns)."""
    warnings.warn(f"{old} is deprecated; use {new} instead.", DeprecationWarning, stacklevel=stacklevel)


def child_seeds(seed: int | list[int], num: int) -> list[int]:
    r"""``num`` independent 63-bit seeds derived from ``seed`` (numpy's ``SeedSequence``).

    Use one child per purpose (data, observation noise, privacy noise, candidate search)
    instead of arithmetic such as ``seed + 1``, which makes streams of neighbouring seeds
    overlap.

    Args:
        seed: A non-negative integer, or a list of them (e.g. ``[seed, index]``).
        num: Number of children.

    Returns:
        ``num`` Python ints in ``[0, 2**63)``.
    """
    children = np.random.SeedSequence(seed).spawn(num)
    return [int(c.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1)) for c in children]


@contextlib.contextmanager
def torch_threads(num_threads: int | None) -> Iterator[None]:
    r"""Run the block with ``torch.set_num_threads(num_threads)`` and restore the old value.

    ``None`` leaves the thread count alone.
    """
    previous = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(int(num_threads))
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def check_bounds(bounds: Tensor) -> Tensor:
    r"""Validate a ``2 x d`` box and return it as float64.

    Args:
        bounds: A ``2 x d`` tensor (or array) of lower and upper bounds.

    Returns:
        The ``2 x d`` float64 tensor.
    """
    bounds = torch.as_tensor(bounds, dtype=torch.float64)
    if bounds.dim() != 2 or bounds.shape[0] != 2 or bounds.shape[1] < 1:
        raise ValueError(f"bounds must be a 2 x d tensor, got shape {tuple(bounds.shape)}.")
    if not torch.isfinite(bounds).all() or not (bounds[0] < bounds[1]).all():
        raise ValueError("bounds must be finite with lower < upper in every dimension.")
    return bounds


def project_to_box(theta: Tensor, bounds: Tensor) -> Tensor:
    r"""Euclidean projection of a ``... x d`` tensor onto the box ``bounds`` (``2 x d``)."""
    return torch.minimum(torch.maximum(theta, bounds[0]), bounds[1])


def plain_json(value: Any) -> Any:
    r"""``value`` as values strict JSON can hold: tensors and tuples become (nested) lists, dict keys
    strings, and a non-finite float the string ``"inf"``, ``"-inf"`` or ``"nan"``."""
    if isinstance(value, Tensor):
        return plain_json(value.detach().cpu().tolist())
    if isinstance(value, (list, tuple)):
        return [plain_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain_json(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


class PlainProgress:
    r"""Progress as a few plain lines (no carriage returns, no escape codes), for a log file or any
    stream that is not a terminal: one line when it starts and one at each quarter of ``total``
    (at the end only, without a total). The methods are tqdm's that the package uses."""

    def __init__(
        self,
        iterable: Any = None,
        *,
        total: int | None = None,
        initial: int = 0,
        desc: str = "",
        unit: str = "it",
        file: Any = None,
    ) -> None:
        self.iterable = iterable
        self.total = total if total is not None or iterable is None else len(iterable)
        self.n, self.desc, self.unit, self.file = initial, desc, unit, file
        self.postfix, self.closed = "", False
        self._start, self._quarter = time.monotonic(), self._quarter_of(initial)
        self._line("started")

    def _quarter_of(self, n: int) -> int:
        return 4 * n // self.total if self.total else 0

    def _line(self, what: str) -> None:
        total = f"/{self.total}" if self.total is not None else ""
        postfix = f" ({self.postfix})" if self.postfix else ""
        elapsed = time.monotonic() - self._start
        eta = ""
        if self.total and 0 < self.n < self.total:
            eta = f", eta {elapsed * (self.total - self.n) / self.n:.0f} s"
        stream = sys.stderr if self.file is None else self.file
        print(
            f"{self.desc}: {self.n}{total} {self.unit}, {what}, {elapsed:.1f} s{eta}{postfix}", file=stream, flush=True
        )

    def set_description(self, desc: str) -> None:
        r"""A new description, said on a line of its own when it changes."""
        if desc != self.desc:
            self.desc = desc
            self._line("now")

    def update(self, n: int = 1) -> None:
        self.n += n
        quarter = self._quarter_of(self.n)
        if quarter > self._quarter and self.n != self.total:
            self._quarter = quarter
            self._line(f"{25 * quarter}%")

    def set_postfix(self, **values: Any) -> None:
        self.postfix = ", ".join(f"{k}={v}" for k, v in values.items())

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._line("done")

    def __iter__(self) -> Iterator[Any]:
        try:
            for item in self.iterable:
                yield item
                self.update(1)
        finally:
            self.close()


class _Overall:
    r"""The one bar of an ``overall_progress`` block and the stage in hand (``{part: name}``)."""

    def __init__(self, bar: Any, desc: str) -> None:
        self.bar, self.desc = bar, desc
        self.stage: dict[str, str] = {}

    def show(self, **parts: str | None) -> None:
        for key, value in parts.items():
            if value is None:
                self.stage.pop(key, None)
            else:
                self.stage[key] = value
        described = " | ".join([self.desc, *(f"{k} {v}" for k, v in self.stage.items())])
        self.bar.set_description(described)


_OVERALL: contextvars.ContextVar[_Overall | None] = contextvars.ContextVar("botorch_dp_overall", default=None)


class _StageBar:
    r"""A bar opened inside ``overall_progress``: its counts go to the overall bar (whose description
    ``progress_stage`` sets), and closing it does not close the overall bar."""

    def __init__(self, overall: _Overall, iterable: Any) -> None:
        self.overall, self.iterable = overall, iterable

    def update(self, n: int = 1) -> None:
        self.overall.bar.update(n)

    def set_postfix(self, **values: Any) -> None:
        pass

    def close(self) -> None:
        pass

    def __iter__(self) -> Iterator[Any]:
        for item in self.iterable:
            yield item
            self.update(1)


@contextlib.contextmanager
def overall_progress(*, total: int, desc: str, unit: str = "run", disable: bool = False) -> Iterator[None]:
    r"""One bar for the whole block: every ``progress_bar`` opened inside it counts on this bar (whose
    ``total`` is the block's public count of steps, so its ETA is the block's) instead of showing a
    bar of its own that restarts from 0; ``progress_stage`` names the part in hand."""
    overall = _Overall(progress_bar(total=total, desc=desc, unit=unit, disable=disable), desc)
    token = _OVERALL.set(overall)
    try:
        yield
    finally:
        _OVERALL.reset(token)
        overall.bar.close()


def progress_stage(**parts: str | None) -> None:
    r"""Name the part in hand on the ``overall_progress`` bar (e.g. ``configuration="lr=0.1"``,
    ``method="dp_hypo"``; ``None`` drops a part); nothing outside such a block."""
    overall = _OVERALL.get()
    if overall is not None:
        overall.show(**parts)


def progress_bar(iterable: Any = None, *, disable: bool = False, **options: Any) -> Any:
    r"""A progress bar: tqdm's (``tqdm.auto``: a widget in a notebook) when stderr is a terminal or a
    notebook shows it, else ``PlainProgress``'s few plain lines, so that a log file never holds
    carriage-return redraws or escape codes; nothing with ``disable``. ``options``: tqdm's
    ``total``, ``initial``, ``desc`` and ``unit``. Inside ``overall_progress`` (unless ``disable``)
    it counts on that block's one bar."""
    from tqdm import autonotebook, std
    from tqdm.auto import tqdm

    overall = _OVERALL.get()
    if disable:
        return tqdm(iterable, disable=True, **options)
    if overall is not None:
        return _StageBar(overall, iterable)
    isatty = getattr(sys.stderr, "isatty", None)
    if autonotebook.tqdm is not std.tqdm or (callable(isatty) and isatty()):  # a notebook's widget, a terminal
        return tqdm(iterable, **options)
    return PlainProgress(iterable, **options)
