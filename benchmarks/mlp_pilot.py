r"""The MLP experiment's public pilot (``mlp.prepare``): σ², clip bound B and score clip C."""

from __future__ import annotations

import torch

from benchmarks.mlp_task import Settings, load_data, make_objective, search_space
from benchmarks.runs import round_sig
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.tuning import synthetic_like
from botorch_dp.utils import torch_threads


def prepare(settings: Settings) -> dict:
    r"""The public pilot: σ², clip bound B and score clip C from ``synthetic_like`` data.

    Only public facts of the real data are used (split sizes, number of features and
    classes, through ``synthetic_like``); the validation users are never evaluated.
    On the synthetic data (seed ``pilot_seed``), at ``pilot_points`` uniform θ:

    - σ²: the pooled variance of a per-user loss between ``pilot_training_seeds``
      trainings that differ only in their seed (the observation noise of the GP,
      ``f(θ) + v``: one fixed seed is one draw of ``v``), floored at ``min_noise_variance``;
    - B: the 90% quantile of the per-user gradient estimates ``‖A y_i‖`` that DP-GIBO
      forms from d + 1 uniform points in the search box around θ (2 digits);
    - C: the 95% quantile of the per-user losses seen (2 digits, at most ``loss_cap``).

    Returns:
        ``noise_variance``, ``clip_bound``, ``loss_clip`` and the statistics the report quotes.
    """
    s = settings
    shape = load_data(s, s.seeds[0])  # only its split sizes, features and classes are read
    public = synthetic_like(shape, seed=s.pilot_seed)
    space = search_space(s)
    d = space.dim
    gen = torch.Generator().manual_seed(s.pilot_seed)
    thetas = torch.rand(s.pilot_points, d, generator=gen, dtype=torch.float64)
    with torch_threads(1):
        per_seed = torch.stack(
            [make_objective(s, public, s.pilot_seed + k)(thetas) for k in range(s.pilot_training_seeds)]
        )  # seeds x points x n
        noise_variance = max(float(per_seed.var(dim=0, unbiased=True).mean()), s.min_noise_variance)
        kernel = space.recommended_kernel(s.lengthscale, s.outputscale)
        objective = make_objective(s, public, s.pilot_seed)
        norms, losses = [], [per_seed.flatten()]
        for theta in thetas:
            lo, hi = (theta - s.search_radius).clamp(0.0, 1.0), (theta + s.search_radius).clamp(0.0, 1.0)
            X = lo + (hi - lo) * torch.rand(d + 1, d, generator=gen, dtype=torch.float64)
            Y = objective(X)  # (d + 1) x n
            with torch.no_grad():
                A = GradientGP(X, kernel, noise_variance).gradient_weights(theta)
            norms.append((A @ Y).T.norm(dim=-1))
            losses.append(Y.flatten())
    norms_t, losses_t = torch.cat(norms), torch.cat(losses)
    return {
        "noise_variance": noise_variance,
        "clip_bound": round_sig(float(torch.quantile(norms_t, 0.9))),
        "loss_clip": min(round_sig(float(torch.quantile(losses_t, 0.95))), s.loss_cap),
        "grad_norm_median": float(norms_t.median()),
        "grad_norm_q90": float(torch.quantile(norms_t, 0.9)),
        "loss_q50": float(losses_t.median()),
        "loss_q95": float(torch.quantile(losses_t, 0.95)),
        "pilot_trainings": s.pilot_points * (s.pilot_training_seeds + d + 1),
        "sizes": shape.sizes(),
        "num_features": shape.num_features,
        "num_classes": shape.num_classes,
    }
