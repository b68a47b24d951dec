"""The Dockerfile agrees with what the chart runs: the entrypoint, a numeric non-root user, one
wheelhouse installed offline, no build tools in the final stage."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

from tests.chart.render import ENTRYPOINT

ROOT = Path(__file__).resolve().parents[2]


def _stages() -> list[list[str]]:
    """The Dockerfile's instructions (continuations joined), split into build stages."""
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8").replace("\\\n", " ")
    stages: list[list[str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(line)
    return stages


def test_the_final_stage_runs_metashard_as_a_numeric_non_root_user() -> None:
    final = _stages()[-1]
    (entrypoint,) = [line for line in final if line.startswith("ENTRYPOINT ")]
    assert tuple(json.loads(entrypoint.removeprefix("ENTRYPOINT "))) == ENTRYPOINT
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert ENTRYPOINT[0] in scripts["project"]["scripts"]
    (user,) = [line for line in final if line.startswith("USER ")]
    uid, _, gid = user.removeprefix("USER ").partition(":")
    assert uid.isdigit() and int(uid) != 0 and gid.isdigit() and int(gid) != 0


def test_the_final_stage_installs_only_the_built_wheelhouse() -> None:
    build, final = _stages()
    assert re.search(r"pip wheel .*--no-deps .* \.", " ".join(build))
    assert re.search(r"pip download .*--only-binary=:all:", " ".join(build))
    installs = [line for line in final if "pip install" in line]
    assert len(installs) == 1
    assert "--no-index" in installs[0] and "--find-links /wheels" in installs[0]
    assert not any(tool in " ".join(final) for tool in ("apt-get", "gcc", "build-essential"))


def test_the_build_context_holds_the_packages_setuptools_ships() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    packages = {p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    ignore = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    build = " ".join(_stages()[0])
    for package in packages:
        assert f"!{package}/" in ignore
        assert f"COPY {package} ./{package}" in build
