r"""``optim.driver.run_to_end``: the ask/evaluate/tell loop over the public ``AskTell`` interface only."""

from __future__ import annotations

import torch

from botorch_dp.optim.driver import run_to_end
from botorch_dp.optim.results import IterationInfo


class _Counting:
    r"""An ``AskTell`` of ``steps`` steps that asks two points and keeps what it is told (no config)."""

    def __init__(self, steps: int, num_users: int = 3) -> None:
        self.steps, self.n = steps, num_users
        self.told: list[tuple[torch.Tensor, torch.Tensor]] = []

    @property
    def is_done(self) -> bool:
        return len(self.told) >= self.steps

    @property
    def iteration(self) -> int:
        return len(self.told)

    @property
    def num_users(self) -> int | None:
        return self.n if self.told else None

    def ask(self) -> torch.Tensor:
        return torch.full((2, 1), float(len(self.told)), dtype=torch.float64)

    def tell(self, points, losses) -> IterationInfo:
        self.told.append((points, losses))
        return IterationInfo(len(self.told), points[0], points.shape[0], 0.0)

    def tell_partitioned(self, points, partitions):  # pragma: no cover - not used here
        raise AssertionError

    def guarantee(self, delta=None):
        class _G:
            epsilon = 0.0

        return _G()

    def result(self):
        return "result"


def test_the_loop_evaluates_each_asked_batch_and_tells_its_losses_until_done():
    run = _Counting(steps=4)
    result = run_to_end(run, lambda X: X.expand(-1, 3) + 1.0, 4, None, False, None)
    assert result == "result" and len(run.told) == 4
    for t, (points, losses) in enumerate(run.told):
        assert torch.equal(points, torch.full((2, 1), float(t), dtype=torch.float64))
        assert torch.equal(losses, torch.full((2, 3), t + 1.0, dtype=torch.float64))


def test_a_callback_returning_true_stops_the_loop():
    run = _Counting(steps=10)
    seen = []
    run_to_end(
        run, lambda X: X.expand(-1, 3), 10, lambda info: seen.append(info.iteration) or info.iteration == 2, False, None
    )
    assert seen == [1, 2] and len(run.told) == 2
