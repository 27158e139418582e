"""The one YAML reader: safe loading that refuses a key written twice in one mapping.

PyYAML's ``safe_load`` keeps the last of two equal keys without a word, so a cluster file
with ``gpus_per_node: 8`` and, further down, ``gpus_per_node: 4`` would silently use 4. Every
YAML gpucast reads (``--config`` and ``--cluster`` files through
:mod:`gpucast.inputs.textfiles`, campaign sweeps through :mod:`gpucast.measure.campaign`)
goes through :func:`load_yaml` or :func:`compose_yaml`, which raise one
:class:`~gpucast.domain.errors.DataFormatError` naming the file, the key and both lines.
Keys merged in with ``<<: *anchor`` may still be overridden: that is what a merge is for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gpucast.domain.errors import DataFormatError

_MERGE_TAG = "tag:yaml.org,2002:merge"


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that raises :class:`_DuplicateKey` for a mapping's repeated key.

    The check runs in ``flatten_mapping`` (which every mapping passes through before it is
    built, and which splices ``<<`` merges into the node), once per node and before the splice,
    so only keys written in the mapping itself are compared."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._checked: set[int] = set()

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        if id(node) not in self._checked:
            self._checked.add(id(node))
            first_line: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    earlier = first_line.get(key)
                except TypeError:  # an unhashable key: SafeLoader's own error says so
                    continue
                line = int(key_node.start_mark.line) + 1
                if earlier is not None:
                    raise _DuplicateKey(key, earlier, line)
                first_line[key] = line
        super().flatten_mapping(node)


class _DuplicateKey(Exception):
    def __init__(self, key: Any, first_line: int, line: int) -> None:
        super().__init__(key)
        self.key = key
        self.first_line = first_line
        self.line = line


def _duplicate_error(path: Path | str, exc: _DuplicateKey) -> DataFormatError:
    where = (
        f"on line {exc.line}"
        if exc.first_line == exc.line
        else f"(lines {exc.first_line} and {exc.line})"
    )
    return DataFormatError(
        str(path),
        f"key {exc.key!r} is given twice {where}; YAML would silently keep the last",
        line=exc.line,
        fix=f"keep one {exc.key!r} line and delete the other",
    )


def _syntax_error(path: Path | str, exc: yaml.YAMLError) -> DataFormatError:
    mark = getattr(exc, "problem_mark", None)
    return DataFormatError(
        str(path),
        f"not valid YAML ({getattr(exc, 'problem', None) or exc})",
        line=None if mark is None else int(mark.line) + 1,
    )


def load_yaml(text: str, path: Path | str) -> Any:
    """The document in ``text`` (``None`` for an empty one), as ``yaml.safe_load`` builds it;
    a syntax error or a key given twice in one mapping is a :class:`DataFormatError` naming
    ``path`` and the line."""
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass: safe
    except _DuplicateKey as exc:
        raise _duplicate_error(path, exc) from None
    except yaml.YAMLError as exc:
        raise _syntax_error(path, exc) from None


def compose_yaml(text: str, path: Path | str) -> yaml.Node | None:
    """The node tree of ``text`` (for a reader that reports errors by node line), checked as
    :func:`load_yaml` checks it."""
    loader = _UniqueKeyLoader(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            loader.construct_document(node)
        return node
    except _DuplicateKey as exc:
        raise _duplicate_error(path, exc) from None
    except yaml.YAMLError as exc:
        raise _syntax_error(path, exc) from None
    finally:
        loader.dispose()
