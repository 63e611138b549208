r"""The loud opt-out (botorch_dp/optim/options/fitting.py): ``NoFitting`` leaves the users and the GP
untouched and charges nothing; ``SensitiveFitting`` records its look at the losses as ``μ = inf``
under ``"fit"`` before reading them (so a ledger with a finite budget refuses the step), fits the
kernel on the mean losses and standardizes them as asked (closed form), and refuses partitioned
users and a call outside a charge."""

import math
from typing import Any

import pytest
import torch
from botorch.models import SingleTaskGP
from botorch.models.transforms.outcome import Standardize
from gpytorch.kernels import RBFKernel

from botorch_dp.distributed import InProcessPartitions
from botorch_dp.distributed.synthetic import synthetic_partitions
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.optim.options import Fitting, NoFitting, SensitiveFitting, register
from botorch_dp.optim.users import InMemoryUsers, PartitionedUsers
from botorch_dp.privacy.ledger import Gaussian, PrivacyBudgetExceeded, PrivacyLedger
from tests.optim.options.plugin import UserStrategy, run_and_resume, run_once
from tests.optim.options.strategy_config import config_with
from tests.test_option_pins import D, _settings

F64 = torch.float64


def _setting():
    g = torch.Generator().manual_seed(2)
    X = torch.rand(5, 2, generator=g, dtype=F64)
    losses = 3.0 + 2.0 * torch.randn(5, 30, generator=g, dtype=F64)
    return X, InMemoryUsers((losses,)), RBFKernel().to(F64)


def test_no_fitting_changes_nothing_and_charges_nothing():
    X, users, kernel = _setting()
    gp = GradientGP(X, kernel, 1e-6)
    assert NoFitting().prepare(users, X, kernel, gp, 1e-6, 1e-8) == (users, gp)
    assert NoFitting().bound_parts() == {} and NoFitting().holds and not SensitiveFitting().holds


def test_a_sensitive_fit_is_recorded_as_no_guarantee_before_it_reads_the_losses():
    X, users, kernel = _setting()
    seen, ledger = [], PrivacyLedger()
    fitting = SensitiveFitting(
        fit=lambda k, x, y: seen.append((x, y, dict(ledger.validation.steps()))), standardize=True
    )
    with ledger.charge(fitting.bound_parts(), run_id="run", step=0) as meter:
        prepared, gp = fitting.prepare(users, X, kernel, None, 1e-6, 1e-8, meter=meter)
    assert ledger.validation.steps() == {("run", "step-0000/fit"): math.inf} and math.isinf(ledger.validation.mu())
    Y = users.losses()
    torch.testing.assert_close(seen[0][1], Y.mean(-1), rtol=0, atol=0)
    assert seen[0][2] == {("run", "step-0000/fit"): math.inf}  # recorded before the fit read the losses
    torch.testing.assert_close(prepared.losses(), (Y - Y.mean()) / Y.std(), rtol=1e-14, atol=1e-14)
    assert isinstance(gp, GradientGP) and torch.equal(gp.train_X, X)
    with pytest.raises(PrivacyBudgetExceeded):
        with PrivacyLedger(validation_mu_budget=10.0).charge(fitting.bound_parts(), run_id="run", step=0):
            pass


def test_a_sensitive_fit_refuses_partitions_and_a_call_outside_a_charge():
    X, users, kernel = _setting()
    partitioned = PartitionedUsers(InProcessPartitions(synthetic_partitions([3, 4], 2, seed=0)))
    with pytest.raises(ValueError, match="^partitions: partitioned users do not support hyperparameter_fit"):
        SensitiveFitting(standardize=True).prepare(partitioned, X, kernel, None, 1e-6, 1e-8, meter=None)
    with pytest.raises(ValueError, match=r"only inside a step's charge \(meter=...\)"):
        SensitiveFitting(standardize=True).prepare(users, X, kernel, None, 1e-6, 1e-8)
    assert SensitiveFitting(standardize=True).spec() == {"kind": "sensitive", "fit": None, "standardize": True}


# ----------------------------------------------------------------- a user's fitting plugs in (issue 42)
@register("fitting", "test_user_none")
class UserNoFitting(UserStrategy):
    r"""A user's fitting (no class of the package) that leaves the users and the GP as they are, and
    says whether the run's guarantee ``holds``."""

    holds: bool

    def __init__(self, holds: bool = True) -> None:
        self.holds = holds

    def params(self) -> dict[str, Any]:
        return {"holds": self.holds}

    def bound_parts(self) -> dict[str, Gaussian]:
        return {}

    def prepare(self, users, X, kernel, gp, noise_variance, jitter, meter=None):  # noqa: ANN001, ANN201
        return users, gp


def test_a_users_fitting_is_kept_runs_and_resumes_bit_identically(tmp_path):
    fitting: Fitting = UserNoFitting()  # mypy checks the protocol's signatures here
    assert type(fitting).__mro__ == (UserNoFitting, UserStrategy, object)
    config = config_with(_settings({"num_iterations": 3}), fitting=fitting)
    assert config.fitting is fitting  # kept, not swapped for the package's NoFitting
    whole, resumed, opt = run_and_resume(config, tmp_path, stop_after=1)
    assert resumed == whole and type(opt.config.fitting) is UserNoFitting  # rebuilt from its spec
    _, package = run_once(config_with(_settings({"num_iterations": 3}), fitting=NoFitting()))
    assert whole == package  # it changes nothing, as NoFitting does


def test_a_users_fitting_that_breaks_the_guarantee_needs_the_opt_out_and_a_model_that_does_not_standardize():
    settings = _settings({"num_iterations": 3})
    with pytest.raises(ValueError, match=r"fitting='test_user_none' does not keep the privacy guarantee"):
        config_with(settings, fitting=UserNoFitting(holds=False))
    unsafe = config_with({**settings, "unsafe_allow_sensitive_fitting": True}, fitting=UserNoFitting(holds=False))
    assert unsafe.fitting == UserNoFitting(holds=False)
    model = SingleTaskGP(torch.zeros(1, D, dtype=F64), torch.zeros(1, 1, dtype=F64), outcome_transform=Standardize(m=1))
    model.covar_module = settings["kernel"]
    with_model = {k: v for k, v in settings.items() if k != "kernel"} | {"model": model}
    with pytest.raises(ValueError, match=r"fitting='test_user_none' does not standardize the losses"):
        config_with({**with_model, "unsafe_allow_sensitive_fitting": True}, fitting=UserNoFitting())
