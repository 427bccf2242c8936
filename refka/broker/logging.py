"""structlog set-up: readable console lines by default, JSON with --log-format json."""

from __future__ import annotations

import logging
import sys

import structlog

# True when debug logging (the request log) is on: checked once per request.
DEBUG = False


def configure(fmt: str = "console", level: str = "info") -> None:
    global DEBUG
    lvl = getattr(logging, level.upper(), logging.INFO)
    DEBUG = lvl <= logging.DEBUG
    processors: list = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if fmt == "json":
        processors += [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    else:
        processors += [structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    # kazoo and asyncio log through the standard library.
    logging.basicConfig(level=max(lvl, logging.WARNING), stream=sys.stderr, format="%(name)s %(levelname)s %(message)s")


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    return structlog.get_logger(name)  # type: ignore[no-any-return]
