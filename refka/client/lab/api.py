"""The admin HTTP API as a plan's runner calls it: ``refka admin``'s helper (admin_cli.call,
urllib) in a thread, so the load's clients keep running on the event loop meanwhile."""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from typing import Any

from refka.client.admin_cli import AdminError, call

__all__ = ["AdminApi", "AdminError", "quote"]


def quote(name: str) -> str:
    """A topic name as one path segment."""
    return urllib.parse.quote(name, safe="")


class AdminApi:
    def __init__(self, url: str, token: str | None = None) -> None:
        self.url = url
        self.token = token

    async def _call(self, method: str, path: str, query: dict[str, Any] | None = None,
                    body: dict[str, Any] | None = None) -> str:
        text, _ = await asyncio.to_thread(call, self.url, path, query, method, body, self.token)
        return text

    async def get(self, path: str, **query: Any) -> Any:
        return _json(await self._call("GET", path, query), path)

    async def get_lines(self, path: str, **query: Any) -> list[dict[str, Any]]:
        """A JSON-lines answer (the timeline) as its objects."""
        text = await self._call("GET", path, query)
        return [_json(line, path) for line in text.splitlines() if line.strip()]

    async def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return _json(await self._call("POST", path, body=body), path)

    async def delete(self, path: str) -> Any:
        return _json(await self._call("DELETE", path), path)


def _json(text: str, path: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise AdminError(f"{path} did not answer JSON (is this refka's admin API?): {text[:80]!r}") from None
