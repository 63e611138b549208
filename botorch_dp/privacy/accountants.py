r"""Privacy accountants with Opacus's interface, and helpers to compare them.

``GDPAccountant`` accounts full-batch Gaussian steps exactly with μ-GDP; Opacus's
``RDPAccountant`` and ``PRVAccountant`` can be fed the same steps for comparison.
"""

from __future__ import annotations

import math
import warnings
from collections import OrderedDict
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from opacus.accountants import PRVAccountant, RDPAccountant
from opacus.accountants.accountant import IAccountant

from botorch_dp.privacy.analysis.gdp import compose_gdp, gdp_epsilon
from botorch_dp.privacy.analysis.zcdp import (
    gdp_to_zcdp,
    zcdp_epsilon,
    zcdp_epsilon_cks,
)
from botorch_dp.privacy.checks import check_delta, check_positive, check_positive_int

__all__ = [
    "ACCOUNTANT_NAMES",
    "GDPAccountant",
    "accountant_epsilon",
    "epsilon_table",
    "make_accountant",
]

#: Names accepted by ``make_accountant``.
ACCOUNTANT_NAMES = ("gdp", "rdp", "prv")

#: One history entry, as in Opacus: (noise_multiplier, sample_rate, num_steps).
HistoryEntry = Tuple[float, float, int]


def _append_step(history: List[HistoryEntry], noise_multiplier: float, sample_rate: float):
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
    of DP-GIBO (seed 000, Thm 3.1). Subsampled steps are refused: their GDP
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
                σ ≥ 0 (0 means no noise).
            sample_rate: Must be 1.0 (full batch).

        Returns:
            None.
        """
        noise_multiplier = float(noise_multiplier)
        if math.isnan(noise_multiplier) or noise_multiplier < 0.0:
            raise ValueError(
                f"noise_multiplier must be non-negative, got {noise_multiplier!r}."
            )
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
        mu = self.get_mu()
        if mu == 0.0:
            check_delta(delta)
            return 0.0
        return gdp_epsilon(mu, delta)

    def __len__(self) -> int:
        r"""Number of steps recorded (not the number of history entries)."""
        return sum(num_steps for _, _, num_steps in self.history)

    @classmethod
    def mechanism(cls) -> str:
        r"""Accounting mechanism name, ``"gdp_full_batch"``."""
        return "gdp_full_batch"

    def state_dict(self, destination: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
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
                f"Cannot load a {state_dict['mechanism']!r} state into "
                f"{type(self).__name__} ({self.mechanism()!r})."
            )
        history = []
        for entry in state_dict["history"]:
            noise_multiplier, sample_rate, num_steps = entry
            if float(sample_rate) != 1.0 or int(num_steps) < 1 or float(noise_multiplier) < 0:
                raise ValueError(f"Invalid history entry {entry!r}.")
            history.append((float(noise_multiplier), 1.0, int(num_steps)))
        self.history = history


def make_accountant(
    name: str, history: Optional[Sequence[Sequence[float]]] = None
) -> IAccountant:
    r"""Create an accountant by name, optionally pre-filled with a history.

    Args:
        name: ``"gdp"`` (our exact ``GDPAccountant``), ``"rdp"`` (Opacus
            ``RDPAccountant``) or ``"prv"`` (Opacus ``PRVAccountant``).
        history: Optional Opacus-style entries (noise_multiplier, sample_rate,
            num_steps), stored as given, in order.

    Returns:
        The accountant.
    """
    factories = {"gdp": GDPAccountant, "rdp": RDPAccountant, "prv": PRVAccountant}
    if name not in factories:
        raise ValueError(f"Unknown accountant {name!r}; expected one of {ACCOUNTANT_NAMES}.")
    accountant = factories[name]()
    for entry in history or ():
        noise_multiplier, sample_rate, num_steps = entry
        if int(num_steps) != num_steps or int(num_steps) < 1:
            raise ValueError(f"num_steps must be a positive integer in {entry!r}.")
        if name == "gdp" and float(sample_rate) != 1.0:
            raise ValueError(f"GDPAccountant needs sample_rate=1.0, got entry {entry!r}.")
        accountant.history.append((float(noise_multiplier), float(sample_rate), int(num_steps)))
    return accountant


def accountant_epsilon(
    accountant: IAccountant, *, delta: float, eps_error: float = 0.01
) -> float:
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
            return float(accountant.get_epsilon(delta, eps_error=eps_error))
    with warnings.catch_warnings():
        # RDP warns when the optimal order is at the end of its grid; the value is
        # still a valid (if looser) bound.
        warnings.simplefilter("ignore", UserWarning)
        return float(accountant.get_epsilon(delta))


def epsilon_table(
    *,
    mu: Optional[float] = None,
    noise_multiplier: Optional[float] = None,
    steps: Optional[int] = None,
    delta: float,
    eps_error: float = 0.01,
) -> Dict[str, float]:
    r"""ε at ``delta`` of full-batch Gaussian steps, from every accountant.

    Give either ``mu`` (total GDP parameter; with ``steps`` it is split over that many
    equal steps, default 1) or ``noise_multiplier`` and ``steps``.

    Args:
        mu: Total GDP parameter μ > 0 (``math.inf`` allowed).
        noise_multiplier: Per-step noise multiplier σ > 0.
        steps: Number of steps T ≥ 1.
        delta: The target δ in (0, 1).
        eps_error: Accuracy of the Opacus PRV accountant.

    Returns:
        A dict with keys ``gdp_exact``, ``opacus_rdp``, ``opacus_prv`` (its upper
        bound), ``zcdp_bun_steinke`` and ``zcdp_cks``, each a float ε.
    """
    if (mu is None) == (noise_multiplier is None):
        raise ValueError("Give exactly one of mu and noise_multiplier.")
    if noise_multiplier is not None and steps is None:
        raise ValueError("noise_multiplier needs steps.")
    steps = 1 if steps is None else steps
    steps = check_positive_int(steps, "steps")
    if mu is not None:
        mu = check_positive(mu, "mu")
        noise_multiplier = 0.0 if math.isinf(mu) else math.sqrt(steps) / mu
    noise_multiplier = float(noise_multiplier)
    if math.isnan(noise_multiplier) or noise_multiplier < 0.0:
        raise ValueError(f"noise_multiplier must be non-negative, got {noise_multiplier!r}.")
    check_delta(delta)

    history = [(noise_multiplier, 1.0, steps)]
    gdp = make_accountant("gdp", history)
    total_mu = gdp.get_mu()
    if math.isinf(total_mu):
        return {key: math.inf for key in _TABLE_KEYS}
    rho = gdp_to_zcdp(total_mu)
    return {
        "gdp_exact": accountant_epsilon(gdp, delta=delta),
        "opacus_rdp": accountant_epsilon(make_accountant("rdp", history), delta=delta),
        "opacus_prv": accountant_epsilon(
            make_accountant("prv", history), delta=delta, eps_error=eps_error
        ),
        "zcdp_bun_steinke": zcdp_epsilon(rho, delta),
        "zcdp_cks": zcdp_epsilon_cks(rho, delta),
    }


_TABLE_KEYS = ("gdp_exact", "opacus_rdp", "opacus_prv", "zcdp_bun_steinke", "zcdp_cks")
