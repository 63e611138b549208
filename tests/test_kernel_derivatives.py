import pytest
import torch

from botorch_dp.kernel_derivatives import KernelDerivatives, derivative_kernel_for
from tests.helpers import make_kernel

KERNELS = ["rbf", "matern52", "poly2", "rq"]


def _fd_cross(kernel, theta, X, h):
    """Central differences of k(theta, x_i) in theta: d x n."""
    d = theta.shape[-1]
    cols = []
    for j in range(d):
        e = torch.zeros_like(theta)
        e[j] = h
        kp = kernel(theta[None] + e, X).to_dense()[0]
        km = kernel(theta[None] - e, X).to_dense()[0]
        cols.append((kp - km) / (2 * h))
    return torch.stack(cols)


@pytest.mark.parametrize("name", KERNELS)
def test_cross_and_prior_agree_across_methods(name, dtype):
    d = 3
    torch.manual_seed(0)
    kernel = make_kernel(name, d, torch.float64)
    theta = torch.rand(d, dtype=torch.float64)
    X = torch.rand(6, d, dtype=torch.float64)
    methods = ["closed_form", "derivative_kernel", "autograd"]
    if name == "matern52":
        methods = ["closed_form", "derivative_kernel"]
    if name == "rq":
        methods = ["autograd"]
    # finite differences in float64 are the independent reference
    fd_cross = _fd_cross(kernel, theta, X, 1e-5)
    h = 1e-4
    ref = KernelDerivatives(kernel, methods[0])
    fd_prior = torch.stack(
        [
            (ref.cross(theta, (theta + h * e)[None]) - ref.cross(theta, (theta - h * e)[None]))[:, 0] / (2 * h)
            for e in torch.eye(d, dtype=torch.float64)
        ],
        dim=-1,
    )
    tol = 1e-6 if dtype == torch.float64 else 1e-4
    kernel = kernel.to(dtype)
    for m in methods:
        kd = KernelDerivatives(kernel, m)
        assert kd.method == m
        cross = kd.cross(theta.to(dtype), X.to(dtype))
        prior = kd.prior(theta.to(dtype))
        assert cross.shape == (d, 6) and cross.dtype == dtype
        assert prior.shape == (d, d)
        torch.testing.assert_close(cross.double(), fd_cross, rtol=tol, atol=tol)
        torch.testing.assert_close(prior.double(), fd_prior, rtol=1e-5 if dtype == torch.float64 else 1e-3, atol=tol)
        torch.testing.assert_close(prior, prior.transpose(-1, -2))


def test_batched_theta_and_X():
    d = 4
    kernel = make_kernel("rbf", d)
    kd_t = KernelDerivatives(kernel, "derivative_kernel")
    kd_a = KernelDerivatives(kernel, "autograd")
    kd_c = KernelDerivatives(kernel, "closed_form")
    theta = torch.rand(5, d, dtype=torch.float64)
    X = torch.rand(5, 3, d, dtype=torch.float64)
    c_t, c_a = kd_t.cross(theta, X), kd_a.cross(theta, X)
    assert c_t.shape == (5, d, 3)
    torch.testing.assert_close(c_t, c_a)
    torch.testing.assert_close(c_t, kd_c.cross(theta, X))
    # broadcasting one theta against a batch of candidate sets
    torch.testing.assert_close(kd_c.cross(theta[0], X), kd_t.cross(theta[0], X))
    for i in range(5):
        torch.testing.assert_close(c_t[i], kd_t.cross(theta[i], X[i]))
    assert kd_t.prior(theta).shape == (5, d, d)


def test_rbf_closed_form():
    """∇k∇ᵀ(θ, θ) = s · diag(1/ℓ²) for a scaled RBF kernel."""
    d = 3
    kernel = make_kernel("rbf", d)
    ls = kernel.base_kernel.lengthscale.detach().reshape(-1)
    expected = kernel.outputscale.detach() * torch.diag(ls**-2)
    for m in ("closed_form", "derivative_kernel", "autograd"):
        torch.testing.assert_close(KernelDerivatives(kernel, m).prior(torch.rand(d, dtype=torch.float64)), expected)


def test_method_selection_and_refusals():
    d = 2
    assert derivative_kernel_for(make_kernel("rq", d)) is None
    assert KernelDerivatives(make_kernel("rq", d)).method == "autograd"
    assert KernelDerivatives(make_kernel("rbf", d)).method == "closed_form"
    assert KernelDerivatives(make_kernel("poly2", d)).method == "closed_form"
    with pytest.raises(ValueError, match="No GPyTorch derivative kernel"):
        KernelDerivatives(make_kernel("rq", d), "derivative_kernel")
    with pytest.raises(ValueError, match="Matérn"):
        KernelDerivatives(make_kernel("matern52", d), "autograd")
    with pytest.raises(ValueError, match="Unknown method"):
        KernelDerivatives(make_kernel("rbf", d), "magic")


