"""Server-side apply through the client stores every string exactly as sent.

The API server reads an apply body (``application/apply-patch+yaml``) as YAML, where raw
U+2028, U+2029 and NEL are line breaks that fold the blanks around them, and raw DEL, C1
controls, U+FFFE and U+FFFF are refused. The strings hold every character class YAML treats
specially (``tests.jsonvalues.YAML_TEXT``). On the embedded cluster (whose apply decoding
follows go-yaml's) or, with ``METASHARD_E2E_KUBECONFIG``, on a real one, the applied
ConfigMap must hold them unchanged, as a data value and as an annotation value.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, example, given, settings

from proto.kube.client import Client
from proto.kube.resources import Resource
from tests.integration.conftest import Kube
from tests.jsonvalues import YAML_TEXT

pytestmark = pytest.mark.asyncio

CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
ANNOTATION = "example.com/text"
ISSUE_TEXT = "a<b & c>d été \u2028 end"


async def apply_and_read(client: Client, namespace: str, name: str, text: str) -> list[str]:
    """Apply a ConfigMap holding ``text``; the values the answer and a fresh read hold."""
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "annotations": {ANNOTATION: text}},
        "data": {"text": text},
    }
    answer = await client.apply(CONFIGMAPS, body, field_manager="it-text")
    stored = await client.get(CONFIGMAPS, name, namespace=namespace)
    values: list[str] = []
    for obj in (answer, stored):
        values += [obj["data"]["text"], obj["metadata"]["annotations"][ANNOTATION]]
    return values


async def test_the_text_of_the_issue_survives_server_side_apply(kube: Kube, namespace: str) -> None:
    assert await apply_and_read(kube.client, namespace, "issue", ISSUE_TEXT) == [ISSUE_TEXT] * 4


async def test_raw_yaml_line_breaks_and_controls_survive_server_side_apply(
    kube: Kube, namespace: str
) -> None:
    text = " \u2028 \u2029 \x85 \x7f \x80 \ufffe \ufeff\t:# "
    assert await apply_and_read(kube.client, namespace, "classes", text) == [text] * 4


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(text=YAML_TEXT)
@example(text=ISSUE_TEXT)
@example(text="  leading and trailing  ")
@example(text="a\u2028--- b")
async def test_any_string_survives_server_side_apply(kube: Kube, namespace: str, text: str) -> None:
    name = f"p-{uuid.uuid4().hex[:8]}"
    assert await apply_and_read(kube.client, namespace, name, text) == [text] * 4
