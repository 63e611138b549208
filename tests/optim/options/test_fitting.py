r"""The loud opt-out (botorch_dp/optim/options/fitting.py): ``NoFitting`` leaves the users and the GP
untouched and charges nothing; ``SensitiveFitting`` records its look at the losses as ``μ = inf``
under ``"fit"`` before reading them (so a ledger with a finite budget refuses the step), fits the
kernel on the mean losses and standardizes them as asked (closed form), and refuses partitioned
users and a call outside a charge."""

import math

import pytest
import torch
from gpytorch.kernels import RBFKernel

from botorch_dp.distributed import InProcessPartitions
from botorch_dp.distributed.synthetic import synthetic_partitions
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.optim.options import NoFitting, SensitiveFitting
from botorch_dp.optim.users import InMemoryUsers, PartitionedUsers
from botorch_dp.privacy.ledger import PrivacyBudgetExceeded, PrivacyLedger

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
