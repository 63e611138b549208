r"""Privacy accountants with Opacus's interface, and helpers to compare them.

``GDPAccountant`` accounts full-batch Gaussian steps exactly with μ-GDP and is registered
in Opacus's accountant registry under ``"gdp_full_batch"`` (so
``opacus.accountants.create_accountant("gdp_full_batch")`` and
``PrivacyEngine(accountant="gdp_full_batch")`` find it); Opacus's ``RDPAccountant`` and
``PRVAccountant`` can be fed the same steps for comparison. ``dp_sgd_rdp`` gives a DP-SGD
run's RDP curve on any order grid, which the ledger composes with other mechanisms.

This is the one module of ``botorch_dp.privacy`` that imports Opacus; the ledger imports
it only when it accounts DP-SGD training runs, so a DP-GIBO run never loads Opacus.
"""

from __future__ import annotations

import math
import warnings
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from opacus.accountants import IAccountant, PRVAccountant, create_accountant, register_accountant
from opacus.accountants.analysis.rdp import compute_rdp

from botorch_dp.privacy.analysis.gdp import compose_gdp, gaussian_noise_std_for_mu, gdp_epsilon, gdp_mu_from_noise
from botorch_dp.privacy.analysis.zcdp import gdp_to_zcdp, zcdp_epsilon, zcdp_epsilon_cks
from botorch_dp.privacy.checks import (
    check_choice,
    check_delta,
    check_history_entry,
    check_nonnegative,
    check_positive_int,
)

__all__ = [
    "ACCOUNTANT_NAMES",
    "TABLE_KEYS",
    "GDPAccountant",
    "accountant_epsilon",
    "dp_sgd_rdp",
    "epsilon_table",
    "full_batch_steps",
    "make_accountant",
]

ACCOUNTANT_NAMES = ("gdp", "rdp", "prv")
"""Names accepted by ``make_accountant``: ``"gdp"`` is our ``GDPAccountant`` (Opacus's own registry
entry ``"gdp"`` is its asymptotic ``GaussianAccountant``)."""

#: The keys of ``epsilon_table``, in order.
TABLE_KEYS = ("gdp_exact", "opacus_rdp", "opacus_prv", "zcdp_bun_steinke", "zcdp_cks")

#: One history entry, as in Opacus: (noise_multiplier, sample_rate, num_steps).
HistoryEntry = tuple[float, float, int]


def _append_step(history: list[HistoryEntry], noise_multiplier: float, sample_rate: float) -> None:
    # Same run-length encoding as Opacus: consecutive identical steps share an entry.
    if history and history[-1][0] == noise_multiplier and history[-1][1] == sample_rate:
        last = history.pop()
        history.append((last[0], last[1], last[2] + 1))
    else:
        history.append((noise_multiplier, sample_rate, 1))


class GDPAccountant(IAccountant):
    r"""Exact accountant for full-batch Gaussian steps, based on μ-GDP.

    A step with noise multiplier σ (noise std divided by ℓ2-sensitivity) and no
    subsampling is (1/σ)-GDP, so after steps σ_1..σ_T the total is
    μ = sqrt(Σ_t 1/σ_t²) and ε(δ) is the exact GDP conversion. This is the accounting
    of DP-GIBO (Sopa et al., Thm 3.1). Subsampled steps are refused: their GDP
    guarantee is only asymptotic, use Opacus's ``RDPAccountant``/``PRVAccountant``.

    ``history`` holds Opacus-style entries (noise_multiplier, sample_rate, num_steps).
    A noise multiplier of 0 is a non-private step and makes μ infinite.
    """

    def __init__(self) -> None:
        super().__init__()

    def step(self, *, noise_multiplier: float, sample_rate: float = 1.0) -> None:
        r"""Record one full-batch Gaussian step.

        Args:
            noise_multiplier: Noise standard deviation divided by the ℓ2-sensitivity,
                σ ≥ 0 and finite (0 means no noise).
            sample_rate: Must be 1.0 (full batch).

        Returns:
            None.
        """
        noise_multiplier = check_nonnegative(noise_multiplier, "noise_multiplier", allow_inf=False)
        if float(sample_rate) != 1.0:
            raise ValueError(
                "GDPAccountant only accounts full-batch steps (sample_rate=1.0), got "
                f"sample_rate={sample_rate!r}; use Opacus's RDPAccountant or "
                "PRVAccountant for subsampled steps."
            )
        _append_step(self.history, noise_multiplier, 1.0)

    def get_mu(self) -> float:
        r"""Total GDP parameter μ = sqrt(Σ_t 1/σ_t²) of the recorded steps.

        Returns:
            μ ≥ 0 (0.0 with no steps, ``math.inf`` after a step without noise).
        """
        mus = []
        for noise_multiplier, _, num_steps in self.history:
            if noise_multiplier == 0.0:
                return math.inf
            mus.append(math.sqrt(num_steps) / noise_multiplier)
        return compose_gdp(mus)

    def get_epsilon(self, delta: float, **kwargs: Any) -> float:
        r"""Exact ε at ``delta`` of the recorded steps.

        Args:
            delta: The target δ in (0, 1).
            kwargs: Ignored (accepted for interface compatibility with Opacus).

        Returns:
            ε ≥ 0 (0.0 with no steps).
        """
        return gdp_epsilon(self.get_mu(), delta)

    def __len__(self) -> int:
        r"""Number of steps recorded (not the number of history entries)."""
        return sum(num_steps for _, _, num_steps in self.history)

    @classmethod
    def mechanism(cls) -> str:
        r"""Accounting mechanism name, ``"gdp_full_batch"``."""
        return "gdp_full_batch"

    def state_dict(self, destination: dict[str, Any] | None = None) -> dict[str, Any]:
        r"""The accountant's state as plain, JSON-serialisable values.

        Args:
            destination: An optional mapping to fill in; a new ``OrderedDict`` if None.

        Returns:
            A dict with ``history`` (a list of [noise_multiplier, sample_rate,
            num_steps] lists) and ``mechanism``.
        """
        if destination is None:
            destination = OrderedDict()
        destination["history"] = [[float(s), float(q), int(n)] for s, q, n in self.history]
        destination["mechanism"] = self.mechanism()
        return destination

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        r"""Replace the state with one produced by ``state_dict`` (possibly via JSON).

        Args:
            state_dict: A mapping with ``history`` and ``mechanism``.

        Returns:
            None.
        """
        if not state_dict or "history" not in state_dict or "mechanism" not in state_dict:
            raise ValueError("state_dict must contain the keys 'history' and 'mechanism'.")
        if state_dict["mechanism"] != self.mechanism():
            raise ValueError(
                f"Cannot load a {state_dict['mechanism']!r} state into {type(self).__name__} ({self.mechanism()!r})."
            )
        history = [check_history_entry(*entry) for entry in state_dict["history"]]
        if any(sample_rate != 1.0 for _, sample_rate, _ in history):
            raise ValueError("GDPAccountant needs sample_rate=1.0 in every history entry.")
        self.history = history


