#!/usr/bin/env python
r"""Benchmark ``qGradientInformation`` against a naive refactorize-per-candidate version.

For every input dimension ``d`` and training-set size ``|D|`` the script builds a
``GradientGP`` with a fixed ``ScaleKernel(RBFKernel)`` on ``|D|`` uniform points of
``[0, 1]^d``, sets ``θ = 0.5·1``, and reports:

- the time to evaluate the project's acquisition on ``--num-candidates`` candidates
  (``q = 1``, one vectorized call; warm-up once, median of ``--repeats``);
- the time of a naive implementation that, for each candidate ``x`` in a Python loop,
  builds ``k(D∪{x}, D∪{x}) + σ²I``, refactorizes it with ``torch.linalg.cholesky`` and
  recomputes ``tr Σ_{D∪{x}}(θ) = tr ∇k∇ᵀ(θ, θ) − ‖L⁻¹ ∇k(θ, D∪{x})ᵀ‖²_F``;
- their ratio and the largest relative difference of the two (asserted ``< 1e-6``);
- the wall time of one ``optimize_acqf(acqf, bounds, q=1, num_restarts, raw_samples)``
  call on the box of half-width 0.1 around ``θ``, for the project's acquisition and, for
  ``|D| <= --naive-opt-max-train``, for the naive one (elsewhere it is skipped and a
  lower bound on its cost is shown).

The comparison is against the naive version in the same process (same problem, same
candidates, same load). Writes ``reports/bench_acquisition.json`` and
``reports/bench_acquisition.md`` (``--out`` elsewhere) with the command, the machine, torch's
thread count and the date (``benchmarks.provenance``).

Usage::

    python scripts/bench_acquisition.py                 # full benchmark
    python scripts/bench_acquisition.py --quick         # tiny smoke configuration
    python scripts/bench_acquisition.py --profile       # + cProfile of the fast path
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import math
import pstats
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.optim import optimize_acqf
from botorch.utils.transforms import t_batch_mode_transform
from gpytorch.kernels import RBFKernel, ScaleKernel
from torch import Tensor

from botorch_dp.acquisition import qGradientInformation
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.kernel_derivatives import KernelDerivatives

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # benchmarks/ (the report header) is the repo's top-level package, not installed

from benchmarks.provenance import cpu_model, finished, header_lines, provenance, write_report  # noqa: E402

DTYPE = torch.float64
NOISE = 1e-4
HALF_WIDTH = 0.1
AGREEMENT_TOL = 1e-6
TARGET_SPEEDUP = 10.0
TARGET_CONFIG = (100, 1000)  # (d, |D|)
COMPARED_AGAINST = (
    "speedup (naive/fast) is the time of a naive acquisition that refactorizes the augmented kernel matrix for "
    "every candidate in a Python loop (NaiveGradientInformation, in this script) over that of the package's "
    "qGradientInformation (Schur complement on the cached Cholesky factor, vectorized over candidates), on the "
    "same GP, the same candidates, in the same process; both values agree to the max rel. diff shown"
)


# ---------------------------------------------------------------------- naive reference
class NaiveGradientInformation(AcquisitionFunction):
    r"""``tr Σ_D(θ) − tr Σ_{D∪X}(θ)`` by refactorizing the augmented matrix per candidate.

    Deliberately unoptimized: one Python iteration per candidate batch, each building the
    full ``(N+q) x (N+q)`` kernel matrix, a fresh Cholesky factor and ``∇k(θ, D∪X)``.
    Only the trace before conditioning, ``tr Σ_D(θ)``, is computed once.
    """

    def __init__(self, gp: GradientGP, theta: Tensor) -> None:
        super().__init__(model=gp)  # type: ignore[arg-type]  # a GradientGP, not a botorch Model: only stored
        self.kernel = gp.kernel
        self.derivatives = KernelDerivatives(gp.kernel)
        self.train_X = gp.train_X
        self.train_noise = gp.train_noise
        self.new_noise = gp.new_point_noise
        self.jitter = gp.jitter
        self.theta = theta.detach().reshape(-1).to(gp.train_X)
        with torch.no_grad():
            self.prior_trace = self.derivatives.prior_trace(self.theta)
            self.base_trace = self._posterior_trace(self.train_X, self.train_noise)

    def _posterior_trace(self, X_all: Tensor, noise: Tensor) -> Tensor:
        K = self.kernel(X_all).to_dense() + torch.diag(noise.clamp_min(self.jitter))
        L = torch.linalg.cholesky(K)
        G = self.derivatives.cross(self.theta, X_all)  # d x n
        M = torch.linalg.solve_triangular(L, G.transpose(-1, -2), upper=False)
        return self.prior_trace - M.pow(2).sum()

    @t_batch_mode_transform()  # type: ignore[arg-type]  # typed for AcquisitionFunction methods only
    def forward(self, X: Tensor) -> Tensor:
        batch_shape, (q, d) = X.shape[:-2], X.shape[-2:]
        new_noise = self.train_noise.new_full((q,), self.new_noise)
        noise = torch.cat([self.train_noise, new_noise])
        values = []
        for x in X.reshape(-1, q, d):  # the Python loop is the point of the baseline
            X_all = torch.cat([self.train_X, x])
            values.append(self.base_trace - self._posterior_trace(X_all, noise))
        return torch.stack(values).reshape(batch_shape)


# ---------------------------------------------------------------------- set-up
def make_problem(d: int, n_train: int, seed: int) -> tuple[GradientGP, Tensor]:
    """A ``GradientGP`` on ``n_train`` uniform points of ``[0, 1]^d`` and ``θ = 0.5·1``."""
    gen = torch.Generator().manual_seed(seed)
    train_X = torch.rand(n_train, d, generator=gen, dtype=DTYPE)
    kernel = ScaleKernel(RBFKernel(ard_num_dims=d)).to(DTYPE)
    kernel.base_kernel.lengthscale = torch.full((d,), 0.5 * math.sqrt(d), dtype=DTYPE)
    kernel.outputscale = 1.0
    kernel.requires_grad_(False)
    gp = GradientGP(train_X, kernel, NOISE)
    theta = torch.full((d,), 0.5, dtype=DTYPE)
    return gp, theta


def make_candidates(theta: Tensor, n: int, seed: int) -> Tensor:
    """``n x 1 x d`` candidates uniform in the box of half-width 0.1 around ``θ``."""
    gen = torch.Generator().manual_seed(seed + 1)
    u = torch.rand(n, 1, theta.shape[0], generator=gen, dtype=DTYPE)
    return theta + HALF_WIDTH * (2.0 * u - 1.0)


def box(theta: Tensor) -> Tensor:
    return torch.stack([theta - HALF_WIDTH, theta + HALF_WIDTH])


def _time(fn: Callable[[], Tensor], repeats: int) -> tuple[float, Tensor]:
    """Median wall time (s) of ``repeats`` (>= 1) calls and the last result."""
    times: list[float] = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def time_optimize(acqf: AcquisitionFunction, theta: Tensor, args, seed: int) -> tuple[float, float]:
    """Wall time (s) and acquisition value of one ``optimize_acqf`` call."""
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. optimization warnings from scipy
        t0 = time.perf_counter()
        _, value = optimize_acqf(acqf, box(theta), q=1, num_restarts=args.num_restarts, raw_samples=args.raw_samples)
        elapsed = time.perf_counter() - t0
    if value is None:
        raise RuntimeError("optimize_acqf returned no acquisition value.")
    return elapsed, float(value)


# ---------------------------------------------------------------------- one configuration
@dataclass
class Row:
    d: int
    n_train: int
    fast_eval_s: float
    naive_eval_s: float
    max_rel_diff: float
    fast_opt_s: float
    fast_opt_value: float
    naive_opt_s: float | None = None
    naive_opt_value: float | None = None
    naive_opt_lower_bound_s: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def speedup(self) -> float:
        return self.naive_eval_s / self.fast_eval_s


def bench_config(d: int, n_train: int, args) -> Row:
    gp, theta = make_problem(d, n_train, args.seed)
    X = make_candidates(theta, args.num_candidates, args.seed)
    fast = qGradientInformation(gp, theta)
    naive = NaiveGradientInformation(gp, theta)

    with torch.no_grad():
        fast(X)  # warm-up
        fast_s, fast_vals = _time(lambda: fast(X), args.repeats)
        naive(X[:2])  # warm-up
        naive_s, naive_vals = _time(lambda: naive(X), 1)

    denom = naive_vals.abs().clamp_min(torch.finfo(DTYPE).tiny)
    max_rel = float(((fast_vals - naive_vals).abs() / denom).max())
    assert max_rel < AGREEMENT_TOL, (
        f"d={d}, |D|={n_train}: fast and naive acquisitions disagree "
        f"(max relative difference {max_rel:.3e} >= {AGREEMENT_TOL:g})"
    )

    fast_opt_s, fast_opt_val = time_optimize(fast, theta, args, args.seed + 2)
    row = Row(d, n_train, fast_s, naive_s, max_rel, fast_opt_s, fast_opt_val)
    if n_train <= args.naive_opt_max_train:
        row.naive_opt_s, row.naive_opt_value = time_optimize(naive, theta, args, args.seed + 2)
    else:
        # optimize_acqf evaluates the raw samples before any L-BFGS step: a lower bound.
        row.naive_opt_lower_bound_s = naive_s * args.raw_samples / args.num_candidates
    return row


# ---------------------------------------------------------------------- output
def _ms(seconds: float) -> str:
    return f"{1e3 * seconds:.1f}"


def format_table(rows: list[Row], args) -> str:
    n = args.num_candidates
    header = [
        "d",
        "N",
        f"fast eval {n} cand. (ms)",
        f"naive eval {n} cand. (ms)",
        "speedup (naive/fast)",
        "max rel. diff",
        "optimize_acqf fast (s)",
        "optimize_acqf naive (s)",
        "best α fast / naive",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---:"] * len(header)) + "|"]
    for r in rows:
        if r.naive_opt_s is not None:
            naive_opt = f"{r.naive_opt_s:.2f}"
            best = f"{r.fast_opt_value:.6g} / {r.naive_opt_value:.6g}"
        else:
            naive_opt = f"skipped (too slow; raw samples alone ≥ {r.naive_opt_lower_bound_s:.0f} s)"
            best = f"{r.fast_opt_value:.6g} / –"
        cells = [
            str(r.d),
            str(r.n_train),
            _ms(r.fast_eval_s),
            _ms(r.naive_eval_s),
            f"{r.speedup:.1f}×",
            f"{r.max_rel_diff:.1e}",
            f"{r.fast_opt_s:.2f}",
            naive_opt,
            best,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def profile_fast_path(d: int, n_train: int, args) -> str:
    """cProfile of the fast evaluation and of one fast ``optimize_acqf`` call."""
    gp, theta = make_problem(d, n_train, args.seed)
    X = make_candidates(theta, args.num_candidates, args.seed)
    acqf = qGradientInformation(gp, theta)
    out = io.StringIO()
    for label, fn in [
        (f"fast evaluation, {args.num_candidates} candidates", lambda: acqf(X).sum()),
        ("fast optimize_acqf", lambda: time_optimize(acqf, theta, args, args.seed + 2)),
    ]:
        prof = cProfile.Profile()
        with torch.no_grad() if "evaluation" in label else contextlib.nullcontext():
            prof.enable()
            fn()
            prof.disable()
        out.write(f"\n### cProfile: {label} (d={d}, |D|={n_train}), top 15 by cumulative time\n")
        stats = pstats.Stats(prof, stream=out).strip_dirs().sort_stats("cumulative")
        stats.print_stats(15)
    return out.getvalue()


# ---------------------------------------------------------------------- entry point
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dims", type=int, nargs="+", default=[10, 50, 100])
    p.add_argument("--num-train", type=int, nargs="+", default=[100, 1000])
    p.add_argument("--num-candidates", type=int, default=512)
    p.add_argument("--repeats", type=int, default=3, help="timed repeats of the fast path")
    p.add_argument("--num-restarts", type=int, default=4)
    p.add_argument("--raw-samples", type=int, default=512)
    p.add_argument(
        "--naive-opt-max-train",
        type=int,
        default=100,
        help="run optimize_acqf on the naive acquisition only for |D| up to this",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="tiny config: d=3, |D|=20, 16 candidates")
    p.add_argument("--profile", action="store_true", help="also cProfile the fast path")
    p.add_argument("--out", type=Path, default=ROOT / "reports", help="directory of bench_acquisition.json/.md")
    p.add_argument("--note", default=None, help="a sentence for the report (why this size, say)")
    args = p.parse_args(argv)
    if args.quick:
        args.dims, args.num_train = [3], [20]
        args.num_candidates, args.repeats = 16, 1
        args.num_restarts, args.raw_samples = 2, 16
    return args


def main(argv: list[str] | None = None) -> list[Row]:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    stamp = provenance("scripts/bench_acquisition.py", argv, args.note)
    t_start = time.perf_counter()
    printed: list[str] = []

    def say(text: str = "") -> None:
        print(text)
        printed.append(text)

    say(f"torch {torch.__version__}, threads {torch.get_num_threads()}, CPU: {cpu_model()}")
    say(
        f"float64, ScaleKernel(RBFKernel), lengthscale 0.5·sqrt(d), σ² = {NOISE:g}, "
        f"N = |D| training points, θ = 0.5·1, box half-width {HALF_WIDTH}, q = 1, "
        f"optimize_acqf(num_restarts={args.num_restarts}, raw_samples={args.raw_samples}), "
        f"fast eval: median of {args.repeats}, naive eval: 1 run, seed {args.seed}"
    )
    say()
    rows = []
    for d in args.dims:
        for n_train in args.num_train:
            rows.append(bench_config(d, n_train, args))
    say(format_table(rows, args))
    say()
    target = [r for r in rows if (r.d, r.n_train) == TARGET_CONFIG]
    if target:
        r = target[0]
        verdict = "MET" if r.speedup >= TARGET_SPEEDUP else "NOT MET"
        say(
            f"Target (d={r.d}, |D|={r.n_train}: fast ≥ {TARGET_SPEEDUP:g}× faster than naive "
            f"on {args.num_candidates} candidates): {verdict} ({r.speedup:.1f}×)"
        )
    else:
        say(f"Target (d, |D|) = {TARGET_CONFIG}: not in this run's configurations.")
    if args.profile and rows:
        last = rows[-1]
        print(profile_fast_path(last.d, last.n_train, args))
    print(f"Total runtime: {time.perf_counter() - t_start:.1f} s")
    report = {
        **finished(stamp),
        "settings": {k: v for k, v in vars(args).items() if k not in ("out", "note", "profile", "quick")},
        "compared_against": COMPARED_AGAINST,
        "target": {
            "d": TARGET_CONFIG[0],
            "num_train": TARGET_CONFIG[1],
            "speedup_at_least": TARGET_SPEEDUP,
            "speedup": target[0].speedup if target else None,
        },
        "rows": [{**asdict(r), "speedup": r.speedup} for r in rows],
    }
    text = "\n".join(
        [
            *header_lines(report, "Acquisition speed (`scripts/bench_acquisition.py`)"),
            f"Compared against: {COMPARED_AGAINST}.",
            "",
            *printed[1:],
        ]
    )
    write_report(args.out, "bench_acquisition", report, text)
    return rows


if __name__ == "__main__":
    main()
