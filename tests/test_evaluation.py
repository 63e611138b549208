"""botorch_dp.evaluation: rows evaluated over any executor come back in row order and equal
the in-process evaluation; DPGIBO.run and the baselines give the same runs with an executor."""

import concurrent.futures as cf
import time
import warnings

import pytest
import torch
from gpytorch.kernels import RBFKernel

from botorch_dp.baselines import random_search
from botorch_dp.evaluation import SerialExecutor, evaluate_rows, map_in_order, process_pool
from botorch_dp.optim import DPGIBO, DPGIBOConfig
from botorch_dp.optim.options import FixedClip, batch_rule
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.problems import NormalLocation

D, N = 3, 40
CENTRES = torch.linspace(-1.0, 1.0, N * D, dtype=torch.float64).reshape(N, D)


def quadratic_losses(X: torch.Tensor) -> torch.Tensor:
    """q x n losses ‖θ_j − c_i‖², computed row by row (a pure function of each row)."""
    return torch.stack([((x - CENTRES) ** 2).sum(-1) for x in X])


def sleepy_square(i: int) -> int:
    time.sleep(0.02 * (5 - i))  # the first calls finish last
    return i * i


def fail_on_three(i: int) -> int:
    if i == 3:
        raise ArithmeticError("three")
    return i


@pytest.fixture(scope="module")
def pool():
    with process_pool(1) as executor:  # one spawned process: a process boundary, cheap to start
        yield executor


def test_map_in_order_returns_results_in_argument_order_whatever_finishes_first():
    with cf.ThreadPoolExecutor(max_workers=5) as threads:
        assert map_in_order(sleepy_square, [(i,) for i in range(5)], threads) == [0, 1, 4, 9, 16]
        assert map_in_order(sleepy_square, [(i,) for i in range(5)], threads, max_in_flight=2) == [0, 1, 4, 9, 16]
    with pytest.raises(ArithmeticError, match="three"):
        map_in_order(fail_on_three, [(i,) for i in range(5)], SerialExecutor())
    with pytest.raises(ValueError, match="max_in_flight"):
        map_in_order(sleepy_square, [(1,)], SerialExecutor(), max_in_flight=0)


def test_serial_executor_stores_exceptions_and_refuses_after_shutdown():
    ex = SerialExecutor()
    fut = ex.submit(fail_on_three, 3)
    assert fut.done() and isinstance(fut.exception(), ArithmeticError)
    ex.shutdown()
    with pytest.raises(RuntimeError, match="shutdown"):
        ex.submit(fail_on_three, 1)


def test_rows_over_a_process_pool_equal_the_in_process_losses(pool):
    X = torch.rand(7, D, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    expected = quadratic_losses(X)
    for rows_per_task in (1, 3, 7):
        got = evaluate_rows(quadratic_losses, X, executor=pool, rows_per_task=rows_per_task)
        assert torch.equal(got, expected)


def test_bad_arguments_are_refused_naming_them():
    X = torch.zeros(2, D, dtype=torch.float64)
    with pytest.raises(ValueError, match="rows_per_task"):
        evaluate_rows(quadratic_losses, X, executor=SerialExecutor(), rows_per_task=0)
    with pytest.raises(ValueError, match="objective: a PerUserProblem with observation_noise_std"):
        evaluate_rows(NormalLocation(num_users=10, observation_noise_std=0.1), X, executor=SerialExecutor())
    with pytest.raises(ValueError, match="objective: each group of rows"):
        evaluate_rows(
            lambda Z: torch.zeros(Z.shape[0], int(Z[0, 0]) + 2), torch.tensor([[0.0], [1.0]]), executor=SerialExecutor()
        )


def _config() -> DPGIBOConfig:
    kernel = RBFKernel(ard_num_dims=D)
    kernel.lengthscale = 1.0
    return DPGIBOConfig(
        kernel=kernel,
        bounds=torch.tensor([[-2.0] * D, [2.0] * D], dtype=torch.float64),
        num_iterations=2,
        privacy_mu=1.0,
        clip=FixedClip(1.0),
        batches=batch_rule(2),
        step_size=0.3,
        num_restarts=1,
        raw_samples=8,
        seed=11,
    )


def test_dp_gibo_run_over_an_executor_equals_the_in_process_run(pool):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        serial = DPGIBO(_config()).run(quadratic_losses, progress=False).release
        pooled = DPGIBO(_config()).run(quadratic_losses, progress=False, executor=pool).release
    assert torch.equal(serial.iterates, pooled.iterates)
    assert torch.equal(serial.released_gradients, pooled.released_gradients)
    assert serial.guarantee == pooled.guarantee


def test_random_search_over_an_executor_equals_the_in_process_search(pool):
    bounds = torch.tensor([[-2.0] * D, [2.0] * D], dtype=torch.float64)
    serial = random_search(quadratic_losses, bounds, num_evaluations=9, seed=3, batch_size=4)
    pooled = random_search(quadratic_losses, bounds, num_evaluations=9, seed=3, batch_size=4, executor=pool)
    assert torch.equal(serial.theta, pooled.theta)
    assert torch.equal(serial.history.mean_losses, pooled.history.mean_losses)
