"""benchmarks.report: a report rendered from a small runs.json (the tables: test_report_tables.py)."""

import dataclasses
import json

from benchmarks.outputs import render, settings_to_dict
from benchmarks.paper import Settings
from benchmarks.runs import Run


def _run(method: str, seed: int, final: float, evals: int = 10, experiment: str = "comparison", **extra) -> Run:
    return Run(experiment, method, seed, None, [0, evals], [1.0, final], final, evals, 2.0, extra=extra)


def _huber_run(method: str, seed: int, distance: float, epsilon: float | None) -> Run:
    return Run(
        "huber",
        method,
        seed,
        None,
        [0, 1, 2],
        [1.0, 0.5, distance**2],
        distance**2,
        4,
        0.5,
        epsilon,
        {"distance": [2.0, 1.0, distance], "final_distance": distance, "coord0": [0.0, 0.5, 0.7], "optimum0": 1.0},
    )


def test_render_a_small_runs_json(tmp_path):
    runs = [
        _huber_run("DP-GIBO (μ=1)", 0, 0.2, 4.38),
        _huber_run("DP-GIBO (μ=1)", 1, 0.4, 4.38),
        _huber_run("noisy GD (μ=1)", 0, 0.3, 4.38),
        _huber_run("noisy GD (μ=1)", 1, 0.3, 4.38),
    ]
    data = {
        "settings": settings_to_dict(Settings(huber_seeds=(0, 1))),
        "pilot": {},
        "argv": ["--only", "huber"],
        "wall_s": 12.0,
        "only": ["huber"],
        "execution": "1 torch thread",
        "runs": [dataclasses.asdict(r) for r in runs],
    }
    (tmp_path / "runs.json").write_text(json.dumps(data))
    result = render(tmp_path, ["--render", "x"])
    text = (tmp_path / "results.md").read_text()
    assert result["text"] == text and len(result["runs"]) == 4
    assert "Command: `python scripts/reproduce_paper.py --only huber`" in text
    assert "Total wall time: 12 s on 1 torch thread" in text and "nothing was re-run" in text
    section = text.split("## 5b.")[1].split("## Findings")[0]
    assert [line for line in section.splitlines() if line.startswith("|")] == [
        "| method | ε at δ = 1e-5 | evaluations | ‖θ_T − θ̂‖ (mean ± s.e.) | f(θ_T) − f(θ̂) (mean ± s.e.) | seeds |",
        "|---|---|---|---|---|---|",
        "| DP-GIBO (μ=1) | 4.380 | 4 | 0.3 ± 0.1 | 0.1 ± 0.06 | 2 |",
        "| noisy GD (μ=1) | 4.380 | 4 | 0.3 ± 0 | 0.09 ± 0 | 2 |",
    ]
    assert "- Matches the paper (E.4): DP-GIBO ends about as close to θ̂ as noisy GD (within 1.5×)" in text
    assert "## 1." not in text and "E.4 Huber: d = 4" in text
    assert (tmp_path / "huber.png").read_bytes()[:4] == b"\x89PNG" and not (tmp_path / "comparison.png").exists()
