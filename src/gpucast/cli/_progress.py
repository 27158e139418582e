"""The transient progress line of `gpucast measure train|infer` (stderr): the ``on_progress``
callback the measure verbs feed, and the notes it printed as they came."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from rich.markup import escape

from gpucast.cli._common import err_console, working
from gpucast.domain.units import percent_text

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from gpucast.measure.harness import Progress


@contextlib.contextmanager
def progress_line(what: str, shown: set[str] | None = None) -> Iterator[Callable[[Progress], None]]:
    """A transient progress line on stderr; yields the ``on_progress`` callback to feed it.
    Off a terminal (a log, CI) ``working``'s plain periodic lines carry the latest state. A
    run's note is printed as it comes and added to ``shown``, which the result leaves out."""
    from rich.progress import Progress as RichProgress
    from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

    latest = [f"{what}: building model"]

    def remember(p: Progress) -> None:
        if p.note is not None:  # now, not only under the table minutes later
            err_console.print(f"[yellow]warning: {escape(p.note)}[/yellow]", highlight=False)
            if shown is not None:  # the result leaves it out: printed twice (QA 40 E)
                shown.add(p.note)
        ci = "-" if p.ci_halfwidth_rel is None else f"±{p.ci_halfwidth_rel:.1%}"
        latest[0] = (
            f"{what}: warming up ({p.n_warmup} steps)"
            if p.phase == "warmup"
            else f"{what}: measured, saving to the store (waiting up to {p.store_wait_s:g} s "
            "while another process holds it)"
            if p.phase == "saving"
            else f"{what}: {p.n_samples} samples, CI {ci} (target ±{percent_text(p.target_ci)})"
        )

    if not err_console.is_terminal:
        with working(lambda: latest[0]):
            yield remember
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with RichProgress(*columns, console=err_console, transient=True) as bar:
        task = bar.add_task(latest[0], total=None)

        def show(p: Progress) -> None:
            remember(p)
            bar.update(task, description=escape(latest[0]))

        yield show
