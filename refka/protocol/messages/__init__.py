"""One module per API; ``APIS`` maps API key to its compiled :class:`Api`."""

from __future__ import annotations

import importlib
import pkgutil

from ..api import Api

APIS: dict[int, Api] = {}


def _load() -> None:
    for mod in pkgutil.iter_modules(__path__):
        m = importlib.import_module(f"{__name__}.{mod.name}")
        for value in vars(m).values():
            if isinstance(value, Api):
                if value.key in APIS and APIS[value.key] is not value:
                    raise RuntimeError(f"API key {value.key} declared twice")
                APIS[value.key] = value


_load()


def get(key: int) -> Api | None:
    return APIS.get(key)
