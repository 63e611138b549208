"""gradient_gp.closed_form: the trace reduction and its gradient in the candidates, written out,
against GradientGP.trace_reduction (values), autograd through it and central differences
(gradients), for every kernel it accepts; the kernels it does not accept are refused by name."""

import pytest
import torch
from gpytorch.kernels import MaternKernel, RBFKernel, ScaleKernel

from botorch_dp.gradient_gp import GradientGP, closed_form_supported, trace_reduction_closed_form
from tests.helpers import make_kernel


def _gp(name, d, N, noise=1e-3, seed=0):
    g = torch.Generator().manual_seed(seed)
    if name == "rbf_plain":
        kernel = RBFKernel().to(torch.float64)  # one shared length-scale
        kernel.lengthscale = 0.7
    elif name == "matern52_plain":
        kernel = MaternKernel(nu=2.5, ard_num_dims=d).to(torch.float64)
        kernel.lengthscale = torch.linspace(0.5, 1.5, d, dtype=torch.float64)
    else:
        kernel = make_kernel(name, d)
    D = torch.rand(N, d, generator=g, dtype=torch.float64)
    return GradientGP(D, kernel.requires_grad_(False), noise), torch.rand(d, generator=g, dtype=torch.float64)


KERNELS = ["rbf", "matern52", "rbf_plain", "matern52_plain"]


@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("N,q", [(0, 3), (9, 1), (9, 4)])
def test_value_and_gradient_equal_autograd_through_the_reference(name, N, q):
    d = 3
    gp, theta = _gp(name, d, N)
    X = torch.rand(5, q, d, generator=torch.Generator().manual_seed(1), dtype=torch.float64, requires_grad=True)
    ref = gp.trace_reduction(theta, X)
    (ref_grad,) = torch.autograd.grad(ref.sum(), X)
    val = trace_reduction_closed_form(gp, theta, X)
    (grad,) = torch.autograd.grad((val * torch.arange(1.0, 6.0, dtype=torch.float64)).sum(), X)
    torch.testing.assert_close(val, ref.detach(), rtol=1e-10, atol=1e-12)
    # the weights of the sum reach each batch element's gradient (grad_output is used)
    weights = torch.arange(1.0, 6.0, dtype=torch.float64).reshape(5, 1, 1)
    torch.testing.assert_close(grad, weights * ref_grad, rtol=1e-8, atol=1e-10)
    assert (ref_grad.abs() > 1e-6).any()  # a gradient that could be wrong


@pytest.mark.parametrize("name", ["rbf", "matern52"])
def test_gradient_matches_central_differences(name):
    d, q = 4, 3
    gp, theta = _gp(name, d, 12, noise=0.01, seed=3)
    X = theta + 0.3 * torch.randn(q, d, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    X.requires_grad_(True)
    (grad,) = torch.autograd.grad(trace_reduction_closed_form(gp, theta, X), X)
    h, fd = 1e-6, torch.zeros(q, d, dtype=torch.float64)
    with torch.no_grad():
        for i in range(q):
            for j in range(d):
                e = torch.zeros(q, d, dtype=torch.float64)
                e[i, j] = h
                fd[i, j] = (
                    trace_reduction_closed_form(gp, theta, X + e) - trace_reduction_closed_form(gp, theta, X - e)
                ) / (2 * h)
    torch.testing.assert_close(grad, fd, rtol=1e-5, atol=1e-8)


def test_output_scale_and_a_given_V_are_used():
    gp, theta = _gp("rbf", 3, 7)
    gp.output_scale = 2.5
    X = torch.rand(2, 2, 3, dtype=torch.float64)
    torch.testing.assert_close(
        trace_reduction_closed_form(gp, theta, X), gp.trace_reduction(theta, X), rtol=1e-10, atol=0
    )
    V = gp.whitened_cross(theta)
    torch.testing.assert_close(
        trace_reduction_closed_form(gp, theta, X, V=V), trace_reduction_closed_form(gp, theta, X)
    )
    assert not torch.allclose(trace_reduction_closed_form(gp, theta, X, V=0 * V), gp.trace_reduction(theta, X))


def test_coincident_candidates_give_finite_values_and_gradients():
    gp, theta = _gp("matern52", 3, 6)
    X = torch.stack([gp.train_X[0], gp.train_X[0], theta]).requires_grad_(True)  # on a training point, twice
    val = trace_reduction_closed_form(gp, theta, X)
    (grad,) = torch.autograd.grad(val, X)
    assert torch.isfinite(val) and torch.isfinite(grad).all()
    torch.testing.assert_close(val, gp.trace_reduction(theta, X.detach()), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize(
    "kernel",
    [
        MaternKernel(nu=1.5),
        make_kernel("poly2", 2),
        make_kernel("rq", 2),
        RBFKernel(active_dims=[0]),
        ScaleKernel(MaternKernel(nu=1.5)),
    ],
)
def test_other_kernels_are_not_claimed_and_are_refused_by_name(kernel):
    gp = GradientGP(torch.rand(4, 2, dtype=torch.float64), kernel.to(torch.float64), 1e-3)
    assert not closed_form_supported(gp)
    with pytest.raises(ValueError, match=type(kernel).__name__):
        trace_reduction_closed_form(gp, torch.zeros(2, dtype=torch.float64), torch.rand(2, 2, dtype=torch.float64))
