r"""Pins of seeded runs, written before the redesign moved any code, within the tolerance
policy of ``tests/pin_compare.py``.

Each case runs a small seeded job (DP-GIBO with fixed, adaptive joint, adaptive greedy
and AdaGrad batches; private random search; noisy gradient descent) and compares what it
releases (gradients, iterates, evaluation points, scores) with the values stored in
``tests/data/regression_pins.json`` as exact float hex strings, decoded for the comparison.
Bit for bit: DP-GIBO's batch sizes, and everything private random search and noisy gradient
descent release (no BLAS, no optimizer). Relative ``1e-9`` (absolute floor ``1e-12``):
DP-GIBO's released gradients, iterates and evaluation points, which flow from the GP's linear
algebra and the L-BFGS-B batch search (``TOLERANCES``). A refactor that changes behaviour
fails here; a change of behaviour made on purpose regenerates the file with
``python -m tests.test_regression_pins`` and says so in its commit message.

The pins hold on one code path of each library (``tests/pin_compare.py`` says why):
OpenBLAS's "Haswell"/"Zen" kernels (``OPENBLAS_CORETYPE``) and MKL's ``MKL_CBWR=COMPATIBLE``,
both set by ``tests/conftest.py`` (and by this module run as a script, from the repository's
root); ``check_kernel_sets`` says so instead of failing on a value. Since the step rules run on ``torch.optim``, whose
vectorized kernels round differently from the scalar ones, torch's CPU capability matters too:
AVX-512 and AVX2 give the same values, ``ATEN_CPU_CAPABILITY=default`` (a CPU without AVX2)
moves some beyond the tolerance.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path

os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")  # run as a script (pytest: tests/conftest.py)
os.environ.setdefault("MKL_CBWR", "COMPATIBLE")

import pytest  # noqa: E402
import torch  # noqa: E402
from gpytorch.kernels import RBFKernel  # noqa: E402

import botorch_dp  # noqa: E402
from botorch_dp.baselines import noisy_gradient_descent, private_random_search  # noqa: E402
from botorch_dp.baselines.selection import NonPrivateTrials  # noqa: E402
from botorch_dp.optim.options.steps import StepRule  # noqa: E402
from tests.pin_compare import BLAS, check_kernel_sets, compare  # noqa: E402

PINS = Path(__file__).parent / "data" / "regression_pins.json"
D, N = 3, 40


def _data() -> torch.Tensor:
    g = torch.Generator().manual_seed(123)
    return 1.0 + torch.randn(N, D, generator=g, dtype=torch.float64)


def _objective(X: torch.Tensor) -> torch.Tensor:
    x = _data()
    return 0.5 * (X[:, None, :] - x[None]).pow(2).sum(-1)


def _gradient_oracle(theta: torch.Tensor) -> torch.Tensor:
    return theta[:, None, :] - _data()[None]  # 1 x n x d


def _bounds() -> torch.Tensor:
    return torch.tensor([[-2.0] * D, [4.0] * D], dtype=torch.float64)


def _dp_gibo(**overrides) -> dict[str, torch.Tensor]:
    kernel = RBFKernel(ard_num_dims=D)
    kernel.lengthscale = 1.5
    settings = dict(
        bounds=_bounds(),
        kernel=kernel,
        num_iterations=4,
        privacy_mu=1.0,
        clip_bound=3.0,
        step_size=0.3,
        theta0=torch.zeros(D, dtype=torch.float64),
        search_radius=0.5,
        noise_variance=1e-4,
        num_restarts=2,
        raw_samples=32,
        seed=0,
    )
    settings.update(overrides)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an explicit noise seed warns once issue 13 lands
        optimizer = botorch_dp.DPGIBO(botorch_dp.DPGIBOConfig(**settings))
        release = optimizer.run(_objective, progress=False).release
    return {
        "released_gradients": release.released_gradients,
        "iterates": release.iterates,
        "evaluation_points": release.evaluation_points,
        "batch_sizes": torch.tensor(release.batch_sizes, dtype=torch.float64),
    }


def _private_random_search() -> dict[str, torch.Tensor]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = private_random_search(  # NON-PRIVATE trials: the pin covers every trial
            _objective, _bounds(), mean_trials=8.0, per_trial_mu=0.5, loss_clip=10.0, seed=0, non_private_trials=True
        )
    assert isinstance(result, NonPrivateTrials)
    return {
        "theta": result.theta,
        "points": result.history.points,
        "noisy_scores": result.history.extras["noisy_scores"],
    }


def _noisy_gd(step_rule: StepRule) -> dict[str, torch.Tensor]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = noisy_gradient_descent(
            _gradient_oracle,
            _bounds(),
            num_iterations=6,
            clip_bound=2.0,
            step_size=0.4,
            privacy_mu=1.0,
            step_rule=step_rule,
            seed=0,
        )
    return {"iterates": result.history.iterates, "released_gradients": result.history.extras["released_gradients"]}


CASES = {
    "dp_gibo_fixed_joint": lambda: _dp_gibo(batch_size=4),
    "dp_gibo_fixed_greedy_adagrad": lambda: _dp_gibo(batch_size=3, batch_search="greedy", step_rule="adagrad"),
    "dp_gibo_adaptive_joint": lambda: _dp_gibo(bias_tolerance=0.05, max_batch_size=4),
    "dp_gibo_adaptive_greedy": lambda: _dp_gibo(bias_tolerance=0.05, max_batch_size=4, batch_search="greedy"),
    "dp_gibo_non_private": lambda: _dp_gibo(batch_size=4, privacy_mu=math.inf),
    "private_random_search": _private_random_search,
    "noisy_gd_sgd": lambda: _noisy_gd("sgd"),
    "noisy_gd_adagrad": lambda: _noisy_gd("adagrad"),
}


def _encode(values: dict[str, torch.Tensor]) -> dict:
    return {
        k: {"shape": list(v.shape), "hex": [float(x).hex() for x in v.detach().reshape(-1).tolist()]}
        for k, v in values.items()
    }


def _run(name: str) -> dict:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # reductions are bit-stable across machines only single-threaded
    try:
        return _encode(CASES[name]())
    finally:
        torch.set_num_threads(threads)


#: The tolerance of each field of a case (a field not named: bit for bit).
TOLERANCES = {
    "dp_gibo": dict.fromkeys(("released_gradients", "iterates", "evaluation_points"), BLAS),
    "private_random_search": {},
    "noisy_gd": {},
}


def _tolerances(name: str):
    return next(table for prefix, table in TOLERANCES.items() if name.startswith(prefix))


@pytest.mark.parametrize("name", sorted(CASES))
def test_seeded_run_matches_its_pin(name):
    check_kernel_sets()
    compare(_run(name), json.loads(PINS.read_text())[name], name, _tolerances(name))


if __name__ == "__main__":  # rewrite the pins (only for a change of behaviour made on purpose)
    PINS.parent.mkdir(exist_ok=True)
    PINS.write_text(json.dumps({name: _run(name) for name in CASES}, indent=1, sort_keys=True) + "\n")
    print(f"wrote {PINS}")
