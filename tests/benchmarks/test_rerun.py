r"""``benchmarks.rerun``: the missing jobs of one kind, for some seeds and epsilon values, into a run store."""

import dataclasses
import json
import types

from benchmarks import rerun
from benchmarks.jobs import Job
from benchmarks.runs import Run


@dataclasses.dataclass
class _Settings:
    seeds: tuple[int, ...] = (0, 1)


def _experiment(ran):
    def runner(kind, kwargs):
        ran.append(dict(kwargs))
        return Run("fake", kwargs["arm"], kwargs["seed"], str(kwargs["epsilon"]), [1], [0.5], 0.5, 1.0, 0.0)

    jobs = [
        Job(f"{arm} {eps} {seed}", "arm", dict(arm=arm, seed=seed, epsilon=eps))
        for eps in (3.0, 1.0)
        for seed in (0, 1)
        for arm in ("a", "b")
    ] + [Job(f"reference {seed}", "arm", dict(arm="reference", seed=seed, epsilon=None)) for seed in (0, 1)]
    return types.SimpleNamespace(
        Settings=_Settings,
        SELECTION_FIELDS=("seeds",),
        prepare=lambda settings: {},
        make_runner=lambda settings, context: runner,
        experiment_jobs=lambda settings, context: jobs,
    )


def test_only_the_asked_seeds_and_epsilons_run_and_a_job_without_an_epsilon_is_skipped(tmp_path, monkeypatch):
    ran = []
    monkeypatch.setattr(rerun, "load_experiment", lambda name: _experiment(ran))
    args = ["fake", "--kind", "arm", "--seeds", "1", "--epsilons", "3", "--out", str(tmp_path)]
    assert rerun.main(args) == 0
    assert ran == [dict(arm="a", seed=1, epsilon=3.0), dict(arm="b", seed=1, epsilon=3.0)]
    assert rerun.main(args) == 0 and len(ran) == 2  # stored: not run again
    lines = (tmp_path / "runs-fake.jsonl").read_text().splitlines()
    assert len(lines) == 3 and [json.loads(x)["run"]["method"] for x in lines[1:]] == ["a", "b"]
    assert rerun.main(["fake", "--kind", "arm", "--seeds", "0", "--out", str(tmp_path)]) == 0
    assert [r["arm"] for r in ran[2:]] == ["a", "b", "a", "b", "reference"]  # every epsilon, and the reference
