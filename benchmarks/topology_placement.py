"""Topology: all-reduce bandwidth of DGX-1 V100 GPU subsets against the published link-sum
figures, and a topology-aware allocator against first-fit on a shared server.

    .venv/bin/python benchmarks/topology_placement.py [--seeds 10] [--jobs 200] [--json]

1. **Bandwidth.** NVIDIA publishes the DGX-1 V100's hybrid cube mesh as link counts: 6
   NVLink 2 links per GPU, 1 or 2 per connected pair, 25 GB/s per link per direction. The
   published figure for a set of GPUs is its *link sum*: the least, over its GPUs, of the
   NVLink bandwidth to the other members (150 GB/s for all 8, 100 for a quad, 50/25 for an
   NV2/NV1 pair). gpucast's figure is the ring all-reduce bus bandwidth from a linear
   programme over every directed ring of the set (``gpucast.predict.topology``). Table: the
   published sets, then every NVLink-connected subset (2..8 GPUs): how many are within 10%
   and which are not (sets whose links cannot all carry rings -- a GPU joined by one pair of
   links, a bridge -- get less than the link sum; that is the ring model, not an error of
   the data).
2. **Allocator.** ``--seeds`` synthetic queues of ``--jobs`` data-parallel jobs (1/2/4/8
   GPUs; :mod:`gpucast.simulate.gpu_queue`) run through one server with the MAPA-like
   allocator and with first-fit; the table gives the jobs-per-hour ratio per topology.
"""

from __future__ import annotations

import argparse
import itertools
import json

import numpy as np

from gpucast.catalog.topologies import load_topologies
from gpucast.plan.placement import choose_gpus
from gpucast.predict.topology import allreduce_bandwidth_gb_per_s, link_sum_gb_per_s
from gpucast.simulate.gpu_queue import simulate_queue, synthetic_jobs

PUBLISHED = (
    ("all 8 GPUs (6 links each)", tuple(range(8)), 150.0),
    ("quad 0-3 (fully connected)", (0, 1, 2, 3), 100.0),
    ("quad 4-7 (fully connected)", (4, 5, 6, 7), 100.0),
    ("NV2 pair 0-3", (0, 3), 50.0),
    ("NV2 pair 0-4", (0, 4), 50.0),
    ("NV1 pair 0-1", (0, 1), 25.0),
    ("NV1 pair 3-7", (3, 7), 25.0),
)
TARGET = 0.10


def bandwidth_rows() -> tuple[list[dict[str, object]], dict[str, object]]:
    topo = load_topologies()["dgx1-v100"]
    rows = []
    for label, ids, published in PUBLISHED:
        gpus = tuple(f"gpu{i}" for i in ids)
        bw = allreduce_bandwidth_gb_per_s(topo, gpus)
        rows.append({
            "set": label, "gpus": list(gpus), "published_gb_per_s": published,
            "link_sum_gb_per_s": link_sum_gb_per_s(topo, gpus), "predicted_gb_per_s": bw,
            "error": bw / published - 1,
        })  # fmt: skip
    within = 0
    total = 0
    off: list[str] = []
    for k in range(2, 9):
        for ids in itertools.combinations(range(8), k):
            gpus = tuple(f"gpu{i}" for i in ids)
            link_sum = link_sum_gb_per_s(topo, gpus)
            if link_sum <= 0:
                continue  # a GPU with no NVLink to the others: PCIe, no published figure
            total += 1
            bw = allreduce_bandwidth_gb_per_s(topo, gpus)
            if abs(bw / link_sum - 1) <= TARGET:
                within += 1
            else:
                off.append(f"{'/'.join(str(i) for i in ids)} {bw:g} vs {link_sum:g}")
    summary = {"subsets": total, "within_10pct": within, "off": off}
    return rows, summary


def queue_rows(seeds: int, jobs: int) -> list[dict[str, object]]:
    out = []
    for name, topo in load_topologies().items():
        ratios = []
        for seed in range(seeds):
            queue = synthetic_jobs(np.random.default_rng(seed), jobs, max_gpus=len(topo.gpus))
            res = {
                p: simulate_queue(
                    topo, queue, lambda f, k, p=p, t=topo: choose_gpus(t, f, k, policy=p).gpus,
                    policy=p,
                )
                for p in ("mapa", "first-fit")
            }  # fmt: skip
            ratios.append(res["mapa"].jobs_per_hour / res["first-fit"].jobs_per_hour)
        out.append({
            "topology": name, "seeds": seeds, "jobs": jobs,
            "ratio_mean": float(np.mean(ratios)), "ratio_min": float(np.min(ratios)),
            "ratio_max": float(np.max(ratios)),
        })  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows, summary = bandwidth_rows()
    queues = queue_rows(args.seeds, args.jobs)
    if args.json:
        print(json.dumps({"bandwidth": rows, "subsets": summary, "queues": queues}, indent=2))
        return 0
    print(f"{'DGX-1 V100 set':30}{'published':>10}{'predicted':>10}{'error':>8}")
    for r in rows:
        print(f"{r['set']!s:30}{r['published_gb_per_s']:>10.1f}{r['predicted_gb_per_s']:>10.1f}"
              f"{r['error']:>+8.1%}")  # fmt: skip
    worst = max(abs(float(r["error"])) for r in rows)  # type: ignore[arg-type]
    print(f"published sets: worst {worst:.1%} (target {TARGET:.0%}: "
          f"{'met' if worst <= TARGET else 'NOT met'})")  # fmt: skip
    print(f"every NVLink-connected subset: {summary['within_10pct']} of {summary['subsets']} "
          f"within {TARGET:.0%} of the link sum; the others (ring-limited):")  # fmt: skip
    for line in summary["off"]:  # type: ignore[attr-defined]
        print(f"  {line}")
    print(f"\n{'topology':20}{'MAPA / first-fit jobs per hour':>34}")
    for q in queues:
        print(f"{q['topology']!s:20}{q['ratio_mean']:>14.3f} (range {q['ratio_min']:.3f}-"
              f"{q['ratio_max']:.3f}, {q['seeds']} queues of {q['jobs']} jobs)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
