r"""``tune``'s PUBLIC proxy answered through one ``plan.cache.ProxyCache`` for the whole planning.

``CachedProxy(proxy, space, cache)`` stands for ``proxy`` wherever ``tune`` plans: bound to a configuration
(``configs_objective``, which calls ``with_choice``) it is the configuration's objective answered through
the memo under the configuration's key, so every configuration's plan, the method comparison over the
space's encoding and the fitting and scoring halves of the split share one evaluation per point.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor

from botorch_dp.plan.cache import CachedObjective, ProxyCache
from botorch_dp.tuning.search_space import SearchSpace, SearchSpaceObjective
from botorch_dp.tuning.tune_result import TuneObjective, configs_objective

__all__ = ["CachedProxy"]


def configuration_key(choice: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    r"""A hashable key of a categorical configuration (its names and values' ``repr``, sorted)."""
    return tuple(sorted((str(name), repr(value)) for name, value in choice.items()))


class CachedProxy(SearchSpaceObjective):
    r"""``proxy`` (either kind ``tune`` takes) answered through ``cache`` per configuration (see the module).

    Attributes:
        proxy: The PUBLIC proxy as given.
        full_space: ``tune``'s search space (the configuration's is ``space``).
        cache: The shared ``ProxyCache``.
        choice: The categorical values this one is bound to (empty: none).
    """

    def __init__(
        self, proxy: TuneObjective, space: SearchSpace, cache: ProxyCache, choice: Mapping[str, Any] | None = None
    ) -> None:
        self.proxy, self.full_space, self.cache, self.choice = proxy, space, cache, dict(choice or {})
        self.space = space.with_choice(self.choice) if self.choice else space
        self.data = getattr(proxy, "data", None)
        bound = configs_objective(proxy, space, self.choice)
        self.objective: CachedObjective = cache.objective(bound, key=configuration_key(self.choice))

    def with_choice(self, choice: Mapping[str, Any]) -> CachedProxy:
        return CachedProxy(self.proxy, self.full_space, self.cache, {**self.choice, **dict(choice)})

    def __getattr__(self, name: str) -> Any:  # anything else the proxy offers, unchanged
        return getattr(self.__dict__["proxy"], name)

    def __call__(self, X: Tensor) -> Tensor:
        return self.objective(X)
