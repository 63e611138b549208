#!/usr/bin/env python
r"""The low-order-bits attack of issue 40 (item 1) against the releases of the botorch_dp on the path.

With the statistic exactly 0 on ``D`` and ``m′ ≠ 0`` on a neighbour ``D′``, the event "``|y| < m′/2``
and ``y`` not a multiple of ``ulp(m′)/2``" has probability 0 on ``D′`` for a float release
``fl(m′ + fl(σZ))`` (an exact sum there) and is counted here, on ``D`` and ``D′``, for (a) the score
mechanism (OS entropy, n = 100, C = 1, m′ = C/n, per-trial μ₀ ∈ {0.09, 0.3, 1}), (b) the gradients
``DPGIBO.tell`` releases on all-zero losses (m′ = B/n) and (c) ``tune``'s released scores read from
``to_json()`` (all-zero losses, m′ = C/n) and (d) AMP's released model (``ObjectivePerturbationMechanism``,
θ̃ = 0 on ``D`` and m′ in every coordinate on ``D′``, the τ test passed). On a grid release the event
cannot happen. Also the time of the exact sampler (one torch thread). Prints JSON.

    python scripts/released_bits_attack.py                       # about a minute
    python scripts/released_bits_attack.py --scores 400 --iterations 2 --tune-calls 1
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings

import torch
from gpytorch.kernels import PolynomialKernel

import botorch_dp
from botorch_dp import DPGIBO, DPGIBOConfig, tune
from botorch_dp.optim.options import FixedClip, batch_rule
from botorch_dp.privacy.mechanisms import (
    GaussianGradientMechanism,
    GaussianScoreMechanism,
    ObjectivePerturbationMechanism,
)
from botorch_dp.tuning import Categorical, Hyperparameter, SearchSpace


def fires(y, m_prime: float) -> int:
    r"""How many ``y`` have ``|y| < m′/2`` and are not multiples of ``ulp(m′)/2``."""
    y = torch.as_tensor(y, dtype=torch.float64).reshape(-1)
    return int(((y.abs() < m_prime / 2) & (torch.fmod(y, math.ulp(m_prime) / 2) != 0)).sum())


def scores(count: int) -> dict:
    n, C, chunk = 100, 1.0, 400  # releases of 400 scores: earlier versions refuse μ₀√q above 26
    out = {}
    for mu0 in (0.09, 0.3, 1.0):
        mech = GaussianScoreMechanism(loss_clip=C, per_trial_mu=mu0)
        zeros = torch.zeros(chunk, n, dtype=torch.float64)
        neighbour = zeros.clone()
        neighbour[:, 0] = C
        rounds = max(1, count // chunk)
        D = torch.cat([mech.release(zeros).scores for _ in range(rounds)])
        Dp = torch.cat([mech.release(neighbour).scores for _ in range(rounds)])
        out[f"mu0={mu0}"] = {"D": fires(D, C / n) / D.numel(), "D'": fires(Dp, C / n) / Dp.numel(), "n": D.numel()}
    return out


def tell_gradients(iterations: int) -> dict:
    d, n, B = 4, 50, 1.0
    released = []
    release_sum = GaussianGradientMechanism.release_sum

    def spy(self, summed, **kwargs):
        out = release_sum(self, summed, **kwargs)
        released.append(out.gradient.clone())
        return out

    kernel = PolynomialKernel(power=2)
    kernel.offset = 1.0
    config = DPGIBOConfig(
        bounds=torch.tensor([[-2.0] * d, [4.0] * d], dtype=torch.float64),
        kernel=kernel,
        num_iterations=iterations,
        privacy_mu=10.0,
        clip=FixedClip(B),
        step_size=0.5,
        batches=batch_rule(2),
        theta0=torch.zeros(d, dtype=torch.float64),
        search_radius=0.5,
        num_restarts=1,
        raw_samples=16,
    )
    GaussianGradientMechanism.release_sum = spy  # type: ignore[method-assign]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            opt = DPGIBO(config)
            for _ in range(iterations):
                X = opt.ask()
                opt.tell(X, torch.zeros(X.shape[0], n, dtype=torch.float64))
    finally:
        GaussianGradientMechanism.release_sum = release_sum  # type: ignore[method-assign]
    g = torch.cat(released)
    return {"D": fires(g, B / n), "coordinates": g.numel()}


def tune_scores(calls: int) -> dict:
    N = 300
    space = SearchSpace([Hyperparameter("lr", 1e-4, 1e-1, log_scale=True), Categorical("opt", ["a", "b", "c", "d"])])
    released: list[float] = []
    for _ in range(calls):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = tune(
                lambda configs: torch.zeros(len(configs), N, dtype=torch.float64),
                space,
                epsilon=2.0,
                delta=1e-5,
                progress=False,
                loss_clip=1.0,
                num_iterations=2,
                raw_samples=8,
                num_restarts=1,
                method="dp_gibo",  # the enumerate procedure: one released score per configuration
            )
        released += [c["noisy_score"] for c in json.loads(result.to_json())["configurations"]]
    return {"D": fires(torch.tensor(released, dtype=torch.float64), 1.0 / N), "scores": len(released)}


def amp_outputs(coordinates: int) -> dict:
    out = {}
    for sigma_out, m_prime in ((0.1, 0.3), (0.15, 0.01)):
        rates = {}
        for side, centre in (("D", 0.0), ("D'", m_prime)):
            mech = ObjectivePerturbationMechanism(
                dim=coordinates, clip=1.0, beta=0.5, lam=2.0, sigma=1.0, tau=5e-4, sigma_out=sigma_out
            )
            mech.perturbation()
            theta_tilde = torch.full((coordinates,), centre, dtype=torch.float64)
            theta = mech.release(theta_tilde, lambda t: torch.zeros(coordinates, dtype=torch.float64)).theta
            rates[side] = fires(theta, m_prime) / coordinates
        out[f"sigma_out={sigma_out}, m'={m_prime}"] = {**rates, "n": coordinates}
    return out


def sampler_times() -> dict:
    try:
        from botorch_dp.privacy.mechanisms._noise import discrete_gaussian_integers
    except ImportError:  # a version without the grid release
        return {}
    out = {}
    for n in (1, 100, 10_000):
        for name, gen in (("os_entropy", None), ("seeded", torch.Generator().manual_seed(0))):
            times = []
            for _ in range(5 if n == 10_000 else 50):
                start = time.perf_counter()
                discrete_gaussian_integers(n, 2**20, generator=gen)
                times.append(time.perf_counter() - start)
            out[f"{name}, {n} draws (ms, best)"] = round(1000 * min(times), 2)
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scores", type=int, default=20_000, help="score releases per μ₀ and side")
    parser.add_argument("--iterations", type=int, default=100, help="DP-GIBO steps (4 coordinates each)")
    parser.add_argument("--tune-calls", type=int, default=100, help="tune() calls (4 scores each)")
    parser.add_argument("--amp-coordinates", type=int, default=20_000, help="AMP release size per side")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    report = {
        "botorch_dp": botorch_dp.__file__,
        "score mechanism": scores(args.scores),
        "tell gradients": tell_gradients(args.iterations),
        "tune scores": tune_scores(args.tune_calls),
        "AMP outputs": amp_outputs(args.amp_coordinates),
        "sampler": sampler_times(),
    }
    print(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
