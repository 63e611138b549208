"""scripts/e1_investigation.py: the centring wrapper, the log parameterisation, the win counts and a quick run."""

import json

import torch

from botorch_dp.gradient_gp import GradientGP
from botorch_dp.problems import GPRegressionLengthscales
from helpers import loaded_script


def _gp(d=3, N=6, seed=0):
    from gpytorch.kernels import RBFKernel

    gen = torch.Generator().manual_seed(seed)
    X = torch.rand(N, d, generator=gen, dtype=torch.float64)
    kernel = RBFKernel(ard_num_dims=d).to(torch.float64)
    kernel.requires_grad_(False)
    return GradientGP(X, kernel, 1e-4), X


def test_centring_removes_the_constant_and_is_restored():
    gp, X = _gp()
    theta = X.mean(0) + 0.3
    original = GradientGP.gradient_weights
    with torch.no_grad():
        A = gp.gradient_weights(theta)
        y = torch.randn(X.shape[0], dtype=torch.float64, generator=torch.Generator().manual_seed(1))
        with loaded_script("e1_investigation") as script:
            with script.centred_gradient_weights():
                Ac = gp.gradient_weights(theta)
            assert GradientGP.gradient_weights is original
            with script.centred_gradient_weights(enabled=False):
                assert GradientGP.gradient_weights is original
    ones = torch.ones(X.shape[0], dtype=torch.float64)
    # a constant loss has no gradient once centred, but a zero-mean GP sees one
    assert torch.allclose(Ac @ ones, torch.zeros(3, dtype=torch.float64), atol=1e-12)
    assert (A @ ones).norm() > 1e-3
    # A (y − ȳ 1), computed independently
    torch.testing.assert_close(Ac @ y, A @ (y - y.mean()))


def test_log_lengthscales_evaluates_the_base_problem_at_exp():
    base = GPRegressionLengthscales(dim=2, n_total=60, seed=3)
    with loaded_script("e1_investigation") as script:
        log = script.LogLengthscales(base)
    torch.testing.assert_close(log.bounds, base.bounds.log())
    theta = base.sample_in_bounds(4, seed=0)
    torch.testing.assert_close(log(theta.log()), base(theta))
    assert log.num_users == base.num_users == 30


def test_summarise_counts_strict_wins_per_seed():
    runs = []
    for seed, (g, rs) in enumerate([(1.0, 2.0), (3.0, 2.0), (2.0, 2.0)]):
        runs.append(dict(variant="eta1", method="GIBO (non-private)", seed=seed, final_loss=g, num_evaluations=10))
        runs.append(dict(variant="eta1", method="random search", seed=seed, final_loss=rs, num_evaluations=10))
    with loaded_script("e1_investigation") as script:
        rows = script.summarise(runs, ["eta1"])
    gibo = next(r for r in rows if r["method"].startswith("GIBO"))
    assert gibo["wins_vs_rs"] == "1/3"  # a tie is not a win
    assert abs(gibo["mean"] - 2.0) < 1e-12 and abs(gibo["se"] - 1 / 3**0.5) < 1e-12


def test_quick_run_writes_json_and_table_and_resumes(tmp_path, monkeypatch, capsys):
    out = tmp_path / "e1"
    argv = ["--quick", "--variants", "centred", "--seeds", "0", "--methods", "DP-GIBO (μ=1)", "random search",
            "--out", str(out)]
    with loaded_script("e1_investigation") as script:
        assert script.main(argv) == 0
        store = json.loads(out.with_suffix(".json").read_text())
        runs = {r["method"]: r for r in store["runs"]}
        assert set(runs) == {"DP-GIBO (μ=1)", "random search"}
        # random search gets DP-GIBO's evaluation count; DP-GIBO used the variant's pilot B
        assert runs["random search"]["num_evaluations"] == runs["DP-GIBO (μ=1)"]["num_evaluations"] > 0
        assert runs["DP-GIBO (μ=1)"]["clip"] == store["pilots"]["centred/quick"]["clip_bound"] > 0
        table = out.with_suffix(".md").read_text()
        assert "| centred |" in table and "random search" in table
        # a second call finds everything recorded and runs nothing
        monkeypatch.setattr(script, "run_seed", lambda *a, **k: (_ for _ in ()).throw(AssertionError("re-ran")))
        assert script.main(argv) == 0
    assert "wins vs RS" in capsys.readouterr().out
