r"""GIBO's gradient-information acquisition as a BoTorch acquisition function.

``qGradientInformation`` scores a q-batch by how much it shrinks the trace of the GP's
posterior gradient covariance at the current iterate θ; ``construct_inputs_gradient_information``
is its BoTorch input constructor (what Ax calls).

The constructor is registered with ``botorch.acquisition.input_constructors`` when that module
is loaded, not before: importing it costs about 0.4 s (``scipy.stats``, BoTorch's whole
acquisition zoo), more than the rest of this module together, and only Ax-style callers of
``get_acqf_input_constructor`` need it. If it is loaded already, the constructor is registered
on import of this module; otherwise an import hook registers it right after BoTorch's module
runs, and then removes itself (``_register_input_constructor_on_import``).
"""

from __future__ import annotations

import importlib.abc
import sys
from types import ModuleType
from typing import Any, Literal, Protocol, cast, get_args

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.acquisition.objective import PosteriorTransform, ScalarizedPosteriorTransform
from botorch.exceptions.errors import BotorchTensorDimensionError
from botorch.models.model import Model
from botorch.utils.transforms import concatenate_pending_points, t_batch_mode_transform
from torch import Tensor

from botorch_dp.gradient_gp import (
    DEFAULT_JITTER,
    GradientGP,
    OutputGradientGP,
    TensorSnapshot,
    closed_form_supported,
    output_gradient_gps,
    trace_reduction_closed_form,
)
from botorch_dp.kernel_derivatives import DerivativeBackend

__all__ = ["AcquisitionGradient", "construct_inputs_gradient_information", "qGradientInformation"]

#: How ``qGradientInformation`` differentiates in the candidates (see its ``gradient`` argument).
AcquisitionGradient = Literal["auto", "closed_form", "autograd"]


class _ExactGPLike(Protocol):
    r"""What ``_ModelWatch`` reads off each exact GP of a model (a GPyTorch ``ExactGP``)."""

    training: bool
    train_inputs: tuple[Tensor, ...] | None


class _ModelWatch:
    r"""Tells whether a BoTorch model changed in a way that changes the gradient posterior.

    Watches the values of every parameter and buffer (kernel, likelihood, input and
    outcome transforms), the training-input tensors and the kernel, likelihood, mean and
    transform modules of every exact GP in the model, and its train/eval mode.
    """

    _PARTS = ("covar_module", "likelihood", "mean_module", "input_transform", "outcome_transform")

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.state = TensorSnapshot(model)
        # the modules with training inputs: GPyTorch's ExactGP (untyped), a tuple of tensors or None
        self.gps = cast(list[_ExactGPLike], [m for m in model.modules() if hasattr(m, "train_inputs")])
        self.layout = self._layout()

    def _layout(self) -> list[Any]:
        # the objects themselves (not ids, which a freed tensor's successor may reuse)
        return [
            obj for gp in self.gps for obj in (*(gp.train_inputs or ()), *(getattr(gp, p, None) for p in self._PARTS))
        ]

    def changed(self) -> bool:
        if self.model.training or any(gp.training for gp in self.gps):
            return True
        if self.state.changed(same_dtype=True):
            return True
        layout = self._layout()
        return len(layout) != len(self.layout) or any(a is not b for a, b in zip(layout, self.layout, strict=True))


