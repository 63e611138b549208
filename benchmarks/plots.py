r"""The plots of a reproduction: loss against evaluations per experiment, sweeps, E.3/E.4 traces.

All losses are NON-PRIVATE diagnostics. matplotlib is imported only when plotting.
"""

from __future__ import annotations

import math
import statistics
import warnings
from pathlib import Path

from benchmarks.paper import Settings
from benchmarks.runs import Run, format_mu, group_by_method, mean_se, num_seeds, step_interp


def make_plots(settings: Settings, runs: list[Run], out: Path) -> list[Path]:
    r"""Write the PNG plots of the experiments present in ``runs`` to ``out``.

    Args:
        settings: The settings the runs were made with.
        runs: The runs.
        out: The output directory.

    Returns:
        The paths of the written plots.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = settings
    paths = []

    def band(ax, grid, curves, label, **kw):
        import numpy as np

        arr = np.array(curves, dtype=float)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")  # grid points before a run's first choice are NaN
            m = np.nanmean(arr, 0)
            se = (
                np.nanstd(arr, 0, ddof=1) / np.sqrt(np.sum(~np.isnan(arr), 0)) if arr.shape[0] > 1 else np.zeros_like(m)
            )
        (line,) = ax.plot(grid, m, label=label, **kw)
        se = np.nan_to_num(se)
        ax.fill_between(grid, m - se, m + se, alpha=0.2, color=line.get_color())

    def eval_grid(groups):
        r"""About 200 evaluation counts from 0 to the longest run among ``groups`` (lists of runs)."""
        max_e = int(max(max(r.evals) for rs in groups for r in rs))
        return list(range(0, max_e + 1, max(1, max_e // 200)))

    def loss_bands(ax, groups: dict[str, list[Run]]):
        r"""Mean ± s.e. of the loss against evaluations, one band per label."""
        grid = eval_grid(groups.values())
        for label, rs in groups.items():
            band(ax, grid, [step_interp(r.evals, r.losses, grid) for r in rs], label)

    def save(fig, name):
        path = out / name
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)

    comp = group_by_method(runs, "comparison")
    if comp:
        fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [3, 2]})
        grid = eval_grid(rs for method, rs in comp.items() if method != "private random search")
        for method, rs in comp.items():
            if method == "private random search":
                xs = sorted({r.setting for r in rs})
                ms = [mean_se([r.final_loss for r in rs if r.setting == x]) for x in xs]
                ev = [statistics.fmean(r.num_evaluations for r in rs if r.setting == x) for x in xs]
                ax.errorbar(
                    ev,
                    [m for m, _ in ms],
                    yerr=[0 if math.isnan(e) else e for _, e in ms],
                    fmt="s",
                    capsize=3,
                    label="private random search (same ε, δ; x = E[K])",
                )
                continue
            band(ax, grid, [step_interp(r.evals, r.losses, grid) for r in rs], method)
        ref = next(rs for k, rs in comp.items() if "pilot" in k)
        ax.axhline(
            statistics.fmean(r.extra["truth_loss"] for r in ref),
            color="gray",
            ls="--",
            lw=1,
            label="generating length-scales",
        )
        ax.set(
            xlabel="number of evaluations",
            ylabel="validation loss (non-private diagnostic)",
            yscale="log",
            title=f"GP length-scale tuning, d = {s.gp_dim} (mean ± s.e., {num_seeds(runs, 'comparison')} seeds)",
        )
        ax.legend(fontsize=7)
        rs_final = {r.seed: r.final_loss for r in comp.get("random search (non-private)", [])}
        if rs_final:
            names = [k for k in comp if k != "random search (non-private)"]
            for i, method in enumerate(names):
                rs = comp[method]
                if method == "private random search":
                    rs = [r for r in rs if r.setting == max(s.private_rs_fractions)]
                ratios = [r.final_loss / rs_final[r.seed] for r in rs if r.seed in rs_final]
                ax2.scatter([i] * len(ratios), ratios, alpha=0.7)
                ax2.plot([i - 0.25, i + 0.25], [statistics.median(ratios)] * 2, color="k")
            ax2.axhline(1.0, color="gray", ls="--", lw=1)
            ax2.set_xticks(range(len(names)), [n.replace(" (", "\n(") for n in names], fontsize=6, rotation=30)
            ax2.set(yscale="log", ylabel="final loss / random search's (same seed)", title="per seed (bar: median)")
        save(fig, "comparison.png")

    eps_runs = group_by_method(runs, "eps")
    if eps_runs:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
        eps_runs = dict(sorted(eps_runs.items(), key=lambda kv: kv[1][0].setting))
        # labelled by the setting (stored runs may carry the old "ε=..." method label)
        loss_bands(a1, {f"bias_tolerance={rs[0].setting:g}": rs for rs in eps_runs.values()})
        a1.set(xlabel="number of evaluations", ylabel="validation loss", yscale="log", title="loss along the run")
        a1.legend(fontsize=7)
        for rs in eps_runs.values():
            pts_ = a2.scatter([r.num_evaluations for r in rs], [r.final_loss for r in rs], alpha=0.6, s=18)
            e = statistics.median(r.num_evaluations for r in rs)
            median_loss = statistics.median(r.final_loss for r in rs)
            a2.scatter([e], [median_loss], marker="D", s=50, color=pts_.get_facecolor()[0], edgecolor="k")
            a2.annotate(f"{rs[0].setting:g}", (e, median_loss), textcoords="offset points", xytext=(4, 4), fontsize=8)
        a2.set(
            xlabel="evaluations used in T iterations",
            ylabel="final validation loss",
            yscale="log",
            title="bias tolerance (dots: seeds, diamonds: medians)",
        )
        save(fig, "eps_sweep.png")

    mu_runs = group_by_method(runs, "mu")
    if mu_runs:
        fig, ax = plt.subplots(figsize=(6, 4))
        items = sorted(mu_runs.values(), key=lambda rs: rs[0].setting)
        finite = [rs[0].setting for rs in items if not math.isinf(rs[0].setting)]
        inf_x = (max(finite) * 3) if finite else 1.0
        xs = [inf_x if math.isinf(rs[0].setting) else rs[0].setting for rs in items]
        for x, rs in zip(xs, items, strict=True):
            ax.scatter([x] * len(rs), [r.final_loss for r in rs], alpha=0.5, s=18, color="C0")
        ax.plot(xs, [statistics.median(r.final_loss for r in rs) for rs in items], "D-", color="C1", label="median")
        ax.plot(xs, [statistics.fmean(r.final_loss for r in rs) for rs in items], "o--", color="C2", label="mean")
        ax.legend(fontsize=7)
        ax.set_yscale("log")
        ax.set_xscale("log")
        ax.set_xticks(xs, [format_mu(rs[0].setting) for rs in items])
        ax.set(xlabel="μ (GDP); ∞ = non-private GIBO", ylabel="final validation loss", title="privacy level μ")
        save(fig, "mu_sweep.png")

    sig = group_by_method(runs, "sigma")
    if sig:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        loss_bands(ax, sig)
        ax.set(
            xlabel="number of evaluations",
            ylabel="validation loss (noise-free)",
            yscale="log",
            title=f"evaluation noise {s.observation_noise}: surrogate σ correct / high / low",
        )
        ax.legend(fontsize=7)
        save(fig, "sigma_sweep.png")

    svm = group_by_method(runs, "svm")
    if svm:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        loss_bands(ax, svm)
        ax.set(
            xlabel="number of evaluations",
            ylabel="validation MSE (non-private diagnostic)",
            yscale="log",
            title=f"SVM tuning, d = {next(iter(svm.values()))[0].extra.get('dim', '?')} "
            f"(mean ± s.e., {num_seeds(runs, 'svm')} seeds)",
        )
        ax.legend(fontsize=7)
        save(fig, "svm.png")

    for exp, name, title, ylabel in (
        ("normal", "normal_location.png", "Location of the normal model (E.3)", "f(θ_t) − f(x̄)"),
        ("huber", "huber.png", "Huber regression (E.4)", "f(θ_t) − f(θ̂)"),
    ):
        groups = group_by_method(runs, exp)
        if not groups:
            continue
        fig, (a1, a2) = plt.subplots(2, 1, figsize=(7, 7), sharex=True)
        for method, rs in groups.items():
            (line,) = a1.plot(rs[0].evals, rs[0].extra["coord0"], label=f"{method} (seed {rs[0].seed})")
            grid = rs[0].evals
            band(a2, grid, [r.losses for r in rs], method, color=line.get_color())
        a1.axhline(next(iter(groups.values()))[0].extra["optimum0"], color="k", ls="--", lw=1, label="optimum")
        a1.set(ylabel="θ_t[0]", title=title)
        a1.legend(fontsize=7)
        a2.set(xlabel="iteration t", ylabel=ylabel + " (mean ± s.e.)", yscale="log")
        a2.legend(fontsize=7)
        save(fig, name)
    return paths
