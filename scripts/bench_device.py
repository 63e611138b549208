r"""DP-GIBO's own work on the CPU and on a GPU, side by side in one process (issue 33, item 3).

For each device (the CPU, and ``cuda`` where ``torch.cuda.is_available()``), one run whose data
(bounds, ``θ₀``, the users' losses) lives on that device, timed part by part:

- **tell**: ``DPGIBO.tell`` of ``--iterations`` batches of ``d + 1`` points for ``n`` users (a
  quadratic per-user loss computed on the device; the objective is not timed), best of
  ``--repeat`` identical runs;
- **acquisition**: ``qGradientInformation`` value and closed-form gradient at ``--candidates``
  fixed random ``(d + 1)``-batches, on the GP the run holds after its tells, best of ``--repeat``;
- **batch search**: one ``optimize_batch`` (one ``optimize_acqf`` call, L-BFGS-B through scipy on
  the CPU, BoTorch moving the point back to the data's device each evaluation) from the same
  search seed, best of ``--repeat``, with the posterior trace it reaches.

Every timed call ends with ``torch.cuda.synchronize()`` on a GPU. The two devices run the same
seeded run, so their iterates should agree to rounding (``max |θ_cpu − θ_gpu|`` is reported).
Where no GPU exists the report says so and holds no GPU number. Writes
``reports/bench_device.json`` and ``reports/bench_device.md`` (``--out`` elsewhere).

    python scripts/bench_device.py --n 10000000    # the issue's size (about 3 GB per device at d = 10)
    python scripts/bench_device.py --n 10000 --repeat 1 --candidates 64   # seconds

On a loaded 2-core machine two torch threads oversubscribe the cores (a tell at n = 1e6 took 0.5 to
2.8 s with 2 threads and 0.14 to 0.21 s with 1 in alternating runs): ``--threads 1`` there.
"""

from __future__ import annotations

import argparse
import functools
import gc
import math
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from gpytorch.kernels import RBFKernel

from botorch_dp.acquisition import qGradientInformation
from botorch_dp.optim.dp_gibo import DPGIBO, DPGIBOConfig
from botorch_dp.optim.options import FixedClip, batch_rule
from botorch_dp.optim.options.batches import FAST, optimize_batch, posterior_trace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # benchmarks/ (the report header) is the repo's top-level package, not installed

from benchmarks.provenance import cpu_model, finished, header_lines, provenance, write_report  # noqa: E402

COMPARED_AGAINST = (
    "the same seeded run with its data on the CPU, in the same process (GPU time / CPU time per part; "
    "each part best of the repeats)"
)
PARTS = ("tell", "acquisition", "batch_search")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(device: torch.device, fn: Callable[[], Any]) -> tuple[float, Any]:
    _sync(device)
    start = time.perf_counter()
    out = fn()
    _sync(device)
    return time.perf_counter() - start, out


