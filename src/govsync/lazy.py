"""A package face whose names load when first asked for (PEP 562): one table of name ->
module, read by docs/architecture.md's test as the face's imports."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def face(package: str, table: Mapping[str, str]
         ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: a name of ``table`` is imported
    from its module when first asked for, then kept in the package."""

    def getattr_(name: str) -> Any:
        try:
            module = table[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def dir_() -> list[str]:
        return sorted({*vars(sys.modules[package]), *table})

    return getattr_, dir_
