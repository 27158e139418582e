"""YAML and TOML files a user writes (request configs, cluster descriptions): one reader.

:func:`read_text` reads the file through the one input reader (``gpucast.store.files``: UTF-8
with or without a BOM; a missing, empty or binary file, a folder or other bytes are one-line
errors naming it), :func:`parse_mapping_text` parses it by its suffix (``.toml`` is TOML,
anything else YAML, read by :func:`gpucast.store.yamlfile.load_yaml`, which refuses a key given
twice) with the line of a syntax error, a repeated key or a TOML table declared twice (its
name and both lines), and :func:`line_of` finds the line a key
is written on, so an error about a field can point at it. ``gpucast.app.config`` and
:mod:`gpucast.inputs.clusters` read through here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from gpucast.domain.errors import DataFormatError


def read_text(path: Path, what: str, *, fix: str = "check the path") -> str:
    """The text of ``path`` (:func:`gpucast.store.files.read_input_text`: UTF-8 with or without
    a BOM, CRLF as LF; a missing, empty, binary or UTF-16 file is one error); ``what`` names
    the option that gave it in the errors."""
    from gpucast.store.files import read_input_text

    return read_input_text(path, what, fix=fix)


def parse_mapping_text(path: Path, text: str) -> Any:
    """The document in ``text``: TOML for a ``.toml`` file, else YAML."""
    if path.suffix.lower() == ".toml":
        import tomllib

        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise _toml_error(path, text, str(exc)) from None
    from gpucast.store.yamlfile import load_yaml

    return load_yaml(text, path)


_TOML_AT = re.compile(r"^(?P<problem>.*) \(at line (?P<line>\d+), column \d+\)$")
_TOML_KEY = re.compile(r"^\s*(?P<key>[A-Za-z0-9_.-]+|\"[^\"]*\"|'[^']*')\s*=")
_TOML_TABLE = re.compile(r"^\s*\[")


def _toml_error(path: Path, text: str, message: str) -> DataFormatError:
    """``tomllib``'s error as one line with the file's line; a key set twice in one table (which
    TOML forbids) names the key and both lines."""
    at = _TOML_AT.match(message)
    if at is None:
        return DataFormatError(str(path), f"not valid TOML ({message})")
    line = int(at["line"])
    lines = text.splitlines()
    key = None
    if at["problem"] == "Cannot overwrite a value" and line <= len(lines):
        key = _TOML_KEY.match(lines[line - 1])
    if key is not None:
        for earlier in range(line - 2, -1, -1):
            if _TOML_TABLE.match(lines[earlier]):
                break
            again = _TOML_KEY.match(lines[earlier])
            if again is not None and again["key"] == key["key"]:
                name = key["key"].strip("\"'")
                return DataFormatError(
                    str(path),
                    f"key {name!r} is given twice (lines {earlier + 1} and {line})",
                    line=line,
                    fix=f"keep one {name!r} line and delete the other",
                )
    declared = _TOML_DECLARED.match(at["problem"])
    if declared is not None:
        return _table_twice(path, lines, declared["table"], line)
    return DataFormatError(str(path), f"not valid TOML ({at['problem']})", line=line)


_TOML_DECLARED = re.compile(r"^Cannot declare (?P<table>\(.*\)) twice$")
_TOML_HEADER = re.compile(r"^\s*\[\[?(?P<name>[^\]]+)\]\]?\s*(#.*)?$")


def _toml_parts(name: str) -> tuple[str, ...]:
    return tuple(p.strip().strip("\"'") for p in name.split("."))


def _first_declared(lines: list[str], parts: tuple[str, ...]) -> int | None:
    """The line (1-based) of the first ``[table]`` header of ``parts`` in ``lines``, else of a
    top-level ``table = {...}`` before any header; ``None`` when neither is found."""
    for k, text in enumerate(lines):
        header = _TOML_HEADER.match(text)
        if header is not None and _toml_parts(header["name"]) == parts:
            return k + 1
    for k, text in enumerate(lines):
        if _TOML_TABLE.match(text):
            break
        key = _TOML_KEY.match(text)
        if key is not None and _toml_parts(key["key"]) == parts:
            return k + 1
    return None


def _table_twice(path: Path, lines: list[str], table: str, line: int) -> DataFormatError:
    """A table declared twice (``[cluster]`` ... ``[cluster]``, which TOML forbids): its name and
    both lines (tomllib says ``Cannot declare ('cluster',) twice`` at the second)."""
    import ast

    try:
        parts = tuple(str(p) for p in ast.literal_eval(table))
    except (ValueError, SyntaxError):
        return DataFormatError(str(path), f"table {table} is declared twice", line=line)
    name = ".".join(parts)
    first = _first_declared(lines[: line - 1], parts)
    lines_text = f"lines {first} and {line}" if first is not None else f"again on line {line}"
    return DataFormatError(
        str(path),
        f"table [{name}] is declared twice ({lines_text})",
        line=line,
        fix=f"merge the two [{name}] tables into one",
    )


def flag_key(key: object) -> str:
    """A key as the option it names: ``batch-size``, ``batch_size`` and `` batch_size`` agree."""
    return str(key).strip().replace("-", "_")


def reject_respelled_keys(
    path: Path, text: str, keys: Iterable[object], canon: Callable[[object], str] = flag_key
) -> None:
    """A :class:`DataFormatError` when two keys of one mapping name the same field
    (``gpus_per_node`` and ``gpus-per-node``): the reader would keep one of them silently."""
    seen: dict[str, str] = {}
    for key in keys:
        name = canon(key)
        if name in seen:
            first, second = line_of(text, seen[name]), line_of(text, str(key))
            lines = f" (lines {first} and {second})" if first and second else ""
            raise DataFormatError(
                str(path),
                f"{seen[name]!r} and {str(key)!r} both set {name}{lines}",
                line=second,
                fix="keep one of them and delete the other",
            )
        seen[name] = str(key)


def line_of(text: str, key: str) -> int | None:
    """The first line (1-based) that sets ``key`` (``key:`` in YAML, ``key =`` in TOML)."""
    pattern = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*[:=]")
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern.match(line):
            return number
    return None
