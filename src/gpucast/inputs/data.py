"""The published-data folder (``--data-dir`` / ``$GPUCAST_SHARED_DATA``) and paths in it."""

from __future__ import annotations

import os
from pathlib import Path

from gpucast.domain.errors import InvalidSpecError

#: Environment variable naming the published-data folder (the one holding cmdare/, transient/).
DATA_DIR_ENV = "GPUCAST_SHARED_DATA"


def published_data_dir(
    given: Path | str | None, needs: tuple[str, ...] = ("transient", "cmdare")
) -> Path | None:
    """The published-data folder the user gave: ``data_dir``, else ``$GPUCAST_SHARED_DATA``.

    Returns ``None`` when neither is set (callers fall back to catalog-only inputs and say so).
    A folder that is given but holds none of the sub-folders ``needs`` (by default
    ``transient/`` or ``cmdare/``; a verb that reads one data set names its own) is an error.
    """
    how = "--data-dir"
    if given is None:
        env = os.environ.get(DATA_DIR_ENV)
        if not env:
            return None
        given, how = Path(env), f"${DATA_DIR_ENV}"
    given = Path(given)
    if any((given / name).is_dir() for name in needs):
        return given.resolve()
    if not given.is_dir():  # a mistyped path: say so, not which sub-folders it lacks
        raise InvalidSpecError(
            "data-dir",
            f"is not a folder (from {how})" if given.exists() else f"does not exist (from {how})",
            got=str(given),
            fix="point --data-dir at the published data folder (e.g. ../shared/data)",
        )
    raise InvalidSpecError(
        "data-dir",
        f"has no {' or '.join(f'{name}/' for name in needs)} folder (from {how})",
        got=str(given),
        fix="point --data-dir at the published data folder (e.g. ../shared/data)",
    )


def data_path(root: Path | None, *parts: str) -> Path | None:
    """``root/parts...`` when ``root`` is given and that file or folder exists, else ``None``."""
    if root is None:
        return None
    path = root.joinpath(*parts)
    return path if path.exists() else None
