"""What every CLI verb shares: consoles, JSON output, the run context (--db, --debug)."""

from __future__ import annotations

import json
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


def emit_json(obj: Any) -> None:
    """Print one JSON object on stdout (NaN/inf become null), with no Rich markup."""
    from gpucast.domain.jsonable import jsonable

    sys.stdout.write(json.dumps(jsonable(obj), indent=2, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()


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
