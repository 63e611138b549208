r"""Redraw the mixed benchmark's private arms on given seeds: is a seed's best arm the same on another draw?

``python scripts/mixed_arm_redraws.py EPS DRAWS SEEDS [KINDS] [OUT]`` runs ``benchmarks.mixed.Runner``'s jobs
(``private_rs``, ``dp_hypo``, ``tune_run`` by default) at ε = EPS on each seed (comma-separated) DRAWS times,
draw r with the noise seed ``child_seeds([the stored run's noise seed, 777, r], 1)`` (K, the trial points and the
score noise change; the data, split and proxy do not), and appends one JSON line per run to OUT
(``{seed, eps, rep, method, test_loss, K, s}``; the test loss and K are NON-PRIVATE diagnostics).
``scripts/mixed_auto_compare.py`` reads that file. E[K] is the stored arms' budget, 104.
"""

from __future__ import annotations

import json
import sys
import time
import warnings

from benchmarks.mixed import Runner, Settings
from benchmarks.mixed_task import DP_HYPO, PRIVATE_RS, TUNE
from botorch_dp.utils import child_seeds

LABEL = {"private_rs": PRIVATE_RS, "dp_hypo": DP_HYPO, "tune_run": TUNE}
BUDGET = 104  # the stored arms' budget (tune's evaluations at the first epsilon): E[K] of the selections


class Redraw(Runner):
    r"""``Runner`` whose noise seed of draw ``rep`` is derived from the stored run's."""

    rep = 0

    def _noise_seed(self, method: str, seed: int, epsilon: float) -> int | None:
        base = super()._noise_seed(method, seed, epsilon)
        return None if base is None else child_seeds([base, 777, self.rep], 1)[0]


def main(argv: list[str]) -> None:
    eps, draws, seeds = float(argv[0]), int(argv[1]), [int(s) for s in argv[2].split(",")]
    kinds = argv[3].split(",") if len(argv) > 3 else list(LABEL)
    path = argv[4] if len(argv) > 4 else "arm-repeats.jsonl"
    runner = Redraw(Settings(tune_auto_proxy=True), {})
    with open(path, "a", encoding="utf-8") as out:
        for seed in seeds:
            for rep in range(1, draws + 1):
                runner.rep = rep
                for kind in kinds:
                    start = time.perf_counter()
                    kwargs: dict = dict(method=LABEL[kind], seed=seed, epsilon=eps, setting=eps)
                    if kind != "tune_run":
                        kwargs["budget"] = BUDGET
                    run = runner.execute(kind, kwargs)
                    record = dict(
                        seed=seed,
                        eps=eps,
                        rep=rep,
                        method=LABEL[kind],
                        test_loss=run.extra["test_loss"],
                        K=run.extra.get("realized_trials_NON_PRIVATE"),
                        s=time.perf_counter() - start,
                    )
                    out.write(json.dumps(record) + "\n")
                    out.flush()
                    print(record, flush=True)


if __name__ == "__main__":
    warnings.simplefilter("ignore")  # seeded noise warns on every run: a measurement
    main(sys.argv[1:])
