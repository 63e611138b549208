r"""What the plug-in tests of each family share (issue 42 item 2): a user's own base for the members
every strategy has (``StrategyLike``; no class of the package), and a run of a config through the
public API, whole and checkpointed, resumed from the checkpoint alone and finished.

``run_and_resume`` returns what both runs released and were charged, as exact hex strings
(``tests/test_option_pins._encode_release``), so a test compares the resumed run with the
uninterrupted one bit for bit. ``assert_not_checkpointed``: a strategy whose run records could not be
kept (issue 42 item 3) is refused a checkpoint before anything is written.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from botorch_dp.optim import DPGIBO, DPGIBOConfig
from tests.test_option_pins import _encode_release, _objective

__all__ = ["UserStrategy", "assert_not_checkpointed", "run_and_resume", "run_once"]


class UserStrategy:
    r"""A user's base (derives from nothing of the package): ``family`` and ``name`` are set by
    ``@register``; a subclass lists its parameters in ``params`` (its ``spec`` and equality)."""

    family: str
    name: str
    requires: frozenset[str] = frozenset()
    provides: frozenset[str] = frozenset()
    needs_finite_mu: str | None = None

    @property
    def key(self) -> str:
        return f"{self.family}:{self.name}"

    @property
    def label(self) -> str:
        return f"{self.family}={self.name!r}"

    def conflicts(self) -> dict[str, str]:
        return {}

    def params(self) -> dict[str, Any]:
        return {}

    def spec(self) -> dict[str, Any]:
        return {"kind": self.name, **self.params()}

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> Any:
        return cls(**{k: v for k, v in spec.items() if k != "kind"})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UserStrategy) and type(other) is type(self) and other.spec() == self.spec()

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.params()})"


def run_once(config: DPGIBOConfig) -> tuple[DPGIBO, dict[str, Any]]:
    r"""A whole run of ``config`` and its encoded release."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the seed's warning
        opt = DPGIBO(config)
        release = opt.run(_objective, progress=False).release
    return opt, _encode_release(opt, release)


def run_and_resume(config: DPGIBOConfig, tmp_path: Path, stop_after: int) -> tuple[dict, dict, DPGIBO]:
    r"""The encoded releases of a whole run of ``config`` and of one stopped after ``stop_after``
    steps, closed, resumed with ``DPGIBO.resume(checkpoint_dir)`` (the strategies rebuilt from their
    specs through the registry) and finished; and the resumed run."""
    _, whole = run_once(config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = DPGIBO(config, checkpoint_dir=tmp_path / "ck")
        opt.run(_objective, progress=False, callback=lambda info: info.iteration == stop_after)
        opt.close()
        resumed = DPGIBO.resume(tmp_path / "ck")
        assert resumed.iteration == stop_after
        release = resumed.run(_objective, progress=False).release
        resumed.close()
    return whole, _encode_release(resumed, release), resumed


def assert_not_checkpointed(config: DPGIBOConfig, tmp_path: Path, message: str) -> None:
    r"""``config``'s run is refused a checkpoint (``TypeError`` matching ``message``) before its directory is
    made, and so is its ``state_dict``; without a checkpoint it is built as usual."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(TypeError, match=message):
            DPGIBO(config, checkpoint_dir=tmp_path / "refused")
        assert not (tmp_path / "refused").exists()
        with pytest.raises(TypeError, match=message):
            DPGIBO(config).state_dict()
