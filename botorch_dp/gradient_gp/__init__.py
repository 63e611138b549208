r"""The posterior of the gradient of a GP with fixed hyperparameters.

- ``core``: ``GradientGP``, which holds the Cholesky factor of ``K = k(D, D) + σ²I`` and
  returns the posterior mean, covariance and trace of ``∇f(θ)`` (``GradientPosterior``),
  and the trace reduction from adding new points.
- ``models``: ``output_gradient_gps`` reads one ``GradientGP`` per output off a BoTorch
  model, together with the model's input transform, whose Jacobian maps gradients back to
  the original inputs (``OutputGradientGP``); ``gradient_posterior`` for one output.
- ``closed_form``: the trace reduction with its gradient in the candidates written out
  (RBF and Matérn-5/2 kernels), which the batch search evaluates without autograd.

Every public name is re-exported here, so ``from botorch_dp.gradient_gp import GradientGP``
is the import path it always was.
"""

from __future__ import annotations

from botorch_dp.gradient_gp.closed_form import closed_form_supported, trace_reduction_closed_form
from botorch_dp.gradient_gp.core import DEFAULT_JITTER, GradientGP, GradientPosterior, TensorSnapshot
from botorch_dp.gradient_gp.models import OutputGradientGP, gradient_posterior, output_gradient_gps

__all__ = [
    "DEFAULT_JITTER",
    "GradientGP",
    "GradientPosterior",
    "OutputGradientGP",
    "TensorSnapshot",
    "closed_form_supported",
    "gradient_posterior",
    "output_gradient_gps",
    "trace_reduction_closed_form",
]
