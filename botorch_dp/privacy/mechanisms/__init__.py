r"""The privacy boundary: where per-user losses meet each other or noise.

Every release of the package is a call into this package and returns the released value
together with its cost (``PrivacyCost``, ``PureDPCost``, ``RDPCost``). A release made
inside a charged step (``PrivacyLedger.charge``) takes the step's ``meter`` and records its
cost through it immediately before its noise is drawn, so the ledger holds a record
whenever the noise exists; without a meter the caller is responsible for the accounting.

- ``_clipping``: the clipped sums of per-user estimates ``clip_B(A y_i)`` (exact and
  overflow-safe), in process and per partition; SENSITIVE until noised.
- ``sums``: those sums as the mechanisms receive them (``ClippedSum`` with the count within
  ``B`` from the same pass), the partitions' partial sums combined in a fixed order after
  checks, and the clamped loss sums of the evaluated selections.
- ``_noise``: the only module that draws privacy noise, from the operating system's entropy
  unless a generator was seeded: every Gaussian release (``release_gaussian``, ``release_goe``)
  is the statistic rounded to a public power-of-two grid plus an exact discrete Gaussian
  (``_discrete_gaussian``, integer arithmetic on the random words ``_noise`` gives it), released
  exactly; Gumbel draws and AMP's noise are float samples.
- ``gradient``: ``GaussianGradientMechanism`` (DP-GIBO's and noisy GD's release, noise
  ``2B√T/(nμ)``, Sopa et al., Thm. 3.1), the per-release ``AdaptiveGaussianGradientMechanism``
  and its ``ClippedMean`` (Menart et al.), ``release_partial_sums``.
- ``counts``: adaptive clipping's noisy count (Andrew et al. 2021).
- ``scores``: trial scores of private random search, and the exponential-mechanism and
  noisy-loss choices of an iterate.
- ``preconditioner``: the GOE-noised private AdaGrad preconditioner (Kairouz et al.).
- ``objective_perturbation``: AMP, a training-side release with an RDP curve.

Nothing computed from per-user losses leaves this package un-noised, except clearly
labelled non-private diagnostics returned only on request.
"""

from botorch_dp.privacy.mechanisms._clipping import (
    NonfiniteLosses,
    clip_rows,
    clipped_mean_gradient,
    count_within_clip,
    default_chunk_size,
)
from botorch_dp.privacy.mechanisms._noise import (
    MAX_OS_ENTROPY_RELEASE_MU,
    OS_ENTROPY_NORMAL_MAX_ABS,
    os_entropy_gumbel,
    os_entropy_normal,
    os_entropy_uniform,
)
from botorch_dp.privacy.mechanisms.counts import ClipCountRelease, GaussianClipCountMechanism
from botorch_dp.privacy.mechanisms.gradient import (
    AdaptiveGaussianGradientMechanism,
    ClippedMean,
    GaussianGradientMechanism,
    release_partial_sums,
)
from botorch_dp.privacy.mechanisms.objective_perturbation import (
    AMPNotConvergedError,
    ObjectivePerturbationMechanism,
    ObjectivePerturbationRelease,
)
from botorch_dp.privacy.mechanisms.preconditioner import (
    GOEPreconditionerMechanism,
    PreconditionerRelease,
    gram_sqrt,
    sample_goe,
)
from botorch_dp.privacy.mechanisms.releases import (
    GradientRelease,
    NormRelease,
    PrivacyCost,
    PureDPCost,
    RDPCost,
    ReleaseDiagnostics,
)
from botorch_dp.privacy.mechanisms.scores import (
    ExponentialLossSelection,
    GaussianScoreMechanism,
    NoisyLossSelection,
    ScoreRelease,
    SelectionRelease,
    exponential_mechanism_log_probabilities,
    gumbel_max_index,
)
from botorch_dp.privacy.mechanisms.sums import (
    ClampedPartialSum,
    ClippedPartialSum,
    ClippedSum,
    clamped_loss_sums,
    clipped_partial_sum,
    clipped_sum,
    combine_clamped_sums,
    combine_partial_sums,
)

__all__ = [
    "MAX_OS_ENTROPY_RELEASE_MU",
    "OS_ENTROPY_NORMAL_MAX_ABS",
    "AMPNotConvergedError",
    "AdaptiveGaussianGradientMechanism",
    "ClampedPartialSum",
    "ClipCountRelease",
    "ClippedMean",
    "ClippedPartialSum",
    "ClippedSum",
    "ExponentialLossSelection",
    "GOEPreconditionerMechanism",
    "GaussianClipCountMechanism",
    "GaussianGradientMechanism",
    "GaussianScoreMechanism",
    "GradientRelease",
    "NoisyLossSelection",
    "NonfiniteLosses",
    "NormRelease",
    "ObjectivePerturbationMechanism",
    "ObjectivePerturbationRelease",
    "PreconditionerRelease",
    "PrivacyCost",
    "PureDPCost",
    "RDPCost",
    "ReleaseDiagnostics",
    "ScoreRelease",
    "SelectionRelease",
    "clamped_loss_sums",
    "clip_rows",
    "clipped_mean_gradient",
    "clipped_partial_sum",
    "clipped_sum",
    "combine_clamped_sums",
    "combine_partial_sums",
    "count_within_clip",
    "default_chunk_size",
    "exponential_mechanism_log_probabilities",
    "gram_sqrt",
    "gumbel_max_index",
    "os_entropy_gumbel",
    "os_entropy_normal",
    "os_entropy_uniform",
    "release_partial_sums",
    "sample_goe",
]
