"""Per-operator prediction on this CPU (issue #20 item 4): leave-one-model-out step times.

Each built-in CNN (and a few other built-in models quick on a CPU) is measured with
``gpucast.measure_train(..., kernels=True)``: the harness times the training step (its median
is the measured step), then 3 more steps run under ``torch.profiler`` and give every operator
call's time and features (:mod:`gpucast.measure.kernels`). Models run interleaved, one after
the other, for ``--rounds`` rounds (the machine is shared: a burst of load hits every model
alike), all with one torch thread, timed by the process's CPU time (``--timer cpu``: the
steps and each operator call; on 2 cores shared by several engineers the wall clock mostly
measures the other processes' turns).

Leave-one-model-out: for each model, :class:`gpucast.predict.kernels.KernelTimeModel` (a
random forest of per-call time) is fitted on the *other* models' runs only, predicts every
operator call of the held-out model, and sums them plus the fitted per-step overhead; the
prediction of each round's trace is compared with the model's measured step (medians over
the rounds). Beside it, the roofline of :mod:`gpucast.predict.roofline` on the same operator
FLOPs and bytes, calibrated the same way (one scale factor: the median measured/roofline
ratio of the other models). Target: within 15% of the measured step for the built-in CNNs.

    .venv/bin/python benchmarks/kernel_prediction.py [--rounds 3] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

import gpucast
from gpucast.inputs.kernels import host_device
from gpucast.predict.kernels import KernelObservation, KernelTimeModel, roofline_step_s

#: (workload, batch size, is a CNN): one torch thread, 0.1-0.7 s a step here
MODELS: tuple[tuple[str, int, bool], ...] = (
    ("cifar-resnet20", 16, True),
    ("cifar-resnet56", 4, True),
    ("cifar-resnet18", 4, True),
    ("shake-shake", 4, True),
    ("shufflenetv2", 4, True),
    ("resnet18", 1, True),
    ("resnet50", 1, True),
    ("mlp", 32, False),
    ("dlrm", 32, False),
    ("lstm-lm", 2, False),
)
QUICK = ("cifar-resnet20", "cifar-resnet56", "shufflenetv2", "mlp")
TARGET_PCT = 15.0


def _measure(models: list[tuple[str, int, bool]], rounds: int) -> dict[str, list[Any]]:
    runs: dict[str, list[Any]] = {name: [] for name, _, _ in models}
    for r in range(rounds):
        for name, batch, _ in models:
            started = time.perf_counter()
            result = gpucast.measure_train(
                name,
                device="cpu",
                batch_size=batch,
                kernels=True,
                timer="cpu",
                threads=1,
                save=False,
                max_time_s=1.0,
                min_samples=3,
                target_ci=0.05,
            )
            m, trace = result.measurement, result.kernels
            assert m is not None and trace is not None
            runs[name].append((m.median_s, trace))
            print(
                f"round {r + 1}/{rounds} {name:>15}: {m.median_s * 1e3:8.1f} ms/step measured, "
                f"{trace.operator_time_s_per_step * 1e3:8.1f} ms in "
                f"{len(trace.operators)} operators ({time.perf_counter() - started:.1f} s)",
                file=sys.stderr,
                flush=True,
            )
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    args = parser.parse_args()
    models = [m for m in MODELS if not args.quick or m[0] in QUICK]
    started = time.perf_counter()
    runs = _measure(models, args.rounds)
    device = host_device(1)
    observations = {
        name: [
            KernelObservation(workload=name, device=device, trace=trace, step_time_s=step)
            for step, trace in runs[name]
        ]
        for name in runs
    }
    print(
        "\nLeave-one-model-out on this CPU (1 torch thread, CPU time): forest fitted on the other "
        f"models' operators, {args.rounds} interleaved rounds, medians\n"
    )
    header = (
        "| model | batch | ops/step | measured ms | forest ms (ops + overhead) | forest error "
        "| roofline ms | roofline error |"
    )
    print(header)
    print("|---|---|---|---|---|---|---|---|")
    cnn_errors: list[float] = []
    all_errors: list[float] = []
    roof_errors: list[float] = []
    for name, batch, is_cnn in models:
        train = [o for other, obs in observations.items() if other != name for o in obs]
        model = KernelTimeModel().fit(train)
        held = observations[name]
        measured = statistics.median(o.step_time_s for o in held)
        predictions = [model.predict_step(o.trace, device) for o in held]
        predicted = statistics.median(p.step_time_s for p in predictions)
        ops_s = statistics.median(p.operator_time_s for p in predictions)
        overhead = statistics.median(p.overhead_s for p in predictions)
        scale = statistics.median(o.step_time_s / roofline_step_s(o.trace, device) for o in train)
        roof = statistics.median(scale * roofline_step_s(o.trace, device) for o in held)
        error = 100 * (predicted - measured) / measured
        roof_error = 100 * (roof - measured) / measured
        (cnn_errors if is_cnn else all_errors).append(abs(error))
        if is_cnn:
            roof_errors.append(abs(roof_error))
        calls = held[0].trace.calls_per_step
        print(
            f"| {name}{'' if is_cnn else ' (not a CNN)'} | {batch} | {calls:.0f} | "
            f"{measured * 1e3:.1f} | {predicted * 1e3:.1f} ({ops_s * 1e3:.1f} + "
            f"{overhead * 1e3:.1f}) | {error:+.1f}% | {roof * 1e3:.1f} | {roof_error:+.1f}% |"
        )
    within = sum(e <= TARGET_PCT for e in cnn_errors)
    print(
        f"\nCNNs: forest median |error| {statistics.median(cnn_errors):.1f}%, worst "
        f"{max(cnn_errors):.1f}%, {within}/{len(cnn_errors)} within {TARGET_PCT:.0f}% "
        f"(target: all); calibrated roofline median {statistics.median(roof_errors):.1f}%, "
        f"worst {max(roof_errors):.1f}%"
    )
    if all_errors:
        print(f"other models: forest |error| {', '.join(f'{e:.1f}%' for e in all_errors)}")
    print(f"({time.perf_counter() - started:.0f} s)")
    return 0 if within == len(cnn_errors) else 1


if __name__ == "__main__":
    raise SystemExit(main())
