"""How every verb takes its request: a request object, keyword options, a config file, or all.

``gpucast.plan_train(workload="resnet50", epochs=90, dataset_size=1281167)``,
``gpucast.plan_train(TrainRequest(...))`` and ``gpucast.plan_train(config="plan.yaml",
deadline="12h")`` are the same call: keyword options are field names or flag names (dashes
or underscores) and win over the request and the config file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from gpucast.app.config import request_from
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.options import converted, fields_of, request_name, update

T = TypeVar("T")


def resolve(
    cls: type[T],
    request: T | str | Path | int | None,
    options: Mapping[str, Any],
    config: Path | str | None = None,
) -> T:
    """The request a verb runs: ``request`` (or one built from ``config`` and ``options``).

    Text in place of the request is the verb's positional argument, as on the command line
    (``gpucast.profile_workload("resnet50", batch_size=64)``). A request whose output file
    (``out`` / ``output``) is one of its input files is refused before anything runs.
    """
    resolved = _resolve(cls, request, options, config)
    _refuse_output_over_input(resolved, config)
    return resolved


#: Request fields that name a file the verb writes; every other path field is read.
OUTPUT_FIELDS = ("out", "output")


def _refuse_output_over_input(request: Any, config: Path | str | None) -> None:
    from gpucast.store.files import refuse_overwriting_inputs

    fields = fields_of(type(request))
    paths = {
        f.name: getattr(request, f.name)
        for f in fields
        if isinstance(getattr(request, f.name), str | Path) and f.kind == "path"
    }
    inputs = [p for name, p in paths.items() if name not in OUTPUT_FIELDS]
    for f in fields:  # a list of input files (fit speed --data a.csv,b.csv) is read too
        if f.kind == "list" and f.info.item == "path" and f.name not in OUTPUT_FIELDS:
            inputs.extend(p for p in getattr(request, f.name) or () if isinstance(p, str | Path))
    if config is not None:
        inputs.append(config)
    for name in OUTPUT_FIELDS:
        if paths.get(name) is not None:
            refuse_overwriting_inputs(paths[name], inputs, field=name)


def _resolve(
    cls: type[T],
    request: T | str | Path | int | None,
    options: Mapping[str, Any],
    config: Path | str | None,
) -> T:
    if request is not None and not isinstance(request, cls):
        positional = [f for f in fields_of(cls) if f.info.argument]
        if len(positional) == 1 and isinstance(request, str | Path | int):
            return request_from(cls, {**options, positional[0].name: request}, config)
    if request is None:
        return request_from(cls, options, config)
    if not isinstance(request, cls):
        raise InvalidSpecError(
            "request",
            f"must be a {cls.__name__} for {request_name(cls)}",
            got=type(request).__name__,
            fix=f"pass {cls.__module__}.{cls.__name__}(...) or keyword options",
        )
    if config is not None:
        raise InvalidSpecError(
            "config", "cannot be combined with a request object", fix="pass one of them"
        )
    return update(converted(request), options)
