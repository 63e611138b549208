r"""Reading one output of an exact BoTorch GP (``gradient_gp.exact``): the parts it returns give the
model's own posterior mean through the textbook formula ``c + k(x, X)(K + Σ)⁻¹(y − c)`` (then the
outcome transform's scale and shift), one output of a multi-output model reads the same parts as a
single-output model of that output, and every model it cannot read is refused naming why."""

from __future__ import annotations

import pytest
import torch
from botorch.models import SingleTaskGP
from botorch.models.transforms import Log, Standardize
from gpytorch.kernels import RBFKernel, ScaleKernel
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood
from gpytorch.means import LinearMean

from botorch_dp.gradient_gp.exact import BATCH_HINT, exact_gp_parts


def _data(N: int = 7, d: int = 2, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(N, d, generator=g, dtype=torch.float64)
    return X, torch.sin(3 * X[:, :1]) + X[:, 1:] ** 2


def _mean_from_parts(parts: dict, x: torch.Tensor) -> torch.Tensor:
    r"""The posterior mean in the model's outcome space, by the textbook formula (float64 solve)."""
    X, y, c = parts["train_X"], parts["train_Y"], parts["mean_constant"]
    noise = torch.as_tensor(parts["noise_variance"], dtype=torch.float64) * torch.ones(X.shape[0], dtype=torch.float64)
    K = parts["kernel"](X, X).to_dense() + torch.diag(noise)
    k = parts["kernel"](x, X).to_dense()
    return c + k @ torch.linalg.solve(K, y - c)


def test_the_parts_give_the_models_posterior_mean():
    X, Y = _data()
    model = SingleTaskGP(X, Y, outcome_transform=Standardize(m=1))
    model.likelihood.noise = 2e-3
    model.mean_module.constant.data.fill_(0.3)
    model.eval()
    parts = exact_gp_parts(model, None)
    assert torch.equal(parts["train_X"], X) and parts["noise_variance"] == pytest.approx(2e-3)
    assert parts["mean_constant"] == pytest.approx(0.3) and parts["kernel"] is model.covar_module
    transform = model.outcome_transform
    assert parts["output_scale"] == pytest.approx(float(transform.stdvs))
    torch.testing.assert_close(parts["train_Y"], ((Y - transform.means) / transform.stdvs).squeeze(-1))
    x = torch.rand(5, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    expected = model.posterior(x).mean.squeeze(-1)
    got = float(transform.means) + parts["output_scale"] * _mean_from_parts(parts, x)
    torch.testing.assert_close(got, expected, rtol=1e-8, atol=1e-10)


def test_one_output_of_a_multi_output_model_reads_as_that_outputs_own_model():
    X, Y1 = _data(N=6)
    Y = torch.cat([Y1, 2 * X[:, :1] - 1], dim=-1)
    kernel = ScaleKernel(RBFKernel(ard_num_dims=2, batch_shape=torch.Size([2])), batch_shape=torch.Size([2])).double()
    kernel.outputscale = torch.tensor([1.5, 0.5], dtype=torch.float64)
    noise = torch.tensor([[1e-3] * 6, [2e-2] * 6], dtype=torch.float64).T
    model = SingleTaskGP(X, Y, noise, covar_module=kernel, outcome_transform=Standardize(m=2)).eval()
    for k in range(2):
        single = SingleTaskGP(X, Y[:, k : k + 1], noise[:, k : k + 1], outcome_transform=Standardize(m=1)).eval()
        parts, alone = exact_gp_parts(model, k), exact_gp_parts(single, None)
        assert isinstance(model.likelihood, FixedNoiseGaussianLikelihood)
        for name in ("train_X", "train_Y", "noise_variance"):
            torch.testing.assert_close(parts[name], alone[name])
        assert parts["output_scale"] == pytest.approx(alone["output_scale"], rel=1e-12)
        assert float(parts["kernel"].outputscale.detach()) == [1.5, 0.5][k]
    with pytest.raises(NotImplementedError, match="pass output=i"):
        exact_gp_parts(model, None)
    with pytest.raises(ValueError, match="output=2 is out of range for a model with 2 outputs"):
        exact_gp_parts(model, 2)


def test_models_it_cannot_read_are_refused_naming_why():
    X, Y = _data()
    with pytest.raises(NotImplementedError, match="Linear is not an exact GP"):
        exact_gp_parts(torch.nn.Linear(2, 1), None)
    batched = SingleTaskGP(X.expand(3, -1, -1), Y.expand(3, -1, -1)).eval()
    with pytest.raises(NotImplementedError, match="Batched models are not supported") as info:
        exact_gp_parts(batched, None)
    assert BATCH_HINT in str(info.value)
    with pytest.raises(NotImplementedError, match="Unsupported mean module LinearMean"):
        exact_gp_parts(SingleTaskGP(X, Y, mean_module=LinearMean(2)).eval(), None)
    with pytest.raises(NotImplementedError, match="Unsupported outcome transform Log"):
        exact_gp_parts(SingleTaskGP(X, Y.abs() + 0.1, outcome_transform=Log()).eval(), None)
