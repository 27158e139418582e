"""What every CLI verb shares: consoles, JSON output, the run context (--db, --debug)."""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

# Piped output (CI logs, `| less`) gets wide tables instead of Rich's 80-column default.
console = Console(width=None if sys.stdout.isatty() else 200)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 200)


@dataclass(frozen=True, slots=True)
class CliState:
    """Options given before the verb: ``gpucast --db PATH --debug VERB ...``."""

    db_path: Path | None
    debug: bool


def state(ctx: typer.Context) -> CliState:
    """The root options, from the Typer context (defaults when invoked without the root)."""
    root = ctx.find_root()
    obj = root.obj
    if isinstance(obj, CliState):
        return obj
    return CliState(db_path=None, debug=False)


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def emit_json(obj: Any) -> None:
    """Print one JSON object on stdout (NaN/inf become null), with no Rich markup."""
    sys.stdout.write(json.dumps(_jsonable(obj), indent=2, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()


#: Environment variable naming the published-data folder (the one holding cmdare/, transient/).
DATA_DIR_ENV = "GPUCAST_SHARED_DATA"


def published_data_dir(given: Path | None) -> Path | None:
    """The published-data folder the user gave: ``--data-dir``, else ``$GPUCAST_SHARED_DATA``.

    Returns ``None`` when neither is set (callers fall back to catalog-only inputs and say so).
    A folder that is given but holds no ``cmdare/`` or ``transient/`` is an error.
    """
    import os

    how = "--data-dir"
    if given is None:
        env = os.environ.get(DATA_DIR_ENV)
        if not env:
            return None
        given, how = Path(env), f"${DATA_DIR_ENV}"
    if (given / "transient").is_dir() or (given / "cmdare").is_dir():
        return given.resolve()
    from gpucast.domain.errors import InvalidSpecError

    raise InvalidSpecError(
        "data-dir",
        f"has no transient/ or cmdare/ folder (from {how})",
        got=str(given),
        fix="point --data-dir at the published data folder (e.g. ../shared/data)",
    )


def emit_result(summary: dict[str, Any], text: str, *, as_json: bool) -> None:
    """The one way a verb reports a result: ``summary`` as JSON with ``--json``, else ``text``."""
    if as_json:
        emit_json(summary)
    else:
        console.print(text, highlight=False)


JSON_OPTION_HELP = "Print one JSON object instead of text."


def working(message: str) -> Any:
    """A spinner on stderr while a verb computes (nothing when stderr is not a terminal)."""
    return err_console.status(message, spinner="dots")
