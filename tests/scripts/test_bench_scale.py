"""scripts/bench_scale.py --quick: the checkpoint writes only the new losses, and the run writes
reports/bench_scale.{json,md} (here into a temporary directory) with its provenance and rows."""

from tests.helpers import loaded_script, markdown_table, read_timing_report


def test_quick_bench_writes_bytes_proportional_to_new_evaluations_and_its_report(tmp_path, capsys):
    argv = ["--quick", "--users", "2000", "--dim", "3", "--iterations", "3", "--out", str(tmp_path)]
    with loaded_script("bench_scale") as module:
        rows = module.main(argv)
    out = capsys.readouterr().out
    assert "| n | iter |" in out and len(rows) == 3
    first, last = rows[0], rows[-1]
    # same batch size each iteration: the third writes the same loss bytes as the first,
    # although the checkpoint now holds three times as many losses
    assert first["loss_bytes"] == last["loss_bytes"] >= 4 * 2000 * 8
    assert last["total"] > 2.5 * first["loss_bytes"]
    assert last["written"] < 1.2 * first["written"]
    assert all(r["tell_s"] > 0 and r["matmul_s"] > 0 for r in rows)

    report, text = read_timing_report(tmp_path, "bench_scale", argv)
    assert report["settings"] == {"users": [2000], "dim": 3, "iterations": 3, "repeat": 1}
    assert report["rows"] == rows and "A @ Y" in report["compared_against"]
    table = markdown_table(text)
    assert [(int(float(r["n"])), int(r["iter"]), int(r["N"])) for r in table] == [(2000, t, 4 * t) for t in (1, 2, 3)]
    for cells, row in zip(table, report["rows"], strict=True):
        assert cells["tell / matmul"] == f"{row['tell_s'] / row['matmul_s']:.2f}"
        assert cells["loss file MB"] == f"{row['loss_bytes'] / 1e6:.2f}"
    assert text in out  # what it printed is what it wrote
