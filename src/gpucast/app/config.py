"""Config files (YAML or TOML) for any request: the keys are the request's flags.

``gpucast plan train --config plan.yaml`` and ``gpucast.plan_train(config="plan.yaml")`` read
the same file through :func:`read_config`; the keys are the flag names of the request's fields
(dashes or underscores), an unknown key is an error naming the file and the closest key.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from gpucast.domain.errors import (
    DataFormatError,
    InvalidInputError,
    InvalidSpecError,
    OptionTextError,
)
from gpucast.domain.options import build, field_for
from gpucast.inputs.textfiles import (
    flag_key,
    line_of,
    parse_mapping_text,
    read_text,
    reject_respelled_keys,
)

T = TypeVar("T")


def read_config(path: Path | str, request_cls: type | None = None) -> dict[str, Any]:
    """The mapping in a YAML (``.yaml``/``.yml``/other) or TOML (``.toml``) file.

    With ``request_cls`` every key must name one of its options (else a one-line error
    naming the file, the key and the closest option).
    """
    path = Path(path)
    text = read_text(path, "config")
    data = parse_mapping_text(path, text)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise DataFormatError(str(path), "must be a mapping of option: value")
    reject_respelled_keys(path, text, data, lambda key: _field_name(request_cls, key))
    out: dict[str, Any] = {}
    for key, value in data.items():
        if request_cls is not None and field_for(request_cls, str(key)) is None:
            try:
                build(request_cls, {str(key): value})  # raises: unknown key
            except InvalidSpecError as exc:  # named with its line, as a bad value is
                line = line_of(text, str(key))
                raise DataFormatError(
                    str(path), exc.detail, line=line, key=str(key), fix=exc.fix
                ) from None
        out[str(key).strip()] = value
    return out


def request_from(
    request_cls: type[T], given: Mapping[str, Any], config: Path | str | None = None
) -> T:
    """The request from explicit values over a config file's (``None`` = not given)."""
    values: dict[str, Any] = {}
    where = None
    if config is not None:
        values.update(read_config(config, request_cls))
        where = str(config)
    from_file = set(values)
    for key, value in given.items():
        if value is None or (isinstance(value, list) and not value):
            continue
        f = field_for(request_cls, key)
        name = f.name if f is not None else key
        # the file's spelling of this option gives way (two given spellings: build refuses)
        values = {
            k: v for k, v in values.items() if k not in from_file or not _same(request_cls, k, name)
        }
        values[key] = value
        from_file.discard(key)
    try:
        return build(request_cls, values, where=where)
    except OptionTextError as exc:
        better = _option_example(exc, values.get("workload"))
        if config is None:
            raise better from None
        raise _in_file(request_cls, better, Path(config), from_file & set(values)) from None
    except InvalidSpecError as exc:
        if config is None:
            raise
        raise _in_file(request_cls, exc, Path(config), from_file & set(values)) from None


def _option_example(exc: OptionTextError, workload: Any) -> OptionTextError:
    """``exc`` with one of ``workload``'s own options as its example (``-o nonsense`` for
    bert-base: ``e.g. -o seq_len=128``; a user model's factory's keyword parameters); the
    generic ``name=value`` where it declares none."""
    if not isinstance(workload, str):
        return exc
    from gpucast.workloads import option_example

    found = option_example(workload)
    if found is None and ":" in workload:  # module:factory that cannot be read (or run:N)
        return OptionTextError(exc.text, example=f"name=value (a keyword of {workload.strip()})")
    if found is None:
        return exc
    example, names = found
    return OptionTextError(
        exc.text, example=f"{example} ({workload.strip()} takes {', '.join(names)})"
    )


def _in_file(
    request_cls: type, exc: InvalidSpecError, path: Path, keys: set[str]
) -> InvalidInputError:
    """A value check's error about a key the config file set, naming the file and its line
    (as an unknown or repeated key's error does); ``exc`` itself where the key was not the
    file's (a flag or keyword given beside it)."""
    f = field_for(request_cls, exc.field)
    key = next((k for k in keys if f is not None and _same(request_cls, k, f.name)), None)
    if key is None:
        return exc
    line = line_of(read_text(path, "config"), key)
    return DataFormatError(str(path), exc.detail, line=line, key=key, fix=exc.fix)


def _field_name(request_cls: type | None, key: object) -> str:
    f = None if request_cls is None else field_for(request_cls, str(key))
    return flag_key(key) if f is None else f.name


def _same(request_cls: type, key: str, name: str) -> bool:
    f = field_for(request_cls, key)
    return f is not None and f.name == name
