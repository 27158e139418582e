"""Speed of the serving simulator against an equivalent SimPy model, side by side.

    .venv/bin/python benchmarks/serving_speed.py [--requests 1000000] [--simpy-requests 200000]

System: 4 GPUs behind a round-robin balancer, one instance each, dynamic batching (max batch
8, max queue delay 5 ms), batch latency 4 ms + 2 ms x batch, Poisson arrivals at 1,200 req/s
(about 75% load). Both simulators get the same arrival array and must agree on every
request's latency (checked on the SimPy run's requests); SimPy (a dev dependency only) is
timed on fewer requests and its time scaled linearly when ``--simpy-requests`` is smaller.
Times are single-process wall-clock seconds (one core).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from gpucast.domain.serving import (
    BatchingPolicy,
    Deployment,
    LatencyCurve,
    ModelDeployment,
    ServerGroup,
    ServerSpec,
)
from gpucast.simulate.arrivals import poisson
from gpucast.simulate.serving import simulate_serving

GPUS = 4
RATE_RPS = 1200.0
POLICY = BatchingPolicy(max_batch_size=8, max_queue_delay_s=0.005)
CURVE = LatencyCurve.affine(0.004, 0.002, max_batch=8)


def deployment() -> Deployment:
    model = ModelDeployment(model="m", latency=CURVE, batching=POLICY, instances=1)
    server = ServerSpec(name="GPU", memory_gib=16, price_usd_per_hour=1.0, models=(model,))
    return Deployment(groups=(ServerGroup(server=server, count=GPUS),))


def simpy_latencies(arrivals: np.ndarray) -> np.ndarray:
    """The same system in SimPy: a load balancer, and per GPU a batcher process."""
    import simpy

    env = simpy.Environment()
    latency = np.empty(arrivals.size)
    table = CURVE.table(POLICY.max_batch_size)
    delay = POLICY.max_queue_delay_s
    queues: list[list[int]] = [[] for _ in range(GPUS)]
    wake: list[simpy.Event] = [env.event() for _ in range(GPUS)]

    def source() -> simpy.events.ProcessGenerator:
        for i, t in enumerate(arrivals.tolist()):
            if t > env.now:
                yield env.timeout(t - env.now)
            g = i % GPUS
            queues[g].append(i)
            if not wake[g].triggered:
                wake[g].succeed()

    def gpu(g: int) -> simpy.events.ProcessGenerator:
        q = queues[g]
        while True:
            if not q:
                wake[g] = env.event()
                yield wake[g]
            due = arrivals[q[0]] + delay
            while len(q) < POLICY.max_batch_size and env.now < due:
                wake[g] = env.event()
                yield wake[g] | env.timeout(due - env.now)
            batch = q[: POLICY.max_batch_size]
            del q[: len(batch)]
            yield env.timeout(table[len(batch)])
            for i in batch:
                latency[i] = env.now - arrivals[i]

    env.process(source())
    for g in range(GPUS):
        env.process(gpu(g))
    env.run()
    return latency


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--simpy-requests", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    arrivals = poisson(RATE_RPS, args.requests / RATE_RPS * 1.02, rng)[: args.requests]
    dep = deployment()

    t0 = time.perf_counter()
    result = simulate_serving(dep, {"m": arrivals}, seed=args.seed)
    ours_s = time.perf_counter() - t0
    lat = result.latencies()
    print(
        f"gpucast: {arrivals.size:,} requests in {ours_s:.2f} s "
        f"({arrivals.size / ours_s:,.0f} req/s simulated); p50 {np.percentile(lat, 50) * 1e3:.2f}"
        f" ms, p99 {np.percentile(lat, 99) * 1e3:.2f} ms, mean batch "
        f"{result.batch_size.mean():.2f}"
    )

    n = min(args.simpy_requests, arrivals.size)
    sub = arrivals[:n]
    t0 = time.perf_counter()
    ref = simpy_latencies(sub)
    simpy_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ours_sub = simulate_serving(dep, {"m": sub}, seed=args.seed).latencies()
    ours_sub_s = time.perf_counter() - t0
    diff = float(np.max(np.abs(ours_sub - ref)))
    print(
        f"SimPy:   {n:,} requests in {simpy_s:.2f} s; gpucast on the same {n:,}: "
        f"{ours_sub_s:.2f} s -> {simpy_s / ours_sub_s:.1f}x faster"
    )
    if n < arrivals.size:
        print(f"SimPy scaled to {arrivals.size:,} requests: {simpy_s * arrivals.size / n:.1f} s")
    print(f"largest per-request latency difference vs SimPy: {diff:.3g} s")
    ok = ours_s < 5.0 and simpy_s / ours_sub_s >= 5.0 and diff < 1e-9
    print(
        "targets (>= 1M requests < 5 s, >= 5x SimPy, identical latencies): "
        + ("met" if ok else "NOT met")
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
