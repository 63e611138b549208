r"""The privacy boundary is enforced: privacy-noise draws happen only in ``privacy/mechanisms/_noise.py``.

Walks the AST of every module under ``botorch_dp/`` and fails on a call that draws from a
noise distribution (Gaussian, Laplace, OS-entropy Gaussian) outside the allow-list. The
checker is syntactic: it sees direct calls and imports of those names (``torch.randn``,
``rng.normal``, ``from torch import randn as r``), not draws hidden behind ``getattr``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import botorch_dp

PACKAGE = Path(botorch_dp.__file__).parent
ROOT = PACKAGE.parent

#: Names whose call (or import) draws noise: torch.randn/normal/randn_like/Tensor.normal_,
#: numpy's normal/standard_normal/multivariate_normal/laplace (module or Generator),
#: random.gauss/normalvariate/SystemRandom, torch.distributions' Normal/Laplace/MVN.
NOISE_NAMES = frozenset(
    {
        "randn",
        "randn_like",
        "normal",
        "normal_",
        "standard_normal",
        "multivariate_normal",
        "laplace",
        "gauss",
        "normalvariate",
        "SystemRandom",
        "Normal",
        "MultivariateNormal",
        "Laplace",
    }
)

#: Where a noise draw is allowed, and why. Keep this small: a new entry needs a reason that
#: says why the randomness is NOT privacy noise. (DP-SGD's noise is drawn inside Opacus,
#: outside this package, so ``torch_tuning``/``training`` need no entry; uniform candidate
#: points and search seeds use ``torch.rand``/``torch.randint``, which are not noise names.)
ALLOWED = {
    "botorch_dp/privacy/mechanisms/_noise.py": "the privacy boundary: every release draws its noise here",
    "botorch_dp/problems/": (
        "benchmark problems simulate the data owner: synthetic data generation and the "
        "simulated observation noise of evaluations are part of the (sensitive) data, not "
        "privacy noise"
    ),
    "botorch_dp/methods/training_proxy.py": (
        "the simulation of a training method on PUBLIC proxy data: the seeded score noise imitates "
        "the private run's, on losses of public records; nothing it draws is released about private data"
    ),
}


def noise_draws(source: str) -> list[tuple[int, str]]:
    r"""``(line, name)`` of every call or import of a noise-drawing name in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in NOISE_NAMES:
                found.append((node.lineno, name))
        elif isinstance(node, ast.ImportFrom):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name in NOISE_NAMES]
    return sorted(found)


def _allowed(module: str) -> bool:
    return any(module == key or (key.endswith("/") and module.startswith(key)) for key in ALLOWED)


def violations(modules: dict[str, str]) -> list[str]:
    r"""``module:line name`` for each noise draw outside the allow-list (``modules``: path → source)."""
    return [
        f"{module}:{line} {name}"
        for module, source in sorted(modules.items())
        if not _allowed(module)
        for line, name in noise_draws(source)
    ]


def _package_sources() -> dict[str, str]:
    return {p.relative_to(ROOT).as_posix(): p.read_text() for p in sorted(PACKAGE.rglob("*.py"))}


def test_privacy_noise_is_drawn_only_in_mechanisms():
    assert violations(_package_sources()) == []


def test_allow_list_is_not_stale():
    sources = _package_sources()
    for key in ALLOWED:  # every entry still covers at least one draw, or it must go
        assert any(noise_draws(src) for mod, src in sources.items() if mod == key or mod.startswith(key)), key
    assert noise_draws(sources["botorch_dp/privacy/mechanisms/_noise.py"])  # the boundary itself is seen


def test_checker_catches_an_inserted_draw_in_a_copy_of_a_module():
    path = "botorch_dp/optim/dp_gibo.py"
    source = (PACKAGE / "optim" / "dp_gibo.py").read_text()
    anchor = "        self._save_checkpoint()  # durable before the step is returned\n"
    assert anchor in source
    tampered = source.replace(anchor, anchor + "        self.theta = self.theta + torch.randn(self.dim)\n")
    assert violations({path: source}) == []
    found = violations({path: tampered})
    assert len(found) == 1 and found[0].endswith(" randn") and found[0].startswith(path)


def test_checker_sees_the_usual_spellings_and_ignores_public_uniform_draws():
    cases = {
        "import torch\nx = torch.randn(3)": ["randn"],
        "x = torch.normal(0.0, 1.0, (3,))": ["normal"],
        "y = torch.randn_like(x)": ["randn_like"],
        "x.normal_(generator=g)": ["normal_"],
        "import random\nz = random.gauss(0, 1)": ["gauss"],
        "import random\nrng = random.SystemRandom()": ["SystemRandom"],
        "import numpy as np\nz = np.random.normal(size=3)": ["normal"],
        "rng = np.random.default_rng(0)\nz = rng.normal(size=3)": ["normal"],
        "z = rng.laplace(0.0, 1.0)": ["laplace"],
        "from torch import randn as r\nz = r(3)": ["randn"],
        "from torch.distributions import Normal": ["Normal"],
        # public randomness: uniform points, integer seeds, generators
        "u = torch.rand(4, 2, generator=g)\ns = torch.randint(0, 9, (1,))\ng = torch.Generator()": [],
    }
    for source, names in cases.items():
        assert [name for _, name in noise_draws(source)] == names, source
