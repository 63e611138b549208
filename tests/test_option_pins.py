r"""Pins of every DP-GIBO option and of every pair of options, before the options became
strategies (issue 29, item 1), within the tolerance policy of ``tests/pin_compare.py``.

Each case is a small seeded run (d = 3, n = 40, T = 4, one thread, the objective of
``test_regression_pins``) and pins what it releases and what it is charged: the released
gradients, iterates, evaluation points and batch sizes, every option record of the
``PrivateRelease`` (step and norm μ's, noise stds, noisy norms, selection, subspace bases
and coordinates, private preconditioners, clip bounds and counts), the guarantee, and the
ledger as the ordered list of ``(key, event)`` records. The pair cases run every
combination of two non-default option values from different families that today's
config accepts, and record each refused combination as refused, so the file is also
today's compatibility table. A run resumed from its checkpoint halfway must give the same
values as the uninterrupted one, and ``tests/data/checkpoints/options_adaptive_norm`` (a
checkpoint an earlier version wrote) must resume to its pinned values.

Tolerances (``tests/pin_compare.py`` states the policy): the values are stored as exact hex
strings and compared by decoding them. Bit for bit: batch sizes, the selected index, clip
bounds and counts, the norm and preconditioner μ's, the ledger's keys and event types, the
guarantee's step count and flag, refusals, and all of noisy gradient descent (no BLAS, no
optimizer); the μ's, noise stds, ledger μ's and guarantee too, except under the adaptive noise
schedule, which computes them from a released noisy norm. Relative ``1e-9`` (absolute floor
``1e-12``): the fields of ``BLAS_FIELDS``, which flow from the GP's linear algebra and the
L-BFGS-B batch search, and under the adaptive schedule those of ``NORM_DEPENDENT_FIELDS``.
``_tolerances`` is the one table; ``test_a_change_of_behaviour_fails_the_pins`` shows that a
change of a setting by ``1e-7`` or of the gradient estimate by ``1e-8`` still fails them.

A deliberate change of behaviour regenerates the file with ``python -m tests.test_option_pins``
from the repository's root (the module fixes ``OPENBLAS_CORETYPE=Haswell`` and ``MKL_CBWR=COMPATIBLE`` like
``tests/conftest.py``) and says so in its commit.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")  # run as a script (pytest: tests/conftest.py)
os.environ.setdefault("MKL_CBWR", "COMPATIBLE")

import itertools  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import shutil  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, TypedDict  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from gpytorch.kernels import RBFKernel  # noqa: E402

import botorch_dp  # noqa: E402
from botorch_dp.baselines import noisy_gradient_descent  # noqa: E402
from botorch_dp.distributed.partitions import InProcessPartitions  # noqa: E402
from botorch_dp.gradient_gp import GradientGP  # noqa: E402
from botorch_dp.optim.options.noise import NoiseSchedule  # noqa: E402
from botorch_dp.optim.options.selection import Selection  # noqa: E402
from botorch_dp.optim.subspace import (  # noqa: E402
    FixedSubspace,
    PosteriorGradientCovarianceSubspace,
    PreviousRunsPCA,
    PublicGradientPCA,
)
from tests.pin_compare import BLAS, Tolerance, check_kernel_sets, compare  # noqa: E402

PINS = Path(__file__).parent / "data" / "option_pins.json"
CHECKPOINT = Path(__file__).parent / "data" / "checkpoints" / "options_adaptive_norm"
D, N = 3, 40


def _data() -> torch.Tensor:
    g = torch.Generator().manual_seed(123)
    return 1.0 + torch.randn(N, D, generator=g, dtype=torch.float64)


def _objective(X: torch.Tensor) -> torch.Tensor:
    return 0.5 * (X[:, None, :] - _data()[None]).pow(2).sum(-1)


def _objective_with_a_nan(X: torch.Tensor) -> torch.Tensor:
    losses = _objective(X)
    losses[:, 7] = math.nan  # one user's loss is never finite ("zero_user" drops it)
    return losses


class _Half:
    r"""Users ``start..start+20`` of the objective: one of two in-process partitions."""

    def __init__(self, start: int) -> None:
        self.start, self.num_users = start, N // 2

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        return _objective(X)[:, self.start : self.start + self.num_users]


def _gradient_oracle(theta: torch.Tensor) -> torch.Tensor:
    return theta[:, None, :] - _data()[None]  # 1 x n x d


def _bounds() -> torch.Tensor:
    return torch.tensor([[-2.0] * D, [4.0] * D], dtype=torch.float64)


def _basis() -> torch.Tensor:
    return torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]], dtype=torch.float64)


def _public_gradients() -> torch.Tensor:
    g = torch.Generator().manual_seed(5)
    return torch.randn(12, D, generator=g, dtype=torch.float64) * torch.tensor([3.0, 1.0, 0.1], dtype=torch.float64)


# One family per option; each value's config overrides (the first value of each is the default).
FAMILIES: dict[str, dict[str, dict]] = {
    "clip": {"fixed": {}, "adaptive": {"clip_bound": "adaptive", "clip_init": 1.0}},
    "noise": {"fixed": {}, "adaptive_norm": {"noise_schedule": "adaptive_norm"}},
    "projection": {
        "none": {},
        "fixed": {"subspace": lambda: FixedSubspace(_basis())},
        "public_pca": {"subspace": lambda: PublicGradientPCA(_public_gradients(), k=2)},
        "previous_runs": {"subspace": lambda: PreviousRunsPCA(_public_gradients(), k=2)},
        "posterior": {"subspace": lambda: PosteriorGradientCovarianceSubspace(2)},
    },
    "step": {
        "sgd": {},
        "adagrad": {"step_rule": "adagrad"},
        "adagrad_full_noisy": {"step_rule": "adagrad_full", "preconditioner": "noisy"},
        "adagrad_full_debiased": {"step_rule": "adagrad_full", "preconditioner": "noisy_debiased"},
        "adagrad_full_private": {"step_rule": "adagrad_full", "preconditioner": "private"},
    },
    "selection": {
        "last": {},
        "min_noisy_norm": {"selection": "min_noisy_norm"},
        "exponential": {"selection": "exponential", "selection_epsilon": 0.5, "loss_clip": 20.0},
        "noisy_loss": {"selection": "noisy_loss", "selection_mu": 0.3, "loss_clip": 20.0},
    },
    "batches": {"fixed": {}, "adaptive": {"bias_tolerance": 0.05, "max_batch_size": 4}},
    "users": {"memory": {}, "partitions": {"_partitions": True}},
}

#: Single options outside the families (each with the defaults otherwise).
EXTRA: dict[str, dict] = {
    "batch_greedy": {"batch_search": "greedy", "batch_size": 3},
    "acqf_maxiter": {"acqf_maxiter": 20},
    "subspace_acquisition": {"subspace": lambda: FixedSubspace(_basis()), "subspace_acquisition": True},
    "zero_user": {"nonfinite_losses": "zero_user", "_objective": _objective_with_a_nan},
    "non_private": {"privacy_mu": math.inf},
}


def _settings(overrides: dict) -> dict:
    kernel = RBFKernel(ard_num_dims=D)
    kernel.lengthscale = 1.5
    settings = dict(
        bounds=_bounds(),
        kernel=kernel,
        num_iterations=4,
        privacy_mu=1.0,
        clip_bound=3.0,
        step_size=0.3,
        theta0=torch.zeros(D, dtype=torch.float64),
        search_radius=0.5,
        noise_variance=1e-4,
        num_restarts=2,
        raw_samples=32,
        seed=0,
        batch_size=3,
    )
    for name, value in overrides.items():
        settings[name] = value() if callable(value) and name == "subspace" else value
    if "bias_tolerance" in settings:
        settings.pop("batch_size")
    return settings


def _hex(values) -> list[str]:
    return [float(v).hex() for v in torch.as_tensor(values, dtype=torch.float64).reshape(-1).tolist()]


def _encode_release(opt, release) -> dict:
    r"""What a run released and what it was charged, as exact hex strings."""
    out = {
        "released_gradients": release.released_gradients,
        "iterates": release.iterates,
        "evaluation_points": release.evaluation_points,
        "batch_sizes": release.batch_sizes,
        "step_mus": release.step_mus,
        "noise_stds": release.noise_stds,
        "noisy_norms": release.noisy_norms,
        "norm_mus": release.norm_mus,
        "clip_bounds": release.clip_bounds,
        "clip_counts": release.clip_counts,
        "preconditioner_mus": release.preconditioner_mus,
        "preconditioner_noise_stds": release.preconditioner_noise_stds,
    }
    encoded: dict[str, Any] = {k: _hex(v) for k, v in out.items()}
    for name in ("subspace_bases", "released_coordinates", "released_preconditioners"):
        encoded[name] = [_hex(t) for t in getattr(release, name)]
    encoded["selected_index"] = release.selected_index
    encoded["selection_scores"] = None if release.selection_scores is None else _hex(release.selection_scores)
    g = release.guarantee
    encoded["guarantee"] = _hex([g.mu, g.epsilon, g.noise_std, g.noise_multiplier]) + [g.num_steps, g.holds]
    encoded["ledger"] = [
        [r.key, type(r.event).__name__, float(getattr(r.event, "mu", math.nan)).hex()]
        for r in opt.ledger.validation.records()
    ]
    return encoded


def _run(overrides: dict, checkpoint_dir=None, stop_after=None) -> dict:
    overrides = dict(overrides)
    partitions = overrides.pop("_partitions", False)
    objective = overrides.pop("_objective", _objective)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # reductions are bit-stable across machines only single-threaded
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            opt = botorch_dp.DPGIBO(botorch_dp.DPGIBOConfig(**_settings(overrides)), checkpoint_dir=checkpoint_dir)
            source = InProcessPartitions([_Half(0), _Half(N // 2)]) if partitions else objective
            if stop_after is not None:
                opt.run(source, progress=False, callback=lambda info: info.iteration == stop_after)
                opt.close()  # the interrupted process ends: the directory is free for the resume
                opt = botorch_dp.DPGIBO.resume(checkpoint_dir)
                source = InProcessPartitions([_Half(0), _Half(N // 2)]) if partitions else objective
            release = opt.run(source, progress=False).release
        return _encode_release(opt, release)
    finally:
        torch.set_num_threads(threads)


class _SelectionSettings(TypedDict, total=False):
    r"""The ``noisy_gradient_descent`` settings a selection needs besides its name."""

    selection_epsilon: float
    selection_mu: float
    loss_clip: float


def _noisy_gd(schedule: NoiseSchedule, selection: Selection) -> dict:
    settings: dict[Selection, _SelectionSettings] = {
        "last": {},
        "min_noisy_norm": {},
        "exponential": {"selection_epsilon": 0.5, "loss_clip": 20.0},
        "noisy_loss": {"selection_mu": 0.3, "loss_clip": 20.0},
    }
    extra = settings[selection]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = noisy_gradient_descent(
            _gradient_oracle,
            _bounds(),
            num_iterations=6,
            clip_bound=2.0,
            step_size=0.4,
            privacy_mu=1.0,
            seed=0,
            noise_schedule=schedule,
            selection=selection,
            loss_oracle=_objective,
            **extra,
        )
    assert result.guarantee is not None  # privacy_mu = 1 is finite
    extras = result.history.extras
    keys = ("step_mus", "noise_stds", "noisy_norms", "norm_mus")
    return {
        "theta": _hex(result.theta),
        "iterates": _hex(result.history.iterates),
        "released_gradients": _hex(extras["released_gradients"]),
        **{k: _hex(extras.get(k, [])) for k in keys},
        "selected_index": extras.get("selected_index"),
        "guarantee": _hex([result.guarantee.mu, result.guarantee.epsilon]),
    }


def _single_cases() -> dict[str, dict]:
    cases: dict[str, dict] = {}
    for family, values in FAMILIES.items():
        for value, overrides in list(values.items())[1:]:
            cases[f"{family}={value}"] = overrides
    cases.update({f"extra={name}": overrides for name, overrides in EXTRA.items()})
    return cases


def _pair_cases() -> dict[str, dict]:
    cases = {}
    for (fa, va), (fb, vb) in itertools.combinations(FAMILIES.items(), 2):
        for (a, oa), (b, ob) in itertools.product(list(va.items())[1:], list(vb.items())[1:]):
            cases[f"{fa}={a}+{fb}={b}"] = {**oa, **ob}
    return cases


_SCHEDULES: tuple[NoiseSchedule, ...] = ("fixed", "adaptive_norm")
_SELECTIONS: tuple[Selection, ...] = ("last", "min_noisy_norm", "exponential", "noisy_loss")
NOISY_GD: list[tuple[NoiseSchedule, Selection]] = [
    (s, sel) for s in _SCHEDULES for sel in _SELECTIONS if not (s == "fixed" and sel == "min_noisy_norm")
]


def _pin(name: str, overrides: dict) -> dict:
    r"""The pinned values of a case, or ``{"refused": <error type>}`` when today's config refuses it."""
    try:
        return _run(overrides)
    except (ValueError, TypeError) as err:
        return {"refused": type(err).__name__}


