r"""Comparing a pinned run with its stored values, field by field, each with its own tolerance.

The pins (``tests/test_option_pins.py``, ``tests/test_regression_pins.py``) store every float
as an exact hex string (``float.hex``) and are compared by decoding it. The policy (also in
``docs/architecture.md``, "Pinned values"):

- **Bit-exact** (``EXACT``) for what every CPU computes the same way: integers (batch sizes,
  selected indices, step counts), strings and flags (ledger keys and event types, refusals,
  ``holds``), shapes, and the floats computed without BLAS, LAPACK or an iterative optimizer
  from the settings or from other exact values (the ledger's and the schedule's μ's, the
  guarantee, clip bounds and counts).
- **Relative tolerance** ``BLAS = Tolerance(rel=1e-9, floor=1e-12)`` for the values that flow
  from a BLAS, LAPACK or L-BFGS-B path (the GP's solves, ``eigh``, the batch search): released
  gradients, coordinates and preconditioners, iterates, evaluation points, noisy norms,
  selection scores, subspace bases, and the μ's, noise stds, ledger μ's and guarantee of a
  schedule that is arithmetic on a released noisy norm (``noise_schedule="adaptive_norm"``).
  Two values ``a`` (got) and ``b`` (stored) agree when ``|a − b| ≤ rel · max(|a|, |b|) + floor``.
  ``1e-9`` is about 4·10⁶ double-precision roundings (``2.2e-16``), room for the last bits a
  different kernel leaves in a well-conditioned value, and still far below any change of
  behaviour (a step size moved by ``1e-7`` fails). The absolute floor is for values near 0:
  the pins' inputs are of order one (data ``N(1, 1)``, ``θ`` in ``[−2, 4]``, clip bounds and
  step sizes 0.3 to 3), so a rounding difference is an absolute ``~1e-16`` that cancellation
  can leave in a value near 0, where a relative test would ask for more than the arithmetic
  has. ``1e-12`` is the relative ``1e-9`` at a scale of ``1e-3``, a thousandth of the inputs'
  order: smaller values are compared to ``1e-12`` absolutely, still 10⁴ roundings of an
  order-one value.

The tolerance does not absorb a different kernel SET: L-BFGS-B turns a last-bit difference
in its objective into a different path, so its end points differ by its own convergence
tolerance (measured up to 46 % between MKL's AVX-512, AVX2 and SSE4.2 code paths, and
between OpenBLAS's Haswell and SkylakeX kernels). ``tests/conftest.py`` therefore fixes both
libraries' code paths, ``OPENBLAS_CORETYPE=Haswell`` and ``MKL_CBWR=COMPATIBLE`` (MKL's
conditional numerical reproducibility: the same results on every x86-64 CPU and under every
``MKL_ENABLE_INSTRUCTIONS``), and ``check_kernel_sets`` fails with that explanation where a
caller set them otherwise. The tolerance covers what is left, a last bit that differs in a
well-conditioned value; it does not cover torch's scalar kernels (``ATEN_CPU_CAPABILITY=default``,
a CPU without AVX2), under which a few chaotic cases move beyond it (AVX-512 and AVX2 agree).

A tolerance is per field, in the pin module's table, so one field's can change alone (e.g.
to one grid step of a discretized mechanism) by editing one entry.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

#: The libraries' code paths the pins were written with (``tests/conftest.py`` sets them).
PINNED_OPENBLAS = ("Haswell", "Zen")  # the same last bits on both
PINNED_MKL_CBWR = "COMPATIBLE"


@dataclass(frozen=True)
class Tolerance:
    r"""``|a − b| ≤ rel · max(|a|, |b|) + floor`` (both 0: bit for bit)."""

    rel: float = 0.0
    floor: float = 0.0

    def agrees(self, a: float, b: float) -> bool:
        if a == b or (math.isnan(a) and math.isnan(b)):  # a NaN is a pinned value too
            return True
        return abs(a - b) <= self.rel * max(abs(a), abs(b)) + self.floor

    def __str__(self) -> str:
        return "bit for bit" if self == EXACT else f"relative {self.rel:g} with absolute floor {self.floor:g}"


EXACT = Tolerance()
#: Values that flow from BLAS, LAPACK or L-BFGS-B (the policy above).
BLAS = Tolerance(rel=1e-9, floor=1e-12)

_HEX = re.compile(r"-?(0x[0-9a-f]+(\.[0-9a-f]*)?p[+-][0-9]+|nan|inf)")


def _is_hex(value: Any) -> bool:
    return isinstance(value, str) and _HEX.fullmatch(value) is not None


def _show(value: Any) -> str:
    return f"{value} (= {float.fromhex(value)!r})" if _is_hex(value) else repr(value)


def compare(
    got: Any,
    stored: Any,
    case: str,
    tolerances: Mapping[str, Tolerance],
    *,
    field: str = "",
    index: tuple[int, ...] = (),
) -> None:
    r"""Assert that ``got`` matches ``stored`` (nested dicts and lists of hex floats and plain values).

    The keys of the top-level dict are the fields; ``tolerances[field]`` applies to the hex
    floats anywhere under it (``EXACT`` for a field not in ``tolerances``); everything else is
    compared exactly. A mismatch names the case, the field, the index in it, both values and
    the tolerance.
    """
    where = f"{case}: field {field or '<top>'}" + (f" at index {list(index)}" if index else "")
    if isinstance(stored, dict):
        assert isinstance(got, dict), f"{where}: got {got!r}, stored a dict"
        assert got.keys() == stored.keys(), f"{where}: keys {sorted(got)}, stored {sorted(stored)}"
        for key in stored:  # below the top level (a regression pin's "shape", "hex"), the field stays
            compare(got[key], stored[key], case, tolerances, field=field or key, index=index)
        return
    if isinstance(stored, list):
        count = len(got) if isinstance(got, list) else got
        assert isinstance(got, list) and len(got) == len(stored), f"{where}: got {count!r} values, stored {len(stored)}"
        for i, (g, s) in enumerate(zip(got, stored, strict=True)):
            compare(g, s, case, tolerances, field=field, index=(*index, i))
        return
    if _is_hex(stored) and _is_hex(got):
        tolerance = tolerances.get(field, EXACT)
        ok = tolerance.agrees(float.fromhex(got), float.fromhex(stored))
    else:
        tolerance, ok = EXACT, got == stored
    assert ok, f"{where}: got {_show(got)}, stored {_show(stored)}; tolerance {tolerance}"


def check_kernel_sets() -> None:
    r"""Fail, saying why, unless numpy's/scipy's OpenBLAS and torch's MKL take the pinned code paths."""
    from threadpoolctl import threadpool_info

    kernels = {i.get("architecture") for i in threadpool_info() if i.get("internal_api") == "openblas"}
    if not kernels <= set(PINNED_OPENBLAS):
        pytest.fail(
            f"numpy/scipy run OpenBLAS {sorted(kernels)} kernels; the pins were written with "
            f"{PINNED_OPENBLAS}: set OPENBLAS_CORETYPE=Haswell before numpy is imported (tests/conftest.py does)."
        )
    cbwr = os.environ.get("MKL_CBWR", "")
    if cbwr.split(",")[0].strip().upper() != PINNED_MKL_CBWR:
        pytest.fail(
            f"MKL_CBWR is {cbwr!r}; the pins were written with MKL_CBWR={PINNED_MKL_CBWR} (the same MKL "
            "results on every CPU): set it before torch is imported (tests/conftest.py does)."
        )
