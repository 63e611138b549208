r"""Command line: calibrate a target (ε, δ) to μ and noise, and ε of full-batch Gaussian
steps from every accountant, side by side.

    botorch-dp-epsilon --epsilon 1 --delta 1e-5 --steps 25 --users 1000 --clip-bound 1
    python -m botorch_dp.privacy.cli --mu 1 --delta 1e-5
    botorch-dp-epsilon --noise-multiplier 5 --steps 25 --delta 1e-5

``--epsilon`` goes from a target to the settings: the largest μ whose μ-GDP guarantee is
(ε, δ)-DP (exact inversion of the GDP privacy profile, as ``DPGIBOConfig(epsilon=...,
delta=...)`` does), the per-step noise multiplier √T/μ and, with ``--users`` and
``--clip-bound``, DP-GIBO's noise standard deviation 2B√T/(nμ) per coordinate. ``--mu``
and ``--noise-multiplier`` go the other way, from the settings to ε.
"""

from __future__ import annotations

import argparse
import json

from botorch_dp.privacy.accountants import TABLE_KEYS, epsilon_table, full_batch_steps
from botorch_dp.privacy.analysis.gdp import gdp_mu
from botorch_dp.privacy.mechanisms import GaussianGradientMechanism

__all__ = ["main"]

# One label per key of ``epsilon_table`` (TABLE_KEYS), in its order.
_LABELS = dict(
    zip(
        TABLE_KEYS,
        (
            "exact mu-GDP conversion",
            "Opacus RDPAccountant",
            "Opacus PRVAccountant (upper bound)",
            "zCDP, Bun & Steinke 2016",
            "zCDP, Canonne, Kamath & Steinke 2020",
        ),
        strict=True,
    )
)


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="botorch-dp-epsilon",
        description=(
            "From a target (epsilon, delta) to mu, the noise multiplier and DP-GIBO's noise "
            "std (--epsilon), or from mu / a noise multiplier to the epsilon at a given delta "
            "of full-batch Gaussian steps (a mu-GDP mechanism), from each accountant."
        ),
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--epsilon",
        type=float,
        help="target epsilon of the whole run (needs --delta): prints mu (exact GDP inversion), "
        "the noise multiplier and, with --users and --clip-bound, the noise std",
    )
    source.add_argument("--mu", type=float, help="total GDP parameter mu")
    source.add_argument("--noise-multiplier", type=float, help="per-step noise std / sensitivity")
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        help="number of steps (needed with --noise-multiplier; splits --mu, default 1)",
    )
    parser.add_argument(
        "--delta", type=float, default=None, help="target delta (required with --epsilon; default 1e-5 otherwise)"
    )
    parser.add_argument("--users", type=int, default=None, help="n, number of users (for the noise std)")
    parser.add_argument("--clip-bound", type=float, default=None, help="B, per-user clipping norm (for the noise std)")
    parser.add_argument("--eps-error", type=float, default=0.01, help="PRV accountant accuracy (default 0.01)")
    parser.add_argument("--json", action="store_true", help="print a JSON object instead")
    return parser


def _format_table(table: dict[str, float], *, mu: float, steps: int, noise_multiplier: float, delta: float) -> str:
    header = (
        f"{steps} full-batch Gaussian step(s), noise multiplier {noise_multiplier:.6g}: "
        f"mu = {mu:.6g} (GDP), delta = {delta:.3g}"
    )
    key_width = max(len(key) for key in table)
    label_width = max(len(label) for label in _LABELS.values())
    lines = [header, f"{'accountant':<{key_width}}  {'method':<{label_width}}  {'epsilon':>10}"]
    for key, value in table.items():
        lines.append(f"{key:<{key_width}}  {_LABELS[key]:<{label_width}}  {value:>10.4f}")
    return "\n".join(lines)


def _format_calibration(
    *,
    target_epsilon: float | None,
    mu: float,
    steps: int,
    noise_multiplier: float,
    noise_std: float | None,
    users: int | None,
    clip_bound: float | None,
    delta: float,
) -> str:
    lines = []
    if target_epsilon is not None:
        lines.append(
            f"target (epsilon = {target_epsilon:.6g}, delta = {delta:.3g})-DP  =>  mu = {mu:.6g} (exact GDP inversion)"
        )
    lines.append(
        f"{steps} step(s): noise multiplier sqrt(T)/mu = {noise_multiplier:.6g} "
        "(noise std / l2-sensitivity of each step)"
    )
    if noise_std is None:
        lines.append("noise std: give --users and --clip-bound for DP-GIBO's 2B sqrt(T)/(n mu)")
    else:
        lines.append(
            f"noise std per coordinate 2B sqrt(T)/(n mu) = {noise_std:.6g} "
            f"(n = {users}, B = {clip_bound:g}, T = {steps})"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    r"""Entry point of ``botorch-dp-epsilon`` and ``python -m botorch_dp.privacy.cli``.

    Args:
        argv: Command-line arguments without the program name; ``sys.argv[1:]`` if None.

    Returns:
        The exit status, 0. Invalid arguments exit with status 2 via argparse.
    """
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.noise_multiplier is not None and args.steps is None:
        parser.error("--noise-multiplier needs --steps")
    if args.epsilon is not None and args.delta is None:
        parser.error("--epsilon needs --delta: a target is a pair (epsilon, delta)")
    if (args.users is None) != (args.clip_bound is None):
        parser.error("--users and --clip-bound go together (the noise std is 2B sqrt(T)/(n mu))")
    delta = 1e-5 if args.delta is None else args.delta
    try:
        mu_given = args.mu if args.epsilon is None else gdp_mu(args.epsilon, delta)
        noise_multiplier, steps, mu = full_batch_steps(
            mu=None if args.noise_multiplier is not None else mu_given,
            noise_multiplier=args.noise_multiplier,
            steps=args.steps,
        )
        noise_std = None
        if args.users is not None:  # the one calibration of DP-GIBO's noise
            noise_std = GaussianGradientMechanism(
                clip_bound=args.clip_bound, num_users=args.users, privacy_mu=mu, num_steps=steps
            ).noise_std
        table = epsilon_table(noise_multiplier=noise_multiplier, steps=steps, delta=delta, eps_error=args.eps_error)
    except ValueError as error:
        parser.error(str(error))
    calibrate = args.epsilon is not None or args.users is not None
    if args.json:
        payload = {"mu": mu, "delta": delta, "steps": steps, "epsilon": table}
        if calibrate:
            payload.update(
                target_epsilon=args.epsilon,
                noise_multiplier=noise_multiplier,
                noise_std=noise_std,
                users=args.users,
                clip_bound=args.clip_bound,
            )
        print(json.dumps(payload))
    else:
        if calibrate:
            print(
                _format_calibration(
                    target_epsilon=args.epsilon,
                    mu=mu,
                    steps=steps,
                    noise_multiplier=noise_multiplier,
                    noise_std=noise_std,
                    users=args.users,
                    clip_bound=args.clip_bound,
                    delta=delta,
                )
            )
            print()
        print(_format_table(table, mu=mu, steps=steps, noise_multiplier=noise_multiplier, delta=delta))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
