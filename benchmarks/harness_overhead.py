"""How much does the measurement harness cost? Harness vs a bare timed loop of the same steps.

For each repeat the harness (``gpucast.measure.measure_runner``: warm-up detection, per-step
timing, running CI, stopping rule, fingerprint, statistics) runs one workload's step for a
fixed budget; then a bare ``for`` loop runs the *same number* of steps of the *same* runner
under one pair of ``perf_counter`` calls. Repeats are interleaved and alternate which goes
first, so drift and machine noise hit both alike. The overhead is the median over repeats of
``harness_wall_per_step / bare_wall_per_step - 1``; the target is <= 1%.

A second, noise-free figure: the loop's own cost per step, timing a step that does nothing.

    python benchmarks/harness_overhead.py [--workload mlp] [--batch-size 64] [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
from rich.console import Console
from rich.table import Table

from gpucast.domain.workload import WorkloadSpec
from gpucast.measure import StoppingRule, measure_runner, run_adaptive
from gpucast.workloads import get_workload
from gpucast.workloads.steps import make_step

TARGET_OVERHEAD = 0.01


def bare_loop(step: object, n_steps: int) -> float:
    """Wall time of ``n_steps`` calls with nothing around them."""
    run = step.__call__  # type: ignore[attr-defined]
    start = time.perf_counter()
    for _ in range(n_steps):
        run()
    return time.perf_counter() - start


def harness_run(step: object, spec: WorkloadSpec, mode: str, n_measured: int) -> tuple[float, int]:
    """Wall time and step count (warm-up included) of one full harness measurement that
    stops after exactly ``n_measured`` measured steps (the sample cap)."""
    rule = StoppingRule(target_ci=1e-9, max_time_s=1e6, min_samples=2, max_samples=n_measured)
    start = time.perf_counter()
    m = measure_runner(step, spec=spec, mode=mode, device="cpu", rule=rule, telemetry=False)  # type: ignore[arg-type]
    wall = time.perf_counter() - start
    return wall, m.n_samples + m.n_warmup


def loop_cost_per_step_s(seconds: float = 1.0) -> float:
    """The harness loop's own cost per step: a no-op step under the same stopping rule."""
    rule = StoppingRule(target_ci=1e-9, max_time_s=seconds, max_samples=10_000_000)
    raw = run_adaptive(lambda: None, rule)
    n = len(raw.step_times_s) + len(raw.warmup_step_times_s)
    return raw.elapsed_s / n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workload", default="mlp")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--mode", choices=("train", "infer"), default="train")
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--seconds", type=float, default=1.0, help="measured time per repeat")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--check", action="store_true", help="exit 1 above the 1%% target")
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    spec = WorkloadSpec(name=args.workload, batch_size=args.batch_size)
    step = make_step(get_workload(args.workload), spec, args.mode, torch.device("cpu"))
    for _ in range(20):  # warm the model, allocator and caches before either side runs
        step()

    console = Console()
    table = Table(
        title=f"harness vs bare loop: {args.mode} {args.workload}, batch {args.batch_size}, "
        f"CPU, {args.threads} thread(s)",
        title_justify="left",
    )
    for column in ("repeat", "first", "steps h / b", "harness s", "bare s", "per-step ratio"):
        table.add_column(column, justify="right")
    step_s = bare_loop(step, 20) / 20
    n_measured = max(10, int(args.seconds / step_s))
    ratios: list[float] = []
    per_step_s: list[float] = []
    n_bare = n_measured + 6  # first guess at the warm-up; set from the harness after repeat 1
    for repeat in range(args.repeats):
        harness_first = repeat % 2 == 0
        if harness_first:
            harness_s, n_harness = harness_run(step, spec, args.mode, n_measured)
            n_bare = n_harness
            bare_s = bare_loop(step, n_bare)
        else:
            bare_s = bare_loop(step, n_bare)
            harness_s, n_harness = harness_run(step, spec, args.mode, n_measured)
        # compare wall time per step (the counts differ only by warm-up length, if at all)
        harness_per_step, bare_per_step = harness_s / n_harness, bare_s / n_bare
        ratios.append(harness_per_step / bare_per_step)
        per_step_s.append(harness_per_step - bare_per_step)
        table.add_row(
            str(repeat + 1),
            "harness" if harness_first else "bare",
            f"{n_harness} / {n_bare}",
            f"{harness_s:.4f}",
            f"{bare_s:.4f}",
            f"{ratios[-1]:.4f}",
        )
    console.print(table)

    overhead = statistics.median(ratios) - 1.0
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    noise = (q3 - q1) / 2
    loop_cost = loop_cost_per_step_s()
    step_s = statistics.median([bare_loop(step, 50) / 50 for _ in range(3)])
    loop_fraction = loop_cost / step_s
    console.print(
        f"wall-time overhead, median of {args.repeats} interleaved repeats: {overhead:+.2%} "
        f"(per-repeat ratios' IQR {q1 - 1:+.2%} .. {q3 - 1:+.2%}); "
        f"median extra per step {statistics.median(per_step_s) * 1e6:+.1f} µs"
    )
    console.print(
        f"harness loop's own cost: {loop_cost * 1e6:.2f} µs per step (timed on a no-op step) "
        f"= {loop_fraction:.3%} of this workload's {step_s * 1e3:.2f} ms step"
    )
    wall_ok = overhead <= TARGET_OVERHEAD
    within_noise = overhead <= TARGET_OVERHEAD + noise
    loop_ok = loop_fraction <= TARGET_OVERHEAD
    verdict = (
        "[green]within the 1% target[/green]"
        if wall_ok and loop_ok
        else "[yellow]loop cost within target; wall-time difference within machine noise[/yellow]"
        if loop_ok and within_noise
        else "[red]above the 1% target[/red]"
    )
    console.print(verdict)
    # --check fails only on what noise cannot explain
    return 0 if (loop_ok and within_noise) or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
