r"""``plan.cache``: one proxy evaluation per point (and configuration) over the whole planning, checked with
a proxy that counts the rows it evaluates (issue 43 item 2). ``tune``'s ``CachedProxy`` over it is tested in
tests/tuning/test_proxy_cache.py."""

import warnings

import torch

from botorch_dp.plan.cache import ProxyCache
from botorch_dp.tuning.mixed_methods import plan_and_compare
from tests.plan.plan_helpers import N_PRIVATE, N_PROXY, plan_config


class Counting:
    r"""A PUBLIC proxy of ``n`` users whose losses are a closed form of the point; counts evaluated rows."""

    def __init__(self, n: int = N_PROXY) -> None:
        self.rows, self.calls = 0, 0
        self.centres = torch.linspace(-0.5, 0.5, n, dtype=torch.float64)

    def __call__(self, X):
        X = torch.as_tensor(X, dtype=torch.float64)
        self.rows += X.shape[0]
        self.calls += 1
        return (X.sum(-1, keepdim=True) - self.centres) ** 2


def test_each_distinct_row_is_evaluated_once_and_answered_exactly():
    proxy, cache = Counting(), ProxyCache()
    cached = cache.objective(proxy)
    X = torch.tensor([[0.1, 0.2], [0.3, 0.4], [0.1, 0.2]], dtype=torch.float64)
    first = cached(X)
    assert proxy.rows == 2 and proxy.calls == 1  # the repeated row inside one batch: one evaluation
    torch.testing.assert_close(first, Counting()(X), rtol=0, atol=0)
    Y = torch.tensor([[0.3, 0.4], [0.5, 0.6]], dtype=torch.float64)
    torch.testing.assert_close(cached(Y), Counting()(Y), rtol=0, atol=0)
    assert proxy.rows == 3 and proxy.calls == 2  # only the new row went to the proxy
    cached(X)
    assert proxy.calls == 2 and cache.rows_asked == 3 + 2 + 3 and cache.rows_evaluated == 3
    other = cache.objective(proxy, key="another configuration")
    other(X[:1])
    assert proxy.rows == 4  # the same θ under another key is another point


def test_planning_twice_through_one_cache_evaluates_nothing_the_second_time():
    proxy, cache = Counting(), ProxyCache()
    config = plan_config()
    options = dict(num_users=N_PRIVATE, clip_quantiles=(0.5, 0.9), step_sizes=(0.5,), num_repeats=2, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # the settings planned and the methods compared (tune's planning of one configuration)
        plain = plan_and_compare(Counting(), config, **options)
        first = plan_and_compare(cache.objective(proxy), config, **options)
        evaluated = proxy.rows
        second = plan_and_compare(cache.objective(proxy), config, **options)
    assert proxy.rows == evaluated  # the second plan: every point answered from the memo
    assert cache.rows_evaluated < cache.rows_asked  # shared work inside the first plan already
    for a, b in ((plain, first), (first, second)):  # the memo changes no answer
        assert [t.proxy_losses for t in a.trials] == [t.proxy_losses for t in b.trials]
        assert [s.proxy_losses for s in a.methods.scores] == [s.proxy_losses for s in b.methods.scores]
