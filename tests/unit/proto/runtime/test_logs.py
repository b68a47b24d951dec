from __future__ import annotations

import asyncio
import importlib.util
import logging
import subprocess
import sys
from collections.abc import Iterator

import orjson
import pytest
import structlog

from proto.runtime import logs


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    yield
    structlog.reset_defaults()
    logging.getLogger().handlers.clear()


def _lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in capsys.readouterr().err.splitlines() if line]


def test_json_lines_carry_level_time_and_bound_context(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(fmt="json", level="info")
    log = logs.get_logger("test", worker="w-1")
    with logs.bound(controller="cc", key="ns/p"):
        log.info("reconciled", took=0.5)
    log.info("after")
    log.debug("filtered out")
    first, second = _lines(capsys)
    assert first["event"] == "reconciled"
    assert first["level"] == "info"
    assert first["controller"] == "cc" and first["key"] == "ns/p" and first["worker"] == "w-1"
    assert first["took"] == 0.5
    assert str(first["timestamp"]).endswith("Z")
    assert "controller" not in second and second["worker"] == "w-1"


def test_context_is_inherited_by_tasks(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(fmt="json", level="info")

    async def child() -> None:
        logs.get_logger().info("in child")

    async def parent() -> None:
        with logs.bound(key="ns/a"):
            await asyncio.create_task(child())

    asyncio.run(parent())
    (line,) = _lines(capsys)
    assert line["key"] == "ns/a"


def test_stdlib_records_are_rendered_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(fmt="json", level="info")
    logging.getLogger("aiohttp.client").warning("connection reset")
    (line,) = _lines(capsys)
    assert line["event"] == "connection reset"
    assert line["logger"] == "aiohttp.client"
    assert line["level"] == "warning"


def test_exceptions_are_structured(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(fmt="json", level="info")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logs.get_logger().exception("failed")
    (line,) = _lines(capsys)
    assert "RuntimeError" in orjson.dumps(line["exception"]).decode()


def test_console_format_is_readable(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(fmt="console", level="info")
    logs.get_logger().info("hello", key="ns/a")
    err = capsys.readouterr().err
    assert "hello" in err and "key" in err and "ns/a" in err
    assert not err.lstrip().startswith("{")


def test_unknown_level_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown log level 'loud'"):
        logs.configure(level="loud")


def test_loggers_made_before_configure_follow_it(capsys: pytest.CaptureFixture[str]) -> None:
    early = logs.get_logger("early", worker="w-9")
    logs.configure(fmt="json", level="info")
    early.info("after configure")
    (line,) = _lines(capsys)
    assert line["logger"] == "early" and line["worker"] == "w-9"


def _fail_with_header() -> None:
    headers = {"Authorization": "Bearer SECRET-TOKEN-1", "Content-Type": "application/json"}
    cookie = "session=SECRET-COOKIE-2"
    assert headers and cookie  # locals of the failing frame, never in its message
    raise RuntimeError("hook refused")


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_tracebacks_never_carry_frame_locals(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(fmt=fmt, level="info")  # type: ignore[arg-type]
    try:
        _fail_with_header()
    except RuntimeError:
        logs.get_logger("test").exception("hook call failed")
        logging.getLogger("aiohttp.client").exception("stdlib too")
    err = capsys.readouterr().err
    assert "hook refused" in err and "_fail_with_header" in err  # the traceback is there
    assert err.count("hook call failed") == 1 and "stdlib too" in err
    assert "SECRET" not in err


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_credentials_in_values_and_messages_are_redacted(
    fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure(fmt=fmt, level="info")  # type: ignore[arg-type]
    log = logs.get_logger("test")
    headers = {"Authorization": "Bearer SECRET1", "Accept": "application/json"}
    log.warning("request", headers=headers, url="https://user:SECRET2@hooks.example/sync")
    log.warning("sent {'Proxy-Authorization': 'Basic U0VDUkVUMw=='}", authorization="SECRET4")
    try:
        raise ValueError(f"bad answer to {headers}")
    except ValueError:
        log.exception("failed")
    err = capsys.readouterr().err
    assert "SECRET" not in err and "U0VDUkVUMw" not in err
    assert "application/json" in err and "hooks.example/sync" in err
    assert "[REDACTED]" in err


def test_importing_logs_leaves_rich_unloaded_and_importable() -> None:
    """structlog would import rich for renderers never used here (about 55 ms per start)."""
    if importlib.util.find_spec("rich") is None:
        pytest.skip("rich is not installed here: nothing to leave unloaded")
    code = (
        "import sys, proto.runtime.logs\n"
        "print('rich' in sys.modules)\n"
        "import rich.console\n"
        "print(rich.console.__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.split() == ["False", "rich.console"]