@pytest.mark.parametrize("name", ["rbf", "matern52", "poly2"])
def test_closed_form_gradient_in_X_is_finite_at_theta(name):
    """Candidates may coincide with θ: the cross term and its X-gradient stay finite."""
    d = 3
    kd = KernelDerivatives(make_kernel(name, d), "closed_form")
    theta = torch.full((d,), 0.4, dtype=torch.float64)
    X = theta.expand(1, 2, d).clone().requires_grad_(True)
    out = kd.cross(theta, X)
    (g,) = torch.autograd.grad(out.sum(), X)
    assert torch.isfinite(out).all() and torch.isfinite(g).all()
    if name != "poly2":
        assert out.abs().max() == 0  # stationary kernels: zero slope at coincident points


# ---------------------------------------------------------------------- composite kernels
def composite_kernel(name: str, d: int = 3):
    """Kernels without a GPyTorch derivative twin: Matérn-3/2 and compositions."""
    from gpytorch.kernels import AdditiveKernel, MaternKernel, PolynomialKernel, ProductKernel, RBFKernel, ScaleKernel

    f64 = torch.float64
    ls = torch.linspace(0.4, 1.2, d, dtype=f64)

    def rbf(dims=None):
        k = RBFKernel(ard_num_dims=d if dims is None else len(dims), active_dims=dims).to(f64)
        k.lengthscale = ls if dims is None else ls[dims]
        return k

    def matern(nu, dims=None):
        k = MaternKernel(nu=nu, ard_num_dims=d if dims is None else len(dims), active_dims=dims).to(f64)
        k.lengthscale = ls.flip(0) if dims is None else ls.flip(0)[dims]
        return k

    def poly(p, dims=None):
        k = PolynomialKernel(power=p, active_dims=dims).to(f64)
        k.offset = 0.6
        return k

    def scaled(k, s):
        k = ScaleKernel(k).to(f64)
        k.outputscale = s
        return k

    if name == "matern32":
        return scaled(matern(1.5), 0.9)
    if name == "rbf+poly":
        return AdditiveKernel(scaled(rbf(), 1.3), poly(2))
    if name == "rbf*poly":
        return ProductKernel(rbf(), poly(1))
    if name == "rbf*poly3_active":  # products of kernels on different dimensions
        return scaled(ProductKernel(rbf([0, 2]), poly(3, [1])), 0.7)
    if name == "additive_matern_active":
        return AdditiveKernel(scaled(rbf([0]), 0.5), matern(2.5, [1, 2]), scaled(matern(1.5, [0, 1]), 0.3))
    if name == "scaled_matern_active":  # ScaleKernel takes over its base's active_dims
        return AdditiveKernel(scaled(rbf([1, 2]), 0.5), scaled(matern(1.5, [2]), 0.4), poly(2, [0, 2]))
    if name == "matern32*rbf":
        return scaled(ProductKernel(matern(1.5), rbf()), 1.1)
    if name == "matern12":
        return matern(0.5)
    raise ValueError(name)


COMPOSITES = [
    "matern32",
    "rbf+poly",
    "rbf*poly",
    "rbf*poly3_active",
    "additive_matern_active",
    "scaled_matern_active",
    "matern32*rbf",
]


def _autograd_cross(kernel, theta, X):
    """∂k(θ, x_i)/∂θ by autograd of the kernel's values (fine for Matérn at r > 0): d x n."""
    t = theta.clone().requires_grad_(True)
    cols = [torch.autograd.grad(kernel(t[None], x[None]).to_dense().sum(), t)[0] for x in X]
    return torch.stack(cols, dim=-1)


def _fd_prior(kernel, theta, h):
    """Mixed central second differences of k(a, b) at a = b = θ, from kernel values only."""
    d = theta.shape[-1]
    E = h * torch.eye(d, dtype=theta.dtype)

    def k(a, b):
        return kernel(a[None], b[None]).to_dense()[0, 0]

    H = torch.empty(d, d, dtype=theta.dtype)
    for j in range(d):
        for m in range(d):
            H[j, m] = (
                k(theta + E[j], theta + E[m])
                - k(theta + E[j], theta - E[m])
                - k(theta - E[j], theta + E[m])
                + k(theta - E[j], theta - E[m])
            ) / (4 * h * h)
    return H


