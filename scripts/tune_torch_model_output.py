r"""What ``scripts/tune_torch_model.py`` shows of a run: the training data's guarantee in its
JSON, the summary printed to stdout (the private release and its two guarantees, then the
NON-PRIVATE diagnostics, labelled as such) and the plot of public values only. Imported by the
script as ``scripts.tune_torch_model_output`` (the script puts the repository root on its
path); not a command itself.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import torch

from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.training import DPSGDConfig
from botorch_dp.tuning import TorchModelTuningObjective

__all__ = ["finite", "plot_release", "print_summary", "training_section"]


def finite(x: float | None) -> float | str | None:
    r"""``x`` for strict JSON: an infinite value as the string ``"inf"`` or ``"-inf"``."""
    if x is None:
        return None
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf")


def training_section(
    objective: TorchModelTuningObjective,
    ledger: PrivacyLedger,
    report: dict,
    dp_sgd: DPSGDConfig | None,
    num_examples: int,
    delta: float,
    num_tuning_runs: int,
) -> dict:
    r"""The training data's guarantee as the JSON states it: composed over every DP-SGD run of the
    ledger (checked against the objective's own count), or none without ``--dp-train``."""
    if dp_sgd is not None:  # --dp-train
        trained = objective.training_report(delta)
        assert (
            trained["epsilon"] == report["training"]["epsilon"]
            and trained["num_runs"] == report["training"]["num_runs"]
        )
        training_guarantee = {
            "data": f"training split ({num_examples} examples)",
            "protected": True,
            "accountant": ledger.training_accountant,
            "epsilon": finite(report["training"]["epsilon"]),
            "delta": delta,
            "num_runs": report["training"]["num_runs"],
            "runs_breakdown": {"dp_gibo_evaluations": num_tuning_runs, "final_model": 1, "diagnostic_baseline": 1},
            "per_run": {
                "noise_multiplier": objective.runs[0].noise_multiplier,
                "sample_rate": objective.runs[0].sample_rate,
                "steps": objective.runs[0].steps,
            },
            "target_epsilon": trained.get("target_epsilon"),
            "planned_runs": trained.get("planned_runs"),
            "note": "composed over ALL DP-SGD training runs on the training split"
            + (
                "; the noise multiplier was calibrated so that the planned runs spend at most the target"
                if dp_sgd.has_target
                else ""
            ),
        }
    else:
        training_guarantee = {
            "data": f"training split ({num_examples} examples)",
            "protected": False,
            "epsilon": "inf",
            "note": "models trained without DP: the training data have NO guarantee",
        }
    return training_guarantee


def _num(x: float | str) -> str:
    return x if isinstance(x, str) else f"{x:.4g}"


def _fmt_params(params: dict) -> str:
    return ", ".join(f"{k}={v:.3g}" for k, v in params.items())


def print_summary(summary: dict, args: argparse.Namespace) -> None:
    rel = summary["private_release"]
    val, tr = rel["guarantees"]["validation_data"], rel["guarantees"]["training_data"]
    print("\n=== private release ===")
    print(f"theta_0: {_fmt_params(rel['iterates'][0])}")
    print(f"theta_T: {_fmt_params(rel['hyperparameters'])}")
    print(f"evaluations: {len(rel['evaluation_points'])} in {len(rel['batch_sizes'])} iterations")
    if val["mu"] == "inf":
        print(f"validation data: NO guarantee (mu = inf: non-private GIBO) on the {val['data']}")
    else:
        print(
            f"validation data: mu = {_num(val['mu'])}-GDP => (epsilon = {_num(val['epsilon'])}, "
            f"delta = {val['delta']:g})-DP over the {val['data']}"
        )
    if tr["protected"]:
        print(
            f"training data  : epsilon = {_num(tr['epsilon'])} at delta = {tr['delta']:g} "
            f"({tr['accountant']}, composed over all {tr['num_runs']} DP-SGD runs on the {tr['data']})"
        )
        if tr["target_epsilon"] is not None:
            print(
                f"                 target epsilon {tr['target_epsilon']:g} for {tr['planned_runs']} planned runs: "
                f"noise multiplier {tr['per_run']['noise_multiplier']:.4g} per run"
            )
    else:
        print("training data  : NOT protected (trained without DP; use --dp-train)")
    diag = summary["NON_PRIVATE_diagnostics"]
    print("\n=== NON-PRIVATE diagnostics (validation/test data; do not publish) ===")
    for key, label in (("initial_theta0", "theta_0"), ("final_theta", "theta_T")):
        r = diag[key]
        print(
            f"{label}: validation loss {r['validation_loss']:.4f}, accuracy {r['validation_accuracy']:.4f}; "
            f"test accuracy {r['test_accuracy']:.4f}"
        )


def plot_release(path: Path, release, space, validation: dict, training: dict, ledger: PrivacyLedger) -> None:
    r"""Public values only: the iterates and evaluation points per hyperparameter, the
    posterior trace, ε spent against iterations, and the loss the run released (the noisy
    losses of ``selection="noisy_loss"``) or else the norm of the released noisy gradient.
    A curve of the validation loss at every iterate would be computed from the sensitive
    validation data (and, with --dp-train, cost one more DP-SGD run per iterate), so it is
    not drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from botorch_dp.plot import plot_loss, plot_privacy

    iterates = space.to_search_units(release.iterates)
    points = space.to_search_units(release.evaluation_points)
    it_of_point = torch.repeat_interleave(
        torch.arange(len(release.batch_sizes)), torch.tensor(release.batch_sizes, dtype=torch.long)
    )
    fig, axes = plt.subplots(1, space.dim + 3, figsize=(3.6 * (space.dim + 3), 3.4))
    for j, (ax, h) in enumerate(zip(axes, space.hyperparameters, strict=False)):  # 3 more axes than hyperparameters
        ax.scatter(it_of_point, points[:, j], s=10, color="gray", alpha=0.6, label="evaluation points")
        ax.plot(range(len(iterates)), iterates[:, j], "o-", label="iterates θ_t")
        lo, hi = h.search_range
        ax.set_ylim(lo, hi)
        ax.set_xlabel("iteration t")
        ax.set_ylabel(f"log10 {h.name}" if h.log_scale else h.name)
    axes[0].legend(fontsize=8)
    trace_ax, privacy_ax, loss_ax = axes[-3:]
    trace_ax.plot(range(1, len(release.posterior_traces) + 1), release.posterior_traces, "o-")
    trace_ax.set_xlabel("iteration t")
    trace_ax.set_ylabel("tr Σ_D(θ_t) after the batch")
    if math.isfinite(validation["delta"]) and validation["mu"] != "inf":
        plot_privacy(ledger, delta=validation["delta"], ax=privacy_ax)
    else:
        privacy_ax.text(0.5, 0.5, "non-private run: μ = ∞", ha="center", va="center", transform=privacy_ax.transAxes)
    if release.recorded("selection", "scores", None) is not None:
        plot_loss(release, ax=loss_ax)
    else:  # no loss was released: the released gradient's norm is the public sign of progress
        norms = release.released_gradients.norm(dim=-1)
        loss_ax.plot(range(len(norms)), norms.numpy(), "o-")
        loss_ax.set_xlabel("iteration t")
        loss_ax.set_ylabel("‖released noisy gradient‖")
    tr = (
        "training data unprotected"
        if not training["protected"]
        else (f"training ε = {_num(training['epsilon'])} ({training['num_runs']} DP-SGD runs)")
    )
    fig.suptitle(
        f"DP-GIBO (public release only): validation μ = {_num(validation['mu'])}, "
        f"ε = {_num(validation['epsilon'])} at δ = {validation['delta']:g}; {tr}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
