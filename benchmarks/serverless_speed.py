"""Speed of the serverless keep-alive simulator: a day of per-minute invocations for 10,000
functions (issue #19 target: under 10 s), against a minute-by-minute Python loop.

    .venv/bin/python benchmarks/serverless_speed.py [--functions 10000] [--loop-functions 100]

The workload is generated with the published characteristics
(:mod:`gpucast.simulate.faas_workload`, timed separately: it is the input, not the simulation).
Each policy is simulated by :func:`gpucast.simulate.serverless.simulate_keep_alive`; the
baseline is the same fixed keep-alive computed by a plain loop over every function and minute
on ``--loop-functions`` functions (checked equal to the vectorised result on them) and scaled
to all functions. Single-process wall-clock seconds.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from gpucast.catalog.faas import load_faas_mix
from gpucast.domain.serverless import parse_policy
from gpucast.simulate.faas_workload import generate_faas_workload
from gpucast.simulate.serverless import simulate_keep_alive

TARGET_S = 10.0


def loop_fixed(counts: np.ndarray, keep: int) -> tuple[np.ndarray, np.ndarray]:
    """Cold starts and loaded idle minutes of a fixed keep-alive, minute by minute."""
    n_f, n_t = counts.shape
    cold = np.zeros(n_f, dtype=np.int64)
    idle = np.zeros(n_f, dtype=np.int64)
    for f in range(n_f):
        last = -1
        row = counts[f].tolist()
        for t in range(n_t):
            if row[t] > 0:
                if last < 0 or t - last - 1 >= keep:
                    cold[f] += 1
                last = t
            elif last >= 0 and t - last - 1 < keep:
                idle[f] += 1
    return cold, idle


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--functions", type=int, default=10_000)
    parser.add_argument("--loop-functions", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    work = generate_faas_workload(
        args.functions, np.random.default_rng(args.seed), mix=load_faas_mix()
    )
    gen_s = time.perf_counter() - start
    n = args.functions
    busy = int((work.counts > 0).sum())
    print(
        f"{n:,} functions x 1,440 minutes: {int(work.counts.sum()):,} invocations in "
        f"{busy:,} busy function-minutes (generated in {gen_s:.2f} s)"
    )
    rng = np.random.default_rng(1)
    common = {
        "exec_s": work.duration_s,
        "cold_s": rng.uniform(1.0, 10.0, n),
        "memory_gib": rng.uniform(0.1, 4.0, n),
    }
    print(f"{'policy':<12}{'simulate s':>12}{'cold starts':>14}{'idle GiB-h':>14}  target")
    fixed_s = 0.0
    for text in ("fixed:10m", "histogram", "prewarm"):
        start = time.perf_counter()
        res = simulate_keep_alive(work.counts, policy=parse_policy(text), **common)
        took = time.perf_counter() - start
        fixed_s = took if text == "fixed:10m" else fixed_s
        ok = "met" if took < TARGET_S else "MISSED"
        print(
            f"{text:<12}{took:>12.2f}{int(res.cold_starts.sum()):>14,}"
            f"{res.wasted_memory_gib_s.sum() / 3600:>14,.0f}  < {TARGET_S:g} s {ok}"
        )
    m = min(args.loop_functions, n)
    sub = work.counts[:m]
    start = time.perf_counter()
    cold, idle = loop_fixed(sub, 10)
    loop_s = (time.perf_counter() - start) * n / m
    check = simulate_keep_alive(
        sub, policy=parse_policy("fixed:10m"), exec_s=1.0, cold_s=1.0, memory_gib=1.0
    )
    assert list(check.cold_starts) == list(cold)
    assert np.allclose(check.wasted_memory_gib_s, idle * 60.0)
    print(
        f"minute loop (fixed:10m, {m} functions timed, scaled to {n:,}): {loop_s:.1f} s -> "
        f"vectorised is {loop_s / fixed_s:.0f}x faster (same cold starts and idle minutes)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
