"""benchmarks.outputs: runs.json settings and merging the runs.json of several commands."""

import json

import pytest

from benchmarks.outputs import merge, settings_from_dict, settings_to_dict
from benchmarks.paper import Settings
from tests.helpers import quick_reproduction


def test_settings_round_trip_and_unknown_keys_are_refused():
    s = Settings.quick()
    assert settings_from_dict(json.loads(json.dumps(settings_to_dict(s)))) == s
    with pytest.raises(ValueError, match="nl_iterations"):
        settings_from_dict({**settings_to_dict(s), "nl_iterations": 3})


@pytest.mark.timeout(120)
def test_merge_combines_runs_json_of_several_commands(tmp_path):
    out = quick_reproduction()["results_md"].parent
    data = json.loads((out / "runs.json").read_text())
    parts = {"a": ("comparison", "eps", "mu"), "b": ("sigma", "normal", "huber", "svm")}
    dirs = []
    for name, exps in parts.items():
        d = tmp_path / name
        d.mkdir()
        part = dict(data, only=list(exps), runs=[r for r in data["runs"] if r["experiment"] in exps])
        (d / "runs.json").write_text(json.dumps(part))
        dirs.append(d)
    merged_dir = tmp_path / "merged"
    result = merge([dirs[1], dirs[0]], merged_dir, ["--merge", "b", "a"])
    merged = json.loads((merged_dir / "runs.json").read_text())
    key = lambda r: (r["experiment"], r["method"], r["seed"], str(r["setting"]))
    assert [key(r) for r in merged["runs"]] == [key(r) for r in data["runs"]]  # experiment order restored
    assert len(result["runs"]) == len(data["runs"]) and len(merged["merged_from"]) == 2
    text = (merged_dir / "results.md").read_text()
    assert "Merged from the `runs.json` of" in text
    tables = lambda t: [line for line in t.splitlines() if line.startswith("|")]
    assert tables(text) == tables((out / "results.md").read_text())
    # a run may come from one source only; settings must agree
    with pytest.raises(ValueError, match="is in both"):
        merge([dirs[0], dirs[0]], tmp_path / "dup", [])
    other = dict(data, settings={**data["settings"], "iterations": 99})
    (tmp_path / "other.json").write_text(json.dumps(other))
    with pytest.raises(ValueError, match="differ .* in iterations"):
        merge([dirs[0], tmp_path / "other.json"], tmp_path / "bad", [])
