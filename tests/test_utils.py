"""botorch_dp/utils.py: progress output stays plain when stderr is not a terminal (issue 43, item 8)."""

import io
import math
import warnings

import torch

from botorch_dp import DPGIBO, DPGIBOConfig, tune
from botorch_dp.tuning import Categorical, Hyperparameter, SearchSpace
from botorch_dp.utils import PlainProgress, progress_bar


def _plain(text: str) -> bool:
    return "\r" not in text and "\x1b" not in text


def test_a_dp_gibo_run_writes_plain_lines_to_a_stderr_that_is_not_a_terminal(capsys):
    d = 2
    config = DPGIBOConfig(
        bounds=torch.tensor([[0.0] * d, [1.0] * d], dtype=torch.float64),
        kernel=SearchSpace([Hyperparameter("a", 0, 1), Hyperparameter("b", 0, 1)]).recommended_kernel(),
        privacy_mu=1.0,
        num_iterations=4,
        batch_size=2,
        raw_samples=8,
        num_restarts=1,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        DPGIBO(config).run(lambda X: (X[:, :1] - 0.3).pow(2).expand(-1, 100), progress=True)
    err = capsys.readouterr().err
    assert _plain(err), repr(err[:200])
    lines = err.splitlines()
    # a start line, one line per quarter (1, 2, 3 of 4 steps) and the end: a few lines, not one per redraw
    assert lines[0].startswith("DP-GIBO: 0/4 it, started") and lines[-1].startswith("DP-GIBO: 4/4 it, done")
    assert [line.split(",")[1].strip() for line in lines[1:-1]] == ["25%", "50%", "75%"]
    assert "eps=" in lines[-1]  # the bar's public postfix


def test_a_tune_call_writes_plain_lines_to_a_stderr_that_is_not_a_terminal(capsys):
    space = SearchSpace([Hyperparameter("lr", 1e-4, 1e-1, log_scale=True), Categorical("opt", ("sgd", "adam"))])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tune(
            lambda cs: torch.stack([torch.full((50,), (math.log10(c["lr"]) + 2) ** 2) for c in cs]),
            space,
            epsilon=3.0,
            delta=1e-5,
            num_iterations=1,
            raw_samples=8,
            num_restarts=1,
            method="dp_gibo",  # the configurations' bar and each run's DP-GIBO bar
        )
    err = capsys.readouterr().err
    assert _plain(err) and "configurations: 2/2 it, done" in err and "DP-GIBO: 1/1 it, done" in err


def test_progress_bar_is_tqdm_on_a_terminal_plain_elsewhere_and_silent_when_disabled(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    bar = progress_bar(total=3, desc="x")
    assert not isinstance(bar, PlainProgress)
    bar.update(3)
    bar.close()
    assert "\r" in terminal.getvalue()  # tqdm's redraws, where a terminal renders them
    log = io.StringIO()
    monkeypatch.setattr("sys.stderr", log)
    assert list(progress_bar(range(5), desc="y")) == list(range(5))
    assert _plain(log.getvalue()) and log.getvalue().splitlines()[-1].startswith("y: 5/5 it, done")
    silent = io.StringIO()
    monkeypatch.setattr("sys.stderr", silent)
    bar = progress_bar(total=3, desc="z", disable=True)
    bar.update(3)
    bar.close()
    assert silent.getvalue() == ""
