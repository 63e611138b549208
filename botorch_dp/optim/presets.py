r"""Named sets of ``DPGIBOConfig`` settings, each backed by a measurement in ``reports/``.

A preset only fills settings: anything passed explicitly wins, and several presets combine when
they do not set the same field to different values::

    config = DPGIBOConfig.from_preset("e1_reach", bounds=bounds, kernel=kernel, clip=2.0)
    config = DPGIBOConfig.from_preset("e1_reach", "adaptive_noise", bounds=bounds, kernel=kernel)

No preset changes the privacy guarantee: each re-splits the same ``μ`` or changes only public
settings (step rule and size, number of steps, the batch search's iterations).

A preset whose loss is worse than the default's by more than one standard error on a benchmark it
is offered for is fixed or withdrawn (issue 43). A withdrawn preset (``Preset.withdrawn`` says why)
still fills its settings, with a ``DeprecationWarning``; it will be removed.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from botorch_dp.optim.options import FixedBatches

__all__ = ["PRESETS", "Preset", "preset_settings"]


@dataclasses.dataclass(frozen=True)
class Preset:
    r"""A named set of ``DPGIBOConfig`` settings.

    Attributes:
        settings: Field name → value.
        summary: One line: what it does and when to use it.
        evidence: Where it was measured (a report in ``reports/`` and its numbers).
        withdrawn: ``None``, or why the preset is withdrawn (then using it warns).
    """

    settings: Mapping[str, Any]
    summary: str
    evidence: str
    withdrawn: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "settings", MappingProxyType(dict(self.settings)))


#: Why ``fast_search`` is withdrawn (``reports/design_optimizer_speed.md``).
WITHDRAWN_FAST_SEARCH = (
    "the default batch search (acqf_speed='fast') already caps its warm-started L-BFGS-B runs at "
    "options.batches.WARM_MAXITER = 10 iterations, so FixedBatches(maxiter=100) changes only its first, cold search: "
    "on the cheap task of reports/design_optimizer_speed.md the same final losses bit for bit (10/10 seeds "
    "at d = 20 and 50) and no time saved. Where the cap acts on every search it was not worse there "
    "(acqf_speed='reference': 1.9x faster; greedy batches: no faster), but on issue 43's held-out task at "
    "d = 20 its loss was worse by +0.046 +- 0.022 (3/10 seeds better). Leave maxiter unset."
)

PRESETS: Mapping[str, Preset] = MappingProxyType(
    {
        "paper": Preset(
            {"step_rule": "adagrad", "step_size": 0.3, "num_iterations": 25},
            "Sopa et al.'s E.1 settings: AdaGrad with η = 0.3 for T = 25 steps (batches default to d + 1).",
            "reports/dimension.md: below private random search on 5/5 seeds at d = 30, 60 and 100 "
            "(box [0.05, 5]^d, μ = 1).",
        ),
        "e1_reach": Preset(
            {"step_rule": "adagrad", "step_size": 1.0, "num_iterations": 25},
            "AdaGrad with η = 1 for T = 25: an iterate can cross a box about 5 wide (η Σ t^-1/2 ≈ 2η√T), "
            "for starts far from the optimum.",
            "reports/e1_investigation.md: E.1 from uniform starts, DP-GIBO beats random search on 7/10 seeds "
            "(η = 0.3: 4/10); reports/dimension.md: worse than η = 0.3 at d = 30, 60 and 100 (diverged on 1 of 5 "
            "seeds at d = 100), about equal at d = 5 and 15.",
        ),
        "adaptive_noise": Preset(
            {"noise": "adaptive_norm"},
            "Menart et al.'s norm-scaled noise under a GDP filter: the same μ spent in fewer steps, so "
            "about a third of the evaluations, at a somewhat worse loss; the closest of issue 15's options "
            "to plain DP-GIBO (none beat it), for runs whose evaluations are expensive.",
            "reports/options/options_svm.md: SVM d = 33, 10 seeds, median 0.096 vs plain 0.061 on 279 vs 850 "
            "evaluations, 3/10 wins; reports/options/options.md: GP d = 15, 0.25 vs 0.15 on 203 vs 400.",
        ),
        "fast_search": Preset(
            {"batches": FixedBatches(maxiter=100)},
            "Caps each L-BFGS-B restart of the batch search at 100 iterations (BoTorch's default: 2000): "
            "the search is most of a run's time at high d.",
            "reports/acqf_maxiter.md: DP-GIBO runs 1.3×, 1.8× and 3.4× faster at d = 30, 60 and 100; paired "
            "loss differences +0.0006 ± 0.0004 at d = 60 and +0.005 ± 0.005 at d = 100 (9 seeds, median "
            "+0.0004, one seed 2.2× worse). Measured with the batch search before issue 33.",
            withdrawn=WITHDRAWN_FAST_SEARCH,
        ),
    }
)


def preset_settings(*names: str) -> dict[str, Any]:
    r"""The union of the settings of the presets ``names`` (``ValueError`` for none, an unknown one, or
    two that set one field to different values)."""
    if not names:
        raise ValueError(f"preset: name at least one of {tuple(PRESETS)}.")
    merged: dict[str, Any] = {}
    owner: dict[str, str] = {}
    for name in names:
        if name not in PRESETS:
            raise ValueError(f"preset: unknown preset {name!r}; known: {', '.join(PRESETS)}.")
        if PRESETS[name].withdrawn is not None:
            warnings.warn(
                f"preset {name!r} is withdrawn and will be removed: {PRESETS[name].withdrawn}",
                DeprecationWarning,
                stacklevel=3,
            )
        for field, value in PRESETS[name].settings.items():
            if field in merged and merged[field] != value:
                raise ValueError(
                    f"preset: {name!r} sets {field}={value!r} but {owner[field]!r} sets {merged[field]!r}."
                )
            merged[field], owner[field] = value, name
    return merged