class qGradientInformation(AcquisitionFunction):
    r"""Reduction of the posterior gradient-covariance trace at ``theta`` (to be maximized).

    ``α(z) = tr Σ_D(θ) − tr Σ_{D ∪ z ∪ X_pending}(θ)`` where ``Σ_D(θ)`` is the posterior
    covariance of ``∇f(θ)`` given the model's training inputs ``D`` (Sopa et al.,
    GIBO). The value does not depend on the outcomes, so a model built on public points
    with placeholder outcomes is enough. The Cholesky factor of the training kernel
    matrix and ``L⁻¹∇k(θ, D)ᵀ`` are computed once; each candidate batch costs triangular
    solves against them.

    What is supported, and the choices made:

    - **Input transforms** (``Normalize`` with fixed or learned bounds, ``InputStandardize``,
      ``Warp``, ``Log10``, chains): ``θ``, the candidates and the criterion are in the
      original inputs ``x``. The GP lives on ``z = T(x)``, so ``∇_x f = Jᵀ∇_z f`` with
      ``J = ∂z/∂x`` at ``θ`` (diagonal for affine transforms), and ``Σ = JᵀΣ_z J``.
    - **Several outputs** (a multi-output ``SingleTaskGP``, a ``ModelListGP``): the
      outputs are independent GPs and the criterion is ``Σ_k w_k² tr Σ_k(θ)``, the trace of
      the posterior covariance of ``∇(Σ_k w_k f_k)``, with ``w`` the weights of a
      ``ScalarizedPosteriorTransform`` or all ones (then it is the total variance of the
      ``m x d`` Jacobian, the sum of the outputs' traces).
    - **Kernels**: any whose sample paths are differentiable (RBF, Matérn-3/2 and 5/2,
      polynomial, and scaled, additive and product compositions; others by autograd).
      Matérn-1/2 is refused: ``∇f`` does not exist there.
    - **Refused** with an error naming the alternative: batched models (build one
      acquisition per batch element), multi-task GPs, other posterior transforms.
    - **Changed hyperparameters**: before every evaluation the model's parameters,
      buffers, training inputs and modules are compared with those the acquisition was
      built from; on any change everything is recomputed from the model. A
      ``GradientGP`` passed directly cannot be re-read: a changed kernel raises.

    Example:
        >>> acqf = qGradientInformation(model, theta)
        >>> bounds = torch.stack([theta - 0.1, theta + 0.1])
        >>> X, val = optimize_acqf(acqf, bounds, q=4, num_restarts=4, raw_samples=64)

    Args:
        model: A BoTorch / GPyTorch exact GP with fixed hyperparameters (e.g.
            ``SingleTaskGP``, ``ModelListGP``; see ``output_gradient_gps``), or a
            ``GradientGP``.
        theta: A ``d`` tensor, the point whose gradient we want to learn (original inputs).
        X_pending: An ``m x d`` tensor of points that will be evaluated anyway.
        posterior_transform: Optional ``ScalarizedPosteriorTransform`` weighting the outputs.
        basis: Optional public ``d x k`` orthonormal basis ``Ṽ`` (original inputs): score
            the reduction of ``tr(ṼᵀΣ_D(θ)Ṽ)``, the uncertainty of the projected gradient
            ``Ṽᵀ∇f(θ)`` that a public-subspace release uses (Kairouz et al., spec A5); with
            an input transform the Jacobian becomes ``JṼ``.
        jitter: Diagonal jitter (see ``GradientGP``); used when reading a BoTorch model.
        method: Backend for kernel derivatives (see ``KernelDerivatives``).
        gradient: How the value's gradient in the candidates is computed: ``"closed_form"``
            (``gradient_gp.closed_form``: no autograd graph, several times faster per
            evaluation; one output, no input transform, weights or basis, an RBF or Matérn-5/2
            kernel, possibly scaled), ``"autograd"``, or ``"auto"`` (the closed form where it
            applies). The value is the same either way (up to round-off).
    """

    # buffers registered in ``_build`` (a Module's attributes are otherwise typed ``Tensor | Module``)
    theta: Tensor
    _V: Tensor | None

    def __init__(
        self,
        model: Model | GradientGP,
        theta: Tensor,
        X_pending: Tensor | None = None,
        *,
        posterior_transform: PosteriorTransform | None = None,
        basis: Tensor | None = None,
        jitter: float = DEFAULT_JITTER,
        method: DerivativeBackend = "auto",
        gradient: AcquisitionGradient = "auto",
    ) -> None:
        super().__init__(model=model)  # type: ignore[arg-type]  # a GradientGP too: the base only stores it
        if gradient not in get_args(AcquisitionGradient):
            raise ValueError(f"gradient must be one of {get_args(AcquisitionGradient)}, got {gradient!r}.")
        self._gradient = gradient
        if posterior_transform is not None and not isinstance(posterior_transform, ScalarizedPosteriorTransform):
            raise NotImplementedError(
                f"posterior_transform {type(posterior_transform).__name__} is not supported: the "
                "criterion weights the outputs' gradients, so only a ScalarizedPosteriorTransform "
                "(a weighted sum of outputs) has a meaning here."
            )
        self.posterior_transform = posterior_transform
        self._jitter, self._method = float(jitter), method
        theta = torch.as_tensor(theta).detach().reshape(-1)
        if basis is not None and (basis.dim() != 2 or basis.shape[0] != theta.shape[0]):
            raise ValueError(f"basis must be d x k with d={theta.shape[0]}, got shape {tuple(basis.shape)}.")
        self._basis = None if basis is None else basis.detach()
        self._build(theta)
        self.set_X_pending(X_pending)

    # ------------------------------------------------------------------ construction
    def _build(self, theta: Tensor) -> None:
        r"""Read the model, map ``θ`` into each output's inputs and precompute ``V = L⁻¹(Jᵀ∇k)ᵀ``."""
        parts = output_gradient_gps(self.model, jitter=self._jitter, method=self._method)
        theta = theta.to(parts[0].gp.train_X)
        weights = None
        if self.posterior_transform is not None:
            # ScalarizedPosteriorTransform's buffer (checked in __init__); mypy sees a Module attribute
            weights = cast(Tensor, self.posterior_transform.weights).detach().reshape(-1).to(theta)
            if weights.numel() != len(parts):
                raise ValueError(
                    f"posterior_transform has {weights.numel()} weights, the model has {len(parts)} outputs."
                )
        self._parts: list[OutputGradientGP] = parts
        self._theta_z: list[Tensor] = []
        self._jacobians: list[Tensor | None] = []
        self._Vs: list[Tensor | None] = []
        self._w2 = None if weights is None else weights.pow(2)
        for part in parts:
            if part.input_transform is None and theta.shape[0] != part.gp.dim:
                raise ValueError(f"theta has {theta.shape[0]} entries, the model has d={part.gp.dim}.")
            try:
                theta_z, J = part.at(theta)
            except (RuntimeError, BotorchTensorDimensionError) as e:  # θ of the wrong size
                raise ValueError(f"theta has {theta.shape[0]} entries; the input transform refused it: {e}") from e
            if self._basis is not None:  # the projected gradient Ṽᵀ∇_x f = (JṼ)ᵀ∇_z f
                basis = self._basis.to(theta)
                J = basis if J is None else J @ basis
            with torch.no_grad():
                V = part.gp.whitened_cross(theta_z, J) if part.gp.num_train else None
            self._theta_z.append(theta_z)
            self._jacobians.append(J)
            self._Vs.append(V)
        self.register_buffer("theta", theta)
        self._gps = torch.nn.ModuleList([p.gp for p in parts])
        # the plain case (one output, no transform, no weights) keeps the original code path
        self._plain = len(parts) == 1 and parts[0].input_transform is None and weights is None and self._basis is None
        self._closed_form = self._plain and self._gradient != "autograd" and closed_form_supported(parts[0].gp)
        if self._gradient == "closed_form" and not self._closed_form:
            raise ValueError(
                "gradient='closed_form' needs one output without input transform, weights or basis and an "
                "RBF or Matérn-5/2 kernel (possibly scaled); use gradient='auto' or 'autograd'."
            )
        self.register_buffer("_V", self._Vs[0] if self._plain else None)
        self._watch = None if isinstance(self.model, GradientGP) else _ModelWatch(self.model)

    def _refresh(self) -> None:
        r"""Recompute from the model if it changed since; refuse a stale ``GradientGP``."""
        if self._watch is None:
            if self._parts[0].gp.kernel_changed():
                raise RuntimeError(
                    "The GradientGP's kernel hyperparameters changed after it was factorized: "
                    "the acquisition would be stale. Build a new GradientGP and acquisition, or "
                    "pass the BoTorch model (which is re-read when it changes)."
                )
        elif self._watch.changed():
            with torch.no_grad():
                self._build(self.theta)

    @property
    def gradient_gp(self) -> GradientGP:
        r"""The ``GradientGP`` of a single-output model (in the model's input space)."""
        if len(self._parts) != 1:
            raise ValueError(f"The model has {len(self._parts)} outputs; see output_gradient_gps(model).")
        return self._parts[0].gp

    @property
    def current_trace(self) -> Tensor:
        r"""``Σ_k w_k² tr Σ_{D,k}(θ)`` (projected on ``basis``: ``tr ṼᵀΣṼ``) before adding any
        point (a scalar tensor)."""
        self._refresh()
        traces = [
            part.gp.posterior_trace(theta_z, J)
            for part, theta_z, J in zip(self._parts, self._theta_z, self._jacobians, strict=True)
        ]
        return self._combine(traces)

    def _combine(self, values: list[Tensor]) -> Tensor:
        if self._w2 is None:
            total = values[0]
            for v in values[1:]:
                total = total + v
            return total
        total = self._w2[0] * values[0]
        for w2, v in zip(self._w2[1:], values[1:], strict=True):
            total = total + w2 * v
        return total

    # ------------------------------------------------------------------ evaluation
    @concatenate_pending_points
    @t_batch_mode_transform()  # type: ignore[arg-type]  # BoTorch types it for AcquisitionFunction only
    def forward(self, X: Tensor) -> Tensor:
        r"""Evaluate the trace reduction on candidate batches.

        Args:
            X: A ``batch_shape x q x d`` tensor of candidates (original inputs).

        Returns:
            A ``batch_shape`` tensor of trace reductions (non-negative).
        """
        self._refresh()
        if self._closed_form:
            return trace_reduction_closed_form(self._parts[0].gp, self.theta, X, V=self._V)
        if self._plain:
            return self._parts[0].gp.trace_reduction(self.theta, X, V=self._V)
        values = [
            part.gp.trace_reduction(theta_z, part.inputs(X), V=V, jacobian=J)
            for part, theta_z, J, V in zip(self._parts, self._theta_z, self._jacobians, self._Vs, strict=True)
        ]
        return self._combine(values)


