r"""The kernel of a checkpoint (botorch_dp/optim/checkpoint/kernels.py): every allow-listed kernel is
rebuilt from its spec and exact tensors, without unpickling, to the same fingerprint and the same
covariance bit for bit; the fingerprint sees a one-ulp change of a hyperparameter and not the dtype
of a float32 copy; kernels outside the allow-list and damaged specs are refused. (Resuming a run
with each kernel the library builds: test_checkpoint_files.py.)"""

import copy
import json

import pytest
import torch
from gpytorch.kernels import (
    LinearKernel,
    MaternKernel,
    PeriodicKernel,
    PolynomialKernel,
    RBFKernel,
    RQKernel,
    ScaleKernel,
)

from botorch_dp.optim.checkpoint.kernels import build_kernel, kernel_fingerprint, kernel_spec, kernel_tensors

F64 = torch.float64


def _set(kernel):
    g = torch.Generator().manual_seed(0)
    kernel = kernel.to(F64)
    with torch.no_grad():
        for p in kernel.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=F64))
    return kernel


KERNELS = {
    "rbf_ard": lambda: RBFKernel(ard_num_dims=3),
    "matern": lambda: MaternKernel(nu=1.5),
    "poly": lambda: PolynomialKernel(power=3),
    "rq": lambda: RQKernel(),
    "linear": lambda: LinearKernel(),
    "scale_matern_ard": lambda: ScaleKernel(MaternKernel(nu=2.5, ard_num_dims=3)),
}


def _rebuilt(kernel):
    spec = json.loads(json.dumps(kernel_spec(kernel)))
    rebuilt = build_kernel(spec)
    rebuilt.load_state_dict({**rebuilt.state_dict(), **kernel_tensors(kernel)})
    return rebuilt


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_a_kernel_is_rebuilt_to_the_same_fingerprint_and_covariance(name):
    kernel = _set(KERNELS[name]())
    rebuilt = _rebuilt(kernel)
    assert type(rebuilt) is type(kernel) and kernel_fingerprint(rebuilt) == kernel_fingerprint(kernel)
    X = torch.rand(5, 3, generator=torch.Generator().manual_seed(1), dtype=F64)
    with torch.no_grad():
        assert torch.equal(rebuilt(X).to_dense(), kernel(X).to_dense())


def test_the_fingerprint_sees_one_ulp_and_not_a_float32_copys_dtype():
    kernel = _set(RBFKernel(ard_num_dims=2))
    moved = _rebuilt(kernel)
    with torch.no_grad():
        raw = moved.raw_lengthscale
        raw.copy_(torch.nextafter(raw, torch.full_like(raw, torch.inf)))
    assert kernel_fingerprint(moved) != kernel_fingerprint(kernel)
    small = RBFKernel().to(torch.float32)
    spec, fingerprint = kernel_spec(small), kernel_fingerprint(small)
    assert spec["dtype"] == "float32" and kernel_fingerprint(copy.deepcopy(small).to(F64)) == fingerprint


def test_kernels_outside_the_allow_list_and_damaged_specs_are_refused():
    with pytest.raises(ValueError, match="kernel: PeriodicKernel cannot be stored in a checkpoint; allowed are"):
        kernel_spec(PeriodicKernel().to(F64))
    with pytest.raises(ValueError, match="class not in the allow-list"):
        build_kernel({**kernel_spec(RBFKernel().to(F64)), "class": "PeriodicKernel"})
    with pytest.raises(ValueError, match=r"'kernel.spec.dtype': 'float16' is not one of"):
        build_kernel({**kernel_spec(RBFKernel().to(F64)), "dtype": "float16"})
    with pytest.raises(ValueError, match="'kernel.spec': expected an object"):
        build_kernel("RBFKernel")
