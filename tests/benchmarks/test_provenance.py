"""benchmarks.provenance: the header of the timing reports reads this machine and this process,
names the git revision (and whether the tree was modified), and is written as JSON + markdown."""

import json
import math
import os
import subprocess
import time

import pytest
import torch

from benchmarks import provenance as P


def test_the_stamp_reads_this_machine_and_process_and_the_header_shows_it():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        stamp = P.provenance("scripts/x.py", ["--out", "a dir", "--quick"])
    finally:
        torch.set_num_threads(previous)
    assert stamp["command"] == "python scripts/x.py --out 'a dir' --quick"  # shell-quoted, runnable
    assert stamp["torch_threads"] == 1 and stamp["torch"] == torch.__version__
    assert stamp["machine"]["cpu_count"] == os.cpu_count() and stamp["machine"]["cpu"]
    time.sleep(0.2)
    report = P.finished(stamp)
    assert "_started" not in report and report["wall_s"] >= 0.2 and "load_average_end" in report["machine"]
    assert "_started" in stamp  # the stamp itself is left as it was
    text = "\n".join(P.header_lines(report, "T"))
    assert text.startswith("# T\n")
    for needle in (
        "`python scripts/x.py --out 'a dir' --quick`",
        report["date"],
        stamp["machine"]["cpu"],
        f"{os.cpu_count()} logical CPUs",
        f"torch {torch.__version__} with 1 thread (",
        "wall time 0 s",
    ):
        assert needle in text, needle


def test_the_revision_is_head_and_says_when_the_tree_was_modified(tmp_path):
    assert P.git_revision(tmp_path) is None  # not a checkout
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(tmp_path), *args], env=env, capture_output=True, text=True, check=True
        ).stdout.strip()

    git("init", "-q")
    (tmp_path / "f.txt").write_text("one\n")
    git("add", "f.txt")
    git("commit", "-q", "-m", "one")
    head = git("rev-parse", "HEAD")
    assert P.git_revision(tmp_path) == head
    (tmp_path / "untracked.txt").write_text("not part of the measured code\n")
    assert P.git_revision(tmp_path) == head
    (tmp_path / "f.txt").write_text("two\n")
    assert P.git_revision(tmp_path) == f"{head} (modified)"


def test_write_report_round_trips_and_refuses_nan(tmp_path):
    report = {"command": "python scripts/x.py", "rows": [{"a": 1.5, "b": None}]}
    json_path, md_path = P.write_report(tmp_path / "new", "x", report, "# x")
    assert json.loads(json_path.read_text()) == report and md_path.read_text() == "# x\n"
    with pytest.raises(ValueError):
        P.write_report(tmp_path, "y", {"rows": [math.nan]}, "# y")


def test_the_header_flags_a_loaded_machine_and_shows_a_note():
    report = P.finished(P.provenance("scripts/x.py", [], note="run at n = 1e6 only"))
    usable = report["machine"]["cpus_usable"]

    def header(load: float) -> str:
        machine = {**report["machine"], "load_average_start": [load, 0.0, 0.0]}
        return "\n".join(P.header_lines({**report, "machine": machine}, "T"))

    assert "Note: run at n = 1e6 only" in header(0.0)
    assert "Loaded machine" not in header(usable) and "Loaded machine" not in header(0.0)
    assert f"load average at the start ({usable + 0.5:.2f}) exceeded the {usable} usable CPUs" in header(usable + 0.5)
    assert "Note:" not in "\n".join(P.header_lines({**report, "note": None}, "T"))


def test_the_comparison_scripts_meta_and_their_one_space_json_with_nan(tmp_path):
    meta = P.script_meta("scripts/compare_x.py", ["--out", "a dir"], threads=3)
    assert meta["command"] == "python scripts/compare_x.py --out 'a dir'"
    assert P.script_meta("scripts/compare_x.py", [], threads=1)["command"] == "python scripts/compare_x.py"
    assert (meta["threads"], meta["cpus"], meta["torch"]) == (3, os.cpu_count(), torch.__version__)
    assert meta["date"].endswith(" UTC") and len(meta["date"]) == len("2026-01-01 00:00 UTC")
    report = {"meta": meta, "value": math.nan}
    json_path, md_path = P.write_report(tmp_path, "cmp", report, "text\n", indent=1, allow_nan=True)
    assert json_path.read_text() == json.dumps(report, indent=1) + "\n"  # what the scripts wrote themselves
    assert md_path.read_text() == "text\n"
    with pytest.raises(ValueError):
        P.write_report(tmp_path, "cmp", report, "text")  # the timing reports' default still refuses NaN