def construct_inputs_gradient_information(
    model: Model,
    theta: Tensor | list[float] | None = None,
    bounds: list[tuple[float, float]] | None = None,
    X_pending: Tensor | None = None,
    posterior_transform: PosteriorTransform | None = None,
    objective: Any = None,
    constraints: Any = None,
    jitter: float = DEFAULT_JITTER,
    method: DerivativeBackend = "auto",
) -> dict[str, Any]:
    r"""Keyword arguments for ``qGradientInformation``, from what BoTorch / Ax pass.

    Registered with ``botorch.acquisition.input_constructors``, so
    ``get_acqf_input_constructor(qGradientInformation)`` returns it and Ax's
    ``Acquisition`` can build the acquisition. Ax also passes ``training_data``,
    ``X_baseline``, ``objective_thresholds`` and ``constraints_tuple``; they are dropped:
    the criterion depends on the training inputs only, never on the (possibly sensitive)
    outcomes. In Ax, give ``theta`` through the acquisition options
    (``botorch_acqf_options={"theta": ...}``).

    Args:
        model: The fitted model (see ``qGradientInformation``).
        theta: The current iterate ``θ``, a ``d`` tensor or list, in the model's input
            space (the space of ``training_data.X``). Required.
        bounds: Optional search bounds as BoTorch's constructors take them, a list of
            ``d`` ``(lower, upper)`` pairs; ``θ`` must lie inside.
        X_pending: Points that will be evaluated anyway.
        posterior_transform: ``None`` or a ``ScalarizedPosteriorTransform`` (output weights).
        objective: Must be ``None``: an MC objective (outcome constraints, multi-objective)
            has no meaning for the gradient covariance.
        constraints: Must be ``None``, for the same reason.
        jitter: See ``qGradientInformation``.
        method: See ``qGradientInformation``.

    Returns:
        A dict of ``qGradientInformation`` keyword arguments.
    """
    if theta is None:
        raise ValueError(
            "qGradientInformation needs theta, the current iterate in the model's input space "
            "(in Ax: botorch_acqf_options={'theta': [...]})."
        )
    if objective is not None or constraints is not None:
        raise ValueError(
            "qGradientInformation scores how much a batch teaches about ∇f(θ); it takes no "
            "objective or outcome constraints (weight several outputs with a "
            "ScalarizedPosteriorTransform instead)."
        )
    theta = torch.as_tensor(theta, dtype=torch.float64).reshape(-1)
    if bounds is not None:
        box = torch.as_tensor(bounds, dtype=theta.dtype)
        if box.shape != (theta.shape[0], 2):
            raise ValueError(f"bounds must be {theta.shape[0]} (lower, upper) pairs, got shape {tuple(box.shape)}.")
        outside = ((theta < box[:, 0]) | (theta > box[:, 1])).nonzero().flatten().tolist()
        if outside:
            shown = "; ".join(
                f"theta[{j}] = {float(theta[j]):.6g} not in [{float(box[j, 0]):.6g}, {float(box[j, 1]):.6g}]"
                for j in outside
            )
            raise ValueError(
                f"theta lies outside bounds: {shown}. theta must be in the model's input space, the "
                "space of these bounds (in Ax: log10 of log-scale parameters; a unit-cube theta must be "
                "mapped there first, e.g. with botorch_dp.integrations.ax.AxThetaSpace.from_unit(theta, 'ax'))."
            )
    return {
        "model": model,
        "theta": theta,
        "X_pending": X_pending,
        "posterior_transform": posterior_transform,
        "jitter": jitter,
        "method": method,
    }


