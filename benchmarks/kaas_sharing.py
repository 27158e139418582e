"""Kernel-as-a-Service under contention: functions as sequences of their profiled kernels
sharing a GPU pool per kernel, vs the same pool per invocation, vs one GPU per function
(issue #19, item 3).

    .venv/bin/python benchmarks/kaas_sharing.py [--gpu T4] [--duration-s 20]

Functions: resnet50, bert-base and mlp (a long, a longer and a tiny one: 174, 131 and 5
kernels; :func:`gpucast.inputs.serverless.kernel_sequence`). Poisson arrivals, the same for
every sharing at one load; the load is the pool's utilisation if shared by 2 GPUs (the rate
per function set so). Reported per sharing: GPUs, p50/p99 latency over all invocations and
the tiny function's p99 (the one a long function blocks), throughput, utilisation; with a
dispatch cost of 0 and 20 us per unit of work (a kernel under KaaS, an invocation otherwise)
beyond the launch overhead every kernel pays (in its time, as simulate serve prices it).
No published figure to compare with: the KaaS paper (Pemberton et al.) measured a different
system; this table shows what the model predicts.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from gpucast.catalog import load_catalog
from gpucast.inputs.serverless import kernel_sequence
from gpucast.simulate.kaas import SHARINGS, poisson_arrivals, simulate_kaas

MODELS = ("resnet50", "bert-base", "mlp")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="T4")
    parser.add_argument("--duration-s", type=float, default=20.0)
    parser.add_argument("--pool-gpus", type=int, default=2)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    gpu = load_catalog().gpu(args.gpu)
    seqs = [kernel_sequence(m, gpu)[0] for m in MODELS]
    work = sum(s.sum() for s in seqs)  # GPU-seconds of one invocation of each
    for m, s in zip(MODELS, seqs, strict=True):
        print(f"{m}: {s.size} kernels, {s.sum() * 1e3:.2f} ms on {gpu.name}")
    print(
        f"pool of {args.pool_gpus} x {gpu.name}; dedicated = {len(MODELS)} GPUs; "
        f"{args.duration_s:g} s of Poisson arrivals per load"
    )
    head = (
        f"{'load':>5}{'dispatch':>10}{'sharing':>11}{'GPUs':>6}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'mlp p99 ms':>12}{'calls/s':>9}{'util':>7}"
    )
    print(head)
    for load in (0.3, 0.6, 0.9, 1.2):
        rate = load * args.pool_gpus / work
        func, arrival = poisson_arrivals(
            [rate] * len(MODELS), args.duration_s, np.random.default_rng(1)
        )
        for dispatch_us in (0.0, 20.0):
            for sharing in SHARINGS:
                r = simulate_kaas(
                    seqs, func, arrival, sharing=sharing, gpus=args.pool_gpus,
                    dispatch_s=dispatch_us * 1e-6,
                )  # fmt: skip
                print(
                    f"{load:>5.1f}{dispatch_us:>8.0f}us{sharing:>11}{r.gpus:>6}"
                    f"{r.percentile_s(50) * 1e3:>9.2f}{r.percentile_s(99) * 1e3:>9.2f}"
                    f"{r.percentile_s(99, 2) * 1e3:>12.2f}{r.throughput_per_s:>9.0f}"
                    f"{r.utilisation:>7.0%}"
                )
    print(f"({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
