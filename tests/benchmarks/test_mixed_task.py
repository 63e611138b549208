"""benchmarks.mixed_task: the mixed space, its public cube encoding for the baselines, the
model and optimizer factories, and the encoded objective against a row-by-row brute force."""

import math

import pytest
import torch
from torch import nn

from benchmarks import mixed_task as mt


@pytest.fixture(scope="module")
def quick_objective():
    s = mt.quick_settings()
    return s, mt.make_objective(s, mt.load_data(s, 0), 0)


def test_the_space_mixes_two_categoricals_an_integer_and_three_continuous():
    space = mt.search_space(mt.Settings())
    assert space.names == ["width", "lr", "weight_decay", "dropout"]
    assert [h.name for h in space.categoricals] == ["optimizer", "activation"]
    assert len(space.configurations()) == 4
    width = space.relaxed[0]
    assert (width.low, width.high) == (16, 128)


def test_the_encoding_gives_each_choice_an_equal_share_of_its_coordinate():
    enc = mt.MixedEncoding(mt.search_space(mt.Settings()))
    assert enc.dim == 6 and enc.sizes == [2, 2]
    d = enc.space.dim
    X = torch.full((5, 6), 0.3, dtype=torch.float64)
    X[:, d] = torch.tensor([0.0, 0.4999, 0.5, 0.9999, 1.0], dtype=torch.float64)
    assert enc.indices(X)[:, 0].tolist() == [0, 0, 1, 1, 1]
    for row in torch.cartesian_prod(torch.arange(2), torch.arange(2)):  # centres decode to their own index
        assert (
            enc.indices(torch.cat([torch.zeros(d, dtype=torch.float64), enc.centres(row)])[None])[0].tolist()
            == row.tolist()
        )
    # a uniform point of the cube is uniform over each categorical (binomial 4-sigma bound, fixed seed)
    n = 20_000
    U = torch.rand(n, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    share = enc.indices(U).double().mean(0)
    assert torch.all((share - 0.5).abs() < 4 * math.sqrt(0.25 / n))
    natural = enc.to_natural(U[0])
    assert natural["optimizer"] == ("sgd", "adam")[int(U[0, d] >= 0.5)]
    assert natural["activation"] == ("relu", "tanh")[int(U[0, d + 1] >= 0.5)]
    assert isinstance(natural["width"], int) and 16 <= natural["width"] <= 128
    assert natural == enc.space.to_natural(U[0, :d], choice={k: natural[k] for k in ("optimizer", "activation")})


def test_the_encoded_objective_equals_each_row_evaluated_alone(quick_objective):
    _, objective = quick_objective
    enc = mt.MixedEncoding(objective.space)
    X = torch.rand(6, enc.dim, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    X[:4, enc.space.dim :] = torch.tensor([[0.1, 0.1], [0.1, 0.9], [0.9, 0.1], [0.9, 0.9]], dtype=torch.float64)
    grouped = enc.objective(objective)(X)
    assert grouped.shape == (6, len(objective.data.y_val)) and grouped.dtype == torch.float64
    for i in range(6):  # brute force: the row's configuration bound by hand, one row at a time
        choice = {k: v for k, v in enc.to_natural(X[i]).items() if k in ("optimizer", "activation")}
        alone = objective.with_choice(choice)(X[i : i + 1, : enc.space.dim])
        assert torch.allclose(grouped[i], alone[0], rtol=0, atol=1e-6)


def test_the_factories_build_what_the_categoricals_name():
    model = mt.make_model(5, 3, width=7, activation="tanh", dropout=0.2)
    assert isinstance(model[1], nn.Tanh) and model[0].out_features == 7 and model[2].p == 0.2
    assert isinstance(mt.make_model(5, 3, width=7, activation="relu", dropout=0.0)[1], nn.ReLU)
    params = list(model.parameters())
    sgd = mt.make_optimizer(params, optimizer="sgd", lr=0.1, weight_decay=1e-3)
    assert isinstance(sgd, torch.optim.SGD) and sgd.defaults["momentum"] == 0.9
    adam = mt.make_optimizer(params, optimizer="adam", lr=0.01, weight_decay=0.0)
    assert isinstance(adam, torch.optim.Adam) and adam.defaults["lr"] == 0.01
    with pytest.raises(ValueError, match="optimizer must be 'sgd' or 'adam', got 'rmsprop'"):
        mt.make_optimizer(params, optimizer="rmsprop", lr=0.1, weight_decay=0.0)


def test_the_objective_routes_categoricals_to_the_model_and_the_optimizer(quick_objective):
    _, objective = quick_objective
    assert objective.routes == {
        "optimizer": "optimizer",
        "activation": "model",
        "width": "model",
        "lr": "optimizer",
        "weight_decay": "optimizer",
        "dropout": "model",
    }


@pytest.mark.slow  # GP fits and mixed acquisition optimisation: seconds to minutes on a loaded machine
def test_mixed_bo_spends_its_budget_on_encoded_points_and_returns_the_best_one():
    from benchmarks.mixed import mixed_bo

    enc = mt.MixedEncoding(mt.search_space(mt.quick_settings()))
    d = enc.space.dim
    seen = []

    def objective(X):  # 3 synthetic users: a bowl in the relaxed coordinates, a penalty per choice
        seen.append(X.clone())
        base = ((X[:, :d] - 0.3) ** 2).sum(-1) + 0.5 * enc.indices(X).sum(-1)
        return base[:, None] + torch.tensor([0.0, 0.1, 0.2], dtype=torch.float64)

    result = mixed_bo(
        objective, enc, budget=14, num_initial=6, batch=4, raw_samples=16, num_restarts=1, maxiter=10, seed=0
    )
    X = torch.cat(seen)
    assert X.shape == (14, enc.dim) and result.num_evaluations == 14
    proposed = X[6:, d:]  # BO's points sit at the centre of their choice's share
    assert torch.allclose(proposed, enc.centres(enc.indices(X[6:])))
    means = objective(X).mean(-1)
    assert torch.equal(result.theta, X[int(torch.argmin(means))])
    assert float(result.history.mean_losses.min()) == pytest.approx(float(means.min()))


def test_the_optional_auto_arm_is_off_by_default_and_its_proxy_is_a_public_training_slice():
    from benchmarks import mixed

    s = mt.Settings()
    assert not s.tune_auto_proxy and mt.methods(s) == mt.METHODS and mt.TUNE_AUTO not in mt.METHODS
    context = mixed.prepare(s)
    kinds = {j.kind for j in mixed.experiment_jobs(s, context)}
    assert "tune_auto" not in kinds  # the stored experiment's jobs are the same as before
    on = mt.Settings(tune_auto_proxy=True)
    jobs = [j for j in mixed.experiment_jobs(on, context) if j.kind == "tune_auto"]
    assert sorted((j.kwargs["seed"], j.kwargs["epsilon"]) for j in jobs) == sorted(
        (seed, e) for seed in on.seeds for e in on.epsilons
    )
    assert mt.methods(on) == mt.METHODS + (mt.TUNE_AUTO,)
    q = mt.quick_settings()
    data = mt.load_data(q, 0)
    proxy = mt.proxy_data(q, data, 0)
    m = data.y_train.shape[0]
    assert proxy.y_val.shape[0] == round(q.proxy_fraction * m) and proxy.y_train.shape[0] + proxy.y_val.shape[0] == m
    rows = {tuple(x.tolist()) for x in data.X_train}  # users and training rows: disjoint slices of the training split
    users, trained = ({tuple(x.tolist()) for x in X} for X in (proxy.X_val, proxy.X_train))
    assert users <= rows and trained <= rows and not users & trained
    assert not users & {tuple(x.tolist()) for x in data.X_val}  # no validation user (the protected ones) in the proxy
