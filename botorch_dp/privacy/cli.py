r"""Command line: ε of full-batch Gaussian steps from every accountant, side by side.

    python -m botorch_dp.privacy.cli --mu 1 --delta 1e-5
    botorch-dp-epsilon --noise-multiplier 5 --steps 25 --delta 1e-5
"""

from __future__ import annotations

import argparse
import json

from botorch_dp.privacy.accountants import TABLE_KEYS, epsilon_table, full_batch_steps

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
            "Print the epsilon at a given delta of full-batch Gaussian steps "
            "(a mu-GDP mechanism), from each accountant."
        ),
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--mu", type=float, help="total GDP parameter mu")
    source.add_argument(
        "--noise-multiplier", type=float, help="per-step noise std / sensitivity"
    )
    parser.add_argument(
        "--steps", type=int, default=None,
        help="number of steps (needed with --noise-multiplier; splits --mu, default 1)",
    )
    parser.add_argument("--delta", type=float, default=1e-5, help="target delta (default 1e-5)")
    parser.add_argument(
        "--eps-error", type=float, default=0.01, help="PRV accountant accuracy (default 0.01)"
    )
    parser.add_argument("--json", action="store_true", help="print a JSON object instead")
    return parser


def _format_table(
    table: dict[str, float], *, mu: float, steps: int, noise_multiplier: float, delta: float
) -> str:
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
    try:
        noise_multiplier, steps, mu = full_batch_steps(
            mu=args.mu, noise_multiplier=args.noise_multiplier, steps=args.steps
        )
        table = epsilon_table(
            noise_multiplier=noise_multiplier, steps=steps, delta=args.delta, eps_error=args.eps_error
        )
    except ValueError as error:
        parser.error(str(error))
    if args.json:
        print(json.dumps({"mu": mu, "delta": args.delta, "steps": steps, "epsilon": table}))
    else:
        print(
            _format_table(
                table, mu=mu, steps=steps, noise_multiplier=noise_multiplier, delta=args.delta
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
