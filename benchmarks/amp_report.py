r"""The report and plot of the AMP tuning comparison (``benchmarks.amp``)."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from benchmarks.amp_task import LABELS, METHODS, NON_PRIVATE_LAMBDAS, Settings
from benchmarks.report_tables import markdown_row
from benchmarks.runs import Run, format_mean_se, mean_se

__all__ = ["make_plot", "report_text"]


def _fmt(x: float | None, spec: str = ".3g") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return "∞" if math.isinf(x) else f"{x:{spec}}"


def _median(values: list) -> float | None:
    values = [v for v in values if v is not None and not math.isnan(v)]
    return statistics.median(values) if values else None


def _paired(a: list[Run], b: list[Run]) -> tuple[float, float, int, int]:
    r"""Mean ± s.e. of the accuracy difference a − b paired by seed, wins of a, pairs."""
    acc_b = {r.seed: r.extra["test_accuracy"] for r in b}
    diffs = [r.extra["test_accuracy"] - acc_b[r.seed] for r in a if r.seed in acc_b]
    if not diffs:
        return math.nan, math.nan, 0, 0
    m, se = mean_se(diffs)
    return m, se, sum(d > 0 for d in diffs), len(diffs)


def report_text(settings: Settings, plan_: dict, runs: list[Run], command: str, wall: float) -> str:
    r"""The Markdown report of the runs (``command``: the command line that made them)."""
    s = settings
    lines = [
        "# Private tuning of AMP logistic regression",
        "",
        f"Command: `{command}`",
        f"Total wall time: {wall:.0f} s. δ = {s.delta:g}; {len(s.seeds)} seed(s) ({', '.join(map(str, s.seeds))}).",
        "",
        "Test accuracy is a NON-PRIVATE diagnostic (mean ± standard error over seeds; each seed",
        "is its own split, its own synthetic data and fresh privacy noise). *training ε*: the",
        "composed guarantee of every training run on the training split (add/remove one record,",
        "RDP on the ledger's order grid). *validation*: what the validation users paid (replace",
        "one user): μ-GDP for DP-GIBO, (ε, δ) from the P&S bound for the selections. The two",
        "sides are different data and are never composed.",
        "",
    ]
    for dataset in s.datasets:
        ds_runs = [r for r in runs if r.experiment == dataset]
        if not ds_runs:
            continue
        sizes = s.data(dataset, s.seeds[0]).sizes()
        lines += [f"## {dataset} (train {sizes['train']}, validation {sizes['validation']}, test {sizes['test']})", ""]
        lines.append(
            markdown_row(
                [
                    "ε",
                    "method",
                    "test accuracy",
                    "training ε",
                    "validation μ",
                    "validation ε",
                    "training runs",
                    "released λ (median)",
                    "wall s / seed",
                ]
            )
        )
        lines.append("|" + "|".join(["---"] * 9) + "|")
        for eps in s.epsilons:
            for method in METHODS:
                group = [r for r in ds_runs if r.method == method and r.setting == eps]
                if not group:
                    continue
                ex = [r.extra for r in group]
                lines.append(
                    markdown_row(
                        [
                            f"{eps:g}",
                            LABELS[method],
                            format_mean_se([e["test_accuracy"] for e in ex], 3),
                            _fmt(max(e["training_epsilon"] for e in ex), ".4g"),
                            _fmt(_median([e["validation_mu"] for e in ex]), ".4g"),
                            _fmt(_median([e["validation_epsilon"] for e in ex]), ".4g"),
                            _fmt(statistics.fmean(e["training_runs"] for e in ex), ".4g")
                            + (" (E[K])" if method.startswith("ps_") else ""),
                            _fmt(_median([e.get("lam") for e in ex]))
                            if method != "ps_dpsgd"
                            else "lr " + _fmt(_median([e.get("lr") for e in ex])),
                            f"{statistics.fmean(r.wall_s for r in group):.1f}",
                        ]
                    )
                )
        ref = [r for r in ds_runs if r.method == "non_private"]
        if ref:
            lines.append(
                markdown_row(
                    [
                        "∞",
                        "non-private logistic regression (λ = 1), reference",
                        format_mean_se([r.extra["test_accuracy"] for r in ref], 3),
                        "∞",
                        "—",
                        "—",
                        "1",
                        "1",
                        "",
                    ]
                )
            )
            lines.append(
                markdown_row(
                    [
                        "∞",
                        "non-private, λ best on validation (grid 1e-3…1e3), reference",
                        format_mean_se([r.extra["tuned_test_accuracy"] for r in ref], 3),
                        "∞",
                        "∞",
                        "∞",
                        str(len(NON_PRIVATE_LAMBDAS)),
                        _fmt(_median([r.extra["tuned_lam"] for r in ref])),
                        f"{statistics.fmean(r.wall_s for r in ref):.1f}",
                    ]
                )
            )
        gibo = [r for r in ds_runs if r.method == "dp_gibo"]
        if gibo:
            lines += [
                "",
                "DP-GIBO's training ε is the plan, (T·b + w)·r converted (valid for adaptively chosen λ); "
                "the ledger's sum of the runs' exact curves converts to "
                + ", ".join(
                    f"{max(r.extra['training_epsilon_ledger'] for r in gibo if r.setting == eps):.4g} "
                    f"(ε = {eps:g}, largest over seeds)"
                    for eps in s.epsilons
                    if any(r.setting == eps for r in gibo)
                )
                + ".",
            ]
        lines += ["", "Paired by seed (difference in test accuracy, mean ± s.e., wins of DP-GIBO):", ""]
        for eps in s.epsilons:
            gibo = [r for r in ds_runs if r.method == "dp_gibo" and r.setting == eps]
            for other in ("amp_calibrated", "ps_amp", "ps_dpsgd"):
                rest = [r for r in ds_runs if r.method == other and r.setting == eps]
                m, se, wins, n = _paired(gibo, rest)
                if n:
                    verdict = (
                        "DP-GIBO wins"
                        if m - 2 * (0 if math.isnan(se) else se) > 0
                        else ("DP-GIBO loses" if m + 2 * (0 if math.isnan(se) else se) < 0 else "no clear difference")
                    )
                    lines.append(
                        f"- ε = {eps:g}, DP-GIBO − {LABELS[other]}: {m:+.3f} ± {_fmt(se, '.2g')} "
                        f"({wins}/{n} seeds better): {verdict}."
                    )
        lines.append("")
    lines += ["## Settings and privacy parameters (public)", ""]
    lines += [
        f"- Data: breast_cancer mapped to [−1, 1] with the feature ranges published in its documentation, "
        f"rows scaled to norm 1; synthetic: {s.synthetic_examples} examples, {s.synthetic_features} Gaussian "
        f"features on the unit sphere, logistic labels (logit sd {s.synthetic_signal:g}). Splits 50/30/20 % "
        "(train/validation/test).",
        f"- AMP: logistic loss, bias feature, C = √2, β = 0.5, τ = {s.tau:g}, σ_out = {s.sigma_out:g}; per-user "
        f"validation loss = logistic loss capped at {s.loss_cap:g}.",
        f"- DP-GIBO: T = {s.gibo_iterations}, b = {s.gibo_batch}, so {s.gibo_runs} training runs: "
        f"{s.gibo_runs - 1} evaluations, each below the reference RDP curve r, and the released model at θ_T "
        f"below {s.gibo_final_weight:g}·r; ({s.gibo_units:g})·r converts to the training ε. Unit cube over "
        f"log10 λ in [max({s.lam_lower:g}·λ_ref, 1.25·λ_min), "
        f"{s.lam_upper:g}·λ_ref], θ₀ at λ_ref; RBF length-scale {s.gibo_lengthscale:g}, output scale "
        f"{s.gibo_outputscale:g}, σ² = {s.gibo_noise_variance:g}, B = {s.gibo_clip:g}, AdaGrad η = "
        f"{s.gibo_step:g}, search radius {s.gibo_radius:g}.",
        f"- P&S: K ~ Poisson({s.mean_trials:.4f}) (P[K > {s.ps_tail_threshold}] = {s.ps_tail_probability:g}); "
        f"Gaussian scores of the mean capped loss (C = {s.loss_cap:g}); DP-SGD trials: 2-logit linear model, "
        f"Adam, lr log-uniform in [{s.dpsgd_lr_lower:g}, {s.dpsgd_lr_upper:g}], expected batch "
        f"{dict(s.dpsgd_batches)}, epochs {dict(s.dpsgd_epochs)}, clip √2.",
        "",
        markdown_row(
            [
                "ε",
                "calibrated (σ, λ)",
                "DP-GIBO per-run reference (σ, λ)",
                "P&S per-trial reference (σ, λ)",
                "DP-GIBO μ",
                "P&S per-trial μ₀",
                "DP-SGD noise multiplier",
            ]
        ),
        "|" + "|".join(["---"] * 7) + "|",
    ]
    for eps in s.epsilons:
        e = plan_["per_epsilon"][repr(float(eps))]
        g, p = e["gibo_budget"], e["ps_budget"]
        lines.append(
            markdown_row(
                [
                    f"{eps:g}",
                    f"({e['calibrated']['sigma']:.4g}, {e['calibrated']['lam']:.4g})",
                    f"({g['sigma']:.4g}, {g['lam']:.4g})",
                    f"({p['sigma']:.4g}, {p['lam']:.4g})",
                    f"{e['gibo_mu']:.4g}",
                    f"{e['ps_per_trial_mu']:.4g}",
                    ", ".join(f"{k}: {v['noise_multiplier']:.4g}" for k, v in e["dpsgd"].items()),
                ]
            )
        )
    return "\n".join(lines) + "\n"


def make_plot(settings: Settings, runs: list[Run], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = [d for d in settings.datasets if any(r.experiment == d for r in runs)]
    fig, axes = plt.subplots(1, len(datasets), figsize=(5.2 * len(datasets), 3.8), squeeze=False)
    for ax, dataset in zip(axes[0], datasets, strict=True):
        for method in METHODS:
            xs, ms, ses = [], [], []
            for eps in settings.epsilons:
                acc = [
                    r.extra["test_accuracy"]
                    for r in runs
                    if r.experiment == dataset and r.method == method and r.setting == eps
                ]
                if acc:
                    m, se = mean_se(acc)
                    xs.append(eps)
                    ms.append(m)
                    ses.append(0.0 if math.isnan(se) else se)
            if xs:
                ax.errorbar(xs, ms, yerr=ses, marker="o", capsize=3, label=LABELS[method])
        ref = [r.extra for r in runs if r.experiment == dataset and r.method == "non_private"]
        if ref:
            ax.axhline(
                statistics.fmean(e["test_accuracy"] for e in ref),
                color="gray",
                ls="--",
                lw=1,
                label="non-private (λ = 1)",
            )
            ax.axhline(
                statistics.fmean(e["tuned_test_accuracy"] for e in ref),
                color="black",
                ls=":",
                lw=1,
                label="non-private (λ tuned on validation)",
            )
        ax.set_xscale("log")
        ax.set_xlabel("ε (training; validation at the same ε), δ = 1e-5")
        ax.set_ylabel("test accuracy (non-private diagnostic)")
        ax.set_title(dataset)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
