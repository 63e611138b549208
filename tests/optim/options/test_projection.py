r"""Projections (botorch_dp/optim/options/projection.py): without one every coordinate is released and
``d + 1`` points make a batch; a projection on a fixed ``d x k`` basis ``Ṽ`` releases ``k`` coordinates,
lifts them to ``Ṽũ`` and records ``Ṽ`` and ``ũ`` each step, defaults to ``k + 1`` points with the
projected acquisition, gives a fixed basis only for a fixed oracle, and refuses a basis that does not
fit ``d``; each is rebuilt from its ``spec()``.

The arithmetic (moved here from ``optim.projected``): the projected release with an identity basis is the plain
mechanism bit for bit, it projects before clipping, and its noise energy is ``kσ²`` instead of ``dσ²``."""

import dataclasses
import json
import math
import warnings
from typing import Any

import pytest
import torch

from botorch_dp.optim import DPGIBO
from botorch_dp.optim.options import (
    NoProjection,
    Projected,
    Projection,
    ProjectionRecord,
    ResumeContext,
    RunRecords,
    from_spec,
    register,
)
from botorch_dp.optim.options.projection import (
    SubspaceTrack,
    lift,
    projected_release,
    projection_state_json,
    restore_projection_state,
)
from botorch_dp.optim.subspace import FixedSubspace, PosteriorGradientCovarianceSubspace, orthonormal_basis
from botorch_dp.privacy.mechanisms import GaussianGradientMechanism, clip_rows
from botorch_dp.privacy.mechanisms.releases import GradientRelease
from tests.optim.options.plugin import UserStrategy, assert_not_checkpointed, run_and_resume, run_once
from tests.optim.options.strategy_config import config_with
from tests.test_option_pins import D, _objective, _settings

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


# ----------------------------------------------------------------------- the projected release
def projector(V):
    return V @ V.T


def _mechanism(seed, **kw):
    base = dict(
        clip_bound=1.0, num_users=30, privacy_mu=1.0, num_steps=4, generator=torch.Generator().manual_seed(seed)
    )
    base.update(kw)
    return GaussianGradientMechanism(**base)


def test_identity_basis_releases_the_same_bits_as_the_plain_mechanism():
    g = torch.Generator().manual_seed(6)
    A, Y = torch.randn(5, 9, generator=g, dtype=F64), torch.randn(9, 30, generator=g, dtype=F64)
    plain = _mechanism(0).release(A, Y, diagnostics=True)
    projected = projected_release(_mechanism(0), torch.eye(5, dtype=F64), A, Y, diagnostics=True)
    assert torch.equal(projected.release.gradient, plain.gradient)
    assert torch.equal(projected.coordinates, plain.gradient)
    assert projected.release.cost == plain.cost
    assert torch.equal(projected.release.diagnostics.unnoised_gradient, plain.diagnostics.unnoised_gradient)
    assert projected.unnoised_coordinates is None


def test_projection_happens_before_clipping_and_the_step_lives_in_the_span():
    g = torch.Generator().manual_seed(7)
    d, k, N, n = 6, 2, 8, 30
    V = orthonormal_basis(torch.randn(d, k, generator=g, dtype=F64))
    A, Y = torch.randn(d, N, generator=g, dtype=F64), 5 * torch.randn(N, n, generator=g, dtype=F64)
    out = projected_release(_mechanism(1, privacy_mu=math.inf), V, A, Y, diagnostics=True, keep_unnoised=True)
    # brute force: clip each user's projected estimate Ṽᵀ A y_i to B = 1 in k dimensions
    U = (V.T @ A @ Y).T  # n x k
    clipped, _ = clip_rows(U, 1.0)
    torch.testing.assert_close(out.unnoised_coordinates, clipped.mean(0), rtol=1e-13, atol=1e-15)
    torch.testing.assert_close(out.coordinates, clipped.mean(0), rtol=1e-13, atol=1e-15)  # μ = inf: no noise
    # projecting after clipping in d dims would give a different (smaller) mean
    clipped_d, _ = clip_rows((A @ Y).T, 1.0)
    assert not torch.allclose(V.T @ clipped_d.mean(0), clipped.mean(0), atol=1e-3)
    # θ-space release Ṽ ũ lies in span(Ṽ); diagnostics are in θ-space
    torch.testing.assert_close(projector(V) @ out.release.gradient, out.release.gradient, rtol=0, atol=1e-14)
    torch.testing.assert_close(out.release.diagnostics.unnoised_gradient, V @ clipped.mean(0), rtol=1e-13, atol=1e-15)
    with pytest.raises(ValueError, match="d x k"):
        projected_release(_mechanism(1), V[:5], A, Y)


def test_noise_energy_is_k_sigma_squared_instead_of_d_sigma_squared():
    d, k, reps = 400, 100, 50
    V = orthonormal_basis(torch.eye(d, dtype=F64)[:, :k] + 0.01)
    A, Y = torch.zeros(d, 1, dtype=F64), torch.zeros(1, 30, dtype=F64)  # ū = 0: the release is pure noise
    mech = _mechanism(8)
    sigma2 = mech.noise_std**2
    projected = torch.stack([projected_release(mech, V, A, Y).release.gradient for _ in range(reps)])
    full = torch.stack([mech.release(A, Y).gradient for _ in range(reps)])
    # E‖Ṽw‖² = kσ², E‖w‖² = dσ²; relative standard errors √(2/(k·reps)) = 2%, √(2/(d·reps)) = 1%
    assert abs(projected.pow(2).sum(-1).mean() / (k * sigma2) - 1) < 0.1
    assert abs(full.pow(2).sum(-1).mean() / (d * sigma2) - 1) < 0.05


