r"""The settings shared by the charged-training tests (tests/objectives/test_charged.py and its slow
twin tests/tuning/test_training_charges.py); their data come from the ``toy_rows`` fixture
(tests/conftest.py)."""

import torch

from botorch_dp.training import TrainingConfig
from botorch_dp.tuning import Hyperparameter, SearchSpace

#: One epoch of batches of 20 on one thread: each run trains in milliseconds.
TRAINING = TrainingConfig(epochs=1, batch_size=20, seed=0, num_threads=1)
SPACE = SearchSpace([Hyperparameter("lr", 1e-3, 1e-1, log_scale=True)])
#: Two and four points of the unit interval (the space's one hyperparameter).
X2 = torch.tensor([[0.2], [0.7]], dtype=torch.float64)
X4 = torch.tensor([[0.1], [0.4], [0.6], [0.9]], dtype=torch.float64)
