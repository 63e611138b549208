r"""``tune``'s PUBLIC proxy answered through one shared cache (``tuning.proxy_cache``): points shared
within a configuration and kept apart across configurations, the configuration key's closed form,
choices that compose, and the proxy's other attributes passed through unchanged."""

import torch

from botorch_dp.plan.cache import ProxyCache
from botorch_dp.tuning import Categorical, Hyperparameter, SearchSpace
from botorch_dp.tuning.proxy_cache import CachedProxy, configuration_key
from botorch_dp.tuning.tune_result import configs_objective


def test_tunes_cached_proxy_shares_points_within_a_configuration_and_keeps_configurations_apart():
    seen = []

    def proxy(configs):  # tune's plain kind: a list of natural-unit dicts
        seen.extend(configs)
        return torch.tensor([[c["x"] + (c["c"] == "b")] * 8 for c in configs], dtype=torch.float64)

    space = SearchSpace([Hyperparameter("x", 0.0, 1.0), Categorical("c", ["a", "b"])])
    cached = CachedProxy(proxy, space, ProxyCache())
    theta = torch.tensor([[0.25], [0.75]], dtype=torch.float64)
    a = configs_objective(cached, space, {"c": "a"})
    b = configs_objective(cached, space, {"c": "b"})
    torch.testing.assert_close(a(theta)[:, 0], torch.tensor([0.25, 0.75], dtype=torch.float64))
    torch.testing.assert_close(b(theta)[:, 0], torch.tensor([1.25, 1.75], dtype=torch.float64))
    configs_objective(cached, space, {"c": "a"})(theta.flip(0))  # a new bound objective: the same memo
    assert len(seen) == 4 and {c["c"] for c in seen} == {"a", "b"}


def test_the_configuration_key_is_the_sorted_names_and_reprs():
    assert configuration_key({"b": 1, "a": "x"}) == (("a", "'x'"), ("b", "1"))
    assert configuration_key({"a": 1}) != configuration_key({"a": "1"}) and configuration_key({}) == ()
    assert configuration_key({"a": 1, "b": 2.0}) == configuration_key({"b": 2.0, "a": 1})


def test_choices_compose_and_the_proxys_attributes_pass_through():
    class Proxy:
        data, label = "public rows", "the proxy"

        def __call__(self, configs):
            return torch.tensor([[c["x"] + 10 * c["c"] + c["d"]] * 4 for c in configs], dtype=torch.float64)

    space = SearchSpace([Hyperparameter("x", 0.0, 1.0), Categorical("c", [0, 1]), Categorical("d", [0, 2])])
    cache = ProxyCache()
    cached = CachedProxy(Proxy(), space, cache)
    assert cached.label == "the proxy" and cached.data == "public rows" and cached.space is space
    bound = cached.with_choice({"c": 1}).with_choice({"d": 2})
    assert bound.choice == {"c": 1, "d": 2} and bound.full_space is space and bound.cache is cache
    assert [h.name for h in bound.space.hyperparameters] == [
        h.name for h in space.with_choice(bound.choice).hyperparameters
    ]
    theta = torch.tensor([[0.5]], dtype=torch.float64)
    assert bound(theta)[0].tolist() == [12.5] * 4  # x + 10·c + d at the bound configuration
    assert cache.rows_evaluated == 1
    again = CachedProxy(Proxy(), space, cache, {"d": 2, "c": 1})  # the same key, whatever the order
    again(theta)
    assert cache.rows_evaluated == 1 and cache.rows_asked == 2
