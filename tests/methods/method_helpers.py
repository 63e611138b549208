r"""Closed-form proxies for the method-choice tests: where local search should win, and where not.

* ``smooth_quadratic``: the normal-location loss ``½‖θ − x_i‖²`` in ``d = 30`` with many users:
  the gradient is exact under the quadratic kernel and uniform points in ``[-2, 4]^30`` are far
  from the optimum (their mean loss is about 4 times the minimum), so DP-GIBO should win.
* ``narrow_basin``: ``1 − exp(−‖θ − c_i‖²/(2w²))`` in ``d = 2`` with ``θ₀`` about ``4w`` from
  the basin: the loss is flat (gradient ``≈ 0``) where DP-GIBO starts, while uniform points land
  in the basin (a fifth of the box) often, so private random search should win.

The training methods' tests (test_training_methods, test_training_proxy, test_training_choice,
test_untuned) share ``training_rows`` and ``training_proxy_data`` (and the ``training_objective``
fixture of conftest.py built from them).
"""

import torch
from gpytorch.kernels import RBFKernel, ScaleKernel

from botorch_dp.objectives.datasets import ClassificationData
from botorch_dp.objectives.search_space import Hyperparameter, SearchSpace
from botorch_dp.optim.config import DPGIBOConfig
from tests.optim.loop_helpers import nl_config, normal_location

FAST = dict(num_restarts=1, raw_samples=8, acqf_maxiter=10)
BASIN_WIDTH = 0.2


def smooth_quadratic(n_proxy=200, d=30):
    _, proxy = normal_location(n=n_proxy, d=d, seed=1)
    config = nl_config(
        d=d,
        privacy_mu=None,
        epsilon=1.0,
        delta=1e-5,
        num_iterations=2,
        step_size=0.5,
        batch_size=3,
        clip_bound=4.0,
        **FAST,
    )
    return proxy, config


def narrow_basin(n_proxy=200, width=BASIN_WIDTH):
    d = 2
    g = torch.Generator().manual_seed(0)
    centres = torch.tensor([0.7, 0.7], dtype=torch.float64) + 0.02 * torch.randn(
        n_proxy, d, generator=g, dtype=torch.float64
    )

    def proxy(X):
        return 1 - torch.exp(-(X[:, None, :] - centres[None]).pow(2).sum(-1) / (2 * width * width))

    kernel = ScaleKernel(RBFKernel(ard_num_dims=d)).to(torch.float64)
    kernel.base_kernel.lengthscale = width
    config = DPGIBOConfig(
        bounds=torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64),
        kernel=kernel,
        theta0=torch.full((d,), 0.15, dtype=torch.float64),
        search_radius=0.05,
        epsilon=1.0,
        delta=1e-5,
        num_iterations=6,
        step_size=0.1,
        batch_size=3,
        clip_bound=0.01,
        **FAST,
    )
    return proxy, config


def uniform_mean_loss(proxy, bounds, num=4096, seed=0):
    r"""Monte Carlo mean of the proxy's mean loss at uniform points (what one random trial gets)."""
    u = torch.rand(num, bounds.shape[1], generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return float(proxy(bounds[0] + u * (bounds[1] - bounds[0])).mean())


__all__ = ["BASIN_WIDTH", "FAST", "narrow_basin", "smooth_quadratic", "uniform_mean_loss"]


#: The one-hyperparameter space of the training methods' tests.
TRAINING_SPACE = SearchSpace([Hyperparameter("lr", 1e-3, 1.0, log_scale=True)])


def training_rows(n, seed):
    r"""``n`` toy classification rows: float32 ``n x 4`` features and the labels ``x₀ + 0.5 x₁ > 0``."""
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 4, generator=g)
    return X, (X[:, 0] + 0.5 * X[:, 1] > 0).long()


def training_proxy_data(m=80):
    r"""A PUBLIC proxy's data: ``m`` training rows and 30 validation users, none of the objective's."""
    (Xp, yp), (Xv, yv) = training_rows(m, 5), training_rows(30, 6)
    return ClassificationData(Xp, yp, Xv, yv)
