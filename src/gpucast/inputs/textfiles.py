"""YAML and TOML files a user writes (request configs, cluster descriptions): one reader.

:func:`read_text` reads the file through the one input reader (``gpucast.store.files``: UTF-8
with or without a BOM; a missing, empty or binary file, a folder or other bytes are one-line
errors naming it), :func:`parse_mapping_text` parses it by its suffix (``.toml`` is TOML,
anything else YAML) with the line of a syntax error, and :func:`line_of` finds the line a key
is written on, so an error about a field can point at it. ``gpucast.app.config`` and
:mod:`gpucast.inputs.clusters` read through here.
"""

from __future__ import annotations

import re
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
            raise DataFormatError(str(path), f"not valid TOML ({exc})") from None
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise DataFormatError(
            str(path),
            f"not valid YAML ({getattr(exc, 'problem', None) or exc})",
            line=None if mark is None else mark.line + 1,
        ) from None


def line_of(text: str, key: str) -> int | None:
    """The first line (1-based) that sets ``key`` (``key:`` in YAML, ``key =`` in TOML)."""
    pattern = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*[:=]")
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern.match(line):
            return number
    return None
