"""Tests for botorch_dp/tuning/datasets.py: splits standardized with training statistics only,
and public synthetic data of the same shape."""

import torch

from botorch_dp.tuning import synthetic_like


def test_data_standardized_with_training_statistics(data):
    assert data.sizes() == {"train": 898, "validation": 539, "test": 360}
    mean, std = data.X_train.mean(0), data.X_train.std(0, unbiased=False)
    varying = std > 0
    torch.testing.assert_close(mean, torch.zeros_like(mean), atol=1e-5, rtol=0)
    torch.testing.assert_close(std[varying], torch.ones_like(std[varying]), atol=1e-5, rtol=0)
    assert data.X_val.mean(0).abs().max() > 1e-3  # not re-standardized on its own statistics


def test_synthetic_like_copies_only_the_shape(data):
    public = synthetic_like(data, seed=0)
    assert public.name == "synthetic" and public.sizes() == data.sizes()
    assert public.num_features == data.num_features and public.num_classes == data.num_classes
    std = public.X_train.std(0, unbiased=False)
    torch.testing.assert_close(std, torch.ones_like(std), atol=1e-5, rtol=0)
    # the values of the sensitive data do not enter: other data of the same shape give the same
    shuffled = type(data)(
        -data.X_train, data.y_train.flip(0), data.X_val * 2, data.y_val, data.X_test, data.y_test,
        num_classes=data.num_classes,
    )
    again = synthetic_like(shuffled, seed=0)
    assert torch.equal(again.X_train, public.X_train) and torch.equal(again.y_val, public.y_val)
    assert not torch.equal(synthetic_like(data, seed=1).X_train, public.X_train)
