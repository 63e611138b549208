r"""Selection rules (botorch_dp/optim/options/selection.py): the free rules return the last iterate or the
first smallest released norm (brute force); the evaluated rules charge their closed form
(``2Φ⁻¹(e^ε/(1 + e^ε))`` for the exponential mechanism, ``μ_sel`` for noisy losses), record it as
``"select"`` when they choose, and with negligible noise choose the smallest mean loss; each rule is
rebuilt from its ``spec()`` and bad settings are refused naming the field. The old keywords
(``legacy_options``) give the rule with exactly the parameters it uses, checked with the other
options; the budget split is exact; the evaluated rules' ledger records (pure ε converted to μ,
charged again on a second release, refused before the draw) follow the loop's charge."""

import json
import math
from typing import Any

import pytest
import torch
from scipy.special import ndtri

from botorch_dp.optim.legacy_options import strategies_from_flat
from botorch_dp.optim.options import (
    BudgetSplit,
    EvaluatedSelection,
    Exponential,
    Last,
    MinNoisyNorm,
    NoisyLoss,
    Options,
    ResumeContext,
    RunRecords,
    from_spec,
    lookup,
    register,
)
from botorch_dp.optim.options.selection import (
    SELECTION_KEY,
    SelectionRecord,
    min_noisy_norm_index,
    restore_selection_state,
    selection_state_json,
)
from botorch_dp.privacy.analysis.gdp import compose_gdp, pure_dp_to_gdp_mu
from botorch_dp.privacy.ledger import PrivacyBudgetExceeded, PrivacyLedger, PureDP
from botorch_dp.privacy.mechanisms import ExponentialLossSelection, NoisyLossSelection
from tests.optim.options.plugin import UserStrategy, assert_not_checkpointed, run_and_resume, run_once
from tests.optim.options.strategy_config import config_with
from tests.test_option_pins import _settings


@pytest.mark.parametrize("rule", [Last(), MinNoisyNorm(), Exponential(0.7, 2.0), NoisyLoss(0.4, 3.0)])
def test_a_rule_is_rebuilt_from_its_spec(rule):
    assert from_spec("selection", json.loads(json.dumps(rule.spec()))) == rule


def test_the_free_rules_pick_the_last_iterate_or_the_first_smallest_norm():
    norms = (0.5, 0.2, 0.9, 0.2)
    assert Last().index(5, norms) == 4 and Last().charge == 0.0 and not Last().evaluated
    first_min = min(range(len(norms)), key=lambda i: (norms[i], i))
    assert MinNoisyNorm().index(5, norms) == first_min == 1
    assert MinNoisyNorm().index(5, ()) == 4
    assert MinNoisyNorm().requires == {"noisy_norms"}


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 4.0])
def test_the_evaluated_rules_charge_their_closed_form(epsilon):
    expected = 2.0 * ndtri(math.exp(epsilon) / (1.0 + math.exp(epsilon)))
    assert Exponential(epsilon).charge == pytest.approx(expected, rel=1e-12)
    assert Exponential(epsilon).event() == PureDP(epsilon)
    assert NoisyLoss(epsilon).charge == epsilon and NoisyLoss(epsilon).event().mu == epsilon


