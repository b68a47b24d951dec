"""Logging set-up shared by the coordinator and the workers (structlog).

Contract:
- ``configure(fmt=..., level=...)`` is called once per process, at the entry point.
  ``fmt="json"`` writes one JSON object per line (production); ``fmt="console"`` writes
  readable, coloured lines (development). ``fmt="auto"`` picks console on a TTY, else JSON.
- Every record carries ``timestamp`` (ISO 8601, UTC), ``level`` and ``event``, plus whatever
  context is bound: per process (``bind(worker="w-0")``) or per task through contextvars
  (``bound(controller=..., key=...)``); asyncio tasks inherit the context of their creator.
- Levels below ``level`` cost one function call (filtering bound logger).
- Third-party libraries logging through the stdlib (aiohttp, kubernetes) are rendered by the
  same processors, so every line of a process has one format.
- No credential reaches the output: exception tracebacks are rendered without frame locals
  (JSON: ``exception`` as a list of frames; console: plain text), and then every value of the
  record, the rendered traceback included, goes through ``proto.runtime.redact.redact``: values
  under credential-like keys (``authorization``, ``cookie``, ``token``...) and credential headers in
  text (``'Authorization': 'Bearer ...'``, URL userinfo) read ``[REDACTED]``.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from typing import Any, Literal

import orjson

from proto.runtime.redact import REDACTED, is_sensitive, redact


@contextlib.contextmanager
def _refused(module: str) -> Iterator[None]:
    """Imports of ``module`` fail with ``ImportError`` inside the block, unless it is loaded
    already; afterwards it can be imported again."""
    if module in sys.modules:
        yield
        return
    sys.modules[module] = None  # type: ignore[assignment]  # the import system's "refused"
    try:
        yield
    finally:
        if module in sys.modules and sys.modules[module] is None:
            del sys.modules[module]


# structlog imports rich when it is installed, for tracebacks this module never renders
# (they are plain here, without frame locals): a large share of every process start.
with _refused("rich"):
    import structlog
    import structlog.dev
    import structlog.stdlib
    from structlog.tracebacks import ExceptionDictTransformer

Format = Literal["json", "console", "auto"]

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}
_ALIASES = {"warn": "warning"}


def parse_level(name: str) -> str:
    """The canonical name of a log level (``debug`` ... ``critical``; ``warn`` too).

    Raises ``ValueError`` naming the accepted levels.
    """
    level = name.lower()
    level = _ALIASES.get(level, level)
    if level not in _LEVELS:
        raise ValueError(f"unknown log level {name!r}; expected one of {sorted(_LEVELS)}")
    return level


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is at the time of the write (it may be replaced)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _orjson_dumps(obj: Any, default: Any = None) -> str:
    return orjson.dumps(obj, default=default or str).decode()


_FIXED_KEYS = frozenset(("level", "timestamp", "logger"))


def _redact_record(_logger: Any, _method: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    """Replace credentials anywhere in the record (see the module docstring)."""
    for key, value in event_dict.items():
        if key in _FIXED_KEYS:
            continue
        if key != "event" and is_sensitive(key):
            event_dict[key] = REDACTED
        elif isinstance(value, str | list | tuple | dict):
            event_dict[key] = redact(value)
    return event_dict


def configure(*, fmt: Format = "auto", level: str = "info") -> None:
    """Configure structlog and the stdlib root logger for this process.

    Raises ``ValueError`` for an unknown level name.
    """
    numeric = _LEVELS[parse_level(level)]
    if fmt == "auto":
        fmt = "console" if sys.stderr.isatty() else "json"

    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Any
    if fmt == "json":
        # structlog's own dict_tracebacks shows frame locals: a header dict in any frame
        # would be written out whole
        shared.append(
            structlog.processors.ExceptionRenderer(ExceptionDictTransformer(show_locals=False))
        )
        renderer = structlog.processors.JSONRenderer(serializer=_orjson_dumps)
    else:
        # rendered to text here (no locals) so it is redacted like every other value; the
        # console renderer's rich tracebacks would show frame locals
        shared.append(structlog.processors.ExceptionRenderer())
        renderer = structlog.dev.ConsoleRenderer(
            colors=sys.stderr.isatty(), exception_formatter=structlog.dev.plain_traceback
        )
    shared.append(_redact_record)

    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.WriteLoggerFactory(file=_CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=True,
    )

    # Route stdlib logging (aiohttp, kubernetes, asyncio) through the same renderer.
    handler = logging.StreamHandler(_CurrentStderr())
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared[:1], structlog.stdlib.add_logger_name, *shared[1:]],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    # aiohttp's access log is per request: far too chatty above debug.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


class _LazyLogger:
    """A logger that binds its context on first use, and again after a reconfiguration.

    Loggers are often made at import time, before ``configure`` runs; binding then would pin
    structlog's defaults (and ``structlog.testing.capture_logs`` would not see them).
    """

    __slots__ = ("_bound", "_context", "_processors")

    def __init__(self, context: dict[str, Any]) -> None:
        self._context = context
        self._bound: Any = None
        self._processors: Any = None

    def __getattr__(self, name: str) -> Any:
        processors = structlog.get_config()["processors"]
        if self._bound is None or processors is not self._processors:
            self._processors = processors
            self._bound = structlog.get_logger().bind(**self._context)
        return getattr(self._bound, name)


def get_logger(name: str | None = None, **context: Any) -> Any:
    """A structlog logger, optionally with a ``logger`` name and bound context.

    Safe at import time: it binds on first use, following whatever ``configure`` set.
    """
    if name is not None:
        context = {"logger": name, **context}
    return _LazyLogger(context)


def bind(**context: Any) -> None:
    """Bind context for the rest of this task (and the tasks it creates)."""
    structlog.contextvars.bind_contextvars(**context)


@contextlib.contextmanager
def bound(**context: Any) -> Iterator[None]:
    """Bind context for the duration of a ``with`` block, then restore the previous values."""
    tokens = structlog.contextvars.bind_contextvars(**context)
    try:
        yield
    finally:
        structlog.contextvars.reset_contextvars(**tokens)
