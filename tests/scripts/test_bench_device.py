"""scripts/bench_device.py at a tiny n: the report (here in a temporary directory) carries its provenance,
one row per device and part that matches the JSON, the seeded run's iterates, and says so when no GPU exists
instead of giving a GPU number."""

import torch

from botorch_dp.utils import torch_threads
from tests.helpers import loaded_script, markdown_table, read_timing_report


def test_tiny_bench_times_each_part_per_device_and_never_invents_a_gpu_number(tmp_path, capsys):
    argv = [
        "--n",
        "500",
        "--dim",
        "3",
        "--iterations",
        "2",
        "--repeat",
        "1",
        "--candidates",
        "8",
        "--threads",
        "1",
        "--out",
        str(tmp_path),
    ]
    with loaded_script("bench_device") as module, torch_threads(None):  # restores the thread count
        report = module.main(argv)
        cfg = module._config(3, 2, torch.device("cpu"))
        objective = module._objective(500, 3, torch.device("cpu"))
        out = capsys.readouterr().out
        written, text = read_timing_report(tmp_path, "bench_device", argv)
    assert written["torch_threads"] == 1
    assert written["devices"] == report["devices"] and text in out
    gpu = torch.cuda.is_available()
    assert report["gpu_available"] is gpu
    assert [r["device"] for r in report["devices"]] == ["cpu"] + (["cuda"] if gpu else [])
    assert ("No GPU on this machine" in text) is (not gpu)

    import warnings

    from botorch_dp.optim.dp_gibo import DPGIBO

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = DPGIBO(cfg).run(objective, progress=False)  # the benchmarked run is the seeded run itself
    assert report["devices"][0]["iterates"] == plain.release.iterates.tolist()
    assert report["devices"][0]["N"] == 8 and report["devices"][0]["theta_device"] == "cpu"

    table = markdown_table(text)
    assert [r["part"] for r in table] == ["tell 1 (N = 4)", "tell 2 (N = 8)", "acquisition", "batch search"]
    cpu = report["devices"][0]
    assert [r["cpu s"] for r in table] == [
        f"{v:.4f}" for v in (*cpu["tell_s"], cpu["acquisition_s"], cpu["batch_search_s"])
    ]
    assert all(v > 0 for v in (*cpu["tell_s"], cpu["acquisition_s"], cpu["batch_search_s"]))
    assert 0 <= cpu["trace_after_search"] and ("GPU / CPU" in text) is gpu
