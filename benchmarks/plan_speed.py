"""Speed of `plan train`: the vectorised search against a candidate-by-candidate Python loop.

Plans ResNet-50 (90 epochs of ImageNet, 24 h deadline) over the whole built-in catalog with
every strategy (DDP, FSDP, PS with 1-4 shards), 4 per-worker batch sizes, on demand and spot,
up to 64 GPUs; spot plans that survive pruning get 1,000 Monte Carlo runs each. Prints:

* the size of the space and the time of the vectorised evaluation of all of it;
* the time of the full plan (evaluation, pruning, Monte Carlo, Pareto, explanations);
* the same with ``allow_mixed`` (pairs of GPU types per provider/region added to the space);
* the time per candidate of a plain Python loop that evaluates the same rows one by one with
  the scalar formulas of ``gpucast.predict.comm`` (measured on a sample, extrapolated to the
  space), the ratio, and the largest relative difference between the two (a correctness check);
* at MLPerf scale (``--large``, default 4096 GPUs; 0 skips it): the full plan of the same
  request up to that many GPUs (~30 million configurations, every one evaluated and
  counted), its time and the process's peak RSS so far; then the same plan with ``--jobs``
  worker processes (default: the CPUs this process may use; 1 skips it), its time and
  whether it is the one-process plan (it must be).

    .venv/bin/python benchmarks/plan_speed.py [--repeat 3] [--sample 3000] [--large 4096] [--jobs N]

The workload profile is computed once before timing (the CLI caches it on disk).
"""

from __future__ import annotations

import argparse
import math
import resource
import time
from dataclasses import replace

import numpy as np

from gpucast.app._workers import usable_cpus, worker_pool
from gpucast.catalog import load_catalog
from gpucast.domain.plan import TrainRequest
from gpucast.domain.workload import WorkloadSpec
from gpucast.plan.evaluate import Evaluation, Work
from gpucast.plan.inputs import GpuTable, PerfParams, RiskInputs, WorkloadFacts
from gpucast.plan.space import FSDP, PS, Space
from gpucast.plan.train import PlanContext, plan_training, search
from gpucast.predict import comm
from gpucast.predict.revocation import hazard_from_interruption_band
from gpucast.profile import profile_workload


