r"""``botorch_dp.methods.proxy_split``: the proxy's users are split by a public seeded permutation, every setting
(DP-GIBO's kernel and trials, the selection methods' loss clip) reads only the fitting half, and every
candidate of the method choice is simulated and scored only on the other half. The proxy used here
records, for each phase of the plan, which user indices were read from its answer."""

import pytest
import torch

import botorch_dp.methods.choice as choice_module
import botorch_dp.methods.private_random_search as prs_module
import botorch_dp.plan.search as search_module
from botorch_dp.methods.proxy_split import PROXY_SPLIT_SEED, ProxySplit
from botorch_dp.tuning.mixed_methods import choose_mixed_method, plan_and_compare
from tests.optim.loop_helpers import normal_location
from tests.plan.plan_helpers import N_PRIVATE, N_PROXY
from tests.plan.plan_helpers import plan_config as _config

_PHASE: list[str] = ["outside"]
_READS: list[tuple[str, frozenset[int] | str]] = []


class _Recorded(torch.Tensor):
    r"""A proxy's answer that records which of its user columns each read takes (``"all"``: every one)."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__name__", "") != "__get__":  # shape, dtype, ...: metadata, not a read
            users: frozenset[int] | str = "all"
            if func is torch.Tensor.__getitem__ and isinstance(args[1], tuple) and len(args[1]) == 2:
                rows, columns = args[1]
                if rows == slice(None) and isinstance(columns, torch.Tensor):
                    users = frozenset(columns.tolist())
            _READS.append((_PHASE[-1], users))
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)


def _recording(proxy):
    return lambda X: torch.as_tensor(proxy(X)).as_subclass(_Recorded)


def _in_phase(name, fn):
    def wrapped(*args, **kwargs):
        _PHASE.append(name)
        try:
            return fn(*args, **kwargs)
        finally:
            _PHASE.pop()

    return wrapped


def test_the_halves_are_a_public_seeded_partition():
    fit, score = ProxySplit(3).halves(11)
    assert len(fit) == 5 and len(score) == 6
    assert sorted(fit.tolist() + score.tolist()) == list(range(11))  # disjoint, all users
    perm = torch.randperm(11, generator=torch.Generator().manual_seed(PROXY_SPLIT_SEED + 3))  # as documented
    assert fit.tolist() == sorted(perm[:5].tolist()) and score.tolist() == sorted(perm[5:].tolist())
    assert torch.equal(ProxySplit(3).halves(11)[0], fit)  # the same at every call
    assert not torch.equal(ProxySplit(4).halves(11)[0], fit)  # another seed, another split
    with pytest.raises(ValueError, match="n_p = 3"):
        ProxySplit().halves(3)


@pytest.fixture
def phases(monkeypatch):
    _READS.clear()
    monkeypatch.setattr(search_module, "fit_kernel_on_proxy", _in_phase("kernel", search_module.fit_kernel_on_proxy))
    monkeypatch.setattr(choice_module, "compare_in_context", _in_phase("compare", choice_module.compare_in_context))
    monkeypatch.setattr(prs_module, "proxy_loss_clip", _in_phase("clip", prs_module.proxy_loss_clip))
    _PHASE[:] = ["plan"]
    yield
    _PHASE[:] = ["outside"]


def _users(phase):
    reads = [users for p, users in _READS if p == phase]
    assert reads, f"no read in phase {phase}"
    assert "all" not in reads, f"phase {phase} read every proxy user"
    return frozenset().union(*reads)


def test_settings_are_fitted_on_one_half_and_every_candidate_scored_on_the_other(phases):
    _, proxy = normal_location(n=N_PROXY, d=2, seed=1)
    plan = plan_and_compare(  # tune's choice for one configuration (methods.choice.plan_then_compare)
        _recording(proxy), _config(), num_users=N_PRIVATE, clip_quantiles=(0.5,), num_repeats=2, seed=5
    )
    fitting, scoring = (frozenset(h.tolist()) for h in ProxySplit(5).halves(N_PROXY))
    assert plan.proxy_split == ProxySplit(5)
    # DP-GIBO's kernel and its B/η/T trials, and the selection methods' loss clip: the fitting half only
    assert _users("kernel") == fitting and _users("plan") == fitting and _users("clip") == fitting
    # every candidate simulated and scored on the other half only
    assert _users("compare") == scoring
    assert {s.name for s in plan.methods.scores if s.proxy_losses} == {"dp_gibo", "private_random_search", "dp_hypo"}
    assert plan.num_proxy_users == len(fitting) and plan.methods.context.num_proxy_users == len(scoring)


def test_the_mixed_choice_plans_on_the_fitting_half_and_scores_on_the_other():
    from botorch_dp.methods.private_random_search import proxy_loss_clip
    from botorch_dp.optim import DPGIBOConfig
    from botorch_dp.tuning import Categorical, Hyperparameter, SearchSpace
    from botorch_dp.tuning.encoding import MixedEncoding
    from botorch_dp.tuning.tune_result import configs_objective

    _, losses = normal_location(n=N_PROXY, d=1, seed=2)
    space = SearchSpace([Hyperparameter("x", 0.0, 1.0), Categorical("kind", ("a", "b"))])

    def proxy(configs):
        return losses(torch.tensor([[c["x"] + 0.1 * (c["kind"] == "b")] for c in configs], dtype=torch.float64))

    run_config = DPGIBOConfig(
        bounds=space.bounds,
        kernel=space.recommended_kernel(),
        privacy_mu=1.0,
        target_delta=1e-5,
        num_iterations=1,
        num_restarts=1,
        raw_samples=8,
    )
    mixed = choose_mixed_method(
        proxy,
        space,
        run_config,
        full_mu=1.0,
        score_mu=0.3,
        loss_clip=3.0,
        num_users=N_PRIVATE,
        plan_options=dict(clip_quantiles=(0.5,), num_repeats=2, seed=7),
        progress=False,
    )
    fitting, scoring = ProxySplit(7).halves(N_PROXY)
    for plan, choice in zip(mixed.plans, space.configurations(), strict=True):  # fitted on the fitting half
        fit = plan.kernel_fit
        whole = configs_objective(proxy, space, choice)(fit.points)
        assert torch.allclose(fit.mean_losses, whole[:, fitting].mean(1), rtol=1e-12, atol=0)
        assert plan.num_proxy_users == len(fitting)
    assert mixed.comparison.context.num_proxy_users == len(scoring)  # simulated on the scoring half
    encoded = MixedEncoding(space).objective(proxy)
    for name in ("private_random_search", "dp_hypo"):  # C: the enumerate scores' C, fitted on no half
        clip = mixed.comparison.get(name).loss_clip
        assert clip == 3.0 == mixed.comparison.get("dp_gibo").loss_clip
        for half in (fitting, scoring):
            assert clip != proxy_loss_clip(lambda X, h=half: encoded(X)[:, h], MixedEncoding(space).bounds)
