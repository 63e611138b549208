"""benchmarks.mlp_pilot: the public pilot (``mlp.prepare``) depends on the public shape of the
data only: scrambling the validation users leaves its result unchanged."""

import torch

from benchmarks import mlp, mlp_pilot


def test_prepare_never_reads_the_validation_users(mlp_quick, monkeypatch):
    quick = mlp_quick
    settings = quick["settings"]
    real, calls = mlp_pilot.load_data, []

    def replaced(s, seed):
        calls.append(seed)
        data = real(s, seed)
        gen = torch.Generator().manual_seed(99)
        data.X_val = torch.randn(data.X_val.shape, generator=gen, dtype=data.X_val.dtype) * 50.0
        data.y_val = data.y_val[torch.randperm(len(data.y_val), generator=gen)]
        return data

    monkeypatch.setattr(mlp_pilot, "load_data", replaced)  # what prepare reads
    again = mlp.prepare(settings)
    assert calls and again == quick["context"]  # the pilot loaded the scrambled data, and did not look
