"""proto.runtime.addresses: Metacontroller's address forms, and bind checks before anything
starts."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from proto.runtime.addresses import (
    UNIX_PATH_MAX,
    TcpAddress,
    UnixAddress,
    check_bindable,
    parse_address,
)
from proto.runtime.startup import StartupError


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        (":9999", TcpAddress("0.0.0.0", 9999)),
        ("127.0.0.1:0", TcpAddress("127.0.0.1", 0)),
        ("[::1]:8081", TcpAddress("::1", 8081)),
        (":65535", TcpAddress("0.0.0.0", 65535)),
        ("0", None),
        ("", None),
        ("unix:/run/m.sock", UnixAddress("/run/m.sock")),
    ],
)
def test_addresses_take_metacontrollers_forms(text: str, parsed: object) -> None:
    assert parse_address(text) == parsed


@pytest.mark.parametrize("text", [":99999", "9999", "host:", "host:port", ":-1", "unix:"])
def test_bad_addresses_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="expected"):
        parse_address(text)


def test_a_port_in_use_is_found_before_starting() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = TcpAddress("127.0.0.1", s.getsockname()[1])
        with pytest.raises(StartupError, match=r"--metrics-address 127.0.0.1:\d+: cannot listen"):
            check_bindable(busy, what="--metrics-address")
    check_bindable(TcpAddress("127.0.0.1", 0), what="--metrics-address")


def test_a_unix_socket_needs_its_directory_and_a_short_path(tmp_path: Path) -> None:
    check_bindable(UnixAddress(str(tmp_path / "m.sock")), what="m")
    with pytest.raises(StartupError, match="no such directory"):
        check_bindable(UnixAddress(str(tmp_path / "no" / "m.sock")), what="m")
    with pytest.raises(StartupError, match=f"limited to {UNIX_PATH_MAX} bytes"):
        check_bindable(UnixAddress(str(tmp_path / ("x" * 120))), what="m")