@pytest.mark.parametrize("name", COMPOSITES)
def test_composite_kernels_closed_form_against_autograd_and_fd(name):
    d = 3
    kernel = composite_kernel(name, d)
    g = torch.Generator().manual_seed(4)
    theta = torch.rand(d, generator=g, dtype=torch.float64)
    X = torch.rand(5, d, generator=g, dtype=torch.float64)
    kd = KernelDerivatives(kernel)
    assert kd.method == "closed_form"
    cross, prior = kd.cross(theta, X), kd.prior(theta)
    assert cross.shape == (d, 5) and prior.shape == (d, d)
    torch.testing.assert_close(cross, _autograd_cross(kernel, theta, X), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(cross, _fd_cross(kernel, theta, X, 1e-5), rtol=1e-6, atol=1e-8)
    # Matérn-3/2 has an |r|³ term, so second differences carry an O(h) error
    torch.testing.assert_close(prior, _fd_prior(kernel, theta, 1e-4), rtol=2e-3, atol=1e-6)
    torch.testing.assert_close(prior, prior.transpose(-1, -2))
    if "matern" not in name:  # autograd of the whole kernel is exact where it applies
        torch.testing.assert_close(prior, KernelDerivatives(kernel, "autograd").prior(theta), rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(cross, KernelDerivatives(kernel, "autograd").cross(theta, X), rtol=1e-10, atol=1e-12)
    # batched θ and candidate sets broadcast like the twin-backed kernels
    thetas = torch.rand(4, d, generator=g, dtype=torch.float64)
    Xs = torch.rand(4, 2, d, generator=g, dtype=torch.float64)
    batched = kd.cross(thetas, Xs)
    assert batched.shape == (4, d, 2) and kd.prior(thetas).shape == (4, d, d)
    for i in range(4):
        torch.testing.assert_close(batched[i], kd.cross(thetas[i], Xs[i]))
        torch.testing.assert_close(kd.prior(thetas)[i], kd.prior(thetas[i]))


def test_matern32_closed_form_prior():
    """∇k∇ᵀ(θ, θ) = 3 s · diag(1/ℓ²) for a scaled Matérn-3/2 kernel (k(r) = s(1 − 3r²/2 + …))."""
    d = 3
    kernel = composite_kernel("matern32", d)
    ls = kernel.base_kernel.lengthscale.detach().reshape(-1)
    expected = 3 * kernel.outputscale.detach() * torch.diag(ls**-2)
    torch.testing.assert_close(
        KernelDerivatives(kernel).prior(torch.rand(2, d, dtype=torch.float64)), expected.expand(2, d, d)
    )


def test_matern12_refused_with_reason():
    for method in ("auto", "closed_form", "autograd"):
        with pytest.raises(ValueError, match="not differentiable"):
            KernelDerivatives(composite_kernel("matern12"), method)
    from gpytorch.kernels import RBFKernel

    with pytest.raises(ValueError, match="nu=0.5"):  # also deep inside a composition
        KernelDerivatives(RBFKernel() + composite_kernel("matern12"))


def test_composite_method_selection_and_refusals():
    from gpytorch.kernels import RBFKernel

    assert KernelDerivatives(composite_kernel("matern32")).method == "closed_form"
    with pytest.raises(ValueError, match="method='closed_form'"):
        KernelDerivatives(composite_kernel("matern32"), "derivative_kernel")
    with pytest.raises(ValueError, match="method='closed_form'"):
        KernelDerivatives(composite_kernel("matern32*rbf"), "autograd")
    # a leaf without a closed form: autograd for the whole kernel, or a clear refusal
    rq_sum = composite_kernel("rbf+poly") + make_kernel("rq", 3)
    assert KernelDerivatives(rq_sum).method == "autograd"
    with pytest.raises(ValueError, match="No closed form"):
        KernelDerivatives(rq_sum, "closed_form")
    with pytest.raises(ValueError, match="Matérn"):
        KernelDerivatives(composite_kernel("matern32") + make_kernel("rq", 3))
    with pytest.raises(ValueError, match="batch_shape"):
        KernelDerivatives(RBFKernel(batch_shape=torch.Size([2])))


def test_active_dims_on_a_scale_kernel_itself():
    """ScaleKernel(RBF(), active_dims=...) slices at the scale kernel: the closed forms follow."""
    from gpytorch.kernels import ScaleKernel

    base = make_kernel("rbf", 2).base_kernel
    kernel = ScaleKernel(base, active_dims=torch.tensor([0, 2])).to(torch.float64)
    theta, X = torch.rand(3, dtype=torch.float64), torch.rand(4, 3, dtype=torch.float64)
    kd = KernelDerivatives(kernel)
    torch.testing.assert_close(kd.cross(theta, X), _autograd_cross(kernel, theta, X))
    torch.testing.assert_close(kd.prior(theta), KernelDerivatives(kernel, "autograd").prior(theta))
    assert kd.prior(theta)[1].abs().max() == 0  # the unused dimension has no gradient
