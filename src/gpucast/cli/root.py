"""The ``gpucast`` command group (Typer): a thin shell over the Python API, one module per verb.

Errors from gpucast (``GpucastError``) become one red line on stderr and exit code 2 for bad
input or 1 for runtime failures; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from typer import _click as click  # typer >= 0.29 vendors click
from typer.core import TyperGroup
from typer.exceptions import Abort

from gpucast._version import __version__
from gpucast.cli._common import CliState, err_console
from gpucast.domain.errors import GpucastError


def _one_line(text: str) -> str:
    return " ".join(text.split())


#: Root options that take a value (the command is the first word that is none of them).
_VALUED_ROOT_OPTIONS = frozenset({"--db"})


def command_aliases(argv: list[str]) -> list[str]:
    """``argv`` with the spellings that name another command rewritten to it: ``plan serve
    --serverless ...`` is ``plan serverless ...`` (issue #19 names the comparison of serverless
    with always-on deployments so; its options are the serverless load's, not a request
    rate's, so it is one command with two spellings, not a mode of ``plan serve``)."""
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] in _VALUED_ROOT_OPTIONS else 1
    if argv[i : i + 2] == ["plan", "serve"] and "--serverless" in argv[i + 2 :]:
        rest = [_serverless_flag(a) for a in argv[i + 2 :] if a != "--serverless"]
        return [*argv[:i], "plan", "serverless", *rest]
    return argv


#: what a usage error adds when ``plan serve --serverless`` was given an option it lacks
SERVERLESS_OPTIONS_HINT = (
    "; with --serverless, plan serve is plan serverless and takes its options (a --trace or "
    "--synthetic load, --models, --slo, --policies, ...), not plan serve's (--arrivals, "
    "--rate, --slo-ms, ...): see gpucast plan serverless --help"
)


def _serverless_flag(arg: str) -> str:
    """``plan serve``'s ``--model`` as ``plan serverless`` spells it (``--models``: the
    functions' workloads; one model is the single one every function serves)."""
    if arg == "--model" or arg.startswith("--model="):
        return "--models" + arg.removeprefix("--model")
    return arg


def _as_typed(text: str, given: list[str]) -> str:
    """An error of ``plan serverless`` in the spelling the user gave ``plan serve
    --serverless``: the field and the fix name ``--model`` where that is the flag typed
    (:func:`_serverless_flag` made it ``--models``)."""
    if not any(a == "--model" or a.startswith("--model=") for a in given):
        return text
    if text.startswith("models:"):
        text = "model:" + text.removeprefix("models:")
    return text.replace("--models ", "--model ")


def _global_option_hint(group: click.Command, option: str, given: list[str]) -> str:
    """``--db`` typed after the verb is gpucast's own option, taken only before the verb:
    say so with the command line that works (``""`` for any other unknown option)."""
    if not any(option in p.opts for p in group.params):
        return ""
    at = next((i for i, a in enumerate(given) if a == option or a.startswith(f"{option}=")), None)
    if at is None:
        return ""
    takes_value = any(option in p.opts and not getattr(p, "is_flag", False) for p in group.params)
    moved = given[at : at + (2 if takes_value and "=" not in given[at] else 1)]
    rest = given[:at] + given[at + len(moved) :]
    return f"; {option} is gpucast's own option: give it before the verb, e.g. gpucast " + " ".join(
        [*moved, *rest]
    )


#: The exit code of a command stopped by Ctrl-C (SIGINT), as shells report it (128 + 2).
INTERRUPTED = 130


class GpucastGroup(TyperGroup):
    """Root command group that turns every error into one clear line and an exit code, and
    imports a verb's module only when that verb is used (:mod:`gpucast.cli.verbs`)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        from gpucast.cli import verbs

        return verbs.names()

    def get_command(self, ctx: click.Context, cmd_name: str) -> Any:
        command = self.commands.get(cmd_name)
        if command is None:
            from gpucast.cli import verbs

            command = verbs.load(cmd_name)
            if command is not None:
                self.commands[cmd_name] = command
        return command

    def main(self, *args: Any, **kwargs: Any) -> Any:
        from gpucast.cli.verbs import plain_flags

        plain_flags(self)
        kwargs["standalone_mode"] = False
        argv = kwargs.get("args")
        if argv is None:
            argv = args[0] if args else sys.argv[1:]
        given = list(argv)
        argv = command_aliases(given)
        aliased = argv != given
        kwargs["args"] = argv
        args = ()
        debug = "--debug" in argv
        try:
            rv = super().main(*args, **kwargs)
        except GpucastError as exc:
            if debug:
                raise
            text = _one_line(str(exc))
            if aliased:
                text = _as_typed(text, given)
            err_console.print(f"[red]error:[/red] {escape(text)}", highlight=False, soft_wrap=True)
            sys.exit(exc.exit_code)
        except click.exceptions.ClickException as exc:
            # --debug after the verb is itself the error (a global option in the wrong place):
            # said in one line with where it goes, not as the traceback it asks for
            misplaced = isinstance(exc, click.exceptions.NoSuchOption) and (
                exc.option_name == "--debug"
            )
            if debug and not misplaced:
                raise
            message = _one_line(exc.format_message()).rstrip(".")
            if message:  # `gpucast` alone prints help and raises an empty usage error
                says = "; see --help" if isinstance(exc, click.exceptions.UsageError) else ""
                if isinstance(exc, click.exceptions.NoSuchOption):
                    says = _global_option_hint(self, exc.option_name, given) or says
                if aliased and isinstance(exc, click.exceptions.NoSuchOption):
                    says = SERVERLESS_OPTIONS_HINT
                err_console.print(
                    f"[red]error:[/red] {escape(message)}{says}", highlight=False, soft_wrap=True
                )
            sys.exit(exc.exit_code)
        except Abort:
            err_console.print("[red]aborted[/red]")
            sys.exit(1)
        except KeyboardInterrupt:
            rv = INTERRUPTED
        if rv == INTERRUPTED:  # Typer turns Ctrl-C into Exit(130), which click returns here
            err_console.print("[red]interrupted[/red]")
            sys.exit(INTERRUPTED)
        if isinstance(rv, int) and rv:
            sys.exit(rv)
        sys.exit(0)


app = typer.Typer(
    name="gpucast",
    cls=GpucastGroup,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    help="Measure, model, predict and plan deep-learning workloads: speed, time and cost.",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gpucast {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    db: Path | None = typer.Option(
        None,
        "--db",
        envvar="GPUCAST_DB",
        help="Measurement store (SQLite). Default: $XDG_DATA_HOME/gpucast/gpucast.db.",
    ),
    debug: bool = typer.Option(
        False, "--debug", help="Show tracebacks instead of one-line errors."
    ),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    if db is not None:
        from gpucast.domain.limits import check_db_text

        check_db_text(str(db))
    ctx.obj = CliState(db_path=db, debug=debug)
