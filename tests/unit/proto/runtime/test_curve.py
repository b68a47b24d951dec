from __future__ import annotations

import base64
import stat
from pathlib import Path

import pytest
import zmq
from hypothesis import given
from hypothesis import strategies as st
from zmq.utils import z85

from proto.runtime.curve import CurveKeyError, client_keys, generate, parse_key, server_keys


@given(st.binary(min_size=32, max_size=32))
def test_z85_and_base64_spell_the_same_key(raw: bytes) -> None:
    as_z85 = z85.encode(raw).decode()
    as_base64 = base64.b64encode(raw).decode()
    assert parse_key(as_z85, source="x") == parse_key(f"  {as_base64}\n", source="x")


@pytest.mark.parametrize(
    "text",
    ["", "short", "A" * 39, base64.b64encode(b"x" * 31).decode() + "==", "é" * 40, "~" * 40],
)
def test_anything_else_is_refused_naming_the_source_and_not_the_text(text: str) -> None:
    with pytest.raises(CurveKeyError) as err:
        parse_key(text, source="/keys/worker.secret")
    assert "/keys/worker.secret" in str(err.value)
    assert text.strip() == "" or text not in str(err.value)


def test_generated_keys_fit_together_and_are_private(tmp_path: Path) -> None:
    keys = generate(tmp_path / "k")
    assert stat.S_IMODE(keys.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in keys.iterdir())
    server, client = server_keys(keys), client_keys(keys)
    assert client.server_public == server.public
    assert client.public in server.admitted
    assert zmq.curve_public(server.secret) == server.public


def test_separated_mode_each_role_gets_only_what_it_needs(tmp_path: Path) -> None:
    full = generate(tmp_path / "full")
    coordinator, worker = tmp_path / "coordinator", tmp_path / "worker"
    coordinator.mkdir()
    worker.mkdir()
    for name in ("server.secret", "worker.public"):
        (coordinator / name).write_text((full / name).read_text())
    for name in ("worker.secret", "server.public"):
        (worker / name).write_text((full / name).read_text())
    assert client_keys(worker).public in server_keys(coordinator).admitted
    with pytest.raises(CurveKeyError, match=r"server\.secret is missing"):
        server_keys(worker)
    with pytest.raises(CurveKeyError, match=r"worker\.secret is missing"):
        client_keys(coordinator)


def test_shared_mode_derives_public_keys_from_the_secrets(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "server.secret").write_text(base64.b64encode(b"s" * 32).decode())
    (shared / "worker.secret").write_text(base64.b64encode(b"w" * 32).decode())
    assert client_keys(shared).public in server_keys(shared).admitted
    assert client_keys(shared).server_public == server_keys(shared).public


def test_a_missing_directory_or_admission_list_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CurveKeyError, match="does not exist"):
        server_keys(tmp_path / "nope")
    only_server = tmp_path / "s"
    only_server.mkdir()
    (only_server / "server.secret").write_text(base64.b64encode(b"s" * 32).decode())
    with pytest.raises(CurveKeyError, match="no worker key to admit"):
        server_keys(only_server)
    (only_server / "worker.public").write_text("# comment\n\nnot-a-key\n")
    with pytest.raises(CurveKeyError, match=r"worker\.public line 3"):
        server_keys(only_server)