# Opacus's registry maps a mechanism name to an accountant class; the key is the class's
# ``mechanism()``, as for Opacus's own accountants. ``force`` only makes a re-import
# (e.g. ``importlib.reload``) idempotent: the key is ours.
register_accountant(GDPAccountant.mechanism(), GDPAccountant, force=True)


def make_accountant(name: str, history: Sequence[tuple[float, float, int]] | None = None) -> IAccountant:
    r"""Create an accountant through Opacus's registry, optionally pre-filled with a history.

    Args:
        name: ``"gdp"`` (our exact ``GDPAccountant``, registered as
            ``"gdp_full_batch"``), ``"rdp"`` (Opacus ``RDPAccountant``) or ``"prv"``
            (Opacus ``PRVAccountant``).
        history: Optional Opacus-style entries (noise_multiplier, sample_rate,
            num_steps), stored as given, in order.

    Returns:
        The accountant, from ``opacus.accountants.create_accountant``.
    """
    check_choice(name, "accountant", ACCOUNTANT_NAMES)
    accountant = create_accountant(GDPAccountant.mechanism() if name == "gdp" else name)
    for entry in history or ():
        entry = check_history_entry(*entry)
        if name == "gdp" and entry[1] != 1.0:
            raise ValueError(f"GDPAccountant needs sample_rate=1.0, got entry {entry!r}.")
        accountant.history.append(entry)
    return accountant


def accountant_epsilon(accountant: IAccountant, *, delta: float, eps_error: float = 0.01) -> float:
    r"""ε at ``delta`` from any accountant, with the same call for all of them.

    Opacus's PRV accountant evaluates log(1 − q), which is −inf for full-batch steps
    (q = 1); the resulting numpy warnings are harmless and silenced here. An empty
    history gives 0.0.

    Args:
        accountant: A ``GDPAccountant`` or an Opacus accountant.
        delta: The target δ in (0, 1).
        eps_error: Accuracy passed to ``PRVAccountant.get_epsilon``; Opacus returns
            the upper end of its error interval, so the PRV value is a guarantee
            that may exceed the exact ε by about ``eps_error``.

    Returns:
        ε ≥ 0, ``math.inf`` if any recorded step has no noise.
    """
    check_delta(delta)
    if not accountant.history:
        return 0.0
    if any(float(entry[0]) == 0.0 for entry in accountant.history):
        return math.inf
    if isinstance(accountant, PRVAccountant):
        with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            warnings.simplefilter("ignore", UserWarning)  # its RDP domain bound: see below
            return float(accountant.get_epsilon(delta, eps_error=eps_error))
    with warnings.catch_warnings():
        # RDP warns when the optimal order is at the end of its grid; the value is
        # still a valid (if looser) bound.
        warnings.simplefilter("ignore", UserWarning)
        return float(accountant.get_epsilon(delta))


