r"""The kernel of a checkpoint: an allow-list of GPyTorch kernels described by their settings and
exact tensors, rebuilt without unpickling, and fingerprinted."""

from __future__ import annotations

from typing import Any

import torch
from gpytorch.kernels import Kernel, LinearKernel, MaternKernel, PolynomialKernel, RBFKernel, RQKernel, ScaleKernel
from torch import Tensor

from botorch_dp.optim.checkpoint.encoding import float_from_json, json_fingerprint

_KERNELS: dict[str, type[Kernel]] = {
    k.__name__: k for k in (RBFKernel, MaternKernel, PolynomialKernel, RQKernel, LinearKernel, ScaleKernel)
}


#: The dtypes a stored kernel may have.
_KERNEL_DTYPES = {"float64": torch.float64, "float32": torch.float32}


def kernel_spec(kernel: Kernel) -> dict[str, Any]:
    r"""Class, settings and dtype of an allow-listed GPyTorch kernel, as JSON that ``build_kernel``
    rebuilds it from (its hyperparameters: ``kernel_tensors``); a ``ValueError`` for a kernel outside
    the allow-list, a batched one or one of mixed dtypes."""
    return {**_kernel_settings(kernel), "dtype": _kernel_dtype(kernel)}


def _kernel_dtype(kernel: Kernel) -> str:
    r"""The one float dtype of all of ``kernel``'s parameters, by name (``"float64"``)."""
    dtypes = {str(p.dtype).removeprefix("torch.") for p in kernel.parameters()}
    if len(dtypes) != 1 or not dtypes <= set(_KERNEL_DTYPES):
        raise ValueError(
            f"kernel: its parameters must share one dtype of {sorted(_KERNEL_DTYPES)}, got {sorted(dtypes)}."
        )
    return dtypes.pop()


def _kernel_settings(kernel: Kernel) -> dict[str, Any]:
    r"""Class and settings of an allow-listed kernel, without its dtype (``ValueError`` for any other)."""
    name = type(kernel).__name__
    if _KERNELS.get(name) is not type(kernel):
        raise ValueError(
            f"kernel: {name} cannot be stored in a checkpoint; allowed are {sorted(_KERNELS)} "
            "(or pass the config again on resume)."
        )
    if len(kernel.batch_shape) != 0:
        raise ValueError("kernel: batched kernels cannot be stored in a checkpoint.")
    spec: dict[str, Any] = {
        "class": name,
        "ard_num_dims": kernel.ard_num_dims,
        "active_dims": None if kernel.active_dims is None else [int(i) for i in kernel.active_dims.tolist()],
        "constraints": {
            k: [
                type(c).__name__,
                getattr(getattr(c, "_transform", None), "__name__", None),
                [float(v).hex() for v in torch.stack([c.lower_bound, c.upper_bound]).reshape(-1).tolist()],
            ]
            for k, c in kernel.named_constraints()
        },
    }
    if isinstance(kernel, MaternKernel):
        spec["nu"] = float(kernel.nu).hex()
    if isinstance(kernel, PolynomialKernel):
        spec["power"] = int(kernel.power)
    if isinstance(kernel, ScaleKernel):
        spec["base"] = _kernel_settings(kernel.base_kernel)
    return spec


def kernel_tensors(kernel: Kernel) -> dict[str, Tensor]:
    r"""The kernel's hyperparameters (raw parameters; constraint bounds are in the spec)."""
    return {k: v.detach() for k, v in kernel.named_parameters()}


def kernel_fingerprint(kernel: Kernel) -> str:
    r"""SHA-256 of the kernel's class, settings and exact hyperparameter values.

    The dtype is left out: a float32 kernel and its float64 copy hold the same values (a
    run computes with the float64 copy), and fingerprints stored before the spec had a
    dtype stay valid.
    """
    spec = _kernel_settings(kernel)
    values = {
        k: [float(x).hex() for x in v.to(torch.float64).reshape(-1).tolist()] for k, v in kernel_tensors(kernel).items()
    }
    return json_fingerprint({"spec": spec, "values": values})


def build_kernel(spec: Any) -> Kernel:
    r"""Rebuild a kernel from ``kernel_spec``'s output, in the stored dtype (float64 for a spec written
    before it was stored) before any hyperparameter is loaded (so none is rounded through float32);
    a ``ValueError`` if the class is not allow-listed or the rebuilt settings differ."""
    if not isinstance(spec, dict):
        raise ValueError("Checkpoint field 'kernel.spec': expected an object.")
    dtype_name = spec.get("dtype", "float64")
    dtype = _KERNEL_DTYPES.get(dtype_name) if isinstance(dtype_name, str) else None
    if dtype is None:
        raise ValueError(
            f"Checkpoint field 'kernel.spec.dtype': {dtype_name!r} is not one of {sorted(_KERNEL_DTYPES)}."
        )
    settings = {k: v for k, v in spec.items() if k != "dtype"}
    kernel = _build_from_settings(settings).to(dtype)
    if _kernel_settings(kernel) != settings:
        raise ValueError(
            f"Checkpoint field 'kernel': the stored {settings['class']} has settings or constraints that cannot be "
            "rebuilt from the checkpoint; pass the config on resume."
        )
    return kernel


def _build_from_settings(settings: Any) -> Kernel:
    r"""The allow-listed kernel ``settings`` describe, in torch's default dtype (checked by the caller)."""
    if not isinstance(settings, dict) or settings.get("class") not in _KERNELS:
        raise ValueError(f"Checkpoint field 'kernel': class not in the allow-list {sorted(_KERNELS)}.")
    kw: dict[str, Any] = {"ard_num_dims": settings.get("ard_num_dims"), "active_dims": settings.get("active_dims")}
    name = settings["class"]
    if name == "MaternKernel":
        kw["nu"] = float_from_json(settings.get("nu"), "kernel.nu")
    if name == "PolynomialKernel":
        kw["power"] = settings.get("power")
    if name == "ScaleKernel":
        kw = {"base_kernel": _build_from_settings(settings.get("base"))}
    try:
        return _KERNELS[name](**kw)
    except Exception as err:
        raise ValueError(f"Checkpoint field 'kernel': cannot build {name}: {err}") from None
