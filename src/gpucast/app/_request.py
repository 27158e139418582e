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
from gpucast.domain.options import request_name, update

T = TypeVar("T")


def resolve(
    cls: type[T],
    request: T | None,
    options: Mapping[str, Any],
    config: Path | str | None = None,
) -> T:
    """The request a verb runs: ``request`` (or one built from ``config`` and ``options``)."""
    if request is None:
        return request_from(cls, options, config)
    if not isinstance(request, cls):
        raise InvalidSpecError(
            "request",
            f"must be a {cls.__name__} for {request_name(cls)}",
            got=type(request).__name__,
            fix=f"pass gpucast.{cls.__module__.rsplit('.', 1)[-1]}.{cls.__name__}(...) or "
            "keyword options",
        )
    if config is not None:
        raise InvalidSpecError(
            "config", "cannot be combined with a request object", fix="pass one of them"
        )
    return update(request, options)
