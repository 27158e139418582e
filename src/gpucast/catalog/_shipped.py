"""Fitted models gpucast ships in ``catalog/data`` as JSON, and name-or-alias lookups."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from importlib import resources
from typing import Any, TypeVar

from gpucast.domain.errors import DataFormatError

T = TypeVar("T")


def shipped_json(name: str) -> Any | None:
    """The parsed ``catalog/data/<name>``, or ``None`` when the file is not shipped."""
    path = resources.files("gpucast.catalog") / "data" / name
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DataFormatError(f"gpucast/catalog/data/{name}", f"unreadable ({exc})") from None


def by_name_or_alias(
    items: Sequence[T],
    name: str,
    names: Callable[[T], Iterable[str]],
    key: Callable[[str], str],
    unknown: Callable[[list[str]], Exception],
) -> T:
    """The item whose name or an alias (``names(item)``) has the same ``key`` as ``name``;
    ``unknown(first names)`` is raised otherwise."""
    wanted = key(name)
    for item in items:
        if wanted in {key(n) for n in names(item)}:
            return item
    raise unknown([next(iter(names(i))) for i in items])