@pytest.mark.parametrize("rule", [Exponential(200.0, 1.0), NoisyLoss(1e6, 1.0)])
def test_with_negligible_noise_the_smallest_mean_loss_is_chosen_and_recorded(rule):
    n = 100
    sums = torch.tensor([60.0, 20.0, 45.0, 90.0], dtype=torch.float64)  # clamped loss sums over n users
    ledger = PrivacyLedger()
    with ledger.charge({"select": rule.event()}, run_id="run") as meter:
        chosen = rule.release(sums, n, meter, torch.Generator().manual_seed(0))
    assert chosen.index == 1
    assert list(ledger.validation.steps()) == [("run", "select")]
    assert ledger.validation.mu() == pytest.approx(rule.charge, rel=1e-12)


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: Exponential(epsilon=0.0), "selection_epsilon"),
        (lambda: Exponential(epsilon=math.inf), "selection_epsilon"),
        (lambda: Exponential(loss_clip=-1.0), "loss_clip"),
        (lambda: NoisyLoss(mu=0.0), "selection_mu"),
        (lambda: NoisyLoss(loss_clip=math.inf), "loss_clip"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(make, named):
    with pytest.raises(ValueError, match=named):
        make()


# ------------------------------------------------ the old keywords, the budget split, the ledger records
RUN = "0" * 32


def _check(selection="last", schedule="fixed", mu=1.0, **kw):
    r"""The selection the old keywords give (``legacy_options``), checked with the noise schedule
    against ``mu`` (``Options.check``), as ``DPGIBOConfig`` does."""
    given = dict(selection_epsilon=None, selection_mu=None, loss_clip=None)
    given.update(kw)
    rule = strategies_from_flat(given, {"selection": selection})["selection"]
    Options(noise=lookup("noise", schedule)(), selection=rule).check(mu, 2, 3)
    return rule


def test_valid_old_keywords_give_the_rule_with_float_parameters():
    assert _check() == Last()
    assert _check("min_noisy_norm", "adaptive_norm") == MinNoisyNorm()
    rule = _check("exponential", selection_epsilon=0.5, loss_clip=2)
    assert rule == Exponential(0.5, 2.0) and type(rule.loss_clip) is float
    assert _check("noisy_loss", "adaptive_norm", selection_mu=0.3, loss_clip=1.0) == NoisyLoss(0.3, 1.0)


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        (("best",), {}, "selection must be one of"),
        (("min_noisy_norm", "fixed"), {}, "only noise_schedule='adaptive_norm' releases"),
        (("exponential",), {"loss_clip": 1.0}, "needs selection_epsilon"),
        (("exponential",), {"selection_epsilon": 1.0}, "needs loss_clip"),
        (("noisy_loss",), {"loss_clip": 1.0}, "needs selection_mu"),
        (("last",), {"loss_clip": 1.0}, r"loss_clip is only used by selection in \('exponential', 'noisy_loss'\)"),
        (
            ("exponential",),
            {"selection_epsilon": 1.0, "selection_mu": 0.1, "loss_clip": 1.0},
            r"selection_mu is only used by selection in \('noisy_loss',\)",
        ),
        (
            ("noisy_loss",),
            {"selection_epsilon": 1.0, "selection_mu": 0.1, "loss_clip": 1.0},
            "selection_epsilon is only",
        ),
        (("exponential",), {"selection_epsilon": -1.0, "loss_clip": 1.0}, "selection_epsilon must be positive"),
        (("noisy_loss",), {"selection_mu": 0.1, "loss_clip": math.inf}, "loss_clip must be positive and finite"),
        (("noisy_loss",), {"selection_mu": 1.0, "loss_clip": 1.0}, "must be below privacy_mu"),
        (("exponential",), {"selection_epsilon": 0.9, "loss_clip": 1.0}, "must be below privacy_mu"),  # μ_sel = 1.11
        (("noisy_loss", "fixed", math.inf), {"selection_mu": 0.1, "loss_clip": 1.0}, "finite privacy_mu"),
    ],
)
def test_inconsistent_choices_are_refused_naming_the_argument(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        _check(*args, **kwargs)


def test_budget_split_is_explicit_and_exact():
    assert Last().charge == 0.0 and MinNoisyNorm().charge == 0.0
    assert Exponential(0.5).charge == pure_dp_to_gdp_mu(0.5)
    assert NoisyLoss(0.4).charge == 0.4
    assert BudgetSplit(1.0).steps_mu == 1.0 and BudgetSplit(math.inf).steps_mu == math.inf  # no selection: same bits
    assert BudgetSplit(1.0, 0.6).steps_mu == pytest.approx(0.8, rel=1e-15)
    assert compose_gdp([BudgetSplit(2.0, 0.7).steps_mu, 0.7]) == pytest.approx(2.0, rel=1e-15)


def test_min_noisy_norm_index_is_the_first_argmin():
    assert min_noisy_norm_index([0.3, -0.2, 5.0, -0.2]) == 1
    assert min_noisy_norm_index([1e300]) == 0
    with pytest.raises(ValueError, match="No noisy norms"):
        min_noisy_norm_index([])


def _release(rule, losses, ledger, run_id, generator):
    r"""An evaluated rule's choice from ``q x n`` losses, charged and recorded as the loop does."""
    sums = losses.clamp(min=0.0, max=rule.loss_clip).sum(-1)
    with ledger.charge({SELECTION_KEY: rule.event()}, run_id=run_id) as meter:
        return rule.release(sums, losses.shape[-1], meter, generator)


def test_selection_mechanisms_and_ledger_records():
    losses = torch.tensor([[0.1, 0.2, 0.3], [0.9, 0.8, 0.7]], dtype=torch.float64)
    gen = torch.Generator().manual_seed(0)
    assert isinstance(Exponential(0.5, 1.0).mechanism(gen), ExponentialLossSelection)
    assert isinstance(NoisyLoss(0.3, 1.0).mechanism(gen), NoisyLossSelection)
    for free in (Last(), MinNoisyNorm()):  # a free rule has no mechanism
        assert not isinstance(free, EvaluatedSelection) and not hasattr(free, "mechanism")

    ledger = PrivacyLedger(validation_mu_budget=1.0)
    _release(Exponential(0.5, 1.0), losses, ledger, RUN, gen)
    assert [(r.run_id, r.key, r.event) for r in ledger.validation.records()] == [(RUN, SELECTION_KEY, PureDP(0.5))]
    assert ledger.validation.mu() == pytest.approx(pure_dp_to_gdp_mu(0.5))
    report = ledger.report(1e-5)["validation"]["pure_releases"]
    assert report == [{"run_id": RUN, "key": SELECTION_KEY, "epsilon": 0.5, "mu": pure_dp_to_gdp_mu(0.5)}]
    _release(Exponential(0.5, 1.0), losses, ledger, RUN, gen)  # a second release: charged again
    assert len(ledger.validation.records(RUN)) == 2
    assert ledger.validation.mu() == pytest.approx(math.sqrt(2) * pure_dp_to_gdp_mu(0.5))

    other = PrivacyLedger(validation_mu_budget=0.3)
    _release(NoisyLoss(0.3, 1.0), losses, other, RUN, gen)
    assert other.validation.steps() == {(RUN, SELECTION_KEY): pytest.approx(0.3, rel=1e-15)}
    state = gen.get_state()
    with pytest.raises(PrivacyBudgetExceeded, match="Nothing was released"):  # refused before its draw
        _release(NoisyLoss(0.3, 1.0), losses, other, "1" * 32, gen)
    assert torch.equal(gen.get_state(), state) and len(other.validation.records()) == 1


def test_a_missing_run_id_is_refused_by_name_before_any_draw():
    losses = torch.tensor([[0.1, 0.2, 0.3], [0.9, 0.8, 0.7]], dtype=torch.float64)
    gen = torch.Generator().manual_seed(0)
    state = gen.get_state()
    ledger = PrivacyLedger(validation_mu_budget=1.0)
    with pytest.raises(ValueError, match=r"run_id .*None"):
        _release(Exponential(0.5, 1.0), losses, ledger, None, gen)
    assert torch.equal(gen.get_state(), state) and ledger.validation.records() == []


# ----------------------------------------------------------------- a user's selection plugs in (issue 42)
@register("selection", "test_user_exponential")
class UserExponential(UserStrategy):
    r"""A user's evaluated rule (no class of the package): the exponential mechanism of
    ``privacy.mechanisms`` on the iterates' clamped losses, charged pure ``ε``."""

    evaluated = True
    needs_finite_mu = "spends budget"

    def __init__(self, epsilon: float, loss_clip: float) -> None:
        self.epsilon, self.loss_clip = float(epsilon), float(loss_clip)

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "loss_clip": self.loss_clip}

    @property
    def charge(self) -> float:
        return pure_dp_to_gdp_mu(self.epsilon)

    def index(self, num_iterates: int, noisy_norms: tuple[float, ...]) -> int:
        return num_iterates - 1

    def record(
        self, num_iterates: int, noisy_norms: tuple[float, ...], chosen: int | None, scores: torch.Tensor | None
    ) -> SelectionRecord:
        return SelectionRecord(chosen, scores)

    def event(self) -> PureDP:
        return PureDP(self.epsilon)

    def release(self, sums: torch.Tensor, num_users: int, meter: Any, generator: torch.Generator | None) -> Any:
        mechanism = ExponentialLossSelection(epsilon=self.epsilon, loss_clip=self.loss_clip, generator=generator)
        return mechanism.release_sums(sums, num_users, meter=meter, part=SELECTION_KEY)

    # its choice kept in the run's state with the selection module's helpers (KeepsRunState; no scores)
    def state_json(self, records: RunRecords) -> dict[str, Any]:
        return selection_state_json(records)

    def restore_state(self, payload: dict[str, Any], records: RunRecords, context: ResumeContext) -> RunRecords:
        return restore_selection_state(payload, records, context, scores=False)


