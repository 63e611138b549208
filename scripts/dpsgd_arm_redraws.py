r"""Redraw the dpsgd benchmark's candidate arms of ``tune(method="auto")`` and measure auto's hit rate on them.

``python scripts/dpsgd_arm_redraws.py run DATASET EPS DRAWS SEEDS OUT`` runs the arms that run each method
``tune(method="auto", protect="training")`` may choose (``benchmarks.dpsgd_hitrate.CANDIDATES``: PS-profile
geometric, proxy then train, subsample then train) on each seed (comma-separated) DRAWS times, at the benchmark's
settings (``benchmarks.dpsgd_task.Settings()``), and appends one JSON line per run to OUT (``{dataset, eps, seed,
rep, arm, test_accuracy, s}``; the test accuracy is a NON-PRIVATE diagnostic). The seed fixes the split, the
public slice and the initialisation (paired across arms and draws) and, as in the stored arms, the cheap arms'
configurations; the privacy noise, Poisson batches and subset, the selection's ``K`` and trial points come from OS
entropy, so every draw's noise is a distinct stream. An optional sixth argument names other arms to run instead
(comma-separated), e.g. ``benchmarks.dpsgd_arms.CENTRE_ARM``, the untuned run auto may choose.

``python scripts/dpsgd_arm_redraws.py render OUT REPORT STORE[:centre] [...] [--notes FILE]`` reads OUT
(comma-separated files) and the auto arm's runs in the run stores (``runs-dpsgd.jsonl``; the last stored run per
seed and cell wins) and writes REPORT: per seed, each candidate's mean test accuracy over its draws with its
standard error; the seed is DECIDED when the best candidate's mean exceeds the second's by more than the standard
error of that difference (the two means' standard errors combined); auto HITS a decided seed when it chose the best
candidate there. ``STORE:centre``: that store's auto could run the untuned training, so the centre arm's draws
(where run) are a fourth candidate. FILE's text (the findings, by hand) goes after the header.
"""

from __future__ import annotations

import json
import math
import sys
import time
import warnings

__all__ = ["decide", "main"]


def run(dataset: str, eps: float, draws: int, seeds: list[int], path: str, arms: list[str] | None = None) -> None:
    from benchmarks.dpsgd import Runner
    from benchmarks.dpsgd_hitrate import CANDIDATES
    from benchmarks.dpsgd_task import Settings

    runner = Runner(Settings(), {})
    with open(path, "a", encoding="utf-8") as out:
        for seed in seeds:
            for rep in range(draws):
                for arm in arms or CANDIDATES.values():
                    start = time.perf_counter()
                    result = runner.execute("arm", dict(arm=arm, dataset=dataset, seed=seed, epsilon=eps))
                    record = dict(
                        dataset=dataset,
                        eps=eps,
                        seed=seed,
                        rep=rep,
                        arm=arm,
                        test_accuracy=float(result.extra["test_accuracy"]),
                        s=round(time.perf_counter() - start, 1),
                    )
                    out.write(json.dumps(record) + "\n")
                    out.flush()
                    print(record, flush=True)


def decide(draws: dict[str, list[float]]) -> dict:
    r"""Per seed: arm → its draws' test accuracies. The best and second arm by mean, their difference and its
    standard error (``sqrt(se_a² + se_b²)``, NaN with fewer than two draws), and whether it is decided."""
    stats = {}
    for arm, values in draws.items():
        n = len(values)
        mean = sum(values) / n
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else math.nan
        stats[arm] = (mean, sd / math.sqrt(n), n)
    best, second = sorted(stats, key=lambda a: stats[a][0], reverse=True)[:2]
    diff = stats[best][0] - stats[second][0]
    se = math.hypot(stats[best][1], stats[second][1])
    return {"stats": stats, "best": best, "second": second, "difference": diff, "se": se, "decided": diff > se}


def auto_choices(stores: list[str], eps: float) -> dict[str, dict[int, str]]:
    r"""dataset → seed → the method the auto arm chose at ``eps`` (the last stored run per seed wins)."""
    from benchmarks.dpsgd_hitrate import AUTO_ARM

    chosen: dict[str, dict[int, str]] = {}
    for store in stores:
        with open(store, encoding="utf-8") as lines:
            for line in lines:
                run = json.loads(line).get("run")
                if run and run["method"] == AUTO_ARM and run["extra"].get("target_epsilon") == eps:
                    chosen.setdefault(run["extra"]["dataset"], {})[int(run["seed"])] = run["extra"]["chosen_method"]
    return chosen


