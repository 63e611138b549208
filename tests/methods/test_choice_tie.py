r"""``methods.choice``'s tie rule: when the lowest mean proxy loss is within one paired standard error
of another method's, the cheaper method (fewer objective evaluations per simulated run, counted on
the proxy calls) is recommended and the comparison, ``TuneResult``'s repr and its guarantee report
say so. Stub methods with fixed losses and costs make the s.e. a closed form."""

import math

import torch

from botorch_dp.methods.choice import MethodScore, compare_in_context, recommend
from botorch_dp.methods.protocol import MethodContext
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.statement import guarantee_statement
from botorch_dp.tuning.tune_result import TuneGuarantee, TuneResult
from tests.plan.plan_helpers import plan_config

SEEDS = (0, 1, 2)


class StubMethod:
    r"""Asks the proxy for ``cost`` rows per simulated run and releases θ = its loss for that seed."""

    def __init__(self, name, losses, cost):
        self.name, self.losses, self.cost = name, losses, cost

    def resolved(self, proxy_objective, context):
        return self

    def simulate(self, proxy_objective, context, seed):
        proxy_objective(torch.zeros(self.cost, 1, dtype=torch.float64))
        return torch.tensor([self.losses[seed]], dtype=torch.float64)

    def describe(self):
        return f"stub {self.name}"


def _proxy(X):  # q x 1 points to q x 4 users whose loss is the point itself
    return X.reshape(-1, 1).expand(-1, 4)


def _compare(*methods):
    context = MethodContext(
        bounds=torch.tensor([[0.0], [1.0]], dtype=torch.float64),
        num_users=1000,
        num_proxy_users=4,
        epsilon=1.0,
        delta=1e-5,
        config=plan_config(),
        evaluations=10.0,
    )
    return compare_in_context(_proxy, context, methods, seeds=SEEDS, progress=False)


def _paired_se(a, b):  # brute force: the standard error of the paired differences b - a
    d = [y - x for x, y in zip(a, b, strict=True)]
    m = sum(d) / len(d)
    return m, math.sqrt(sum((x - m) ** 2 for x in d) / (len(d) - 1) / len(d))


EXPENSIVE = (0.10, 0.20, 0.30)
CLOSE = (0.12, 0.18, 0.33)  # diffs +0.02, -0.02, +0.03: mean 0.01 < s.e. 0.0153
FAR = (0.20, 0.30, 0.40)  # diffs 0.1 each: s.e. 0, no tie


def test_a_tie_goes_to_the_cheaper_method_and_is_said():
    mean, se = _paired_se(EXPENSIVE, CLOSE)
    assert 0 < mean <= se  # the premise: a tie within one s.e.
    comparison = _compare(StubMethod("slow", EXPENSIVE, 10), StubMethod("cheap", CLOSE, 2))
    assert [s.evaluations for s in comparison.scores] == [10.0, 2.0]  # the cost counted on the proxy calls
    assert comparison.scores[0].mean_proxy_loss < comparison.scores[1].mean_proxy_loss
    assert comparison.recommended_name == "cheap"
    assert comparison.note is not None and comparison.note.startswith("tie (within one s.e.): chose the cheaper cheap")
    assert comparison.note in str(comparison)


def test_no_tie_keeps_the_lowest_mean_and_a_costlier_tied_method_does_not_win():
    far = _compare(StubMethod("slow", EXPENSIVE, 10), StubMethod("cheap", FAR, 2))
    assert far.recommended_name == "slow" and far.note is None and "tie" not in str(far)
    costlier = _compare(StubMethod("best", EXPENSIVE, 2), StubMethod("close", CLOSE, 10))
    assert costlier.recommended_name == "best" and costlier.note is None


def test_one_repeat_has_no_standard_error_and_no_tie():
    scores = [
        MethodScore("a", object(), (0.1,), evaluations=10.0),
        MethodScore("b", object(), (0.1001,), evaluations=1),
    ]
    assert recommend(scores) == (0, None)


def test_the_result_shows_the_method_table_and_the_tie():
    comparison = _compare(StubMethod("slow", EXPENSIVE, 10), StubMethod("cheap", CLOSE, 2))
    ledger = PrivacyLedger()
    result = TuneResult(
        hyperparameters={"lr": 0.1},
        guarantee=TuneGuarantee(1.0, 3.0, 1e-5),
        runs=[],
        chosen=0,
        statement=guarantee_statement(ledger, 1e-5),
        ledger=ledger,
        method="cheap",
        methods=comparison,
    )
    for text in (repr(result), result.guarantee_report()):
        assert "tie (within one s.e.): chose the cheaper cheap" in text
        lines = text.splitlines()
        chosen = [line for line in lines if line.startswith("*")]
        assert len(chosen) == 1 and "cheap" in chosen[0] and "0.21" in chosen[0]  # mean 0.21
        assert any("slow" in line and "0.2 " in line for line in lines)  # mean 0.2 shown
        assert "* wins" in text and "evals" in text