def _stored() -> dict:
    return json.loads(PINS.read_text())


#: DP-GIBO's fields that flow from BLAS, LAPACK or L-BFGS-B (``pin_compare.BLAS``).
BLAS_FIELDS = (
    "released_gradients",
    "iterates",
    "evaluation_points",
    "noisy_norms",
    "selection_scores",
    "subspace_bases",
    "released_coordinates",
    "released_preconditioners",
)
#: The accounting the adaptive noise schedule computes from a released noisy norm.
NORM_DEPENDENT_FIELDS = ("step_mus", "noise_stds", "ledger", "guarantee")


def _tolerances(name: str) -> dict[str, Tolerance]:
    r"""The tolerance of each field of a DP-GIBO case (a field not named: bit for bit)."""
    fields = BLAS_FIELDS + (NORM_DEPENDENT_FIELDS if "noise=adaptive_norm" in name else ())
    return dict.fromkeys(fields, BLAS)


def _compare(got: dict, stored: dict, name: str) -> None:
    compare(got, stored, name, _tolerances(name))


@pytest.fixture(scope="module", autouse=True)
def _kernel_sets():
    check_kernel_sets()


@pytest.mark.parametrize("name", sorted(_single_cases()))
def test_each_option_is_pinned(name):
    _compare(_pin(name, _single_cases()[name]), _stored()["single"][name], name)


