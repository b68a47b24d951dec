"""loadtest.dev.manifests: reading YAML/JSON manifests from files and directories, and their
order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadtest.dev.manifests import ManifestError, load, ordered

CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "things.example.com"},
}
NS = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}


def test_documents_files_and_directories_in_order(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "a.yaml").write_text("kind: ConfigMap\napiVersion: v1\nmetadata: {name: a}\n---\n")
    (tmp_path / "b" / "c.json").write_text(json.dumps({"kind": "List", "items": [NS, CRD]}))
    (tmp_path / "b" / "hook.py").write_text("not a manifest")
    assert load([tmp_path]) == [CM, NS, CRD]
    assert load([tmp_path / "b" / "c.json", tmp_path / "a.yaml"]) == [NS, CRD, CM]


def test_crds_then_namespaces_then_the_rest() -> None:
    other = {**CM, "metadata": {"name": "b"}}
    assert ordered([CM, NS, other, CRD]) == [CRD, NS, CM, other]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("- a\n- b\n", "a document is not an object"),
        ("kind: ConfigMap\nmetadata: {name: a}\n", "without apiVersion, kind or metadata"),
        ("kind: ConfigMap\napiVersion: v1\nmetadata: {}\n", "a ConfigMap without metadata.name"),
        ("kind: [\n", "x.yaml"),
    ],
)
def test_what_is_not_a_manifest_is_refused_naming_the_file(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(text)
    with pytest.raises(ManifestError, match=problem) as err:
        load([path])
    assert str(path) in str(err.value)


def test_a_missing_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="no such file"):
        load([tmp_path / "nope.yaml"])
