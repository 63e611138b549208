import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_scale.py"


def _load():
    spec = importlib.util.spec_from_file_location("bench_scale", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quick_bench_writes_bytes_proportional_to_new_evaluations(capsys):
    rows = _load().main(["--quick", "--users", "2000", "--dim", "3", "--iterations", "3"])
    out = capsys.readouterr().out
    assert "| n | iter |" in out and len(rows) == 3
    first, last = rows[0], rows[-1]
    # same batch size each iteration: the third writes the same loss bytes as the first,
    # although the checkpoint now holds three times as many losses
    assert first["loss_bytes"] == last["loss_bytes"] >= 4 * 2000 * 8
    assert last["total"] > 2.5 * first["loss_bytes"]
    assert last["written"] < 1.2 * first["written"]
    assert all(r["tell_s"] > 0 and r["matmul_s"] > 0 for r in rows)
