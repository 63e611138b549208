r"""What the classification-tuning experiments (``mlp``, ``mixed``) share: their data and seeds.

``ClassificationSettings`` holds the settings fields both begin with (a scikit-learn data set,
its per-seed split and the replication seeds); ``load_data`` makes the seed's stratified split.
All of it is public and fixed before any run.
"""

from __future__ import annotations

from dataclasses import dataclass

from botorch_dp.tuning import ClassificationData, load_sklearn_classification

__all__ = ["ClassificationSettings", "load_data"]


@dataclass
class ClassificationSettings:
    r"""The first settings fields of a classification-tuning experiment (public values only)."""

    mode: str = "full"
    # data and model
    dataset: str = "digits"
    val_fraction: float = 0.3
    test_fraction: float = 0.2
    seeds: tuple[int, ...] = tuple(range(10))


def load_data(settings: ClassificationSettings, seed: int) -> ClassificationData:
    r"""The seed's stratified train / validation / test split of ``settings.dataset``."""
    return load_sklearn_classification(
        settings.dataset, val_fraction=settings.val_fraction, test_fraction=settings.test_fraction, seed=seed
    )
