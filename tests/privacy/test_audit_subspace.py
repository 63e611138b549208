"""Audits of Kairouz et al.'s releases: sound on the real mechanisms, and able to catch broken ones."""

import math

import torch

from botorch_dp.privacy import audit
from botorch_dp.privacy.mechanisms import GaussianGradientMechanism, GOEPreconditionerMechanism, gram_sqrt


class HalvedNoise(GaussianGradientMechanism):
    """A broken gradient mechanism: half the noise its μ needs."""

    @property
    def noise_std(self) -> float:
        return super().noise_std / 2


class PaperSensitivity(GOEPreconditionerMechanism):
    """The seed paper's calibration: Frobenius sensitivity √t Δ instead of √(2t) Δ (E2.1),
    so the noise is √2 too small and the true μ is √2 times the claim."""

    def noise_std(self, t: int) -> float:
        return super().noise_std(t) / math.sqrt(2)


def test_projected_release_audit_is_tight_and_catches_halved_noise():
    honest = audit.audit_projected_release(num_runs=2000, seed=11)
    assert honest.claimed_mu == 1.0
    assert honest.empirical_mu_lower <= honest.claimed_mu
    assert abs(honest.empirical_mu - 1.0) < 0.25  # spends what it claims: the huge user is clipped in k dims
    broken = audit.audit_projected_release(num_runs=1000, mechanism_class=HalvedNoise, seed=11)
    assert broken.empirical_mu_lower > broken.claimed_mu


def test_private_preconditioner_audit_is_tight_and_catches_the_paper_sensitivity():
    honest = audit.audit_private_preconditioner(num_runs=2000, privacy_mu=math.sqrt(3), seed=12)
    assert honest.claimed_mu == 1.0  # μ_H/√T with μ_H = √3, T = 3
    assert honest.empirical_mu_lower <= honest.claimed_mu
    assert abs(honest.empirical_mu - 1.0) < 0.25
    broken = audit.audit_private_preconditioner(
        num_runs=1000, privacy_mu=math.sqrt(3), mechanism_class=PaperSensitivity, seed=12
    )
    assert broken.empirical_mu_lower > broken.claimed_mu


def test_preconditioner_audit_neighbours_attain_the_sensitivity_bound():
    # the audit's two column matrices are the near-worst case of E2.1
    n, B, T = 100, 1.0, 3
    A = 100.0 * torch.eye(2, dtype=torch.float64)
    Y = torch.zeros(2, n, dtype=torch.float64)
    Y[0, 1:] = 1.0
    Y[1, 0] = -10.0
    from botorch_dp.privacy.mechanisms import clipped_mean_gradient

    x, _ = clipped_mean_gradient(A, Y, B)
    Y[1, 0] = 1e3
    x_prime, _ = clipped_mean_gradient(A, Y, B)
    assert torch.allclose((x_prime - x).norm(), torch.tensor(2 * B / n, dtype=torch.float64), rtol=1e-14)
    X, X_prime = x.unsqueeze(-1).expand(2, T), x_prime.unsqueeze(-1).expand(2, T)
    bound = GOEPreconditionerMechanism(sensitivity=2 * B / n, privacy_mu=1.0, num_steps=T).frobenius_sensitivity(T)
    assert 0.9999 * bound < float((gram_sqrt(X_prime) - gram_sqrt(X)).norm()) <= bound
