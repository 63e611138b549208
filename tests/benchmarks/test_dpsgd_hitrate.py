"""benchmarks.dpsgd_hitrate (issue 41, item 2): the auto arm's hit rate from hand-made runs, checked against
counts worked out by hand, and rendered into the report from a synthetic store (no training)."""

import dataclasses
import json
import math
import statistics

from benchmarks import dpsgd
from benchmarks.dpsgd_hitrate import AUTO_ARM, CANDIDATES, hit_rate
from benchmarks.dpsgd_report import render_store, summary
from benchmarks.dpsgd_task import Settings
from benchmarks.runs import Run

S, P, U = CANDIDATES.values()
#: Ten seeds: P beats S by 0.10 on seeds 0-5, by 0.001 on 6-7 (within the s.e.), S beats P by 0.10 on 8-9;
#: U is far below on every seed, so (P, S) are the two best everywhere.
P_ACC = [0.9] * 10
S_ACC = [0.8] * 6 + [0.899] * 2 + [1.0] * 2
U_ACC = [0.5] * 10
#: auto chose P everywhere but seed 1 (S: a miss), seed 8 (S: a hit) and seed 6 (untuned: not decided).
CHOSEN = ["proxy_then_train"] * 10
CHOSEN[1], CHOSEN[8], CHOSEN[6] = "training_selection", "training_selection", "untuned"


def test_the_hit_rate_counts_decided_seeds_by_hand():
    accuracy = {a: dict(enumerate(v)) for a, v in zip((S, P, U), (S_ACC, P_ACC, U_ACC), strict=True)}
    h = hit_rate(dict(enumerate(CHOSEN)), accuracy)
    se = statistics.stdev(p - s for p, s in zip(P_ACC, S_ACC, strict=True)) / math.sqrt(10)
    assert 0.001 < se < 0.1  # seeds 6, 7 undecided; the rest decided
    assert [s for s, r in h["per_seed"].items() if r["decided"]] == [0, 1, 2, 3, 4, 5, 8, 9]
    assert h["per_seed"][8]["best"] == S and h["per_seed"][0]["best"] == P and h["per_seed"][0]["second"] == S
    # decided: 0, 2-5 chose P and P was best (5 hits); 1 chose S (miss); 8 chose S, best (hit); 9 chose P (miss)
    assert (h["hits"], h["decided"], h["seeds"]) == (6, 8, 10)
    assert h["rate"] == 0.75 and not h["met"]
    assert h["per_seed"][6]["se"] == se and not h["per_seed"][6]["hit"]  # untuned has no arm
    assert hit_rate({0: "proxy_then_train"}, accuracy)["decided"] == 0  # one seed: no s.e., nothing decided
    better = dict(enumerate(CHOSEN))
    better[1] = "proxy_then_train"  # one more hit: 7/8 meets the 80% goal
    assert hit_rate(better, accuracy)["rate"] == 7 / 8 and hit_rate(better, accuracy)["met"]


def _run(arm: str, seed: int, acc: float, **extra) -> dict:
    run = Run("dpsgd", arm, seed, dpsgd.setting_of("digits", 3.0), [1], [0.0], 0.0, 1.0, 0.0, epsilon=3.0,
              extra={"dataset": "digits", "target_epsilon": 3.0, "test_accuracy": acc, "sigma": 1.0,
                     "trainings": 1, **extra})  # fmt: skip
    return {"key": f"{arm}{seed}", "run": dataclasses.asdict(run)}


def test_the_report_renders_the_hit_rate_from_a_synthetic_store(tmp_path):
    settings = Settings(datasets=("digits",), epsilons=(3.0,), arms=(S, P, U, AUTO_ARM))
    records = [_run(a, s, v[s]) for a, v in zip((S, P, U), (S_ACC, P_ACC, U_ACC), strict=True) for s in range(10)]
    records += [_run(AUTO_ARM, s, 0.9, chosen_method=CHOSEN[s]) for s in range(10)]
    header = {"context": {}, "experiment": "dpsgd", "format": "botorch-dp-runs/1", "settings": vars(settings)}
    lines = [json.dumps(header, default=list)] + [json.dumps(r) for r in records]
    (tmp_path / "runs-dpsgd.jsonl").write_text("\n".join(lines) + "\n")
    text = render_store(tmp_path).read_text()
    assert (
        "| digits ε=3 | P ✓ | S ✗ | P ✓ | P ✓ | P ✓ | P ✓ | [untuned ✗] | [P ✓] | S ✓ | P ✗ | 6 / 8 | 10 | NOT met |"
        in text
    )
    assert "Pooled over the cells: 6 hits of 8 decided seeds (75%); the goal is NOT met" in text
    runs = [Run(**r["run"]) for r in records]
    assert summary(settings, {}, runs)["hit_rate"]["digits ε=3"]["hits"] == 6
    no_auto = dataclasses.replace(settings, arms=(S, P, U))
    assert summary(no_auto, {}, [r for r in runs if r.method != AUTO_ARM])["hit_rate"] == {}
