r"""Projections (botorch_dp/optim/options/projection.py): without one every coordinate is released and
``d + 1`` points make a batch; a projection on a fixed ``d x k`` basis ``Ṽ`` releases ``k`` coordinates,
lifts them to ``Ṽũ`` and records ``Ṽ`` and ``ũ`` each step, defaults to ``k + 1`` points with the
projected acquisition, gives a fixed basis only for a fixed oracle, and refuses a basis that does not
fit ``d``; each is rebuilt from its ``spec()``."""

import pytest
import torch

from botorch_dp.optim.options import NoProjection, Projected, from_spec
from botorch_dp.optim.projected import SubspaceTrack
from botorch_dp.optim.subspace import FixedSubspace, PosteriorGradientCovarianceSubspace
from botorch_dp.privacy.mechanisms.releases import GradientRelease

F64 = torch.float64
V = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0], [0.0, 0.0]], dtype=F64)


def test_no_projection_releases_every_coordinate_and_records_only_when_asked():
    none = NoProjection()
    assert none.released_dim(4) == 4 and none.default_batch_size(4) == 5 and none.basis(None, None, None) is None
    release = GradientRelease(gradient=torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=F64), cost=None)
    assert none.lift(release, None, SubspaceTrack(), record=False) == (release, SubspaceTrack())
    _, track = none.lift(release, None, SubspaceTrack(), record=True)
    assert len(track.coordinates) == 1 and torch.equal(track.coordinates[0], release.gradient)
    assert from_spec("projection", none.spec()) == none and none.provides == {"fixed_basis"}


def test_a_fixed_basis_releases_k_coordinates_lifted_to_v_u_and_recorded():
    projected = Projected(FixedSubspace(V), acquisition=True)
    projected.check(4)
    basis = projected.basis(torch.zeros(4, dtype=F64), None, SubspaceTrack())
    assert basis.shape == (4, 2) and torch.allclose(basis.T @ basis, torch.eye(2, dtype=F64), atol=1e-15)
    assert projected.released_dim(4) == 2 and projected.default_batch_size(4) == 3
    assert Projected(FixedSubspace(V)).default_batch_size(4) == 5  # k + 1 only with the projected acquisition
    coordinates = torch.tensor([0.5, -2.0], dtype=F64)
    lifted, track = projected.lift(GradientRelease(gradient=coordinates, cost=None), basis, SubspaceTrack(), True)
    torch.testing.assert_close(lifted.gradient, basis @ coordinates, rtol=0, atol=0)
    assert torch.equal(track.bases[0], basis) and torch.equal(track.coordinates[0], coordinates)
    rebuilt = from_spec("projection", projected.spec())
    assert isinstance(rebuilt, Projected) and rebuilt.acquisition and torch.equal(rebuilt.oracle.basis, basis)
    assert projected.provides == {"fixed_basis"} and Projected(PosteriorGradientCovarianceSubspace(2)).provides == set()


def test_a_basis_that_does_not_fit_d_is_refused():
    with pytest.raises(ValueError, match="the basis has 4 rows, but the bounds have d = 3"):
        Projected(FixedSubspace(V)).check(3)
    with pytest.raises(ValueError, match="k = 5 exceeds d = 4"):
        Projected(PosteriorGradientCovarianceSubspace(5)).check(4)
    with pytest.raises(ValueError, match="subspace must be a SubspaceOracle"):
        Projected(V)
    with pytest.raises(ValueError, match="subspace_acquisition must be True or False, got 1"):
        Projected(FixedSubspace(V), acquisition=1)
    with pytest.raises(ValueError, match="lifts a release from its basis"):
        Projected(FixedSubspace(V)).lift(GradientRelease(gradient=V[0], cost=None), None, SubspaceTrack(), True)