# ----------------------------------------------------------------- a user's projection plugs in (issue 42)
@register("projection", "test_first_axes")
class FirstAxes(UserStrategy):
    r"""A user's projection (no class of the package) on the first ``k`` coordinate axes, a public basis."""

    def __init__(self, k: int = 1) -> None:
        self.k = int(k)

    def params(self) -> dict[str, Any]:
        return {"k": self.k}

    def basis(self, theta: torch.Tensor, gp: Any, track: SubspaceTrack) -> torch.Tensor:
        return torch.eye(theta.shape[0], dtype=theta.dtype)[:, : self.k]

    def acquisition_basis(self, theta: torch.Tensor, gp: Any, track: SubspaceTrack) -> torch.Tensor | None:
        return None

    def default_batch_size(self, dim: int) -> int:
        return dim + 1

    def released_dim(self, dim: int) -> int:
        return self.k

    def check(self, dim: int) -> None:
        if not 1 <= self.k <= dim:
            raise ValueError(f"k must lie in [1, d = {dim}], got {self.k!r}.")

    def lift(
        self, release: GradientRelease, basis: torch.Tensor | None, track: SubspaceTrack, record: bool
    ) -> tuple[GradientRelease, SubspaceTrack]:
        assert basis is not None
        track = dataclasses.replace(
            track, bases=(*track.bases, basis), coordinates=(*track.coordinates, release.gradient)
        )
        return lift(release, basis), track

    def record(self, track: SubspaceTrack) -> ProjectionRecord:
        return ProjectionRecord(track.bases, track.coordinates)

    # its part of the run's state, saved and checked with the projection module's helpers (KeepsRunState)
    def state_json(self, records: RunRecords) -> dict[str, Any]:
        return projection_state_json(records)

    def restore_state(self, payload: dict[str, Any], records: RunRecords, context: ResumeContext) -> RunRecords:
        return restore_projection_state(payload, records, context, bases=True)


def test_a_users_projection_runs_in_its_subspace_and_releases_what_the_packages_does():
    # (resumed from its checkpoint: the test below)
    projection: Projection = FirstAxes(2)  # mypy checks the protocol's signatures here
    assert type(projection).__mro__ == (FirstAxes, UserStrategy, object)
    config = config_with(_settings({"num_iterations": 3}), projection=projection)
    assert config.projection is projection
    opt, released = run_once(config)
    record = opt.result().release.records["projection"]
    assert record.dims == (2, 2, 2)
    gradients, iterates = opt.result().release.released_gradients, opt.result().release.iterates
    assert (gradients[:, 2:] == 0).all() and (gradients[:, :2] != 0).all()  # only the first k are released
    assert (iterates[:, 2:] == 0).all()  # θ₀ = 0 moves only along the first two axes
    # the same basis as the package's projection on a fixed subspace: the same bits
    fixed = Projected(FixedSubspace(torch.eye(D, dtype=torch.float64)[:, :2]))
    package_run, package = run_once(config_with(_settings({"num_iterations": 3}), projection=fixed))
    bases = package_run.result().release.records["projection"].bases
    assert all(torch.equal(a, b) for a, b in zip(record.bases, bases, strict=True))  # its QR writes −0.0 for 0.0
    released.pop("subspace_bases"), package.pop("subspace_bases")
    assert released == package
    with pytest.raises(ValueError, match=r"k must lie in \[1, d = 3\], got 4"):
        config_with(_settings({}), projection=FirstAxes(4))


def test_a_users_projection_resumes_from_its_checkpoint_to_the_uninterrupted_run(tmp_path):
    r"""Issue 42 item 3: a user's projection (not a ``Projected``) that records a basis per step resumes
    from the checkpoint alone (rebuilt through the registry; its part of the state restored by its own
    ``restore_state``) to what the uninterrupted run releases, bit for bit, bases included. (Before, the
    checkpoint code compared the projection's class with ``Projected`` and refused: "'subspace.bases' must
    hold 0 entries".) A lost basis in its stored state is refused naming the field."""
    config = config_with(_settings({"num_iterations": 3}), projection=FirstAxes(1))
    whole, resumed_release, resumed = run_and_resume(config, tmp_path, stop_after=1)
    assert resumed.config.projection == FirstAxes(1) and resumed_release == whole
    assert len(whole["subspace_bases"]) == 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = DPGIBO(config, checkpoint_dir=tmp_path / "again")
        opt.run(_objective, progress=False, callback=lambda info: info.iteration == 1)
        opt.close()
    path = tmp_path / "again" / "state.json"
    state = json.loads(path.read_text())
    assert set(state["strategies"]["projection"]) == {"bases", "coordinates"}
    state["strategies"]["projection"]["bases"] = []
    path.write_text(json.dumps(state))
    with pytest.raises(ValueError, match="'strategies.projection.bases' must hold 1 entries, got 0"):
        DPGIBO.resume(tmp_path / "again")


def test_a_users_projection_without_the_state_pair_is_refused_a_checkpoint(tmp_path, monkeypatch):
    r"""Issue 42 item 3: without ``state_json`` its bases and coordinates would not be saved (a resumed
    run would lose them): the run is refused a checkpoint before anything is written."""
    monkeypatch.delattr(FirstAxes, "state_json")
    config = config_with(_settings({"num_iterations": 3}), projection=FirstAxes(1))
    message = r"FirstAxes \(projection\) cannot be checkpointed: it lacks state_json \(KeepsRunState\)"
    assert_not_checkpointed(config, tmp_path, message)
