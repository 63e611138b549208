r"""The DP-GIBO loop: config, ask/tell facade, batch selection, step rules, results, checkpoints."""

from botorch_dp.optim.dp_gibo import (
    DPGIBO,
    DPGIBOConfig,
    DPGIBOResult,
    IterationInfo,
    NonPrivateDiagnostics,
    PrivacyGuarantee,
    PrivateRelease,
)

__all__ = [
    "DPGIBO",
    "DPGIBOConfig",
    "DPGIBOResult",
    "IterationInfo",
    "NonPrivateDiagnostics",
    "PrivacyGuarantee",
    "PrivateRelease",
]
