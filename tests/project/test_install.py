"""Every pin in requirements.txt holds in the installed environment, and the wheel ships what it must
(every module imports there: tests/project/test_imports.py)."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


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
