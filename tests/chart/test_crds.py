"""The CRDs the chart ships are the package's CRDs, as YAML, and never drift from them."""

from __future__ import annotations

import json
from pathlib import Path

import yaml  # type: ignore[import-untyped]

from proto.api.crds import load_crds, yaml_documents
from proto.api.crds.__main__ import main as write_crds

CHART_CRDS = Path(__file__).resolve().parents[2] / "charts" / "metashard" / "crds"


def test_the_chart_ships_exactly_the_generated_files() -> None:
    shipped = {path.name: path.read_text(encoding="utf-8") for path in CHART_CRDS.iterdir()}
    assert shipped == yaml_documents(), (
        "charts/metashard/crds is out of date: run "
        "`python -m proto.api.crds --yaml charts/metashard/crds`"
    )


def test_each_yaml_file_holds_the_json_object() -> None:
    by_name = {crd["metadata"]["name"]: crd for crd in load_crds()}
    assert sorted(by_name) == [
        "compositecontrollers.metacontroller.k8s.io",
        "controllerrevisions.metacontroller.k8s.io",
        "decoratorcontrollers.metacontroller.k8s.io",
    ]
    for path in CHART_CRDS.iterdir():
        (document,) = yaml.safe_load_all(path.read_text(encoding="utf-8"))
        assert json.dumps(document) == json.dumps(by_name[path.name.removesuffix(".yaml")])


def test_the_generator_writes_and_checks(tmp_path: Path) -> None:
    assert write_crds(["--yaml", str(tmp_path), "--check"]) == 1
    assert write_crds(["--yaml", str(tmp_path)]) == 0
    assert write_crds(["--yaml", str(tmp_path), "--check"]) == 0
    (tmp_path / next(iter(yaml_documents()))).write_text("# edited\n", encoding="utf-8")
    assert write_crds(["--yaml", str(tmp_path), "--check"]) == 1