@pytest.mark.parametrize("name", sorted(_pair_cases()))
def test_each_pair_of_options_is_pinned_or_refused_as_before(name):
    _compare(_pin(name, _pair_cases()[name]), _stored()["pairs"][name], name)


@pytest.mark.parametrize("schedule, selection", NOISY_GD)
def test_noisy_gd_per_schedule_and_selection_is_pinned(schedule, selection):
    name = f"{schedule}+{selection}"
    compare(_noisy_gd(schedule, selection), _stored()["noisy_gd"][name], f"noisy_gd {name}", {})  # all exact


@pytest.mark.parametrize(
    "name",
    ["noise=adaptive_norm", "clip=adaptive", "step=adagrad_full_private", "selection=noisy_loss", "users=partitions"],
)
def test_a_run_resumed_halfway_gives_the_pinned_values(name, tmp_path):
    got = _run(_single_cases()[name], checkpoint_dir=tmp_path / "ckpt", stop_after=2)
    _compare(got, _stored()["single"][name], name)


@pytest.mark.parametrize("change", ["search_radius=0.55", "step_size*(1+1e-8)", "gradient_weights*(1+1e-8)"])
def test_a_change_of_behaviour_fails_the_pins(change, monkeypatch):
    r"""The tolerance keeps the pins' purpose: another search radius (0.55 for 0.5), a step size
    moved by 1e-8 (relative), or every gradient estimate scaled by ``1 + 1e-8`` (a change inside
    the library, where BLAS feeds the values) each fail the adaptive-schedule case, whose fields
    are the most tolerant, and the failure names the field, the index and the tolerance."""
    name = "noise=adaptive_norm"
    overrides = dict(_single_cases()[name])
    if change == "search_radius=0.55":
        overrides["search_radius"] = 0.55
    elif change == "step_size*(1+1e-8)":
        overrides["step_size"] = 0.3 * (1 + 1e-8)
    else:
        weights = GradientGP.gradient_weights
        monkeypatch.setattr(GradientGP, "gradient_weights", lambda gp, *a, **k: weights(gp, *a, **k) * (1 + 1e-8))
    got = _run(overrides)
    with pytest.raises(AssertionError, match=rf"^{name}: field \w+ at index \[\d+.*; tolerance (bit for bit|relative)"):
        _compare(got, _stored()["single"][name], name)


