r"""``EnumerateMethod`` (``tuning.method_enumerate``): its simulation is the enumerate procedure on
the proxy, recomputed here step by step (one DP-GIBO run per configuration at the private noise,
then Gaussian scores of noise ``C/(n μ_score)``), and it is a simulated-only candidate."""

import math
import warnings

import pytest
import torch

from botorch_dp.methods.choice import compare_in_context
from botorch_dp.optim import DPGIBO, DPGIBOConfig
from botorch_dp.plan import MethodContext, simulation_config
from botorch_dp.tuning import Categorical, Hyperparameter, SearchSpace
from botorch_dp.tuning.encoding import MixedEncoding
from botorch_dp.tuning.method_enumerate import EnumerateMethod
from botorch_dp.utils import child_seeds

SPACE = SearchSpace([Hyperparameter("x", 0.0, 1.0), Categorical("c", ("a", "b", "z"))])
OFFSET = {"a": 0.02, "b": 0.0, "z": 1.0}
N, N_P = 1000, 100
CENTRES = 0.4 + 0.05 * torch.randn(N_P, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def proxy(configs):
    x = torch.tensor([c["x"] for c in configs], dtype=torch.float64)
    off = torch.tensor([OFFSET[c["c"]] for c in configs], dtype=torch.float64)
    return (x[:, None] - CENTRES[None]).pow(2) + off[:, None]


def _method(score_mu):
    config = DPGIBOConfig(
        bounds=SPACE.bounds,
        privacy_mu=0.5,
        num_iterations=2,
        batch_size=2,
        step_size=0.2,
        clip_bound=1.0,
        kernel=SPACE.recommended_kernel(),
        raw_samples=8,
        num_restarts=1,
        acqf_maxiter=10,
    )
    enc = MixedEncoding(SPACE)
    context = MethodContext(
        bounds=enc.bounds, num_users=N, num_proxy_users=N_P, epsilon=1.0, delta=1e-5, config=config, evaluations=15.0
    )
    return EnumerateMethod(enc, tuple(SPACE.configurations()), (config,) * 3, score_mu, 2.0), enc, context


def test_the_simulation_is_the_enumerate_procedure_recomputed():
    method, enc, context = _method(score_mu=0.3)
    encoded = enc.objective(proxy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = method.resolved(encoded, context).simulate(encoded, context, seed=5)
        streams = child_seeds([5], 4)
        thetas = []
        for k, choice in enumerate(SPACE.configurations()):  # each run on its configuration at μ n/n_p
            sim = simulation_config(method.configs[k], N, N_P, seed=streams[k])
            assert sim.privacy_mu == pytest.approx(0.5 * N / N_P)
            run = DPGIBO(sim).run(lambda X, c=choice: proxy(SPACE.to_natural(X, choice=c)), progress=False)
            thetas.append(run.release.theta)
    configurations = SPACE.configurations()
    losses = torch.stack(
        [proxy([SPACE.to_natural(t, choice=c)])[0] for t, c in zip(thetas, configurations, strict=True)]
    )
    noise = torch.randn(3, generator=torch.Generator().manual_seed(streams[3]), dtype=torch.float64)
    scores = losses.clamp(0, 2.0).mean(1) + 2.0 / (N * 0.3) * noise  # C/(n μ_score): the private scale
    k = int(torch.argmin(scores))
    assert torch.equal(x, enc.encode(thetas[k], SPACE.configurations()[k]))


def test_it_is_compared_but_not_run_by_the_comparison_and_needs_two_configurations():
    method, enc, context = _method(score_mu=0.3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        comparison = compare_in_context(enc.objective(proxy), context, [method], seeds=[0, 1], progress=False)
    assert comparison.recommended_name == "dp_gibo" and len(comparison.scores[0].proxy_losses) == 2
    with pytest.raises(ValueError, match=r"method='dp_gibo' is simulated here only"):
        comparison.recommended  # noqa: B018
    assert "3 planned DP-GIBO runs" in method.describe() and "T = 2/2/2" in method.describe()
    with pytest.raises(ValueError, match=r"configs: one planned config per configuration"):
        EnumerateMethod(enc, tuple(SPACE.configurations()[:1]), method.configs[:1], 0.3, 2.0)
    assert math.isfinite(comparison.scores[0].mean_proxy_loss)
