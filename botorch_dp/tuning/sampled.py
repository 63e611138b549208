r"""Moved to ``botorch_dp.methods.sampled`` (``SampledMethod``); this module keeps the old import path,
and ``sample_configurations``, the old entry point that takes ``tune``'s trial runner."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botorch_dp.methods.protocol import ConfigurationRun
from botorch_dp.methods.sampled import SAMPLE_PART, SampledMethod
from botorch_dp.objectives.search_space import SearchSpace
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.tuning.encoding import MixedEncoding
from botorch_dp.tuning.tune_result import TuneObjective, TuneResult, tune_result

__all__ = ["SAMPLE_PART", "SampledMethod", "sample_configurations"]


@dataclass(frozen=True)
class _GivenTrials(SampledMethod):
    r"""``SampledMethod`` whose trials are ``run_one(choice, μ_run, seed, ledger, quiet=True)``."""

    run_one: Any = dataclasses.field(default=None, repr=False)

    def _trial(self, index: int, objective: Any, seed: int | None, executor: Any) -> ConfigurationRun:
        run_mu = self.per_trial_mu * math.sqrt(1.0 - self.selection_share)
        return self.run_one(self.configurations[index], run_mu, seed, PrivacyLedger(), quiet=True)


def sample_configurations(
    objective: TuneObjective,
    space: SearchSpace,
    run_one: Callable[..., ConfigurationRun],
    *,
    epsilon: float,
    delta: float,
    ledger: PrivacyLedger,
    mean_trials: float,
    selection_share: float,
    loss_clip: float,
    seed: int | None,
    progress: bool,
    max_trials: int | None = None,
    holds: bool = True,
) -> TuneResult:
    r"""The sampled strategy (``methods.sampled``) with ``run_one`` as each trial's DP-GIBO run."""
    configurations = tuple(space.configurations())
    method = _GivenTrials(
        configurations, (), epsilon, delta, mean_trials, selection_share, loss_clip, max_trials, (), holds,
        run_one=run_one,
    )  # fmt: skip
    run = method.run_private(MixedEncoding(space).objective(objective), ledger=ledger, seed=seed, progress=progress)
    return tune_result(run, space, ledger)