@pytest.mark.parametrize("stop_after", [1, 2])  # 2: all steps done, only the selection left
def test_a_users_evaluated_selection_runs_resumes_and_releases_what_the_packages_does(tmp_path, stop_after):
    rule: EvaluatedSelection = UserExponential(0.5, 2.0)  # mypy checks the protocol's signatures here
    assert type(rule).__mro__ == (UserExponential, UserStrategy, object)
    config = config_with(_settings({"num_iterations": 2}), selection=rule)
    whole, resumed, opt = run_and_resume(config, tmp_path, stop_after=stop_after)
    assert resumed == whole and type(opt.config.selection) is UserExponential  # rebuilt from its spec
    assert whole["selected_index"] is not None and whole["ledger"][-1][:2] == ["select", "PureDP"]
    # the same mechanism, seed and charge as the package's own rule: the same bits
    _, package = run_once(config_with(_settings({"num_iterations": 2}), selection=Exponential(0.5, 2.0)))
    assert whole == package


def test_a_users_evaluated_selection_without_the_state_pair_is_refused_a_checkpoint(tmp_path, monkeypatch):
    r"""Issue 42 item 3: without ``restore_state`` its choice could not be restored (a resumed run would
    select again): the run is refused a checkpoint before anything is written (``stateless`` it is not)."""
    monkeypatch.delattr(UserExponential, "restore_state")
    config = config_with(_settings({"num_iterations": 2}), selection=UserExponential(0.5, 2.0))
    message = r"UserExponential \(selection\) cannot be checkpointed: it lacks restore_state \(KeepsRunState\)"
    assert_not_checkpointed(config, tmp_path, message)
