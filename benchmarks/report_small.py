r"""Sections 5–6 of ``results.md``: E.3 (normal location), E.4 (Huber), E.2 (SVM) and their findings."""

from __future__ import annotations

import statistics

from benchmarks.paper import Settings
from benchmarks.report_tables import (
    EVALUATIONS_MEAN,
    FINAL_LOSS,
    WALL_TIME,
    compare_sentence,
    label_column,
    mean_se_column,
    median_column,
    paired_finding,
    reference_row,
    seeds_column,
    table,
    wins_column,
)
from benchmarks.runs import Run, group_by_method


def small_problem_sections(s: Settings, runs: list[Run]) -> tuple[list[str], list[str]]:
    r"""The tables of sections 5a, 5b and 6 (normal location, Huber, SVM) and their findings."""
    lines: list[str] = []
    add = lines.append
    findings: list[str] = []
    delta = f"{s.target_delta:g}"

    final_distance = mean_se_column("‖θ_T − x̄‖ (mean ± s.e.)", lambda r: r.extra["final_distance"], 3)
    normal = group_by_method(runs, "normal")
    if normal:
        add("## 5a. Location of the normal model (E.3)\n")
        add(
            table(
                normal,
                [
                    label_column(),
                    ("ε at δ = 1e-5", lambda label, rs: f"{rs[0].epsilon:.3f}"),
                    final_distance,
                    mean_se_column("f(θ_T) − f(x̄) (mean ± s.e.)", digits=3),
                    mean_se_column("‖θ_0 − x̄‖", lambda r: r.extra["distance"][0], 3),
                    seeds_column(),
                ],
            )
        )
        add("")
        keys = list(normal)
        if len(keys) == 2:
            ok, txt = compare_sentence(
                keys[1],
                [r.extra["final_distance"] for r in normal[keys[1]]],
                keys[0],
                [r.extra["final_distance"] for r in normal[keys[0]]],
            )
            findings.append(
                ("Matches" if ok else "**Does NOT match**")
                + f" the paper (E.3): the larger μ ends closer to the MLE x̄ (distance {txt})."
            )
    huber = group_by_method(runs, "huber")
    if huber:
        add("## 5b. Huber regression (E.4): DP-GIBO vs noisy gradient descent\n")
        add(
            table(
                huber,
                [
                    label_column(),
                    (
                        "ε at δ = 1e-5",
                        lambda label, rs: "non-private" if rs[0].epsilon is None else f"{rs[0].epsilon:.3f}",
                    ),
                    ("evaluations", lambda label, rs: f"{rs[0].num_evaluations}"),
                    mean_se_column("‖θ_T − θ̂‖ (mean ± s.e.)", lambda r: r.extra["final_distance"], 3),
                    mean_se_column("f(θ_T) − f(θ̂) (mean ± s.e.)", digits=3),
                    seeds_column(),
                ],
            )
        )
        add("")
        gibo_k = next((k for k in huber if k.startswith("DP-GIBO")), None)
        gd_k = next((k for k in huber if k.startswith("noisy GD")), None)
        if gibo_k and gd_k:
            a = [r.extra["final_distance"] for r in huber[gibo_k]]
            b = [r.extra["final_distance"] for r in huber[gd_k]]
            _, txt = compare_sentence("DP-GIBO", a, "noisy GD", b)
            close = statistics.fmean(a) <= 1.5 * statistics.fmean(b)
            findings.append(
                ("Matches" if close else "**Does NOT match**")
                + f" the paper (E.4): DP-GIBO ends about as close to θ̂ as noisy GD (within 1.5×): "
                f"distance {txt}."
            )

    svm = group_by_method(runs, "svm")
    if svm:
        add("## 6. SVM hyperparameter tuning (E.2)\n")
        rs_key = "random search (non-private)"

        def svm_privacy(label: str, rs: list[Run]) -> str:
            return "none" if rs[0].epsilon is None else f"μ = {s.svm_mu:g} ({rs[0].epsilon:.3f}, {delta})-DP"

        ref = next((rs for rs in svm.values() if "initial_loss" in rs[0].extra), None)
        columns = [
            label_column(),
            ("privacy", svm_privacy),
            EVALUATIONS_MEAN,
            FINAL_LOSS,
            median_column(),
            wins_column(
                "seeds lower than random search",
                {r.seed: r.final_loss for r in svm.get(rs_key, [])},
                rs_key,
                lower=False,
            ),
            seeds_column(),
            WALL_TIME,
        ]
        add(table(svm, columns, [reference_row("loss at θ₀", ref, "initial_loss", 8, evals="0")] if ref else []))
        add("")
        dp_key = next((k for k in svm if k.startswith("DP-GIBO")), None)
        if dp_key and rs_key in svm:
            findings.append(
                paired_finding(
                    "the paper's claim (E.2) that DP-GIBO beats random search on SVM tuning",
                    "DP-GIBO",
                    svm[dp_key],
                    "random search",
                    svm[rs_key],
                )
            )
        if "GIBO (non-private)" in svm and rs_key in svm:
            findings.append(
                paired_finding(
                    "the paper's claim (Sopa et al., short version, §4.4) that non-private "
                    "GIBO beats random "
                    "search on SVM tuning",
                    "GIBO",
                    svm["GIBO (non-private)"],
                    "random search",
                    svm[rs_key],
                )
            )
        if dp_key and "GIBO (non-private)" in svm:
            findings.append(
                paired_finding(
                    "the paper's cost of privacy on SVM tuning (non-private GIBO better than DP-GIBO)",
                    "GIBO",
                    svm["GIBO (non-private)"],
                    "DP-GIBO",
                    svm[dp_key],
                )
            )
    return lines, findings