# ---------------------------------------------------------------------- registration with BoTorch
_INPUT_CONSTRUCTORS = "botorch.acquisition.input_constructors"


def _register(module: ModuleType) -> None:
    if qGradientInformation not in module.ACQF_INPUT_CONSTRUCTOR_REGISTRY:
        module.acqf_input_constructor(qGradientInformation)(construct_inputs_gradient_information)


class _RegisteringLoader(importlib.abc.Loader):
    r"""BoTorch's own loader of ``input_constructors``, registering the constructor after it runs."""

    def __init__(self, loader: importlib.abc.Loader, finder: _RegisterOnImport) -> None:
        self.loader, self.finder = loader, finder

    def create_module(self, spec: Any) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        _register(module)
        if self.finder in sys.meta_path:  # registered once: nothing more to watch
            sys.meta_path.remove(self.finder)

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ... (tracebacks, inspect)
        return getattr(self.loader, name)


class _RegisterOnImport(importlib.abc.MetaPathFinder):
    r"""Finds ``input_constructors`` with the other finders and wraps its loader."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != _INPUT_CONSTRUCTORS:
            return None
        for finder in [f for f in sys.meta_path if f is not self]:
            spec = finder.find_spec(fullname, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _RegisteringLoader(spec.loader, self)
                return spec
        return None


def _register_input_constructor_on_import() -> None:
    loaded = sys.modules.get(_INPUT_CONSTRUCTORS)
    if loaded is not None and hasattr(loaded, "acqf_input_constructor"):
        _register(loaded)
    elif not any(isinstance(f, _RegisterOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _RegisterOnImport())


_register_input_constructor_on_import()
