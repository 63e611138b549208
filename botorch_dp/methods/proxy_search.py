r"""The search on a PUBLIC proxy that chooses the configuration of ``proxy_then_train``'s one private training.

One DP-SGD run on a proxy of a few hundred records is a very noisy draw: on the ``dpsgd`` benchmark
(digits, ε = 3) the same configuration's proxy loss ranges over a factor of two between runs that
differ only in their noise, so a search that trains each candidate once picks the luckiest draw
rather than the best configuration, and a search over random points alone may have no candidate
as good as a sound default. The search here (no privacy cost: it reads public data only):

1. **Candidates**: the public defaults first (given ones, else the centre of the space, the
   untuned run's default ``training_proxy.default_configuration``), then the tuner's
   configurations. An untuned default is a candidate, so the search is compared with it on the
   proxy instead of having to beat it by luck.
2. **Screening**: every candidate is trained ``repeats`` times on the proxy, each training with its
   own noise stream; its score is the mean over those trainings of the mean validation loss.
3. **Finalists**: the ``finalists`` best by the screening are trained ``repeats`` more times each,
   with fresh noise streams, and the winner is the lowest mean of these FRESH trainings only. The
   screening chose the finalists partly by their lucky draws; scoring them on new draws removes
   that bias (the winner's curse). ``finalists=1`` skips this step.

The caller gives ``train_score(configuration) -> float``: one fresh training on the proxy and its
mean loss on the users the choice is made by; every call must draw a new noise stream (the
objective's copies do: each run's stream is seeded by its own run index, or drawn from OS
entropy).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from botorch_dp.methods.training_proxy import Configuration, default_configuration, natural_configuration
from botorch_dp.privacy.checks import check_positive_int

__all__ = [
    "DEFAULT_FINALISTS",
    "DEFAULT_REPEATS",
    "ProxySearch",
    "ProxySearchOutcome",
    "natural_configurations",
    "with_defaults",
]

#: Proxy trainings per candidate in the screening (and per finalist after it).
DEFAULT_REPEATS = 3
#: Candidates retrained with fresh noise after the screening (1: none).
DEFAULT_FINALISTS = 3


def natural_configurations(space: Any, values: Sequence[Mapping[str, Any]], name: str) -> list[Configuration]:
    r"""Configurations given in natural units as ``(categorical choice, θ in the unit cube)``
    (``training_proxy.natural_configuration`` each); ``name`` is the argument named in an error."""
    return [natural_configuration(space, item, f"{name}[{j}]") for j, item in enumerate(values)]


def with_defaults(
    space: Any, configs: list[Configuration], defaults: Sequence[Mapping[str, Any]] | None
) -> list[Configuration]:
    r"""The candidates: the public ``defaults`` (natural units; ``None``: the centre of the space; ``()``:
    none) first, then ``configs``; a configuration equal to an earlier one is dropped."""
    if defaults is None:
        first = [default_configuration(space)]
    elif isinstance(defaults, (str, Mapping)) or not isinstance(defaults, Sequence):
        raise ValueError(f"defaults must be None or a list of mappings (natural units), got {defaults!r}.")
    else:
        first = natural_configurations(space, defaults, "defaults")
    out: list[Configuration] = []
    for choice, theta in [*first, *configs]:
        if not any(choice == c and torch.equal(theta, t) for c, t in out):
            out.append((choice, theta))
    return out


@dataclass(frozen=True)
class ProxySearchOutcome:
    r"""What the search saw and chose (public: proxy data only).

    Attributes:
        index: The winner's index in the candidates.
        screening: ``candidates x repeats`` scores of the screening trainings.
        finalists: The finalists' indices, best screening mean first.
        final: ``finalists x repeats`` scores of their fresh trainings (empty without a final round).
    """

    index: int
    screening: Tensor
    finalists: tuple[int, ...]
    final: Tensor

    @property
    def trainings(self) -> int:
        return int(self.screening.numel() + self.final.numel())

    def summary(self) -> dict[str, Any]:
        r"""Plain values for a result's settings: the screening means, the finalists, their fresh means."""
        return {
            "screening_means": [float(v) for v in self.screening.mean(-1)],
            "finalists": list(self.finalists),
            "finalist_means": [float(v) for v in self.final.mean(-1)] if self.final.numel() else [],
            "chosen": self.index,
            "proxy_trainings": self.trainings,
        }


@dataclass(frozen=True)
class ProxySearch:
    r"""The screening with repeats and the fresh final round (see the module).

    Attributes:
        repeats: Proxy trainings per candidate (and per finalist), each with its own noise stream.
        finalists: Candidates retrained with fresh noise after the screening (``1``: no final round).
    """

    repeats: int = DEFAULT_REPEATS
    finalists: int = DEFAULT_FINALISTS

    def __post_init__(self) -> None:
        check_positive_int(self.repeats, "repeats")
        check_positive_int(self.finalists, "finalists")

    def trainings(self, num_candidates: int) -> int:
        r"""The proxy trainings of a search over ``num_candidates`` candidates."""
        finalists = min(self.finalists, int(num_candidates))
        return self.repeats * (int(num_candidates) + (finalists if finalists > 1 else 0))

    def choose(self, train_score: Callable[[Configuration], float], configs: list[Configuration]) -> ProxySearchOutcome:
        r"""The winner among ``configs``; ``train_score`` trains once (a fresh noise stream) and scores."""
        if not configs:
            raise ValueError("configs: the proxy search needs at least one candidate configuration.")

        def rounds(indices: Sequence[int]) -> Tensor:
            scores = [[float(train_score(configs[i])) for _ in range(self.repeats)] for i in indices]
            return torch.tensor(scores, dtype=torch.float64).nan_to_num(nan=math.inf)  # a diverged run ranks last

        screening = rounds(range(len(configs)))
        order = torch.argsort(screening.mean(-1), stable=True)
        finalists = tuple(int(i) for i in order[: min(self.finalists, len(configs))])
        if len(finalists) < 2:
            return ProxySearchOutcome(finalists[0], screening, finalists, torch.empty(0, self.repeats))
        final = rounds(finalists)
        winner = finalists[int(torch.argmin(final.mean(-1)))]
        return ProxySearchOutcome(winner, screening, finalists, final)
