r"""Device and dtype plumbing of the loop (issue 33, item 3), on a machine without a GPU.

``tests.helpers.DeviceAudit`` gives every tensor ``botorch_dp`` creates without a ``device`` the
foreign device ``meta``, as a GPU run gives it the CPU while the data is on ``cuda``: a run whose
tensors all follow the data finishes with none of its library calls off the data's device. It also
lists the library's explicit host transfers, which must be the ones named here with their reason.
The GP linear algebra runs in float64 whatever the dtype of the bounds, ``θ₀`` and losses.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.optim.subspace import FixedSubspace, PosteriorGradientCovarianceSubspace
from botorch_dp.utils import check_bounds, plain_json
from tests.helpers import DeviceAudit

from .loop_helpers import nl_config, normal_location

#: The explicit host transfers a step may make, each public or a scalar: JSON of public values.
ALLOWED_HOST_MOVES = frozenset(
    {
        "utils.py plain_json",  # public values written as JSON lists
        "privacy/mechanisms/_clipping.py _column_norms",  # numpy's correctly rounded sqrt, only for data on the CPU
        "privacy/mechanisms/scores.py gumbel_max_index",  # q log-probabilities meet the CPU's OS-entropy Gumbels
        "privacy/mechanisms/_noise.py draw_gumbel",  # a seeded generator's q uniforms join them there
    }
)

CONFIGS = {
    "fixed": dict(),
    "reference_search": dict(acqf_speed="reference", acqf_maxiter=5),  # autograd under the audit is slow
    "adaptive": dict(
        clip_bound="adaptive",
        step_rule="adagrad_full",
        batch_search="greedy",
        bias_tolerance=1e-3,
        max_batch_size=3,
        batch_size=None,
    ),
    "adaptive_noise": dict(noise_schedule="adaptive_norm", bias_tolerance=1e-3, max_batch_size=3, batch_size=None),
    "exponential_selection": dict(selection="exponential", selection_epsilon=0.5, loss_clip=10.0),
    "noisy_loss_selection": dict(selection="noisy_loss", selection_mu=0.5, loss_clip=10.0, step_rule="adagrad"),
    "posterior_subspace": dict(subspace=PosteriorGradientCovarianceSubspace(2), subspace_acquisition=True),
    "fixed_subspace": dict(subspace=FixedSubspace(torch.eye(3, dtype=torch.float64)[:, :2]), step_rule="adagrad_full"),
}


def _short_run(
    audit: DeviceAudit | None = None, dtype: torch.dtype = torch.float64, loss_dtype: torch.dtype = torch.float64, **kw
):
    r"""Two private steps with ``dtype`` bounds and ``θ₀`` and losses rounded to ``loss_dtype`` and given
    as ``dtype``."""
    _, objective = normal_location(n=20, d=3)
    cfg = nl_config(d=3, num_iterations=2, privacy_mu=1.0, seed=0, **kw)
    if dtype != torch.float64:
        cfg = nl_config(
            d=3,
            num_iterations=2,
            privacy_mu=1.0,
            seed=0,
            bounds=cfg.bounds.to(dtype),
            theta0=cfg.theta0.to(dtype),
            **kw,
        )
    with audit if audit is not None else contextlib.nullcontext():
        opt = DPGIBO(cfg)
        result = opt.run(lambda X: objective(X.to(torch.float64)).to(loss_dtype).to(dtype), progress=False)
    return opt, result


def _where(calls: list[str]) -> set[str]:
    return {f"{c.split(':')[0]} {c.split(' ')[-1]}" for c in calls}


def test_the_audit_sees_a_tensor_made_off_the_data_device_and_a_host_move():
    audit = DeviceAudit()
    with audit:
        plain_json(torch.zeros(2))  # .cpu() of a public tensor
        with pytest.raises(RuntimeError, match="meta"):  # a box given as Python lists lands on the foreign device
            check_bounds([[0.0], [1.0]])  # (its check needs values that meta tensors do not have)
    assert _where(audit.host_moves) == {"utils.py plain_json"}
    assert _where(audit.off_device) == {"utils.py check_bounds"}


@pytest.mark.parametrize("name", CONFIGS)
def test_a_run_creates_every_tensor_on_the_data_device(name):
    audit = DeviceAudit()
    opt, result = _short_run(audit, **CONFIGS[name])
    assert audit.off_device == []
    assert audit.not_float64 == []  # nothing drops to float32 on the way
    assert _where(audit.host_moves) <= ALLOWED_HOST_MOVES, sorted(set(audit.host_moves))
    assert result.release.theta.device == opt.bounds.device == torch.device("cpu")
    assert opt.iteration == 2


def test_float32_data_runs_its_gp_linear_algebra_in_float64():
    audit = DeviceAudit()
    opt32, result32 = _short_run(audit, dtype=torch.float32)
    assert audit.linalg_dtypes, "the run made no linear algebra call"
    assert {d for dtypes in audit.linalg_dtypes.values() for d in dtypes} == {torch.float64}, audit.linalg_dtypes
    assert opt32.theta.dtype == opt32.evaluation_points.dtype == result32.release.theta.dtype == torch.float64
    # the float32 inputs are only read as given (the told losses checked for shape and finiteness), then converted
    assert _where(audit.not_float64) == {"privacy/checks.py check_told_batch", "privacy/checks.py all_finite"}
    # the float32 bounds and θ₀ are exact in float64: the run is the float64 run on float32-rounded losses
    _, result64 = _short_run(dtype=torch.float64, loss_dtype=torch.float32)
    assert torch.equal(result32.release.evaluation_points, result64.release.evaluation_points)
    assert torch.equal(result32.release.iterates, result64.release.iterates)
    _, unrounded = _short_run(dtype=torch.float64)  # the comparison sees the losses' rounding
    assert not torch.equal(result32.release.iterates, unrounded.release.iterates)
