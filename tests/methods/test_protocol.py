r"""``botorch_dp.methods.protocol``: one ``MethodRun`` type with one release and one guarantee, stated per
protected set; the methods ``tune`` runs fill it, and ``tune`` builds its result from it."""

import math
import warnings

import pytest
import torch

from botorch_dp.methods import EnumerateMethod, Method, MethodRun
from botorch_dp.methods.protocol import PROTECTED_SETS
from botorch_dp.optim import DPGIBOConfig
from botorch_dp.privacy.analysis.gdp import gdp_epsilon, gdp_mu
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.tuning import Categorical, Hyperparameter, SearchSpace
from botorch_dp.tuning.encoding import MixedEncoding
from botorch_dp.tuning.tune_result import tune_result

SPACE = SearchSpace([Hyperparameter("x", 0.0, 1.0), Categorical("arm", ("a", "b"))])
N = 400


def _losses(configs):
    g = torch.Generator().manual_seed(0)
    base = torch.rand(N, generator=g, dtype=torch.float64)
    return torch.stack([(c["x"] - 0.3) ** 2 + (0.1 if c["arm"] == "b" else 0.0) + 0.1 * base for c in configs])


def test_a_run_states_its_guarantee_per_protected_set_and_refuses_an_unknown_set():
    run = MethodRun("m", torch.zeros(1), None, "id", 10, 1.5, 1e-5, "a method")
    assert PROTECTED_SETS == ("validation", "training")
    assert run.guarantees == {"validation": (1.5, 1e-5), "training": None}
    given = {"validation": None, "training": (2.0, 1e-6)}
    assert MethodRun("m", torch.zeros(1), None, "id", 10, 1.5, 1e-5, "a method", guarantees=given).guarantees == given
    with pytest.raises(ValueError, match=r"guarantees: the protected sets are \('validation', 'training'\)"):
        MethodRun("m", torch.zeros(1), None, "id", 10, 1.5, 1e-5, "a method", guarantees={"test": (1.0, 1e-5)})


def test_the_enumerate_procedure_is_a_method_whose_run_is_the_composition_the_ledger_holds():
    epsilon, delta, share = 2.0, 1e-5, 0.1
    mu = gdp_mu(epsilon, delta)
    configurations = tuple(SPACE.configurations())
    K = len(configurations)
    config = DPGIBOConfig(
        bounds=SPACE.bounds,
        privacy_mu=mu * math.sqrt((1 - share) / K),
        target_delta=delta,
        num_iterations=2,
        batch_size=2,
        clip_bound=1.0,
        kernel=SPACE.recommended_kernel(),
        raw_samples=8,
        num_restarts=1,
        acqf_maxiter=10,
    )
    method = EnumerateMethod(configurations, (config,) * K, mu * math.sqrt(share / K), 2.0, mu)
    assert isinstance(method, Method) and method.gdp_mu == mu
    ledger = PrivacyLedger(validation_mu_budget=mu)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = method.run_private(MixedEncoding(SPACE).objective(_losses), ledger=ledger, seed=3)
    # K runs and one release of K scores, composed: the whole budget, no more
    assert run.mu == pytest.approx(mu, rel=1e-9) and ledger.validation.mu() == pytest.approx(mu, rel=1e-9)
    assert run.guarantees == {"validation": (pytest.approx(gdp_epsilon(mu, delta)), delta), "training": None}
    assert len(run.runs) == K and all(r.noisy_score is not None for r in run.runs)
    chosen = min(range(K), key=lambda k: run.runs[k].noisy_score)
    assert run.chosen == chosen and run.configuration == configurations[chosen]  # the lowest released score
    result = tune_result(run, SPACE, ledger)
    assert result.guarantee.mu == run.mu and result.guarantee.epsilon == pytest.approx(epsilon, rel=1e-6)
    assert result.hyperparameters["arm"] == configurations[chosen]["arm"] and result.score_mu == method.score_mu