def redraw_hit_rate(draws: dict[int, dict[str, list[float]]], chosen: dict[int, str], centre: bool = True) -> dict:
    r"""Per seed ``decide``'s result with ``chosen`` and ``hit``; ``hits`` and ``decided`` over the seeds."""
    from benchmarks.dpsgd_arms import CENTRE_ARM
    from benchmarks.dpsgd_hitrate import CANDIDATES

    arm_of = {**CANDIDATES, "untuned": CENTRE_ARM}  # the centre's draws, where run, are a fourth candidate
    per_seed = {}
    for seed in sorted(draws):
        if not set(CANDIDATES.values()) <= set(draws[seed]):
            continue  # a seed whose candidates have not all run yet
        row = decide({a: v for a, v in draws[seed].items() if centre or a != CENTRE_ARM})
        row["chosen"] = chosen.get(seed)
        row["hit"] = arm_of.get(row["chosen"] or "") == row["best"]
        arm = arm_of.get(row["chosen"] or "")
        # the chosen method's shortfall: the best candidate's mean minus the chosen one's (NaN: no arm of its own)
        row["regret"] = row["stats"][row["best"]][0] - row["stats"][arm][0] if arm in row["stats"] else math.nan
        per_seed[seed] = row
    decided = [s for s, row in per_seed.items() if row["decided"] and row["chosen"] is not None]
    regrets = [row["regret"] for row in per_seed.values() if math.isfinite(row["regret"])]
    return {
        "per_seed": per_seed,
        "decided": len(decided),
        "hits": sum(per_seed[s]["hit"] for s in decided),
        "regret": sum(regrets) / len(regrets) if regrets else math.nan,
        "chosen_seeds": len(regrets),
    }


