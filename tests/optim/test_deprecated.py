"""botorch_dp.optim.deprecated: the old names of renamed config fields and properties keep working,
each with a DeprecationWarning naming the new one, and disagree loudly with the new name."""

import dataclasses
import math
import re

import pytest

from botorch_dp.optim.config import clip_count_privacy_mu, split_privacy_mu

from .loop_helpers import nl_config


@pytest.mark.parametrize(
    ("old", "new", "value"),
    [("privacy_budget_mu", "validation_mu_budget", 0.5), ("batch_selection", "batch_search", "greedy")],
)
def test_a_renamed_field_is_set_and_read_by_its_old_name_with_a_warning(old, new, value):
    with pytest.warns(DeprecationWarning, match=re.escape(f"DPGIBOConfig({old}=...) is deprecated; use {new}=...")):
        cfg = nl_config(d=2, privacy_mu=1.0, **{old: value})
    assert getattr(cfg, new) == value and old not in {f.name for f in dataclasses.fields(cfg)}
    with pytest.warns(DeprecationWarning, match=f"DPGIBOConfig.{old} is deprecated; use DPGIBOConfig.{new}"):
        assert getattr(cfg, old) == value
    with (
        pytest.warns(DeprecationWarning),
        pytest.raises(ValueError, match=f"{old} .deprecated. = .* disagree; give {new}"),
    ):
        nl_config(d=2, privacy_mu=1.0, **{old: value, new: {"privacy_budget_mu": 0.7, "batch_selection": "joint"}[old]})


def test_the_shares_of_mu_are_read_off_one_split():
    cfg = nl_config(d=2, privacy_mu=1.0, clip_bound="adaptive", selection="noisy_loss", selection_mu=0.6, loss_clip=5.0)
    split = cfg.mu_split
    assert split.selection_mu == 0.6 and split.steps_mu == pytest.approx(0.8, rel=1e-15)
    assert math.hypot(split.gradient_mu, split.clip_mu) == pytest.approx(split.steps_mu, rel=1e-15)
    with pytest.warns(DeprecationWarning, match="steps_privacy_mu is deprecated; use DPGIBOConfig.mu_split.steps_mu"):
        assert cfg.steps_privacy_mu == split.steps_mu
    with pytest.warns(DeprecationWarning, match="selection_privacy_mu is deprecated"):
        assert cfg.selection_privacy_mu == split.selection_mu
    with pytest.warns(DeprecationWarning, match="split_privacy_mu"):
        assert split_privacy_mu(cfg) == (split.gradient_mu, split.precond_mu)
    with pytest.warns(DeprecationWarning, match="clip_count_privacy_mu"):
        assert clip_count_privacy_mu(cfg) == split.clip_mu
