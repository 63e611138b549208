r"""One evaluation per proxy point: a memo of the PUBLIC proxy's per-user losses, shared by the whole planning.

``tune(method="auto")`` plans every configuration on the proxy and then compares the methods there; the
simulated runs, the kernel fits, the probes at ``θ₀`` and the comparison's scoring calls ask the proxy
again and again for points it has already answered (every setting's first batch at ``θ₀`` under the same
seed, the fitting and the scoring half of ``plan.split``, which both call the whole proxy). ``ProxyCache``
keeps the answer of each row: ``cache.objective(proxy, key)`` is ``proxy`` with rows looked up by
``(key, the row's float64 bytes)``; only the rows not seen before are evaluated, in one call in their
order. ``key`` tells objectives apart that take the same coordinates (``tune`` passes the categorical
configuration: the same θ in another configuration is another point).

The proxy's users are public, so its losses may be kept and reused. A proxy that draws fresh randomness
at every call (a training run without a fixed seed) is answered with its first draw at a point.
``seconds_per_row`` (the wall time of the evaluated rows) is what ``plan.budget`` estimates costs with.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Any

import torch
from torch import Tensor

__all__ = ["CachedObjective", "ProxyCache"]


class ProxyCache:
    r"""The memo of a PUBLIC proxy's rows (see the module).

    Attributes:
        rows_asked: Rows the cached objectives were asked for.
        rows_evaluated: Rows the proxy itself evaluated (the others were answered from the memo).
        seconds: Wall time of the proxy's own calls.
    """

    def __init__(self) -> None:
        self._rows: dict[tuple[Hashable, bytes], Tensor] = {}
        self.rows_asked = 0
        self.rows_evaluated = 0
        self.seconds = 0.0

    def objective(self, proxy_objective: Callable[[Tensor], Tensor], key: Hashable = ()) -> CachedObjective:
        r"""``proxy_objective`` (``q x d`` points to ``q x n_p`` losses) answered through this memo under ``key``."""
        return CachedObjective(proxy_objective, self, key)

    @property
    def seconds_per_row(self) -> float:
        r"""Mean wall time of one evaluated row (NaN before the first)."""
        return self.seconds / self.rows_evaluated if self.rows_evaluated else float("nan")

    def lookup(self, key: tuple[Hashable, bytes]) -> Tensor | None:
        return self._rows.get(key)

    def store(self, key: tuple[Hashable, bytes], losses: Tensor) -> None:
        self._rows[key] = losses


class CachedObjective:
    r"""A proxy objective answered row by row from a ``ProxyCache`` (see the module). Other attributes
    (an encoded proxy's ``bound`` and ``encode``, a model objective's ``num_users``) are the proxy's."""

    def __init__(self, proxy_objective: Callable[[Tensor], Tensor], cache: ProxyCache, key: Hashable) -> None:
        self.proxy_objective, self.cache, self.key = proxy_objective, cache, key

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["proxy_objective"], name)

    def __call__(self, X: Tensor) -> Tensor:
        X = torch.as_tensor(X)
        if X.dim() != 2 or X.shape[0] == 0:
            return self.proxy_objective(X)  # not a batch of rows: the proxy answers (and refuses) itself
        keys = [(self.key, row.tobytes()) for row in X.detach().to(torch.float64).cpu().numpy()]
        self.cache.rows_asked += len(keys)
        missing: dict[tuple[Hashable, bytes], int] = {}
        for i, k in enumerate(keys):
            if self.cache.lookup(k) is None and k not in missing:
                missing[k] = i
        if missing:
            rows = torch.tensor(list(missing.values()), dtype=torch.long)
            start = time.perf_counter()
            answer = self.proxy_objective(X[rows])
            self.cache.seconds += time.perf_counter() - start
            losses = torch.as_tensor(answer)
            if losses.dim() != 2 or losses.shape[0] != len(missing):
                return answer  # not q x n_p: kept out of the memo, the caller's check names the shape
            self.cache.rows_evaluated += len(missing)
            for k, row in zip(missing, losses.detach(), strict=True):
                self.cache.store(k, row.clone())
        found = [self.cache.lookup(k) for k in keys]
        sizes = {int(row.shape[0]) for row in found if row is not None}
        if len(sizes) != 1:
            raise ValueError(f"proxy_objective returned {sorted(sizes)} users at different points; it must score "
                             "every point on the same users.")  # fmt: skip
        return torch.stack([row for row in found if row is not None])
