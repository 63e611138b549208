r"""A run's privacy parameters: the ``μ`` of a target ``(ε, δ)`` (``resolve_privacy``) and who
counts as a user (``check_per_user_losses``: one loss column per user, at least ``MIN_USERS``)."""

from __future__ import annotations

import math

from botorch_dp.privacy.analysis.gdp import gdp_mu
from botorch_dp.privacy.checks import check_delta, check_positive

__all__ = ["DEFAULT_PRIVACY_MU", "DEFAULT_TARGET_DELTA", "MIN_USERS", "check_per_user_losses", "resolve_privacy"]

#: ``privacy_mu`` when neither it nor a target ``(epsilon, delta)`` is given.
DEFAULT_PRIVACY_MU = 1.0
#: ``target_delta`` when neither it nor ``delta`` is given.
DEFAULT_TARGET_DELTA = 1e-5
#: Fewest users a private run accepts (see ``check_per_user_losses``).
MIN_USERS = 2
#: A ``privacy_mu`` given next to ``(epsilon, delta)`` must be their ``μ`` to this relative
#: tolerance (a resolved config copied or read back from a checkpoint; scipy's root finder
#: may differ in the last digits between versions).
_RESOLVED_MU_RTOL = 1e-9


def resolve_privacy(
    privacy_mu: float | None, epsilon: float | None, delta: float | None, target_delta: float | None
) -> tuple[float, float | None, float | None, float]:
    r"""The ``μ`` a run uses, from ``privacy_mu`` or from a target ``(epsilon, delta)``.

    A target ``(ε, δ)`` resolves to the largest ``μ`` whose ``μ``-GDP guarantee implies
    ``(ε, δ)``-DP: the exact inversion ``gdp_mu(ε, δ)`` of the GDP privacy profile
    ``δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)`` (Dong, Roth & Su 2019), so the run's
    reported ``ε`` at ``δ`` is the target. ``target_delta`` (the ``δ`` at which ``ε`` is reported)
    defaults to ``delta``, else 1e-5. Returns ``(privacy_mu, epsilon, delta, target_delta)``,
    checked; the error names the fields (``privacy_mu`` with a target is refused unless it is the
    ``μ`` the target resolves to).
    """
    if epsilon is None:
        if delta is not None:
            raise ValueError(
                "delta (δ) was given without epsilon (ε): a target (ε, δ) needs both, "
                "DPGIBOConfig(epsilon=..., delta=...). For the δ at which the guarantee's ε "
                "is reported, use target_delta."
            )
        mu = DEFAULT_PRIVACY_MU if privacy_mu is None else check_positive(privacy_mu, "privacy_mu (μ)")
        target = DEFAULT_TARGET_DELTA if target_delta is None else check_delta(target_delta, "target_delta")
        return mu, None, None, target
    epsilon = check_positive(epsilon, "epsilon (ε)")
    if delta is None:
        raise ValueError(
            "epsilon (ε) needs delta (δ): give both, DPGIBOConfig(epsilon=..., delta=...), "
            "with δ well below 1/n (e.g. 1e-5)."
        )
    delta = check_delta(delta, "delta (δ)")
    mu = gdp_mu(epsilon, delta)
    if privacy_mu is not None:
        given = check_positive(privacy_mu, "privacy_mu (μ)")
        if not math.isclose(given, mu, rel_tol=_RESOLVED_MU_RTOL):
            raise ValueError(
                "Give either privacy_mu (μ) or epsilon and delta (a target (ε, δ)), not both: "
                f"privacy_mu = {given:g} is not the μ = {mu:.10g} that epsilon = {epsilon:g}, "
                f"delta = {delta:g} resolve to. Set privacy_mu=None to use the target."
            )
        mu = given  # the value a resolved config already runs with
    target = delta if target_delta is None else check_delta(target_delta, "target_delta")
    return mu, epsilon, delta, target


def check_per_user_losses(num_users: int, privacy_mu: float) -> None:
    r"""Refuse a private run on fewer than ``MIN_USERS`` users' losses.

    DP-GIBO protects each column of the ``q x n`` losses: column ``i`` must be user
    ``i``'s own loss (e.g. a validation example's loss, ``reduction="none"``). An
    objective that returns the mean loss as a ``q x 1`` tensor makes the whole data set
    one "user", and a guarantee for that one user says nothing about any person in it.
    Non-private runs (``μ = inf``) accept any ``n ≥ 1``.
    """
    if num_users < MIN_USERS and not math.isinf(privacy_mu):
        raise ValueError(
            f"losses have {num_users} column(s), but a private run needs per-user losses: a "
            "q x n tensor whose column i is user i's own loss at each of the q points (e.g. "
            "each validation example's loss, reduction='none'), with n >= 2. A q x 1 tensor "
            "such as the mean loss over all users treats the whole data set as one user, and "
            "a guarantee for that one user protects no person in it. Return the per-user "
            "losses; DP-GIBO averages them itself after clipping each user's contribution."
        )
