"""A DP-GIBO run whose objective trains with DP-SGD, interrupted and resumed: the ledger counts
every training run once (same total training ε as an uninterrupted run), no run id and no noise
stream is used twice, and the run numbering comes from the ledger, not from the objective."""

import json
import math
import warnings

import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel

from botorch_dp.optim.dp_gibo import DPGIBO, DPGIBOConfig
from botorch_dp.privacy.ledger import DPSGDRun, PrivacyLedger
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.training import DPSGDConfig, TrainingConfig
from botorch_dp.tuning import ClassificationData, TorchModelTuningObjective

TRAINING = TrainingConfig(epochs=1, batch_size=20, hidden_sizes=(4,), seed=0)
DP = DPSGDConfig(noise_multiplier=1.2, max_grad_norm=1.0)
T, BATCH = 4, 2


@pytest.fixture(scope="module")
def small_data():
    g = torch.Generator().manual_seed(0)

    def split(m):
        X = torch.randn(m, 3, generator=g)
        return X, (X[:, 0] > 0).long()

    X_train, y_train = split(60)
    X_val, y_val = split(15)
    X_test, y_test = split(10)
    return ClassificationData(X_train, y_train, X_val, y_val, X_test, y_test, num_classes=2, name="toy")


def _config():
    kernel = ScaleKernel(RBFKernel(ard_num_dims=3))
    kernel.base_kernel.lengthscale = 0.5
    return DPGIBOConfig(
        bounds=torch.tensor([[0.0] * 3, [1.0] * 3], dtype=torch.float64),
        kernel=kernel,
        num_iterations=T,
        privacy_mu=1.0,
        clip_bound=3.0,
        step_size=0.1,
        batch_size=BATCH,
        noise_variance=1e-2,
        seed=3,
        num_restarts=1,
        raw_samples=16,
    )


def _objective(data, ledger, noise_seed=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)  # explicit seeds are tested in test_dp_sgd
        return TorchModelTuningObjective(data, training=TRAINING, dp_sgd=DP, ledger=ledger, noise_seed=noise_seed)


def _dp_gibo(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)  # DPGIBOConfig(seed=...) may warn
        return DPGIBO(*args, **kwargs)


def _resume(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        return DPGIBO.resume(*args, **kwargs)


def test_resumed_dp_sgd_run_spends_the_same_training_epsilon(small_data, tmp_path):
    # uninterrupted reference
    ref_ledger = PrivacyLedger()
    _dp_gibo(_config(), ledger=ref_ledger).run(_objective(small_data, ref_ledger), progress=False)
    assert len(ref_ledger.training.runs()) == T * BATCH

    # interrupted after k = 2 iterations; the process holding `ledger` and `first` is gone
    ledger = PrivacyLedger()
    first = _objective(small_data, ledger)
    opt = _dp_gibo(_config(), checkpoint_dir=tmp_path, ledger=ledger)
    opt.run(first, progress=False, callback=lambda info: info.iteration == 2)
    assert opt.iteration == 2 and len(ledger.training.runs()) == 2 * BATCH
    del opt, first, ledger

    new_ledger = PrivacyLedger()
    second = _objective(small_data, new_ledger)  # built before the ledger is restored: numbering is lazy
    opt = _resume(tmp_path, ledger=new_ledger)
    assert opt.ledger is new_ledger and opt.iteration == 2
    assert second.next_run_index() == 2 * BATCH
    opt.run(second, progress=False)

    runs = new_ledger.training.runs()
    assert list(runs) == [f"eval-{i:04d}" for i in range(T * BATCH)]  # every run once, no id reused
    assert [r.run_id for r in second.runs] == [f"eval-{i:04d}" for i in range(2 * BATCH, T * BATCH)]
    assert sorted(runs.values()) == sorted(ref_ledger.training.runs().values())
    for delta in (1e-5, 1e-3):
        assert new_ledger.training.epsilon(delta) == pytest.approx(ref_ledger.training.epsilon(delta), rel=1e-12)
    # the validation side is complete too: T releases of μ/√T
    assert len(new_ledger.validation.steps()) == T
    assert new_ledger.validation.mu() == pytest.approx(ref_ledger.validation.mu(), rel=1e-12)
    assert new_ledger.validation.mu() == pytest.approx(1.0, rel=1e-12)


def test_explicit_noise_seed_streams_continue_after_resume(small_data):
    """With a seed, a resumed objective draws exactly the streams an uninterrupted one would."""
    X = torch.rand(4, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    whole = _objective(small_data, PrivacyLedger(), noise_seed=7)(X)

    ledger = PrivacyLedger()
    part1 = _objective(small_data, ledger, noise_seed=7)(X[:2])
    restored = PrivacyLedger.from_state_dict(json.loads(json.dumps(ledger.state_dict())))
    resumed = _objective(small_data, restored, noise_seed=7)
    part2 = resumed(X[2:])
    assert torch.equal(torch.cat([part1, part2]), whole)
    assert list(restored.training.runs()) == [f"eval-{i:04d}" for i in range(4)]
    # the old behaviour (numbering restarting at 0) would have re-drawn stream 0 for X[2]
    restart = _objective(small_data, PrivacyLedger(), noise_seed=7)(X[2:3])
    assert not torch.equal(restart[0], part2[0])


def test_run_numbering_comes_from_the_ledger(small_data):
    ledger = PrivacyLedger()
    for run_id in ("eval-0000", "eval-0006-final", "eval-x", "evaluation-0042", "pilot-0100", 17):
        ledger.external.record(DPSGDRun(noise_multiplier=1.0, sample_rate=0.1, steps=3), run_id=run_id)
    objective = _objective(small_data, ledger)
    assert objective.next_run_index() == 7
    other = TorchModelTuningObjective(small_data, training=TRAINING, dp_sgd=DP, ledger=ledger, run_prefix="pilot")
    assert other.next_run_index() == 101
    objective.evaluate_non_private(torch.full((3,), 0.5, dtype=torch.float64), label="final")
    assert "eval-0007-final" in ledger.training.runs() and objective.next_run_index() == 8
    with pytest.raises(ValueError, match="run_prefix"):
        TorchModelTuningObjective(small_data, training=TRAINING, ledger=ledger, run_prefix="a b")
    with pytest.raises(ValueError, match="label"):
        objective.train(torch.full((3,), 0.5, dtype=torch.float64), label="")
    assert not math.isinf(ledger.training.epsilon(1e-5))


def test_default_dp_sgd_noise_is_fresh_and_not_stored(small_data):
    ledger = PrivacyLedger()
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)  # the default never warns
        objective = TorchModelTuningObjective(small_data, training=TRAINING, dp_sgd=DP, ledger=ledger)
    assert objective.noise_seed is None
    theta = torch.full((2, 3), 0.5, dtype=torch.float64)
    losses = objective(theta)
    assert not torch.equal(losses[0], losses[1])  # same θ, independent noise
    assert objective.noise_seed is None  # no seed was kept
    assert objective.with_data(small_data).noise_seed is None
    with pytest.warns(PrivacyWarning, match="noise seed"):
        TorchModelTuningObjective(small_data, training=TRAINING, dp_sgd=DP, noise_seed=0)
