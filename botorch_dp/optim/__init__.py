r"""The DP-GIBO loop: config and ask/tell facade (``dp_gibo``), options as strategies (``options``),
batch search, step rules, results and checkpoint I/O, one module each."""

from botorch_dp.optim.dp_gibo import DPGIBO, DPGIBOConfig
from botorch_dp.optim.results import (
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
