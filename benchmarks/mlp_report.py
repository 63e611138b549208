r"""The report of the MLP tuning experiment (``benchmarks.mlp``): Markdown tables and a plot.

``write_report`` writes ``mlp_tuning.md`` (one row per μ and method, paired by-seed
comparisons of DP-GIBO against the private baselines and non-private GIBO, the public
set-up) and ``mlp_tuning.png``. Every loss and accuracy in them is a NON-PRIVATE
diagnostic of the recorded runs.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import torch

from benchmarks.mlp_task import (
    DP_GIBO,
    DP_HYPO,
    GIBO,
    INF,
    METHODS,
    PRIVATE_METHODS,
    PRIVATE_RS,
    RANDOM,
    REFERENCE_METHODS,
    UCB,
    Settings,
    search_space,
)
from benchmarks.report_tables import markdown_row
from benchmarks.runs import Run, format_mean_se, format_mu, mean_se, step_interp
from botorch_dp.objectives.search_space import Hyperparameter, SearchSpace

__all__ = ["REPORT_MD", "REPORT_PNG", "make_plot", "report_text", "write_report"]

REPORT_MD, REPORT_PNG = "mlp_tuning.md", "mlp_tuning.png"


def _groups(settings: Settings, runs: list[Run]) -> list[tuple[float, str, list[Run]]]:
    r"""``(μ, method, runs)`` in table order: private methods per μ, then the references (μ = ∞)."""
    out = []
    for mu in settings.mus:
        for method in PRIVATE_METHODS:
            group = [r for r in runs if r.method == method and r.setting == mu]
            if group:
                out.append((mu, method, group))
    for method in REFERENCE_METHODS:
        group = [r for r in runs if r.method == method]
        if group:
            out.append((INF, method, group))
    return out


def _paired(a: list[Run], b: list[Run], key) -> tuple[float, float, int, int, int]:
    r"""``key(b) − key(a)`` over common seeds: mean, s.e., wins of ``a`` (> 0), ties (= 0), pairs."""
    by_seed = {r.seed: r for r in b}
    diffs = [key(by_seed[r.seed]) - key(r) for r in a if r.seed in by_seed]
    if not diffs:
        return math.nan, math.nan, 0, 0, 0
    m, se = mean_se(diffs)
    return m, se, sum(x > 0 for x in diffs), sum(x == 0 for x in diffs), len(diffs)


def _pairs(settings: Settings, runs: list[Run]) -> list[tuple[float, str, list[Run], list[Run]]]:
    r"""``(μ, other method, DP-GIBO runs, other runs)`` of the paired comparisons that have runs."""
    out = []
    for mu in settings.mus:
        gibo = [r for r in runs if r.method == DP_GIBO and r.setting == mu]
        for other in (PRIVATE_RS, DP_HYPO, GIBO):
            rest = [r for r in runs if r.method == other and (r.setting == mu or other == GIBO)]
            if gibo and rest:
                out.append((mu, other, gibo, rest))
    return out


def _sign_test(wins: int, losses: int) -> float:
    r"""Two-sided exact sign test of ``wins`` against ``losses`` (``nan`` without any)."""
    if wins + losses == 0:
        return math.nan
    from scipy.stats import binomtest

    return float(binomtest(wins, wins + losses, 0.5).pvalue)


def _verdict(m: float, se: float) -> str:
    r"""``"DP-GIBO better"`` / ``"DP-GIBO worse"`` when the mean is over 2 s.e. from 0."""
    if math.isnan(m) or math.isnan(se):
        return "—"
    if m - 2 * se > 0:
        return "DP-GIBO better"
    if m + 2 * se < 0:
        return "DP-GIBO worse"
    return "no clear difference"


def _fmt(x: float | None, spec: str = ".3g") -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def _continuous(space: SearchSpace) -> list[Hyperparameter]:
    r"""The hyperparameters of ``space``, all continuous ones in this experiment (``TypeError`` otherwise)."""
    others = [h for h in space.hyperparameters if not isinstance(h, Hyperparameter)]
    if others:
        raise TypeError(f"the MLP report describes continuous hyperparameters only, got {others[0]!r}")
    return [h for h in space.hyperparameters if isinstance(h, Hyperparameter)]


def report_text(settings: Settings, context: dict, runs: list[Run], command: str) -> str:
    r"""The Markdown report (tables, paired comparisons, settings)."""
    s, c = settings, context
    space = search_space(s)
    sizes = c["sizes"]
    job_wall = sum(r.wall_s for r in runs)
    seeds = sorted({r.seed for r in runs})
    lines = [
        "# Private tuning of a torch MLP on a scikit-learn data set",
        "",
        f"Command: `{command}`",
        "",
        f"Total wall time: {c.get('wall_s', 0.0):.0f} s (pilot {c.get('prepare_wall_s', 0.0):.0f} s; "
        f"{len(runs)} jobs {job_wall:.0f} s of run time, some possibly taken from the run store; "
        f"{c.get('execution', 'serial')}). "
        f"Seeds: {', '.join(map(str, seeds))}; δ = {s.target_delta:g}.",
        "",
        "Every loss and accuracy below is a NON-PRIVATE diagnostic: the validation loss of the released θ",
        "(mean capped cross-entropy over the validation users, noise-free) and the test loss / accuracy of",
        "the model trained at the released θ, computed only to evaluate the methods. Mean ± standard error",
        "over seeds; each seed is its own split, initialisation and privacy noise.",
        "",
        markdown_row(
            [
                "μ",
                "ε at δ",
                "method",
                "validation loss (released θ)",
                "test loss",
                "test accuracy",
                "evaluations",
                "wall s / run",
            ]
        ),
        "|" + "|".join(["---"] * 8) + "|",
    ]
    for mu, method, group in _groups(s, runs):
        eps = [r.epsilon for r in group if r.epsilon is not None]
        lines.append(
            markdown_row(
                [
                    format_mu(mu),
                    _fmt(max(eps), ".4g") if eps else "∞",
                    method,
                    format_mean_se([r.final_loss for r in group], 3),
                    format_mean_se([r.extra["test_loss"] for r in group], 3),
                    format_mean_se([r.extra["test_accuracy"] for r in group], 3),
                    f"{statistics.fmean(r.num_evaluations for r in group):g}"
                    + (" (E[K])" if method in (PRIVATE_RS, DP_HYPO) else ""),
                    f"{statistics.fmean(r.wall_s for r in group):.1f}",
                ]
            )
        )
    realized = []
    for mu in s.mus:
        for method in (PRIVATE_RS, DP_HYPO):
            ks = sorted(r.extra["realized_trials_NON_PRIVATE"] for r in runs if r.method == method and r.setting == mu)
            if ks:
                realized.append(f"{method} at μ = {mu:g}: {', '.join(map(str, ks))}")
    if realized:
        lines += [
            "",
            "The selections draw their number of trials K from a truncated negative binomial (η = "
            f"{s.tnb_eta:g}{', i.e. geometric' if s.tnb_eta == 1 else ''}) with E[K] = "
            f"{s.selection_fraction:g} × the budget; the realised K per seed (sorted; "
            "NON-PRIVATE diagnostic, hidden by the method) were: " + "; ".join(realized) + ".",
        ]
    lines += [
        "",
        "## Paired by seed: DP-GIBO against the private baselines at the same (ε, δ)",
        "",
        "Δ validation loss = other − DP-GIBO and Δ test accuracy = DP-GIBO − other (positive: DP-GIBO",
        "better), mean ± s.e. over seeds; *wins*: seeds where DP-GIBO is strictly better (ties counted",
        "apart); *verdict*: a mean more than two standard errors from 0, else no clear difference. The last",
        "rows compare DP-GIBO with non-private GIBO (the cost of privacy and clipping).",
        "",
        markdown_row(
            [
                "μ",
                "DP-GIBO vs",
                "Δ validation loss",
                "wins / ties / seeds",
                "sign test p",
                "verdict (validation)",
                "Δ test accuracy",
                "wins / ties / seeds",
                "sign test p",
                "verdict (test)",
            ]
        ),
        "|" + "|".join(["---"] * 10) + "|",
    ]
    for mu, other, gibo, rest in _pairs(s, runs):
        cells = [format_mu(mu), other]
        for key in (lambda r: r.final_loss, lambda r: -r.extra["test_accuracy"]):
            m, se, wins, ties, n = _paired(gibo, rest, key)
            cells += [
                f"{m:+.4f} ± {_fmt(se, '.2g')}",
                f"{wins} / {ties} / {n}",
                _fmt(_sign_test(wins, n - ties - wins), ".2g"),
                _verdict(m, se),
            ]
        lines.append(markdown_row(cells))
    lines += [
        "",
        "*sign test p*: two-sided exact binomial test of the wins against the losses (ties left out), a",
        "check that does not assume normal differences (the selections' losses are heavy-tailed).",
    ]
    initial = [r.extra["initial_loss"] for r in runs if r.method == GIBO]
    d = space.dim
    lines += [
        "",
        "## Set-up (public)",
        "",
        f"- Data: scikit-learn `load_{s.dataset}` ({c['num_features']} features, {c['num_classes']} classes), "
        f"stratified split per seed into train {sizes['train']} / validation {sizes['validation']} (the users) / "
        f"test {sizes['test']}, standardised with the training statistics.",
        f"- Model: MLP {c['num_features']} → {' → '.join(map(str, s.hidden))} (ReLU, dropout) → {c['num_classes']}, "
        f"SGD, {s.epochs} epochs, batch {s.train_batch_size}, one torch thread; initialisation, dropout and "
        "shuffling from the seed (an evaluation is a deterministic function of θ). Per-user loss: the "
        f"validation example's cross-entropy capped at {s.loss_cap:g}.",
        f"- Search space (unit cube, d = {d}): "
        + "; ".join(
            f"{h.name} ∈ [{h.lower:g}, {h.upper:g}]" + (" (log10)" if h.log_scale else "") for h in _continuous(space)
        )
        + ".",
        f"- Pilot (`prepare`, public synthetic data of the same shape from `synthetic_like`, seed {s.pilot_seed}, "
        f"{c['pilot_trainings']} trainings, never the validation users): σ² = {c['noise_variance']:.3g} (pooled "
        f"per-user loss variance over {s.pilot_training_seeds} training seeds at {s.pilot_points} uniform θ); "
        f"B = {c['clip_bound']:g} (90% quantile of ‖A y_i‖ over d + 1 points in the search box; median "
        f"{c['grad_norm_median']:.3g}); score clip C = {c['loss_clip']:g} (95% quantile of the per-user losses; "
        f"median {c['loss_q50']:.3g}).",
        f"- DP-GIBO: θ₀ = box centre, T = {s.iterations}, fixed batches of {s.batch_size or d + 1} "
        f"(so {s.iterations * (s.batch_size or d + 1)} evaluations), AdaGrad η = {s.step_size:g}, search radius "
        f"{s.search_radius:g}, RBF length-scale {s.lengthscale:g}, output scale {s.outputscale:g}, σ² and B from "
        f"the pilot; raw samples {s.raw_samples}, restarts {s.num_restarts}. GIBO: the same with μ = ∞ and no "
        "clipping.",
        f"- Private random search: K ~ truncated negative binomial (η = {s.tnb_eta:g}), E[K] = "
        f"{s.selection_fraction:g} × DP-GIBO's evaluations, per-trial μ₀ from `per_trial_mu_for_epsilon` so that "
        f"ε = gdp_epsilon(μ, δ); scores clipped at C. DP-HyPO: the same K and C, density ratio in "
        f"[1/{s.dp_hypo_ratio:g}, {s.dp_hypo_ratio:g}], {s.dp_hypo_candidates} Sobol candidates, GP refit every "
        f"{s.dp_hypo_refit_every} trials, μ₀ by root finding so that its ε on the ledger's order grid is the same "
        "target.",
        f"- UCB-BO: β = {s.ucb_beta:g}, {s.ucb_num_initial or 2 * (d + 1)} Sobol points, refit every "
        f"{s.ucb_refit_every}; random search: uniform points. Both non-private, with DP-GIBO's evaluations.",
        "- Privacy noise: "
        + (
            "derived from the replication seed (reproducible benchmark runs; PrivacyWarning by design)."
            if s.seeded_noise
            else "OS entropy."
        ),
    ]
    if initial:
        lines.append(
            f"- Validation loss at θ₀ (box centre, the start of DP-GIBO and GIBO): {format_mean_se(initial, 3)}."
        )
    lines += [
        "",
        "## Left out",
        "",
        "- DP-SGD training: every model is trained without DP, so only the validation users are protected",
        "  (the guarantee in the table); the training split has no guarantee. DP-SGD would add training noise",
        "  and a second guarantee (`TorchModelTuningObjective(dp_sgd=...)`) at several times the cost.",
        "- A sweep of the selections' E[K] (paper.py's private random search fractions) and of DP-HyPO's",
        "  ratio bound: one E[K] (the shared evaluation budget) and one public ratio, for the time limit.",
        "- Adaptive batches (bias tolerance) and DP-GIBO presets: fixed batches of d + 1 keep every μ at the",
        "  same budget.",
        "- Other data sets (breast_cancer, wine): `dataset=` runs them; not run here.",
        "",
    ]
    return "\n".join(lines)


def make_plot(settings: Settings, runs: list[Run], path: Path) -> None:
    r"""Validation loss of the released θ and test accuracy against μ (references as lines)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = (
        ("validation loss of released θ (non-private diagnostic)", lambda r: r.final_loss),
        ("test accuracy at released θ (non-private diagnostic)", lambda r: r.extra["test_accuracy"]),
    )
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
    colors = dict(zip(METHODS, plt.rcParams["axes.prop_cycle"].by_key()["color"], strict=False))  # 10 colours
    for ax, (label, key) in zip(axes[:2], metrics, strict=True):  # axes[2]: the loss curves
        for j, method in enumerate(PRIVATE_METHODS):
            xs, ms, ses = [], [], []
            for mu in settings.mus:
                vals = [key(r) for r in runs if r.method == method and r.setting == mu]
                if vals:
                    m, se = mean_se(vals)
                    xs.append(mu * (1 + 0.04 * (j - 1)))
                    ms.append(m)
                    ses.append(0.0 if math.isnan(se) else se)
            if xs:
                ax.errorbar(xs, ms, yerr=ses, marker="o", capsize=3, label=method, color=colors[method])
        for method, ls in zip(REFERENCE_METHODS, ("--", ":", "-."), strict=True):
            vals = [key(r) for r in runs if r.method == method]
            if vals:
                ax.axhline(statistics.fmean(vals), ls=ls, lw=1.2, color=colors[method], label=f"{method}, μ = ∞")
        ax.set_xscale("log")
        ax.minorticks_off()
        ax.set_xticks(list(settings.mus))
        ax.set_xticklabels([f"{mu:g}" for mu in settings.mus])
        ax.set_xlabel(f"μ (validation users; ε = gdp_epsilon(μ, {settings.target_delta:g}))")
        ax.set_ylabel(label, fontsize=8)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    _plot_curves(settings, runs, axes[2], colors)
    fig.suptitle(f"MLP on {settings.dataset}: mean ± s.e. over {len({r.seed for r in runs})} seeds", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_curves(settings: Settings, runs: list[Run], ax, colors: dict) -> None:
    r"""Mean validation loss of each method's current choice against evaluations (NON-PRIVATE)."""
    budget = max((int(r.num_evaluations) for r in runs), default=1)
    grid = list(range(budget + 1))
    curves = [(f"{DP_GIBO} μ = {mu:g}", DP_GIBO, mu) for mu in settings.mus]
    curves += [(m, m, INF) for m in (GIBO, RANDOM, UCB)]
    for j, (label, method, mu) in enumerate(curves):
        group = [r for r in runs if r.method == method and (r.setting == mu or method != DP_GIBO)]
        if not group:
            continue
        values = torch.tensor([step_interp(r.evals, r.losses, grid) for r in group], dtype=torch.float64)
        mean = values.nanmean(0)
        if method == DP_GIBO:
            style = dict(color=colors[method], alpha=0.45 + 0.55 * (j + 1) / len(settings.mus))
        else:
            style = dict(color=colors[method], ls="--")
        ax.plot(grid, mean.tolist(), label=label, **style)
    ax.set_yscale("log")
    ax.set_xlabel("evaluations")
    ax.set_ylabel("validation loss of current choice (non-private diagnostic)", fontsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def write_report(settings: Settings, context: dict, runs: list[Run], out: Path, command: str) -> Path:
    r"""Write ``mlp_tuning.md`` and ``mlp_tuning.png`` into ``out``; returns the Markdown path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / REPORT_MD
    path.write_text(report_text(settings, context, runs, command))
    make_plot(settings, runs, out / REPORT_PNG)
    return path
