r"""The exact discrete Gaussian sampler (Canonne, Kamath & Steinke 2020, Algorithms 1–3) on a
source of random 62-bit words: integer arithmetic only, vectorised over the draws.

The source is given by ``_noise`` (OS entropy or a seeded generator); nothing here draws
randomness of its own. Every Bernoulli is a comparison of an exactly uniform integer, and every
int64 product stays under ``2^62`` for scales ``s <= MAX_DISCRETE_GAUSSIAN_SCALE = 2^24``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from botorch_dp.privacy.analysis.discrete_gaussian import MAX_DISCRETE_GAUSSIAN_SCALE

#: ``words(n)``: ``n`` independent uniform int64 words in ``[0, 2^62)``, on the device the draws are made on.
WordSource = Callable[[int], Tensor]


#: Bernoulli trials drawn per element and round (the extra ones are discarded unused): the
#: loops below then end after one round for all but a fraction ``~1/BLOCK!`` or ``e^-BLOCK``.
BLOCK = 4

#: Independent attempts per pending draw and round (at most ``_ATTEMPTS_PER_ROUND`` in all).
PARALLEL_ATTEMPTS = 8
_ATTEMPTS_PER_ROUND = 2**15


def _uniform_below(bound: Tensor, words: WordSource) -> Tensor:
    r"""Exactly uniform integers in ``[0, bound_i)`` (``1 <= bound_i <= 2^62``), by rejection
    of the words at or above the largest multiple of ``bound_i`` below ``2^62``."""
    bound = bound.reshape(-1)
    limit = (2**62 // bound) * bound
    w = words(bound.numel())
    ok = w < limit
    out = w % bound
    if not bool(ok.all()):  # probability below bound/2^62 per element
        redo = (~ok).nonzero().reshape(-1)
        out[redo] = _uniform_below(bound[redo], words)
    return out


def _bernoulli_exp_unit(num: Tensor, den: Tensor, words: WordSource) -> Tensor:
    r"""``Bernoulli(exp(−num/den))`` for ``0 <= num <= den`` (CKS Alg. 1: ``K`` is the index of
    the first failure of independent ``Bernoulli(x/K)``, ``K = 1, 2, …``; the draw is 1 iff
    ``K`` is odd). ``BLOCK`` consecutive ``K`` are tried at once per element."""
    n = num.numel()
    result = torch.empty(n, dtype=torch.bool, device=num.device)
    active = torch.arange(n, device=num.device)
    first_k = 1
    steps = torch.arange(BLOCK, dtype=torch.int64, device=num.device)
    while active.numel() > 0:
        bounds = den[active].unsqueeze(-1) * (first_k + steps)
        success = _uniform_below(bounds, words).reshape(-1, BLOCK) < num[active].unsqueeze(-1)
        failed = ~success
        stops = failed.any(-1)
        k = first_k + failed.to(torch.int8).argmax(-1)  # index of the first failure
        result[active[stops]] = k[stops] % 2 == 1
        active = active[~stops]
        first_k += BLOCK
    return result


def _bernoulli_exp_minus_one(count: int, words: WordSource, device: torch.device) -> Tensor:
    r"""``count`` independent ``Bernoulli(e⁻¹)`` draws."""
    one = torch.ones(count, dtype=torch.int64, device=device)
    return _bernoulli_exp_unit(one, one, words)


def _bernoulli_exp(num: Tensor, den: Tensor, words: WordSource) -> Tensor:
    r"""``Bernoulli(exp(−num/den))`` for ``num >= 0``, ``den >= 1``: ``floor(num/den)`` draws of
    ``Bernoulli(e⁻¹)`` that must all succeed (drawn together), and one of ``exp(−frac)``."""
    whole = num // den
    result = torch.ones(num.numel(), dtype=torch.bool, device=num.device)
    total = int(whole.sum())
    if total > 0:
        owner = torch.repeat_interleave(torch.arange(num.numel(), device=num.device), whole)
        failures = torch.zeros(num.numel(), dtype=torch.int64, device=num.device)
        failures.index_add_(0, owner, (~_bernoulli_exp_minus_one(total, words, num.device)).to(torch.int64))
        result = failures == 0
    rest = result.nonzero().reshape(-1)
    result[rest] = _bernoulli_exp_unit(num[rest] - whole[rest] * den[rest], den[rest], words)
    return result


def _geometric_exp_minus_one(count: int, words: WordSource, device: torch.device) -> Tensor:
    r"""``V``: the number of ``Bernoulli(e⁻¹)`` successes before the first failure
    (``P(V >= v) = e^{-v}``), ``BLOCK`` trials per element and round."""
    v = torch.zeros(count, dtype=torch.int64, device=device)
    active = torch.arange(count, device=device)
    while active.numel() > 0:
        success = _bernoulli_exp_minus_one(active.numel() * BLOCK, words, device).reshape(-1, BLOCK)
        run = success.to(torch.int64).cumprod(-1).sum(-1)  # leading successes
        v[active] += run
        active = active[run == BLOCK]
    return v


def _discrete_gaussian_attempt(
    count: int, scale: int, words: WordSource, device: torch.device
) -> tuple[Tensor, Tensor]:
    r"""One round of CKS Alg. 3 for ``count`` draws at integer scale ``s`` (discrete Laplace of
    scale ``t = s``, Alg. 2, then acceptance with probability ``exp(−(|Y| − s)²/(2s²))``).

    Returns ``(y, accepted)``: ``y`` is ``N_Z(0, s²)`` where ``accepted``. A rejection at any
    stage restarts the whole draw, which leaves the accepted draws' distribution unchanged.
    """
    s = torch.full((count,), scale, dtype=torch.int64, device=device)
    u = _uniform_below(s, words)
    accepted = _bernoulli_exp(u, s, words)  # Alg. 2: keep U with probability exp(−U/t)
    v = _geometric_exp_minus_one(count, words, device)
    x = u + scale * v
    negative = (words(count) & 1) == 1
    accepted &= ~(negative & (x == 0))
    # Alg. 3: (|Y| − s)²/(2s²) with |Y| − s = U + s(V − 1): int64-safe directly for V <= 64,
    # split into (V − 1)²/2 + (2s(V − 1)U + U²)/(2s²) beyond (all terms >= 0 there)
    near = (accepted & (v <= 64)).nonzero().reshape(-1)
    gap = u[near] + scale * (v[near] - 1)
    accepted[near] = _bernoulli_exp(gap * gap, s[near] * (2 * scale), words)
    far = (accepted & (v > 64)).nonzero().reshape(-1)
    if far.numel() > 0:  # probability below e^-64 per attempt
        if bool((v[far] > 2**12).any()):
            raise RuntimeError("discrete Gaussian sampler: V > 2^12 (probability < e^-4096); nothing was released.")
        c, uf = v[far] - 1, u[far]
        first = _bernoulli_exp(c * c, torch.full_like(c, 2), words)
        second = _bernoulli_exp(2 * scale * c * uf + uf * uf, s[far] * (2 * scale), words)
        accepted[far] = first & second
    return torch.where(negative, -x, x), accepted


def discrete_gaussian_from_words(
    count: int, scale: int, words: WordSource, device: torch.device | None = None
) -> Tensor:
    r"""``count`` exact draws of ``N_Z(0, s²)`` from the word source ``words`` (CKS Alg. 3).

    Each pending draw runs up to ``PARALLEL_ATTEMPTS`` independent attempts at once and keeps
    the first accepted one (the first acceptance of an i.i.d. sequence, as in the sequential
    loop; about 47 % of attempts are accepted). ``1 <= s <= MAX_DISCRETE_GAUSSIAN_SCALE``. The
    int64 work runs on ``device`` (default the CPU), where ``words`` must put its words.
    """
    if isinstance(scale, bool) or not isinstance(scale, int) or not 1 <= scale <= MAX_DISCRETE_GAUSSIAN_SCALE:
        raise ValueError(f"scale (s) must be an integer in [1, 2^24], got {scale!r}.")
    device = torch.device("cpu") if device is None else device
    out = torch.empty(count, dtype=torch.int64, device=device)
    todo = torch.arange(count, device=device)
    while todo.numel() > 0:
        tries = max(1, min(PARALLEL_ATTEMPTS, _ATTEMPTS_PER_ROUND // todo.numel()))
        y, accepted = _discrete_gaussian_attempt(todo.numel() * tries, scale, words, device)
        y, accepted = y.reshape(-1, tries), accepted.reshape(-1, tries)
        done = accepted.any(-1)
        first = accepted.to(torch.int8).argmax(-1)
        out[todo[done]] = y[done, first[done]]
        todo = todo[~done]
    return out