def test_a_checkpoint_written_by_an_earlier_version_resumes_to_the_pinned_values(tmp_path):
    r"""``tests/data/checkpoints/options_adaptive_norm``: the ``noise=adaptive_norm`` case with
    its checkpoint taken after two steps (written when these pins were); every later version
    must resume it to the same release."""
    directory = tmp_path / "ckpt"
    shutil.copytree(CHECKPOINT, directory)
    os.chmod(directory, 0o700)
    for path in directory.rglob("*"):
        os.chmod(path, 0o700 if path.is_dir() else 0o600)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = botorch_dp.DPGIBO.resume(directory)
        release = opt.run(_objective, progress=False).release
    name = "noise=adaptive_norm"
    _compare(_encode_release(opt, release), _stored()["single"][name], f"checkpoint {name}")


def _write_checkpoint() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "ckpt"
        overrides = dict(_single_cases()["noise=adaptive_norm"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            opt = botorch_dp.DPGIBO(botorch_dp.DPGIBOConfig(**_settings(overrides)), checkpoint_dir=directory)
            opt.run(_objective, progress=False, callback=lambda info: info.iteration == 2)
        shutil.rmtree(CHECKPOINT, ignore_errors=True)
        shutil.copytree(directory, CHECKPOINT)


if __name__ == "__main__":  # rewrite the pins (only for a change of behaviour made on purpose)
    pins = {
        "single": {name: _pin(name, o) for name, o in _single_cases().items()},
        "pairs": {name: _pin(name, o) for name, o in _pair_cases().items()},
        "noisy_gd": {f"{s}+{sel}": _noisy_gd(s, sel) for s, sel in NOISY_GD},
    }
    PINS.write_text(json.dumps(pins, indent=0, sort_keys=True) + "\n")
    refused = sorted(name for name, v in pins["pairs"].items() if "refused" in v)
    print(f"wrote {PINS}: {len(pins['single'])} options, {len(pins['pairs'])} pairs ({len(refused)} refused)")
    if not CHECKPOINT.exists():
        _write_checkpoint()
        print(f"wrote {CHECKPOINT}")
