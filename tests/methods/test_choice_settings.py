r"""``methods.choice``: every candidate's settings chosen the same way (issue 41, item 2).

* a selection's cost in the comparison is its ``E[K]``, not the ``K`` its few simulations drew
  (the mixed benchmark's seed 3 at ε = 3 was decided by two geometric draws averaging 51.5
  evaluations against DP-GIBO's 104 at the same ``E[K] = 104``);
* a tie between equally costly methods goes to the caller's ``prefer`` (``tune``: the public rule's
  method), not to whichever mean the noise put lowest;
* ``with_loss_clip`` gives every open selection ``tune``'s ``C`` (the enumerate scores' ``C`` and
  that of a selection forced without a proxy) and leaves a given ``C`` alone; ``tune`` with a proxy
  hands the selections that ``C`` on a continuous and on a mixed space.
"""

import warnings

import numpy as np
import pytest
import torch

from botorch_dp import tune
from botorch_dp.methods.choice import MethodScore, compare_in_context, recommend, with_loss_clip
from botorch_dp.methods.dp_gibo import DPGIBOMethod
from botorch_dp.methods.dp_hypo import DPHyPOMethod
from botorch_dp.methods.private_random_search import PrivateRandomSearchMethod
from botorch_dp.methods.protocol import MethodContext
from botorch_dp.privacy.analysis.private_selection_trials import sample_num_trials
from botorch_dp.tuning import Categorical, Hyperparameter, SearchSpace
from tests.plan.plan_helpers import plan_config

SEEDS = (0, 1, 2)
MEAN_TRIALS = 12.0


def _proxy(X):  # q x 1 points to q x 50 users whose loss is the point plus a user offset
    return X.reshape(-1, 1) + torch.linspace(0.0, 0.1, 50, dtype=torch.float64)[None]


def _context():
    return MethodContext(
        bounds=torch.tensor([[0.0], [1.0]], dtype=torch.float64),
        num_users=1000,
        num_proxy_users=50,
        epsilon=3.0,
        delta=1e-5,
        config=plan_config(),
        evaluations=MEAN_TRIALS,
    )


def test_a_selections_cost_is_its_expected_number_of_trials_not_the_simulated_draws():
    rows = []

    def counting(X):
        rows.append(X.reshape(-1, X.shape[-1]).shape[0])
        return _proxy(X)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        comparison = compare_in_context(
            counting, _context(), [PrivateRandomSearchMethod(loss_clip=1.0)], seeds=SEEDS, progress=False
        )
    score = comparison.scores[0]
    # the premise: the simulations' K (geometric, E[K] = 12) drew another mean than E[K]; recounted by brute force
    simulated = sum(rows) - len(SEEDS)  # each repeat's scoring call asks for one row
    assert simulated / len(SEEDS) != MEAN_TRIALS
    assert score.evaluations == MEAN_TRIALS == score.method.expected_evaluations
    # and the draws were the documented ones: K of each repeat from the seed's stream 0
    ks = [sample_num_trials(distribution="truncated_negative_binomial", mean_trials=MEAN_TRIALS,
                            rng=np.random.default_rng([s, 0])) for s in SEEDS]  # fmt: skip
    assert simulated == sum(ks)


def _score(name, losses, evaluations):
    return MethodScore(name, object(), tuple(losses), evaluations=evaluations)


LOW = (0.10, 0.20, 0.30)
CLOSE = (0.12, 0.18, 0.33)  # paired diffs +0.02, -0.02, +0.03: mean 0.01 within one s.e. (0.0153)
FAR = (0.20, 0.30, 0.40)


def test_an_equal_cost_tie_goes_to_the_preferred_method_and_is_said():
    scores = [_score("dp_gibo", LOW, 104.0), _score("private_random_search", CLOSE, 104.0)]
    assert recommend(scores) == (0, None)  # no preference: the lowest mean
    best, note = recommend(scores, prefer="private_random_search")
    assert best == 1 and note is not None
    assert note.startswith("tie (within one s.e.) at the same cost (104 evaluations per run): chose private_random")
    assert recommend(scores, prefer="dp_gibo") == (0, None)
    # no tie: the preference does not override the proxy
    far = [_score("dp_gibo", LOW, 104.0), _score("private_random_search", FAR, 104.0)]
    assert recommend(far, prefer="private_random_search") == (0, None)
    # a cheaper tied method still wins over the preferred one
    cheaper = [_score("a", LOW, 104.0), _score("b", CLOSE, 104.0), _score("c", CLOSE, 50.0)]
    assert recommend(cheaper, prefer="b")[0] == 2


def test_with_loss_clip_fills_the_open_clips_only():
    given = PrivateRandomSearchMethod(loss_clip=0.5)
    gibo = DPGIBOMethod()
    out = with_loss_clip([gibo, PrivateRandomSearchMethod(), DPHyPOMethod(), given], 3.0)
    assert out[0] is gibo and out[3] is given
    assert out[1].loss_clip == 3.0 and isinstance(out[2], DPHyPOMethod) and out[2].loss_clip == 3.0
    assert out[2].ratio_bound == DPHyPOMethod().ratio_bound  # nothing else changed
    assert with_loss_clip([PrivateRandomSearchMethod()], None)[0].loss_clip is None


WIDTH = 0.2


def _basin(n, seed, coordinates):
    g = torch.Generator().manual_seed(seed)
    centres = 0.7 + 0.02 * torch.randn(n, 2, generator=g, dtype=torch.float64)

    def objective(configs):
        X = torch.tensor([[c[k] for k in coordinates] for c in configs], dtype=torch.float64)
        offset = torch.tensor([0.1 * (c.get("kind") == "b") for c in configs], dtype=torch.float64)[:, None]
        return offset + 1 - torch.exp(-(X[:, None, :] - centres[None]).pow(2).sum(-1) / (2 * WIDTH**2))

    return objective


@pytest.mark.parametrize("mixed", [False, True])
def test_tune_hands_every_selection_its_loss_clip_with_a_proxy(mixed):
    coordinates = ("x", "y")
    hyper = [Hyperparameter("x", 0.0, 1.0), Hyperparameter("y", 0.0, 1.0)]
    space = SearchSpace(hyper + ([Categorical("kind", ("a", "b"))] if mixed else []))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune(
            _basin(2000, 1, coordinates),
            space,
            epsilon=1.0,
            delta=1e-5,
            seed=3,
            progress=False,
            proxy=_basin(200, 0, coordinates),
            plan_budget=None,
            num_users=2000,
            loss_clip=1.5,
            plan_options=dict(fit_kernel=False, clip_quantiles=(0.9,), step_sizes=(0.1,), num_repeats=2, seed=4),
            num_iterations=1,
            batch_size=2,
            step_size=0.1,
            search_radius=0.05,
            raw_samples=8,
            num_restarts=1,
            acqf_maxiter=5,
        )
    for name in ("private_random_search", "dp_hypo"):
        assert result.methods.get(name).loss_clip == 1.5  # tune's C, not a quantile of the proxy's losses
