r"""Tuning the ARD length-scales of a GP regression on data drawn from a GP.

Sopa et al. §4 Example 4.1 / Appendix E.1, E.5: one user per validation point, loss = squared error.
"""

from __future__ import annotations

import torch
from torch import Tensor

from botorch_dp.objectives.per_user_problem import PerUserProblem
from botorch_dp.utils import project_to_box


def _rbf(X1: Tensor, X2: Tensor, lengthscales: Tensor, outputscale: float) -> Tensor:
    r"""ARD RBF kernel s² exp(−½ Σ_k (x_k − x'_k)² / ℓ_k²), batched over length-scales.

    Args:
        X1: An ``m1 x D``-dim tensor.
        X2: An ``m2 x D``-dim tensor.
        lengthscales: A ``c x D``-dim tensor of length-scale vectors.
        outputscale: The signal variance s².

    Returns:
        A ``c x m1 x m2``-dim tensor.
    """
    Z1 = X1 / lengthscales.unsqueeze(-2)
    Z2 = X2 / lengthscales.unsqueeze(-2)
    sq = torch.cdist(Z1, Z2).square_()
    return sq.mul_(-0.5).exp_().mul_(outputscale)


class GPRegressionLengthscales(PerUserProblem):
    r"""Validation loss of a GP regression as a function of its length-scales.

    Data (all generated from ``seed``): inputs u_j ~ U[0, 1]^D, true
    length-scales ℓ* ~ U(Θ) (paper: drawn uniformly from the optimization box),
    responses y ~ N(0, s² K_{ℓ*}(U, U) + σ_n² I) with an ARD RBF kernel. The
    ``n_total`` points are split into a training half and a validation half;
    each validation point is one user (n = 1000 in the paper's setting).

    Parameter θ ∈ Θ = [0.05, 5]^D are the length-scales themselves (paper:
    [0, 5]^D, which is also where ℓ* is drawn; the lower end is moved off 0 to
    keep the kernel defined). For each θ a zero-mean GP with ARD RBF
    length-scales θ, the generating outputscale s² and noise variance σ_n² (fixed,
    not fit) is conditioned on the training data, and

        ℓ_i(θ) = (μ_θ(u_i) − y_i)²,   μ_θ(u) = k_θ(u, U_tr) (K_θ + σ_n² I)⁻¹ y_tr.

    At θ = ℓ* the expected loss is σ_n² plus the posterior variance, i.e. close
    to σ_n² when the training data determine the function. θ outside Θ is
    evaluated at its projection onto Θ. Evaluation is batched over candidates
    in chunks of ``chunk_size`` (one ``m x m`` Cholesky each; ``m = 1000`` costs
    about 8 MB per matrix).

    The paper's noise level σ = .05 (Appendix E.1) is used as the default data
    noise std σ_n. Evaluation noise (Appendix E.5, λ = 0.01) is the base-class
    ``observation_noise_std``.
    """

    name = "gp_regression"

    def __init__(
        self,
        dim: int = 15,
        n_total: int = 2000,
        train_fraction: float = 0.5,
        noise_std: float = 0.05,
        outputscale: float = 1.0,
        lengthscale_bounds: tuple[float, float] = (0.05, 5.0),
        true_lengthscales: Tensor | None = None,
        seed: int = 0,
        observation_noise_std: float = 0.0,
        chunk_size: int = 4,
    ) -> None:
        r"""Generate the GP data and split it.

        Args:
            dim: D, the input dimension = the number of length-scales = d.
            n_total: The total number of data points (train + validation).
            train_fraction: The fraction of points used for training.
            noise_std: σ_n, the std of the Gaussian noise on the responses; also
                the (fixed) noise std of the fitted GP.
            outputscale: s², the signal variance of the generating and fitted GP.
            lengthscale_bounds: (lower, upper) of the box Θ for every length-scale.
            true_lengthscales: Optional ``D``-dim tensor ℓ*; drawn uniformly
                from Θ with the seed when None.
            seed: Seed of the data and of the observation-noise generator.
            observation_noise_std: The evaluation noise std (see base class).
            chunk_size: The number of candidates whose Cholesky factors are
                formed at once.
        """
        lo, hi = float(lengthscale_bounds[0]), float(lengthscale_bounds[1])
        if not 0 < lo <= hi:
            raise ValueError("lengthscale_bounds must satisfy 0 < lower <= upper.")
        n_train = int(round(train_fraction * n_total))
        if not 0 < n_train < n_total:
            raise ValueError("train_fraction must leave both splits non-empty.")
        bounds = torch.tensor([[lo] * dim, [hi] * dim], dtype=torch.float64)
        super().__init__(
            bounds=bounds, num_users=n_total - n_train, seed=seed, observation_noise_std=observation_noise_std
        )
        self.noise_std = float(noise_std)
        self.outputscale = float(outputscale)
        self.chunk_size = int(chunk_size)
        # Fitted-model noise variance; a floor keeps the Cholesky stable when
        # the data are noise free.
        self.fit_noise_variance = max(self.noise_std**2, 1e-6)

        gen = torch.Generator().manual_seed(self._data_seed)
        if true_lengthscales is None:
            u = torch.rand(dim, generator=gen, dtype=torch.float64)
            true_lengthscales = lo + (hi - lo) * u
        else:
            # Keep the random stream identical whether or not ℓ* is given.
            torch.rand(dim, generator=gen, dtype=torch.float64)
        #: ``D``-dim generating length-scales ℓ* (a NON-PRIVATE reference point).
        self.true_lengthscales = torch.as_tensor(true_lengthscales, dtype=torch.float64).reshape(dim)
        inputs = torch.rand(n_total, dim, generator=gen, dtype=torch.float64)
        z = torch.randn(n_total, generator=gen, dtype=torch.float64)
        responses = self._sample_responses(inputs, z)

        #: Training data (``n_train x D`` and ``n_train``).
        self.train_X, self.train_Y = inputs[:n_train], responses[:n_train]
        #: SENSITIVE validation data, one user per row (``n x D`` and ``n``).
        self.val_X, self.val_Y = inputs[n_train:], responses[n_train:]

    def _sample_responses(self, inputs: Tensor, z: Tensor) -> Tensor:
        r"""y = chol(s² K_{ℓ*} + σ_n² I) z, with growing jitter if needed."""
        K = _rbf(inputs, inputs, self.true_lengthscales.unsqueeze(0), self.outputscale)[0]
        K.diagonal().add_(self.noise_std**2)
        jitter = 1e-10
        while True:
            L, info = torch.linalg.cholesky_ex(K)
            if int(info) == 0:
                return L @ z
            K.diagonal().add_(jitter)
            jitter *= 10
            if jitter > 1e-2:  # pragma: no cover - the RBF Gram matrix is PSD
                raise RuntimeError("Could not factorize the generating covariance.")

    def evaluate_true(self, X: Tensor) -> Tensor:
        r"""Per-validation-point squared errors of the GP posterior mean.

        Args:
            X: A ``q x D``-dim float64 tensor of length-scale vectors.

        Returns:
            A ``q x n``-dim tensor.
        """
        X = project_to_box(X, self.bounds)
        if X.shape[0] == 0:
            return X.new_zeros(0, self.num_users)
        out = []
        for chunk in X.split(self.chunk_size):
            K = _rbf(self.train_X, self.train_X, chunk, self.outputscale)  # c x m x m
            K.diagonal(dim1=-2, dim2=-1).add_(self.fit_noise_variance)
            L = torch.linalg.cholesky(K)
            rhs = self.train_Y.expand(chunk.shape[0], -1).unsqueeze(-1)
            alpha = torch.cholesky_solve(rhs, L)  # c x m x 1
            del K, L
            K_vt = _rbf(self.val_X, self.train_X, chunk, self.outputscale)  # c x n x m
            mean = (K_vt @ alpha).squeeze(-1)  # c x n
            out.append((mean - self.val_Y).square())
        return torch.cat(out, dim=0)
