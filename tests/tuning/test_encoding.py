r"""The public unit-cube encoding of a mixed space (``tuning.encoding``): uniform over each
categorical, decoding is the inverse of encoding, the encoded objective equals row-by-row
evaluation and hands the objective natural-unit configurations; the benchmark uses it."""

import pytest
import torch

from botorch_dp.tuning import Categorical, Hyperparameter, Integer, SearchSpace
from botorch_dp.tuning.encoding import EncodedObjective, MixedEncoding

SPACE = SearchSpace(
    [
        Categorical("opt", ("sgd", "adam", "rmsprop")),
        Integer("w", 2, 6),
        Hyperparameter("lr", 1e-3, 1e-1, log_scale=True),
        Categorical("act", ("relu", "tanh")),
    ]
)


def test_uniform_points_are_uniform_over_each_categorical_and_decoding_inverts_encoding():
    enc = MixedEncoding(SPACE)
    assert enc.dim == 4 and enc.sizes == [3, 2] and enc.bounds.tolist() == [[0.0] * 4, [1.0] * 4]
    U = torch.rand(30000, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    idx = enc.indices(U)
    for j, m in enumerate(enc.sizes):  # each share within 4 binomial standard deviations of 1/m
        freq = torch.bincount(idx[:, j], minlength=m).double() / U.shape[0]
        assert torch.all((freq - 1 / m).abs() < 4 * (1 / m * (1 - 1 / m) / U.shape[0]) ** 0.5)
    assert enc.indices(torch.tensor([[0.5, 0.5, 1.0, 1.0]], dtype=torch.float64)).tolist() == [[2, 1]]  # u = 1
    theta = torch.tensor([0.3, 0.8], dtype=torch.float64)
    for choice in SPACE.configurations():
        x = enc.encode(theta, choice)
        assert enc.configuration(x) == choice and torch.equal(x[:2], theta)
        assert enc.to_natural(x) == SPACE.to_natural(theta, choice=choice)
    with pytest.raises(ValueError, match=r"opt: unknown choice 'lbfgs'"):
        enc.encode(theta, {"opt": "lbfgs", "act": "relu"})


def test_a_fixed_categorical_gets_no_coordinate():
    enc = MixedEncoding(SPACE.with_choice({"act": "tanh"}))
    assert enc.dim == 3 and enc.sizes == [3]
    assert enc.to_natural(torch.tensor([0.0, 1.0, 0.1], dtype=torch.float64)) == {
        "opt": "sgd",
        "w": 2,
        "lr": pytest.approx(1e-1),
        "act": "tanh",
    }


def test_the_encoded_objective_is_row_by_row_evaluation_in_natural_units():
    calls = []

    def objective(configs):
        calls.append(configs)
        for c in configs:  # natural units only
            assert type(c["w"]) is int and 2 <= c["w"] <= 6 and c["opt"] in ("sgd", "adam", "rmsprop")
        return torch.stack(
            [torch.arange(5, dtype=torch.float64) * c["w"] + c["lr"] + len(c["opt"] + c["act"]) for c in configs]
        )

    enc = MixedEncoding(SPACE)
    X = torch.rand(40, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    out = EncodedObjective(objective, enc)(X)
    configurations = {tuple(row) for row in enc.indices(X).tolist()}
    assert len(calls) == len(configurations)  # one call per configuration present, its rows together
    rowwise = torch.cat([objective([enc.to_natural(x)]) for x in X])
    assert torch.equal(out, rowwise)


def test_the_benchmark_encoding_is_the_package_one():
    from benchmarks import mixed_task

    assert issubclass(mixed_task.MixedEncoding, MixedEncoding)
    assert issubclass(mixed_task.EncodedObjective, EncodedObjective)