def loop_time_s(
    space: Space,
    rows: np.ndarray,
    facts: WorkloadFacts,
    gpus: GpuTable,
    perf: PerfParams,
    work: Work,
    startup_s: float,
) -> list[float]:
    """Time to target of each row, one row at a time, with scalar formulas."""
    off = space.offers
    out = []
    for i in rows:
        o = int(space.offer[i])
        g = int(off.gpu[o])
        gpn = int(off.gpus_per_node[o])
        n = int(space.nodes[i]) * gpn
        b = int(space.batch[i])
        strategy = int(space.strategy[i])
        w, gr, opt = facts.weights_bytes, facts.gradient_bytes, facts.optimizer_bytes
        if strategy == PS:
            state = w + gr
        elif strategy == FSDP:
            state = (w + gr + opt) / n + 2 * facts.max_tensor_bytes
        else:
            state = w + gr + opt
        acts = facts.activation_bytes_per_sample * b
        slow = 1.0
        if state + acts > gpus.usable_bytes[g]:
            if state + acts * facts.checkpoint_fraction > gpus.usable_bytes[g]:
                out.append(math.nan)
                continue
            slow = 1.33
        compute = (
            sum(float(gpus.fixed_s[g, t] + gpus.per_sample_s[g, t] * b) for t in range(3)) * slow
        )
        if strategy != PS:
            one = np.array([o])
            coll = perf.collective_for(
                rdma=off.instance_type[o] in perf.rdma_instances,
                nvlink=bool(np.atleast_1d(off.nvlink_rows(one, gpus.nvlink[[g]]))[0]),
            )
            intra = float(np.atleast_1d(off.intra_link_gbps(one, gpus.intra_node_gbps[[g]]))[0])
            total = float(
                coll.total_s(
                    gr, n, gpn, intra, float(off.network_gbps[o]),
                    passes=3.0 if strategy == FSDP else 2.0,
                )
            )  # fmt: skip
            step = compute + float(coll.exposed_s(total, compute))
            samples_per_s = n * b / step
            global_batch = n * b
        else:
            if math.isnan(off.cpu_usd_per_hour[o]):
                out.append(math.nan)
                continue
            k = float(space.shards[i])
            net, cpu = comm.ps_service_demand_s(
                gr,
                facts.n_tensors,
                ps_network_gbps=float(off.cpu_network_gbps[o]),
                network_efficiency=perf.ps_network_efficiency,
                per_tensor_cost_s=perf.ps_per_tensor_cost_s,
            )
            largest = min(facts.max_tensor_bytes / gr, 1.0)
            push, pull = comm.shard_demands_s(net, cpu, k, largest)
            worker = comm.transfer_time_s(gr, off.network_gbps[o] * perf.ps_network_efficiency)
            think = compute + comm.worker_nic_delay_s(pull, worker)
            x, _ = comm.ps_async_throughput(
                np.array([float(think)]), push, pull, np.array([n], dtype=np.int64)
            )
            nic = (
                space.nodes[i] * off.network_gbps[o] * perf.ps_network_efficiency * 1e9 / (8.0 * gr)
            )
            samples_per_s = min(float(x[0]), float(nic)) * b
            global_batch = b
        samples = float(work.samples_needed(np.array([float(global_batch)]))[0])
        out.append(startup_s + samples / samples_per_s)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sample", type=int, default=3000)
    parser.add_argument("--large", type=int, default=4096, help="max GPUs of the large plan")
    parser.add_argument("--jobs", type=int, default=usable_cpus(), help="workers, large plan")
    args = parser.parse_args(argv)

    prof = profile_workload(WorkloadSpec(name="resnet50", batch_size=16))
    facts = WorkloadFacts.from_profile(prof)
    band = hazard_from_interruption_band("5-10%")
    ctx = PlanContext(
        catalog=load_catalog(),
        facts=facts,
        perf=PerfParams(),
        risk=RiskInputs(lifetime=lambda g, r, p: band),
    )
    request = TrainRequest(
        workload="resnet50", epochs=90, dataset_size=1_281_167, deadline_s=24 * 3600.0
    )
    large_line = _large(request, ctx, args.large, args.jobs) if args.large > 0 else ""
    search(request, ctx)  # warm caches (catalog parse, imports)

    best_search = min(_timed(lambda: search(request, ctx)) for _ in range(args.repeat))
    res = search(request, ctx)
    best_plan = min(_timed(lambda: plan_training(request, ctx)) for _ in range(args.repeat))
    plan = plan_training(request, ctx)
    n = len(res.space)

    rng = np.random.default_rng(0)
    rows = rng.choice(n, size=min(args.sample, n), replace=False)
    t0 = time.perf_counter()
    looped = loop_time_s(
        res.space, rows, facts, res.gpus, ctx.perf, res.work, ctx.risk.startup_mean_s
    )
    loop_s = time.perf_counter() - t0
    per_row = loop_s / rows.size
    vec: Evaluation = res.evaluation
    ok = ~np.isnan(np.array(looped)) & vec.fits[rows] & ~np.isnan(vec.time_s[rows])
    diff = np.max(np.abs(np.array(looped)[ok] / vec.time_s[rows][ok] - 1.0)) if ok.any() else 0
    print(f"space: {n:,} candidates ({plan.evaluated:,} incl. never generated)")
    print(f"vectorised evaluation of all:      {best_search:.3f} s")
    print(
        f"full plan (+ pruning, {plan.simulated} spot plans x {request.mc_runs} MC runs, "
        f"Pareto, explanations): {best_plan:.3f} s"
    )
    print(
        f"python loop: {per_row * 1e6:.1f} us/candidate on {rows.size:,} sampled rows "
        f"-> {per_row * n:.2f} s for the space"
    )
    print(f"ratio loop / vectorised evaluation: {per_row * n / best_search:.0f}x")
    mixed = replace(request, allow_mixed=True)
    mixed_res = search(mixed, ctx)
    best_mixed = min(_timed(lambda: plan_training(mixed, ctx)) for _ in range(args.repeat))
    n_mixed = int(mixed_res.space.mixed.sum())
    print(
        f"with --allow-mixed: {len(mixed_res.space):,} candidates ({n_mixed:,} mixed), "
        f"full plan {best_mixed:.3f} s"
    )
    print(f"max relative difference loop vs vectorised time: {diff:.2e}")
    if large_line:
        print(large_line)
    return 0


def _large(request: TrainRequest, ctx: PlanContext, max_gpus: int, jobs: int) -> str:
    """The full plan up to ``max_gpus`` GPUs, timed; run first, so the process's peak RSS is
    this plan's (the other measurements hold whole spaces); then with ``jobs`` workers."""
    big_request = replace(request, max_gpus=max_gpus)
    t0 = time.perf_counter()
    big = plan_training(big_request, ctx)
    big_s = time.perf_counter() - t0
    rss_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 2**30
    line = (
        f"up to {max_gpus:,} GPUs: {big.evaluated:,} candidates, full plan {big_s:.1f} s, "
        f"peak RSS {rss_gib:.2f} GiB (profile and catalog included)"
    )
    if jobs > 1:
        t0 = time.perf_counter()
        apart = plan_training(big_request, ctx, executor=worker_pool(jobs), workers=jobs)
        apart_s = time.perf_counter() - t0
        same = apart.to_dict() == big.to_dict()
        line += (
            f"\n  with {jobs} worker processes (starting them included): {apart_s:.1f} s, "
            f"{big_s / apart_s:.2f}x; the one-process plan: {'yes' if same else 'NO'}"
        )
    return line


def _timed(fn: object) -> float:
    t0 = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - t0


if __name__ == "__main__":
    raise SystemExit(main())
