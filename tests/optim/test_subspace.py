"""Subspace oracles and the projected release (Kairouz et al., spec A2/A4, §1.7 items 6)."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel

from botorch_dp.gradient_gp import GradientGP
from botorch_dp.optim.subspace import (
    FixedSubspace,
    PosteriorGradientCovarianceSubspace,
    PreviousRunsPCA,
    PublicGradientPCA,
    SubspaceOracle,
    check_basis,
    orthonormal_basis,
    subspace_from_spec,
    top_eigenvectors,
)

F64 = torch.float64


def projector(V):
    return V @ V.T


def assert_orthonormal(V, d, k):
    assert V.dtype == F64 and V.shape == (d, k)
    torch.testing.assert_close(V.T @ V, torch.eye(k, dtype=F64), rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- bases
def test_orthonormal_basis_spans_the_columns_and_keeps_the_identity_exactly():
    g = torch.Generator().manual_seed(0)
    V = torch.randn(6, 3, generator=g, dtype=F64)
    Q = orthonormal_basis(V)
    assert_orthonormal(Q, 6, 3)
    # same span: projecting V onto span(Q) leaves it unchanged
    torch.testing.assert_close(projector(Q) @ V, V, rtol=0, atol=1e-12)
    # the signs are fixed: Q is the same for a positively rescaled V, R has a positive diagonal
    torch.testing.assert_close(orthonormal_basis(3.0 * V), Q, rtol=0, atol=1e-13)
    assert bool((torch.diagonal(Q.T @ V) > 0).all())
    eye = torch.eye(5, dtype=F64)
    assert torch.equal(orthonormal_basis(eye), eye)  # bit for bit
    torch.testing.assert_close(orthonormal_basis(torch.tensor([3.0, 4.0])), torch.tensor([[0.6], [0.8]], dtype=F64))


@pytest.mark.parametrize(
    "V,match",
    [
        (torch.zeros(4, 0), "k >= 1"),
        (torch.ones(2, 3), "more than d"),
        (torch.tensor([[1.0, float("nan")], [0.0, 1.0], [0.0, 0.0]]), "finite"),
        (torch.tensor([[1.0, float("inf")], [0.0, 1.0], [0.0, 0.0]]), "finite"),
        (torch.tensor([[1.0, 2.0], [1.0, 2.0], [0.0, 0.0]]), "linearly dependent"),
        (torch.zeros(3, 1), "linearly dependent"),
        ("abc", "d x k"),
    ],
)
def test_bad_bases_are_refused(V, match):
    with pytest.raises(ValueError, match=match):
        FixedSubspace(V)


def test_check_basis_refuses_non_orthonormal_or_misshaped_output():
    V = orthonormal_basis(torch.randn(4, 2, generator=torch.Generator().manual_seed(1), dtype=F64))
    assert torch.equal(check_basis(V, 4), V)
    for bad, match in [(2 * V, "orthonormal"), (V[:3], "d = 4"), (V * float("nan"), "finite"), (V.numpy(), "tensor")]:
        with pytest.raises(ValueError, match=match):
            check_basis(bad, 4)


def test_top_eigenvectors_energy_rule_closed_form():
    C = torch.diag(torch.tensor([0.5, 4.5, 0.0], dtype=F64))  # trace 5: 90% in e2, 100% in e1, e2
    V, eigenvalues = top_eigenvectors(C, energy=0.9)
    assert eigenvalues.tolist() == [4.5, 0.5, 0.0]
    assert V.shape == (3, 1) and torch.equal(projector(V), torch.diag(torch.tensor([0.0, 1.0, 0.0], dtype=F64)))
    assert top_eigenvectors(C, energy=0.95)[0].shape == (3, 2)
    assert top_eigenvectors(C, k=3)[0].shape == (3, 3)
    with pytest.raises(ValueError, match="zero"):
        top_eigenvectors(torch.zeros(3, 3, dtype=F64), energy=0.9)
    with pytest.raises(ValueError, match="k must"):
        top_eigenvectors(C, k=4)


# ----------------------------------------------------------------------------- oracles
def test_fixed_subspace_is_fixed_and_checks_the_dimension():
    oracle = FixedSubspace(torch.tensor([[1.0, 1.0], [0.0, 1.0], [0.0, 0.0]]))
    assert isinstance(oracle, SubspaceOracle) and oracle.fixed and oracle.k == 2
    V = oracle(torch.zeros(3, dtype=F64), None)
    assert_orthonormal(V, 3, 2)
    torch.testing.assert_close(projector(V), torch.diag(torch.tensor([1.0, 1.0, 0.0], dtype=F64)), rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="d = 3"):
        oracle(torch.zeros(4, dtype=F64), None)
    rebuilt = subspace_from_spec(oracle.spec())  # bit for bit (a second QR would change the last bits)
    assert isinstance(rebuilt, FixedSubspace) and torch.equal(rebuilt.basis, oracle.basis)
    with pytest.raises(ValueError, match="orthonormal"):
        subspace_from_spec({"kind": "fixed", "basis": 2 * oracle.basis})


def test_public_gradient_pca_recovers_the_active_subspace():
    d = 6
    g = torch.Generator().manual_seed(2)
    W = orthonormal_basis(torch.randn(d, 2, generator=g, dtype=F64))  # f depends on Wᵀθ only
    weights = torch.tensor([3.0, 1.0], dtype=F64)
    users = torch.randn(5, 2, generator=g, dtype=F64)

    def public_objective(X):  # q x n per-user losses ℓ_i(θ) = Σ_j w_j (W_jᵀθ − c_ij)²
        z = X @ W
        return ((z[:, None, :] - users[None]) ** 2 * weights).sum(-1)

    points = torch.rand(8, d, generator=g, dtype=F64)
    exact = 2 * ((points @ W)[:, None, :] - users[None]).mean(1) * weights @ W.T  # m x d
    oracle = PublicGradientPCA(exact, energy=0.999)
    assert oracle.k == 2 and oracle.fixed
    torch.testing.assert_close(projector(oracle(points[0], None)), projector(W), rtol=0, atol=1e-12)
    # the same from the objective by central finite differences (exact for a quadratic up to rounding)
    fd = PublicGradientPCA.from_objective(public_objective, points, energy=0.999)
    torch.testing.assert_close(projector(fd.basis), projector(W), rtol=0, atol=1e-8)
    torch.testing.assert_close(fd.eigenvalues, oracle.eigenvalues, rtol=1e-6, atol=1e-8)
    # k is honoured; eigenvalues are those of (1/m) Σ g gᵀ
    assert PublicGradientPCA(exact, k=1).k == 1
    C = exact.T @ exact / exact.shape[0]
    torch.testing.assert_close(oracle.eigenvalues, torch.linalg.eigvalsh(C).flip(0), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="either k or energy"):
        PublicGradientPCA(exact, k=1, energy=0.5)


def test_public_gradient_pca_from_gp_posterior_means():
    d = 3
    w = torch.tensor([1.0, 0.0, 0.0], dtype=F64)

    def objective(X):  # a ridge function of θ₁ only
        return torch.sin(2 * X @ w)

    points = torch.rand(40, d, generator=torch.Generator().manual_seed(3), dtype=F64)
    kernel = RBFKernel(ard_num_dims=d).to(F64)
    kernel.lengthscale = torch.tensor([0.5, 2.0, 2.0], dtype=F64)
    oracle = PublicGradientPCA.from_objective(objective, points, k=1, kernel=kernel, noise_variance=1e-6)
    assert abs(float(oracle.basis[0, 0])) > 0.999  # the GP gradients point along θ₁


def test_previous_runs_pca_from_tensors_and_releases():
    g = torch.Generator().manual_seed(4)
    a, b = torch.randn(5, 4, generator=g, dtype=F64), torch.randn(7, 4, generator=g, dtype=F64)
    from_tensors = PreviousRunsPCA([a, b], k=2)
    reference = PublicGradientPCA(torch.cat([a, b]), k=2)
    torch.testing.assert_close(from_tensors.basis, reference.basis, rtol=0, atol=1e-12)
    releases = [
        SimpleNamespace(released_gradients=a, iterates=torch.zeros(6, 4, dtype=F64)),
        SimpleNamespace(release=SimpleNamespace(released_gradients=b, iterates=torch.zeros(8, 4, dtype=F64))),
    ]
    torch.testing.assert_close(PreviousRunsPCA(releases, k=2).basis, reference.basis, rtol=0, atol=1e-12)
    iterates = torch.cumsum(torch.cat([torch.zeros(1, 4, dtype=F64), a]), 0)
    diffs = PreviousRunsPCA([SimpleNamespace(iterates=iterates)], use="iterate_differences", energy=0.8)
    torch.testing.assert_close(diffs.basis, PublicGradientPCA(a, energy=0.8).basis, rtol=0, atol=1e-10)
    with pytest.raises(ValueError, match="different dimensions"):
        PreviousRunsPCA([a, torch.ones(2, 3, dtype=F64)], k=1)
    with pytest.raises(ValueError, match="at least one"):
        PreviousRunsPCA([], k=1)
    for use in ("gradient", ["gradients"]):
        with pytest.raises(ValueError, match="use must be 'gradients' or 'iterate_differences'"):
            PreviousRunsPCA(releases, use=use, k=1)


def _brute_force_gradient_covariance(kernel, X, theta, noise):
    """Σ_D(θ) from autograd derivatives of the kernel and a dense solve (no KernelDerivatives)."""
    d = theta.shape[0]

    def k_pair(z):  # z = (θ, θ'): k(θ, θ')
        return kernel(z[:d].unsqueeze(0), z[d:].unsqueeze(0)).to_dense().squeeze()

    hess = torch.autograd.functional.hessian(k_pair, torch.cat([theta, theta]))
    prior = hess[:d, d:]  # ∂²k/∂θ∂θ'ᵀ at θ = θ'
    if X.shape[0] == 0:
        return prior.detach()
    cross = torch.autograd.functional.jacobian(lambda t: kernel(t.unsqueeze(0), X).to_dense().squeeze(0), theta).T
    K = kernel(X).to_dense() + noise * torch.eye(X.shape[0], dtype=F64)
    return (prior - cross @ torch.linalg.solve(K, cross.T)).detach()


def test_posterior_covariance_subspace_equals_brute_force_eigendecomposition():
    d, k = 4, 2
    g = torch.Generator().manual_seed(5)
    kernel = ScaleKernel(RBFKernel(ard_num_dims=d)).to(F64)
    kernel.base_kernel.lengthscale = torch.tensor([0.3, 0.6, 1.0, 2.0], dtype=F64)
    kernel.outputscale = 1.5
    kernel.requires_grad_(False)
    theta = torch.tensor([0.1, -0.2, 0.3, 0.0], dtype=F64)
    X = theta + 0.3 * torch.randn(3, d, generator=g, dtype=F64)
    noise = 1e-4
    oracle = PosteriorGradientCovarianceSubspace(k)
    assert not oracle.fixed
    for D in (X[:0], X):  # the prior (first step) and a posterior
        gp = GradientGP(D, kernel, noise)
        V = oracle(theta, gp)
        assert_orthonormal(V, d, k)
        sigma = _brute_force_gradient_covariance(kernel, D, theta, noise).numpy()
        eigenvalues, vectors = np.linalg.eigh((sigma + sigma.T) / 2)
        assert eigenvalues[-k] - eigenvalues[-k - 1] > 1e-3 * eigenvalues[-1]  # a well-defined top-k space
        top = torch.from_numpy(vectors[:, -k:])
        torch.testing.assert_close(projector(V), projector(top), rtol=0, atol=1e-8)
    # the prior of an ARD RBF kernel: Σ = (s²/ℓ_j²) diag, so the top directions are the shortest ℓ
    torch.testing.assert_close(
        projector(oracle(theta, GradientGP(X[:0], kernel, noise))),
        torch.diag(torch.tensor([1.0, 1.0, 0.0, 0.0], dtype=F64)),
        rtol=0,
        atol=1e-12,
    )
    with pytest.raises(ValueError, match="exceeds d"):
        PosteriorGradientCovarianceSubspace(5)(theta, GradientGP(X, kernel, noise))
    with pytest.raises(ValueError, match="k"):
        PosteriorGradientCovarianceSubspace(0)
    assert subspace_from_spec(oracle.spec()).k == k
    # the allow-list: an unknown kind, a kind that is no name, extra or missing keys, or no mapping at all
    for bad in ({"kind": "mine"}, {"kind": ["fixed"]}, {"kind": "posterior_gradient_covariance", "k": k, "x": 1}):
        with pytest.raises(ValueError, match="Unknown subspace"):
            subspace_from_spec(bad)
    for bad in ({"kind": "fixed"}, ["fixed"], None):
        with pytest.raises(ValueError, match="Unknown subspace"):
            subspace_from_spec(bad)


# ----------------------------------------------------------------------------- projected acquisition (A5)
def _gp_and_points(d=4, seed=9):
    g = torch.Generator().manual_seed(seed)
    kernel = ScaleKernel(RBFKernel(ard_num_dims=d)).to(F64)
    kernel.base_kernel.lengthscale = torch.linspace(0.4, 1.2, d, dtype=F64)
    kernel.outputscale = 1.3
    kernel.requires_grad_(False)
    theta = torch.zeros(d, dtype=F64)
    D = 0.3 * torch.randn(5, d, generator=g, dtype=F64)
    X = 0.3 * torch.randn(7, 3, d, generator=g, dtype=F64)  # 7 candidate batches of 3 points
    V = orthonormal_basis(torch.randn(d, 2, generator=g, dtype=F64))
    return GradientGP(D, kernel, 1e-4), kernel, theta, D, X, V


def test_projected_trace_and_reduction_equal_dense_recomputation():
    from botorch_dp.acquisition import qGradientInformation

    gp, kernel, theta, D, X, V = _gp_and_points()
    dense = V.T @ gp.posterior_covariance(theta) @ V
    torch.testing.assert_close(gp.posterior_trace(theta, V), torch.trace(dense), rtol=1e-12, atol=1e-12)
    # brute force: refactorize K on D ∪ X_j and project the dense posterior covariance
    brute = torch.stack(
        [
            torch.trace(dense)
            - torch.trace(V.T @ GradientGP(torch.cat([D, x]), kernel, 1e-4).posterior_covariance(theta) @ V)
            for x in X
        ]
    )
    torch.testing.assert_close(gp.trace_reduction(theta, X, jacobian=V), brute, rtol=1e-8, atol=1e-10)
    for q in (1, 3):  # the q = 1 shortcut and the Cholesky path
        acqf = qGradientInformation(gp, theta, basis=V)
        torch.testing.assert_close(acqf(X[:, :q]), gp.trace_reduction(theta, X[:, :q], jacobian=V), rtol=0, atol=0)
    torch.testing.assert_close(acqf.current_trace, torch.trace(dense), rtol=1e-12, atol=1e-12)
    # Ṽ = I: the projected acquisition is the full one
    eye = torch.eye(4, dtype=F64)
    torch.testing.assert_close(
        qGradientInformation(gp, theta, basis=eye)(X), qGradientInformation(gp, theta)(X), rtol=1e-12, atol=1e-14
    )
    torch.testing.assert_close(gp.posterior_trace(theta, eye), gp.posterior_trace(theta), rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="basis must be d x k"):
        qGradientInformation(gp, theta, basis=eye[:3])


def test_adaptive_batches_stop_on_the_projected_trace():
    from botorch_dp.optim.options.batches import BATCH_SEARCHES, search_batch

    gp, kernel, theta, D, X, V = _gp_and_points()
    full, projected = float(gp.posterior_trace(theta)), float(gp.posterior_trace(theta, V))
    assert projected < full
    tolerance = (projected + full) / 2  # met by Ṽᵀ∇f already, not by ∇f
    box = torch.stack([theta - 0.5, theta + 0.5])
    options = dict(batch_size=5, bias_tolerance=tolerance, max_batch_size=5, num_restarts=1, raw_samples=8)
    for selection in ("joint", "greedy"):
        empty = search_batch(
            gp, theta, box, torch.Generator().manual_seed(0), batch_search=BATCH_SEARCHES[selection], basis=V, **options
        )
        assert empty.shape == (0, 4)
    some = search_batch(
        gp, theta, box, torch.Generator().manual_seed(0), batch_search=BATCH_SEARCHES["greedy"], **options
    )
    assert some.shape[0] >= 1


def test_top_eigenvectors_needs_k_or_energy():
    with pytest.raises(
        ValueError, match=r"top_eigenvectors of the matrix needs k or energy, got k=None and energy=None"
    ):
        top_eigenvectors(torch.eye(3, dtype=torch.float64))