def dp_sgd_rdp(
    *, noise_multiplier: float, sample_rate: float, steps: int, orders: Sequence[float] | np.ndarray
) -> np.ndarray:
    r"""RDP curve of a DP-SGD run (Poisson-subsampled Gaussian steps), from Opacus.

    ``opacus.accountants.analysis.rdp.compute_rdp`` (Mironov, Talwar & Zhang 2019), the
    curve Opacus's ``RDPAccountant`` sums over its history; evaluated at the given
    orders so that DP-SGD runs and other mechanisms compose on one grid.

    Args:
        noise_multiplier: Noise std over ℓ2-sensitivity, σ ≥ 0 and finite (0: no noise).
        sample_rate: Poisson sampling rate q in (0, 1].
        steps: Number of steps T ≥ 1.
        orders: ``k`` Rényi orders α > 1.

    Returns:
        A ``k`` float64 array of ε(α) ≥ 0 (all ``inf`` when σ = 0).
    """
    noise_multiplier, sample_rate, steps = check_history_entry(noise_multiplier, sample_rate, steps, steps_name="steps")
    grid = np.asarray(orders, dtype=np.float64)
    if grid.ndim != 1 or grid.size == 0 or not np.all(grid > 1.0) or not np.all(np.isfinite(grid)):
        raise ValueError(f"orders must be a non-empty list of finite orders > 1, got {grid!r}.")
    if noise_multiplier == 0.0:
        return np.full(grid.shape, math.inf)
    rdp = compute_rdp(q=sample_rate, noise_multiplier=noise_multiplier, steps=steps, orders=grid)
    # Opacus's series can round to about -1e-11 at small orders; RDP is never negative. It overflows
    # to NaN at large orders for some (q, σ, steps): read as inf, a valid bound (no guarantee there).
    rdp = np.asarray(rdp, dtype=np.float64).reshape(grid.shape)
    return np.where(np.isfinite(rdp), np.maximum(rdp, 0.0), math.inf)


def full_batch_steps(
    *, mu: float | None = None, noise_multiplier: float | None = None, steps: int | None = None
) -> tuple[float, int, float]:
    r"""The noise multiplier, number of steps and total μ of equal full-batch Gaussian steps.

    Give either ``mu`` (total GDP parameter; with ``steps`` it is split over that many
    equal steps, default 1) or ``noise_multiplier`` and ``steps``; the other follows from
    μ = sqrt(T)/σ.

    Args:
        mu: Total GDP parameter μ > 0 (``math.inf`` allowed).
        noise_multiplier: Per-step noise multiplier σ ≥ 0 (0: no noise).
        steps: Number of steps T ≥ 1.

    Returns:
        ``(noise_multiplier, steps, mu)``.
    """
    if mu is not None and noise_multiplier is None:
        steps = check_positive_int(1 if steps is None else steps, "steps")
        return gaussian_noise_std_for_mu(1.0, mu, steps), steps, float(mu)
    if noise_multiplier is None or mu is not None:
        raise ValueError("Give exactly one of mu and noise_multiplier.")
    if steps is None:
        raise ValueError("noise_multiplier needs steps.")
    steps = check_positive_int(steps, "steps")
    noise_multiplier = check_nonnegative(noise_multiplier, "noise_multiplier", allow_inf=False)
    return noise_multiplier, steps, gdp_mu_from_noise(1.0, noise_multiplier, steps)


def epsilon_table(
    *,
    mu: float | None = None,
    noise_multiplier: float | None = None,
    steps: int | None = None,
    delta: float,
    eps_error: float = 0.01,
) -> dict[str, float]:
    r"""ε at ``delta`` of full-batch Gaussian steps, from every accountant.

    Give either ``mu`` (total GDP parameter; with ``steps`` it is split over that many
    equal steps, default 1) or ``noise_multiplier`` and ``steps`` (see
    ``full_batch_steps``).

    Args:
        mu: Total GDP parameter μ > 0 (``math.inf`` allowed).
        noise_multiplier: Per-step noise multiplier σ ≥ 0.
        steps: Number of steps T ≥ 1.
        delta: The target δ in (0, 1).
        eps_error: Accuracy of the Opacus PRV accountant.

    Returns:
        A dict with the keys ``TABLE_KEYS``: ``gdp_exact``, ``opacus_rdp``,
        ``opacus_prv`` (its upper bound), ``zcdp_bun_steinke`` and ``zcdp_cks``, each a
        float ε.
    """
    noise_multiplier, steps, total_mu = full_batch_steps(mu=mu, noise_multiplier=noise_multiplier, steps=steps)
    check_delta(delta)
    if math.isinf(total_mu):
        return {key: math.inf for key in TABLE_KEYS}
    history = [(noise_multiplier, 1.0, steps)]
    rho = gdp_to_zcdp(total_mu)
    table = {
        "gdp_exact": accountant_epsilon(make_accountant("gdp", history), delta=delta),
        "opacus_rdp": accountant_epsilon(make_accountant("rdp", history), delta=delta),
        "opacus_prv": accountant_epsilon(make_accountant("prv", history), delta=delta, eps_error=eps_error),
        "zcdp_bun_steinke": zcdp_epsilon(rho, delta),
        "zcdp_cks": zcdp_epsilon_cks(rho, delta),
    }
    return {key: table[key] for key in TABLE_KEYS}
