r"""DP-SGD's privacy accounting, from Opacus: the noise multiplier σ that makes ``R`` equal
runs together ``(ε, δ)``-DP (``calibrate_noise_multiplier``), and the ε of DP-SGD runs
composed as the ledger composes them (``composed_training_epsilon``). Both are pure
functions of public run shapes ``(σ, q, steps)``; ``dp_sgd`` uses them to resolve a target
ε and re-exports them. Opacus is imported only when one of them is called.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from botorch_dp.privacy.checks import check_choice, check_delta, check_positive, check_positive_int

__all__ = ["TRAINING_ACCOUNTANTS", "calibrate_noise_multiplier", "composed_training_epsilon"]

#: Accountants a training-data ε can be calibrated and reported with (Opacus names).
TRAINING_ACCOUNTANTS: tuple[str, ...] = ("rdp", "prv")


def calibrate_noise_multiplier(
    *,
    target_epsilon: float,
    target_delta: float,
    sample_rate: float,
    steps_per_run: int,
    planned_runs: int,
    accountant: str = "rdp",
    epsilon_tolerance: float = 0.01,
    eps_error: float = 0.01,
) -> float:
    r"""The DP-SGD noise multiplier σ that makes ``planned_runs`` equal runs ``(ε, δ)``-DP.

    Opacus's ``get_noise_multiplier`` searches σ for ONE history entry; ``R`` runs of
    ``S`` steps at the same ``(σ, q)`` compose exactly like one entry of ``R·S`` steps,
    so it is asked for ``steps = R·S``.

    Args:
        target_epsilon: ε of all runs composed (> 0).
        target_delta: δ in (0, 1).
        sample_rate: Poisson rate ``q`` of each run.
        steps_per_run: ``S``.
        planned_runs: ``R``.
        accountant: ``"rdp"`` or ``"prv"`` (the ledger's ``training_accountant``).
        epsilon_tolerance: The composed ε lies in ``[target − tolerance, target]``.
        eps_error: Accuracy of the PRV accountant.

    Returns:
        σ > 0.
    """
    from opacus.accountants.utils import get_noise_multiplier

    check_choice(accountant, "accountant", TRAINING_ACCOUNTANTS)
    total_steps = check_positive_int(steps_per_run, "steps_per_run") * check_positive_int(planned_runs, "planned_runs")
    kwargs = {"eps_error": eps_error} if accountant == "prv" else {}
    target_epsilon = check_positive(target_epsilon, "target_epsilon", allow_inf=False)
    target_delta = check_delta(target_delta, "target_delta")
    with warnings.catch_warnings():
        # RDP: "optimal order is the largest alpha" (still a valid bound); PRV: log(1 - q) at q = 1
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            return float(
                get_noise_multiplier(
                    target_epsilon=target_epsilon,
                    target_delta=target_delta,
                    sample_rate=float(sample_rate),
                    steps=total_steps,
                    accountant=accountant,
                    epsilon_tolerance=epsilon_tolerance,
                    **kwargs,
                )
            )
        except ValueError as err:  # Opacus: "The privacy budget is too low." (no σ up to its MAX_SIGMA reaches it)
            from opacus.accountants.utils import MAX_SIGMA

            floor = composed_training_epsilon(
                [(MAX_SIGMA, float(sample_rate), total_steps)], target_delta, accountant, eps_error
            )
            raise ValueError(
                f"target_epsilon={target_epsilon!r} is below what DP-SGD can reach for planned_runs={planned_runs} "
                f"run(s) of steps_per_run={steps_per_run} steps at sample_rate={float(sample_rate):.4g} "
                f"(target_delta={target_delta!r}, {accountant} accountant): even the noise multiplier "
                f"{MAX_SIGMA:.0e} gives epsilon = {floor:.4g}, the smallest feasible target. Raise target_epsilon "
                f"well above {floor:.3g} (such noise learns nothing) or use the 'prv' "
                f"accountant. Nothing was trained."
            ) from err


def composed_training_epsilon(
    history: Sequence[tuple[float, float, int]], delta: float, accountant: str = "rdp", eps_error: float = 0.01
) -> float:
    r"""ε at ``delta`` of DP-SGD runs composed, merged like the ledger (equal ``(σ, q)`` runs
    become one entry with the summed steps), from Opacus's accountant.

    Args:
        history: ``(noise_multiplier, sample_rate, steps)`` per run.
        delta: δ in (0, 1).
        accountant: ``"rdp"`` or ``"prv"``.
        eps_error: Accuracy of the PRV accountant.

    Returns:
        ε ≥ 0 (0.0 for no runs).
    """
    from botorch_dp.privacy.accountants import accountant_epsilon, make_accountant

    check_choice(accountant, "accountant", TRAINING_ACCOUNTANTS)
    merged: dict[tuple[float, float], int] = {}
    for sigma, rate, steps in history:
        merged[(float(sigma), float(rate))] = merged.get((float(sigma), float(rate)), 0) + int(steps)
    if not merged:
        return 0.0
    entries = [(sigma, rate, steps) for (sigma, rate), steps in merged.items()]
    return accountant_epsilon(make_accountant(accountant, entries), delta=delta, eps_error=eps_error)
