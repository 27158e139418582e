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
