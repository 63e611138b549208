"""Tests for botorch_dp/objectives/datasets.py: splits standardized with training statistics only,
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
        -data.X_train,
        data.y_train.flip(0),
        data.X_val * 2,
        data.y_val,
        data.X_test,
        data.y_test,
        num_classes=data.num_classes,
    )
    again = synthetic_like(shuffled, seed=0)
    assert torch.equal(again.X_train, public.X_train) and torch.equal(again.y_val, public.y_val)
    assert not torch.equal(synthetic_like(data, seed=1).X_train, public.X_train)


def test_arrays_of_any_float_dtype_are_accepted_and_checked():
    import numpy as np
    import pytest

    from botorch_dp.tuning import ClassificationData

    X = np.arange(12, dtype=np.float64).reshape(6, 2)
    d = ClassificationData(X, np.array([0, 1, 2, 0, 1, 2], dtype=np.int32), X[:2].astype(np.float16), [1, 0])
    assert d.X_train.dtype == torch.float64 and d.X_val.dtype == torch.float16  # kept; the model decides
    assert d.y_train.dtype == torch.long and d.num_classes == 3 and d.is_classification
    assert torch.equal(d.X_train, torch.from_numpy(X)) and d.sizes() == {"train": 6, "validation": 2, "test": 0}
    ints = ClassificationData(np.ones((3, 2), dtype=np.int64), np.zeros(3), np.ones((2, 2)), np.zeros(2))
    assert ints.X_train.dtype == torch.get_default_dtype() and not ints.is_classification and ints.num_classes is None
    with pytest.raises(ValueError, match="X_val has 2 rows but y_val has 3"):
        ClassificationData(X, np.zeros(6, dtype=int), X[:2], np.zeros(3, dtype=int))
    with pytest.raises(ValueError, match="feature shape"):
        ClassificationData(X, np.zeros(6, dtype=int), np.ones((2, 3)), np.zeros(2, dtype=int))
    with pytest.raises(ValueError, match="both be class labels or both floating"):
        ClassificationData(X, np.zeros(6, dtype=int), X[:2], np.zeros(2))
    with pytest.raises(ValueError, match="X_test and y_test"):
        ClassificationData(X, np.zeros(6, dtype=int), X[:2], np.zeros(2, dtype=int), X_test=X)
    with pytest.raises(ValueError, match="X_train must be a numpy array or a tensor"):
        ClassificationData("data", np.zeros(6, dtype=int), X[:2], np.zeros(2, dtype=int))