def device_name(device: torch.device) -> str:
    r"""The card's name on a GPU, the CPU model otherwise."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_model()


def _config(d: int, iterations: int, device: torch.device) -> DPGIBOConfig:
    kernel = RBFKernel(ard_num_dims=d)
    kernel.lengthscale = 1.5
    return DPGIBOConfig(
        bounds=torch.tensor([[-2.0] * d, [4.0] * d], dtype=torch.float64, device=device),
        kernel=kernel,
        num_iterations=iterations,
        privacy_mu=1.0,
        clip=FixedClip(2.0),
        step_size=0.3,
        batches=batch_rule(d + 1),
        search_radius=0.5,
        seed=0,
        num_restarts=2,
        raw_samples=32,
    )


def _objective(n: int, d: int, device: torch.device) -> Callable[[torch.Tensor], torch.Tensor]:
    g = torch.Generator().manual_seed(0)  # the same users on every device
    centres = (1.0 + torch.randn(n, d, generator=g, dtype=torch.float64)).to(device)

    def objective(X: torch.Tensor) -> torch.Tensor:  # b x n, row by row (b x n memory only)
        return torch.stack([0.5 * (centres - x).pow(2).sum(-1) for x in X])

    return objective


def bench_device(device: torch.device, n: int, d: int, iterations: int, repeat: int, candidates: int) -> dict[str, Any]:
    r"""The timings of one device: ``tell_s`` per iteration, ``acquisition_s``, ``batch_search_s``."""
    objective = _objective(n, d, device)
    cfg = _config(d, iterations, device)
    tell_s = [math.inf] * iterations
    opt = None
    for _ in range(repeat):
        opt = None
        gc.collect()
        opt = DPGIBO(cfg)
        for t in range(iterations):
            X = opt.ask()
            Y = objective(X)
            seconds, _ = _timed(device, functools.partial(opt.tell, X, Y))
            tell_s[t] = min(tell_s[t], seconds)
            del Y
    assert opt is not None
    s = opt.state
    g = torch.Generator().manual_seed(1)
    Z = torch.rand(candidates, d + 1, d, generator=g, dtype=torch.float64).to(device)
    box = opt.local_bounds()
    Z = box[0] + (box[1] - box[0]) * Z  # fixed candidates in the local box

    def acquisition() -> torch.Tensor:
        acqf = qGradientInformation(s.gp, s.theta)
        Zg = Z.clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(acqf(Zg).sum(), Zg)
        return grad

    acq_s, search_s = math.inf, math.inf
    batch = None
    for _ in range(repeat):
        acq_s = min(acq_s, _timed(device, acquisition)[0])
        gen = torch.Generator().manual_seed(2)  # the same search seed every time, on every device
        seconds, batch = _timed(
            device,
            functools.partial(
                optimize_batch,
                s.gp,
                s.theta,
                box,
                d + 1,
                gen,
                num_restarts=cfg.num_restarts,
                raw_samples=cfg.raw_samples,
                speed=FAST,
            ),
        )
        search_s = min(search_s, seconds)
    assert batch is not None and batch.device == s.theta.device
    return dict(
        device=str(device),
        name=device_name(device),
        tell_s=tell_s,
        acquisition_s=acq_s,
        batch_search_s=search_s,
        trace_after_search=posterior_trace(s.gp, s.theta, batch),
        iterates=torch.stack(s.iterates).cpu().tolist(),
        N=int(s.X.shape[0]),
        theta_device=str(s.theta.device),
    )


def render(report: dict[str, Any]) -> str:
    r"""The markdown report: provenance, settings, one row per device and part, the GPU/CPU ratios."""
    s, rows = report["settings"], report["devices"]
    lines = header_lines(report, "DP-GIBO on the CPU and on a GPU (`scripts/bench_device.py`)")
    lines += [
        f"n = {s['n']:.0e} users, d = {s['dim']}, batches of d + 1, {s['iterations']} tells; acquisition value and "
        f"closed-form gradient at {s['candidates']} fixed (d + 1)-batches; one optimize_acqf "
        f"(num_restarts 2, raw_samples 32); every part best of {s['repeat']}.",
        "",
        f"Compared against: {report['compared_against']}.",
        "",
        "Devices: " + "; ".join(f"`{r['device']}` = {r['name']}" for r in rows) + ".",
        "",
    ]
    if not report["gpu_available"]:
        lines += [
            "**No GPU on this machine** (`torch.cuda.is_available()` is False): CPU numbers only; "
            "no GPU number is given. Run `python scripts/bench_device.py --n 10000000` on a GPU machine.",
            "",
        ]
    header = "| part | " + " | ".join(f"{r['device']} s" for r in rows)
    header += " | GPU / CPU |" if len(rows) > 1 else " |"
    lines += [header, "|---" * (len(rows) + 1 + (len(rows) > 1)) + "|"]
    parts = [
        (f"tell {t + 1} (N = {(t + 1) * (s['dim'] + 1)})", [r["tell_s"][t] for r in rows])
        for t in range(s["iterations"])
    ]
    parts += [
        ("acquisition", [r["acquisition_s"] for r in rows]),
        ("batch search", [r["batch_search_s"] for r in rows]),
    ]
    for name, values in parts:
        cells = " | ".join(f"{v:.4f}" for v in values)
        ratio = f" | {values[1] / values[0]:.3f}" if len(values) > 1 else ""
        lines.append(f"| {name} | {cells}{ratio} |")
    lines += [
        "",
        "Trace after the batch search: "
        + "; ".join(f"{r['device']} {r['trace_after_search']:.6g}" for r in rows)
        + ".",
    ]
    if report.get("max_iterate_difference") is not None:
        lines.append(f"Largest difference of the iterates between the devices: {report['max_iterate_difference']:.3g}.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10**7, help="users (default 1e7)")
    parser.add_argument("--dim", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=2, help="tells per run")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many per part")
    parser.add_argument("--candidates", type=int, default=512, help="fixed (d + 1)-batches of the acquisition")
    parser.add_argument("--out", type=Path, default=ROOT / "reports", help="directory of bench_device.json/.md")
    parser.add_argument("--note", default=None, help="a sentence for the report (why this size, say)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    args = parser.parse_args(argv)
    if args.threads is not None:
        if args.threads < 1:
            parser.error(f"--threads must be at least 1, got {args.threads}.")
        torch.set_num_threads(args.threads)  # before the provenance, which records it
    for name in ("n", "dim", "iterations", "repeat", "candidates"):
        if getattr(args, name) < (2 if name == "n" else 1):
            parser.error(f"--{name} must be at least {2 if name == 'n' else 1}, got {getattr(args, name)}.")
    stamp = provenance("scripts/bench_device.py", argv, args.note)
    gpu = torch.cuda.is_available()
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if gpu else [])
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fixed noise seed warns: this is a benchmark
        for device in devices:
            rows.append(bench_device(device, args.n, args.dim, args.iterations, args.repeat, args.candidates))
    difference = None
    if len(rows) > 1:
        a, b = (torch.tensor(r["iterates"], dtype=torch.float64) for r in rows)
        difference = float((a - b).abs().max())
    report = {
        **finished(stamp),
        "settings": {
            "n": args.n,
            "dim": args.dim,
            "iterations": args.iterations,
            "repeat": args.repeat,
            "candidates": args.candidates,
        },
        "compared_against": COMPARED_AGAINST,
        "gpu_available": gpu,
        "devices": rows,
        "max_iterate_difference": difference,
    }
    text = render(report)
    print(text)
    write_report(args.out, "bench_device", report, text)
    sys.stdout.flush()
    return report


if __name__ == "__main__":
    main()