def render(path: str, report: str, stores: list[str], notes: str | None = None) -> None:
    r"""Write REPORT (see the module) from the redraws in ``path`` (comma-separated files) and ``stores``, with
    the text of the file ``notes`` (the findings, written by hand) after the header."""
    import datetime
    import os
    import platform

    from benchmarks.dpsgd_arms import CENTRE_ARM
    from benchmarks.dpsgd_hitrate import CANDIDATES

    letter = {"training_selection": "S", "proxy_then_train": "P", "subsample_tuning": "U", "untuned": "N (centre)"}
    data: dict[tuple[str, float], dict[int, dict[str, list[float]]]] = {}
    seconds = 0.0
    for file in path.split(","):
        with open(file, encoding="utf-8") as lines:
            for line in lines:
                r = json.loads(line)
                data.setdefault((r["dataset"], r["eps"]), {}).setdefault(r["seed"], {}).setdefault(r["arm"], [])
                data[(r["dataset"], r["eps"])][r["seed"]][r["arm"]].append(r["test_accuracy"])
                seconds += r["s"]
    out = [
        '# `tune(method="auto")`\'s hit rate on the dpsgd task, candidates redrawn (issue 41, item 2)',
        "",
        f"Command: `PYTHONPATH=. python {' '.join(sys.argv[0:1])} run DATASET 3 3 {_seed_text(data)} FILE` per data "
        "set, then "
        f"`render {path} {report} {' '.join(stores)}`. Rendered {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} "
        f"UTC on {platform.machine()} ({os.cpu_count()} logical CPUs shared with other jobs), 1 torch thread per "
        f"run (`benchmarks.dpsgd.Runner`), nice -n 5; the redraws' runs took {seconds / 60:.0f} minutes of wall "
        "time in all.",
        "",
        "Per seed every candidate arm (the arm that runs the method auto may choose, at the benchmark's settings: "
        + ", ".join(f"{arm} = `{m}` ({letter[m]})" for m, arm in CANDIDATES.items())
        + ") is run R times: the seed fixes the split, the public slice and the initialisation (paired across arms "
        "and draws); the privacy noise, Poisson batches and subset, K and the selection's trial points come from OS "
        "entropy (a distinct stream per draw; the cheap arms' configurations are seeded, as in the stored arms). A "
        "seed is DECIDED when the best candidate's mean test accuracy (NON-PRIVATE) exceeds the second's by more "
        "than the standard error of that difference, sqrt(se_1^2 + se_2^2) over the draws; auto "
        "HITS a decided seed when it chose the best candidate there. Auto's choice is read from the run store(s).",
        "",
    ]
    if notes is not None:
        with open(notes, encoding="utf-8") as f:
            out += [f.read().rstrip("\n"), ""]
    for (dataset, eps), draws in sorted(data.items()):
        for store in stores:
            # STORE:centre: its auto could choose the untuned run, whose draws (where run) are a fourth candidate
            store, _, flag = store.partition(":")
            centre = flag == "centre" and any(CENTRE_ARM in v for v in draws.values())
            columns = list(CANDIDATES.values()) + ([CENTRE_ARM] if centre else [])
            chosen = auto_choices([store], eps).get(dataset, {})
            if not chosen:
                continue
            h = redraw_hit_rate(draws, chosen, centre)
            out += [f"## {dataset} ε = {eps:g}, auto's choices from `{store}`", ""]
            out += [
                "| seed | "
                + " | ".join(columns)
                + " | best − second ± se | decided | auto chose | hit | best − chosen |",
                "|---|" + "---|" * (len(columns) + 5),
            ]
            for seed, row in h["per_seed"].items():
                cells = []
                for arm in columns:
                    if arm not in row["stats"]:
                        cells.append("—")
                        continue
                    mean, se, n = row["stats"][arm]
                    mark = "**" if arm == row["best"] else ""
                    cells.append(f"{mark}{mean:.3f} ± {se:.3f}{mark} ({n})")
                c = row["chosen"]
                hit = ("✓" if row["hit"] else "✗") if row["decided"] else f"({'✓' if row['hit'] else '✗'})"
                out.append(
                    f"| {seed} | " + " | ".join(cells) + f" | {row['difference']:.3f} ± {row['se']:.3f} | "
                    f"{'yes' if row['decided'] else 'no'} | {letter.get(c, c) if c else '—'} | {hit} | "
                    f"{row['regret']:.3f} |"
                )
            rows = [r for r in h["per_seed"].values() if all(a in r["stats"] for a in columns)]
            fixed = {
                letter[m]: sum(r["stats"][r["best"]][0] - r["stats"][a][0] for r in rows) / len(rows)
                for m, a in {**CANDIDATES, "untuned": CENTRE_ARM}.items()
                if a in columns
            }
            means = {a: sum(r["stats"][a][0] for r in rows) / len(rows) for a in columns}
            out += [
                "",
                f"**Hits: {h['hits']} of {h['decided']} decided seeds** (goal: 8 of 10, i.e. 80%). The chosen "
                f"method's mean shortfall against the seed's best candidate (redraw means): {h['regret']:.3f} over "
                f"{h['chosen_seeds']} seeds (always the same method instead: "
                + ", ".join(f"{k} {v:.3f}" for k, v in fixed.items())
                + "). Candidates' mean over seeds: "
                + ", ".join(f"{a} {m:.3f}" for a, m in means.items())
                + ".",
                "",
            ]
    with open(report, "w", encoding="utf-8") as f:
        f.write("\n".join(out))


def _seed_text(data: dict) -> str:
    r"""The redrawn seeds as the ``run`` command takes them (``a,...,b`` when they are a run of integers)."""
    seeds = sorted({seed for draws in data.values() for seed in draws})
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]},...,{seeds[-1]}"
    return ",".join(map(str, seeds))


def main(argv: list[str]) -> None:
    if argv[0] == "run":
        arms = argv[6].split(",") if len(argv) > 6 else None
        run(argv[1], float(argv[2]), int(argv[3]), [int(s) for s in argv[4].split(",")], argv[5], arms)
    elif argv[0] == "render":
        notes = None
        if "--notes" in argv:
            i = argv.index("--notes")
            notes, argv = argv[i + 1], argv[:i] + argv[i + 2 :]
        render(argv[1], argv[2], argv[3:], notes)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    main(sys.argv[1:])
