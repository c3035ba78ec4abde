"""Every module imports from the installed environment, and every pin in requirements.txt holds there."""

from __future__ import annotations

import pkgutil
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

import tpurank

ROOT = Path(__file__).resolve().parents[2]


def _modules() -> list[str]:
    return sorted(
        m.name for m in pkgutil.walk_packages(tpurank.__path__, "tpurank.") if "__main__" not in m.name
    )


def test_every_module_imports_in_a_fresh_interpreter() -> None:
    """One fresh interpreter imports every tpurank module and the kaggle client the stages load lazily
    (kaggle 2.2.4 imports `six` without declaring it: this fails when six is not installed)."""
    mods = [*_modules(), "kaggle", "kaggle.api.kaggle_api_extended", "kagglesdk"]
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\nprint('ok')"
    r = subprocess.run([sys.executable, "-c", code, *mods], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == "ok"
    assert len(mods) > 40


def test_installed_versions_match_the_pins() -> None:
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)", line.strip())
        if m:
            pins[m.group(1)] = m.group(2)
    assert "six" in pins and "kagglesdk" in pins
    # a local build tag (torch 2.13.0+cpu or +cu126) satisfies the pin
    wrong = {
        name: (want, metadata.version(name))
        for name, want in pins.items()
        if metadata.version(name).split("+")[0] != want
    }
    assert not wrong, f"installed versions differ from requirements.txt: {wrong}"

    # what every pinned package declares it needs (on this Python, without extras) is pinned too
    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    pinned = {norm(p) for p in pins}
    unpinned = sorted(
        f"{norm(r.name)} (for {name})"
        for name in pins
        for r in map(Requirement, metadata.requires(name) or [])
        if (r.marker is None or r.marker.evaluate({"extra": ""})) and norm(r.name) not in pinned
    )
    assert not unpinned, f"dependencies without a pin in requirements.txt: {unpinned}"


def test_the_wheel_lists_every_package_and_the_presets() -> None:
    """pyproject.toml lists the packages by hand (configs/ ships as tpurank.presets): a new
    subpackage left off the list would be missing from the wheel."""
    import tomllib

    from setuptools import find_packages

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    assert listed == {*find_packages(str(ROOT / "src")), "tpurank.presets"}
    assert sorted((ROOT / "configs").glob("*.toml"))  # what tpurank.presets carries
