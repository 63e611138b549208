r"""The proxy's users split in two: a fitting half for the settings, a scoring half for the method choice.

A method scored on the same proxy users its settings were fitted on is favoured by that fit
(issue 41: a kernel fitted on the proxy put its short length-scales on the proxy's informative
features and DP-GIBO was then scored with it on the same users). ``plan_private_run`` (with
``choose_method=True``) and ``tune``'s comparison on a mixed space therefore split the proxy's
``n_p`` users once, by a PUBLIC seeded permutation that depends on ``n_p`` and the seed only:

* the FITTING half (the first ``⌊n_p/2⌋`` of the permutation, in increasing order) is what
  every setting is fitted or chosen on: DP-GIBO's kernel (``fit_kernel_on_proxy``), its
  ``B``, ``η``, ``T`` and batch rule (the plan's search), and the selection methods' loss clip
  ``C`` (``proxy_loss_clip``, in their ``resolved``);
* the SCORING half (the other ``⌈n_p/2⌉``) is what every candidate is simulated and scored on
  (``methods.choice``), with the private run's noise simulated for that half's size.

The permutation is ``torch.randperm(n_p)`` under a ``torch.Generator`` seeded with
``PROXY_SPLIT_SEED`` plus the plan's ``seed`` (public randomness on public users; no privacy
cost). Both halves need at least ``MIN_USERS`` users, so the split needs ``n_p ≥ 2 MIN_USERS``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from botorch_dp.optim.config import MIN_USERS
from botorch_dp.privacy.checks import check_nonnegative_int

__all__ = ["PROXY_SPLIT_SEED", "ProxySplit", "ProxyUsers"]

PROXY_SPLIT_SEED = 41_000
"""Offset of the split's seed (the plan's ``seed`` is added): a fixed public constant."""

_PARTS = ("fitting", "scoring")


@dataclass(frozen=True)
class ProxySplit:
    r"""The public seeded split of a proxy's users into a fitting and a scoring half (see the module).

    Attributes:
        seed: The plan's seed (the permutation's generator is seeded with ``PROXY_SPLIT_SEED + seed``).
    """

    seed: int = 0

    def __post_init__(self) -> None:
        check_nonnegative_int(self.seed, "seed")

    def halves(self, num_proxy_users: int) -> tuple[Tensor, Tensor]:
        r"""``(fitting, scoring)``: the user indices of each half, each in increasing order.

        Raises:
            ValueError: Naming the proxy, when ``n_p < 2 MIN_USERS`` (a half would protect no one).
        """
        n_p = int(num_proxy_users)
        if n_p < 2 * MIN_USERS:
            raise ValueError(
                f"proxy: the method choice splits the proxy's per-user losses into a fitting and a scoring half, "
                f"each of at least {MIN_USERS} users; the proxy has n_p = {n_p} (give at least {2 * MIN_USERS})."
            )
        generator = torch.Generator().manual_seed(PROXY_SPLIT_SEED + int(self.seed))
        permutation = torch.randperm(n_p, generator=generator)
        half = n_p // 2
        return permutation[:half].sort().values, permutation[half:].sort().values

    def fitting(self, proxy_objective: Callable[[Tensor], Tensor]) -> ProxyUsers:
        r"""The proxy restricted to the fitting half."""
        return ProxyUsers(proxy_objective, self, "fitting")

    def scoring(self, proxy_objective: Callable[[Tensor], Tensor]) -> ProxyUsers:
        r"""The proxy restricted to the scoring half."""
        return ProxyUsers(proxy_objective, self, "scoring")


@dataclass(frozen=True)
class ProxyUsers:
    r"""A PUBLIC proxy objective restricted to one half of its users (``ProxySplit``).

    Called with ``q x d`` points, it calls the proxy and returns the ``q x |half|`` per-user losses
    of that half's users (the columns ``split.halves(n_p)[part]``; ``n_p`` is read from the proxy's
    answer, so the split is the same at every call). An encoded proxy (``tuning.encoding``) keeps
    its ``bound`` and ``encode``.
    """

    proxy_objective: Callable[[Tensor], Tensor]
    split: ProxySplit
    part: str

    def __post_init__(self) -> None:
        if self.part not in _PARTS:
            raise ValueError(f"part must be one of {_PARTS}, got {self.part!r}.")

    def bound(self, choice: dict[str, Any]) -> ProxyUsers:
        r"""An encoded proxy's objective for one configuration (``EncodedObjective.bound``), same half."""
        bound = getattr(self.proxy_objective, "bound")  # noqa: B009 (a public method of an encoded proxy)
        return dataclasses.replace(self, proxy_objective=bound(choice))

    def encode(self, theta: Tensor, choice: dict[str, Any]) -> Tensor:
        r"""The encoded proxy's point of ``theta`` in ``choice`` (``EncodedObjective.encode``)."""
        return getattr(self.proxy_objective, "encode")(theta, choice)  # noqa: B009

    def users(self, num_proxy_users: int) -> Tensor:
        r"""This half's user indices for a proxy of ``num_proxy_users`` users."""
        return self.split.halves(num_proxy_users)[_PARTS.index(self.part)]

    def _answer(self, X: Tensor) -> Tensor:
        losses = self.proxy_objective(X)
        if not isinstance(losses, Tensor):
            losses = torch.as_tensor(losses)
        shape = getattr(losses, "shape", None)
        if shape is None or len(shape) != 2:
            raise ValueError(
                f"proxy_objective must return a q x n_p tensor of per-user losses, got {type(losses).__name__} "
                f"of shape {None if shape is None else tuple(shape)}."
            )
        return losses

    def count(self, X: Tensor) -> int:
        r"""The number of this half's users, from the proxy's answer at ``X`` (its shape only)."""
        return len(self.users(int(self._answer(X).shape[1])))

    def __call__(self, X: Tensor) -> Tensor:
        losses = self._answer(X)
        return losses[:, self.users(int(losses.shape[1]))]
