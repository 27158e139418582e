"""What every CLI verb shares: consoles, JSON output, the run context (--db, --debug)."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

# Piped output (CI logs, `| less`) gets wide tables instead of Rich's 80-column default. No
# emoji codes: a mix like "bert-base:100:100" would print as "bert-base💯100".
console = Console(width=None if sys.stdout.isatty() else 200, emoji=False)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 200, emoji=False)


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
    from gpucast.domain.jsonable import json_text

    sys.stdout.write(json_text(obj))  # what a Python caller gets from json_text(to_dict())
    sys.stdout.flush()


def emit_result(summary: dict[str, Any], text: str, *, as_json: bool) -> None:
    """The one way a verb reports a result: ``summary`` as JSON with ``--json``, else ``text``."""
    if as_json:
        emit_json(summary)
    else:
        console.print(text, highlight=False)


JSON_OPTION_HELP = "Print one JSON object instead of text."


def say_new_store(store: Path | None) -> None:
    """The stderr line of a write that created its store's missing folder (a result's
    ``new_store``; a read verb refuses one): the folder, not only the run, is new."""
    if store is not None:
        err_console.print(
            f"new store {store}: created its folder {store.parent} (it did not exist)",
            highlight=False,
            markup=False,
            soft_wrap=True,  # one line, however long the paths
        )


def print_warnings(warnings: Iterable[str]) -> None:
    """One ``warning:`` line on stderr per text (stdout stays the result, JSON or text)."""
    for text in warnings:
        err_console.print(f"[yellow]warning:[/yellow] {escape(text)}", highlight=False)


#: Plain progress lines (stderr not a terminal): the first after this many seconds, then
#: one every :data:`PLAIN_EVERY_S` (a log or a CI job sees the verb is alive; a quick verb
#: prints nothing).
PLAIN_FIRST_S = 10.0
PLAIN_EVERY_S = 30.0


def _real_stream(stream: Any) -> bool:
    """Whether ``stream`` is a file the OS writes (a pipe, a log), not an in-memory capture."""
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    return True


@contextlib.contextmanager
def working(message: str | Callable[[], str]) -> Iterator[None]:
    """Progress on stderr while a verb computes: a Rich spinner in a terminal, else a plain
    line ``... still <message> (N s)`` after :data:`PLAIN_FIRST_S` and every
    :data:`PLAIN_EVERY_S` after that. ``message`` may be a callable, read at each line (a
    measurement's latest sample count); a terminal shows its first value."""
    if err_console.is_terminal:
        text = message() if callable(message) else message
        with err_console.status(text, spinner="dots"):
            yield
        return
    if not _real_stream(sys.stderr):  # captured in-process (a test runner): keep it clean
        yield
        return
    done = threading.Event()
    start = time.monotonic()

    def tick() -> None:
        wait = PLAIN_FIRST_S
        while not done.wait(wait):
            elapsed = time.monotonic() - start
            text = message() if callable(message) else message
            sys.stderr.write(f"... still {text} ({elapsed:.0f} s)\n")
            sys.stderr.flush()
            wait = PLAIN_EVERY_S

    thread = threading.Thread(target=tick, name="gpucast-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=1.0)


def print_more_rows(total: int, shown: int) -> None:
    """The line under a plan table that shows ``shown`` of its ``total`` rows."""
    from gpucast.domain.units import count_of

    if total > shown:
        console.print(
            f"[dim]{total - shown} more: --limit {total} shows all "
            f"{count_of(total, 'row')} (--json lists them)[/dim]",
            highlight=False,
        )


def check_outputs(outputs: dict[str, Path | None], inputs: Iterable[Path | None]) -> None:
    """Before the work: each output (``--report --save --csv``) a file that may be written,
    none an input file, and ``--report`` an HTML name (QA 40 C5); each error names its
    option. ``plan train``, ``plan llm-train``, ``plan serve`` and ``plan llm-serve`` share it."""
    from gpucast.app.reports import html_out
    from gpucast.store.files import output_file, refuse_overwriting_inputs

    read = list(inputs)
    for flag, path in outputs.items():
        if path is not None:
            output_file(path, flag)
            refuse_overwriting_inputs(path, read, field=flag)
            if flag == "report":
                html_out(path, flag)
