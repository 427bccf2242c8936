"""The handler registry: ``@handles(ApiKey, min, max)``.

Handlers register themselves when ``refka.broker.handlers`` is imported;
ApiVersions answers from this registry, so what is advertised cannot drift
from what is served. A handler is ``fn(ctx, request) -> response`` or an
``async def`` of the same shape; a plain handler may also return a coroutine
when it has to wait (Produce acks=-1), which the connection awaits in order.
Returning ``None`` sends no response (Produce with acks=0).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from refka.protocol import Api, ErrorCode
from refka.protocol.messages import APIS
from refka.protocol.messages.api_versions import ApiVersions


@dataclass(frozen=True)
class Handler:
    api: Api
    min_version: int
    max_version: int
    fn: Callable[..., Any]
    is_async: bool
    # Sent by the controller to brokers (LeaderAndIsr, ...) or by a broker to the
    # controller (ControlledShutdown): served before the broker is ready, as they are what
    # makes it ready, and only to brokers (the handlers ask inter_broker.py); advertised in
    # ApiVersions on every listener like the others, as Kafka's ZooKeeper-mode brokers do.
    inter_broker: bool = False


HANDLERS: dict[int, Handler] = {}


def handles(api_key: int, min_version: int, max_version: int, *, inter_broker: bool = False):
    api = APIS.get(api_key)
    if api is None:
        raise LookupError(f"no declaration for API key {api_key}")
    if min_version < api.min_version or max_version > api.max_version:
        raise ValueError(
            f"{api.name}: serving v{min_version}-{max_version} but declared "
            f"v{api.min_version}-{api.max_version}"
        )

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        if api_key in HANDLERS:
            raise RuntimeError(f"{api.name} has two handlers")
        HANDLERS[api_key] = Handler(
            api, min_version, max_version, fn, inspect.iscoroutinefunction(fn), inter_broker
        )
        return fn

    return register


def served_versions() -> list[tuple[int, str, int, int]]:
    """(key, name, min, max) of every served API, by key."""
    return sorted((h.api.key, h.api.name, h.min_version, h.max_version) for h in HANDLERS.values())


_api_versions_answers: dict[int, Any] = {}


def api_versions_response(error: ErrorCode) -> Any:
    """The ApiVersions answer with ``error``: every registered handler's key and versions
    (built once per error code; handlers are all registered by the time anyone asks)."""
    cached = _api_versions_answers.get(int(error))
    if cached is None:
        R = ApiVersions.Response
        cached = R(
            error_code=error,
            api_keys=[
                R.ApiVersion(api_key=h.api.key, min_version=h.min_version, max_version=h.max_version)
                for h in sorted(HANDLERS.values(), key=lambda h: h.api.key)
            ],
        )
        _api_versions_answers[int(error)] = cached
    return cached
