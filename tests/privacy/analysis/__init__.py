"""Tests for botorch_dp.privacy.analysis."""
