"""GAT on CPU: measured mini-batch step time vs the pricing of gpucast.predict.gat.

A power-law graph (Chung-Lu as in ``gnn_cpu.py``: ``--nodes`` nodes, ``--edges`` undirected
edges, both directions stored) with random features trains a 2-layer GAT
(:class:`gpucast.workloads.graph.GAT`: 4 heads, hidden 64, a linear classifier) on sampled
blocks (``--batch`` seeds, fan-outs ``--fanouts``; sampled once with
:func:`gpucast.workloads.graph.sample_blocks`, outside the timing). One timed step: gather the
input nodes' features (``index_select``), forward, backward, SGD, timed with gpucast's
adaptive harness (``measure.harness``).

The prediction is :func:`gpucast.predict.gat.gat_cost` from the graph's statistics alone
(nodes, edges, fan-outs, batch) with two rates measured by micro-benchmarks that are not the
GAT: the matmul rate (``torch.mm`` of ``rows x 64 x 64``) and the random-row gather rate
(``index_select`` of random rows of the feature matrix):
``step = sum over matmuls of max(flops / rate, bytes / gather) + (edge bytes + feature bytes)
/ gather`` (the sampling itself is not timed, so its bytes are left out). The predicted
sampled nodes per hop (uniform draws) are printed beside the ones drawn. The same step priced
with a dense adjacency shows the gap. Target (issue #17): within 20%.

Run: ``python benchmarks/gat_cpu.py [--nodes 100000] [--edges 1000000]`` (about a minute).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from gnn_cpu import power_law_graph
from gpucast.measure.harness import StoppingRule, run_adaptive
from gpucast.predict.gat import GatSpec, HeteroGraph, gat_cost
from gpucast.workloads.graph import GAT, csc, sample_blocks

FEATURES, HIDDEN, CLASSES, HEADS = 64, 64, 8, 4
TARGET = 0.20


def _median_s(step: object, seconds: float) -> float:
    rule = StoppingRule(target_ci=0.05, max_time_s=seconds, min_samples=5)
    run = run_adaptive(step, rule)  # type: ignore[arg-type]
    return float(np.median(run.step_times_s))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--edges", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--fanouts", type=str, default="10,5")
    parser.add_argument("--seconds", type=float, default=8.0, help="harness budget per timing")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    fanouts = tuple(int(f) for f in args.fanouts.split(","))
    n = args.nodes
    src, dst = power_law_graph(n, args.edges)
    e = len(src)
    indptr, indices = csc(src, dst, n)
    seeds = rng.choice(n, args.batch, replace=False)
    inputs, blocks = sample_blocks(seeds, indptr, indices, fanouts, rng)
    x = torch.randn(n, FEATURES)
    y = torch.randint(0, CLASSES, (args.batch,))
    rows = torch.from_numpy(inputs)
    model = GAT(FEATURES, HIDDEN, CLASSES, len(fanouts), HEADS)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def step() -> None:
        out = model(torch.index_select(x, 0, rows), blocks)
        loss = torch.nn.functional.cross_entropy(out, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    # -- rates from micro-benchmarks (not the GAT) -------------------------------------------
    m = max(len(inputs), 10_000)
    a, b = torch.randn(m, 64), torch.randn(64, 64)
    mm_s = _median_s(lambda: a @ b, args.seconds / 2)
    flops = 2.0 * m * 64 * 64 / mm_s
    idx = torch.from_numpy(rng.integers(0, n, 1_000_000))
    buffer = torch.empty(len(idx), FEATURES)
    gather_s = _median_s(lambda: torch.index_select(x, 0, idx, out=buffer), args.seconds / 2)
    gather_gbps = len(idx) * FEATURES * 4 / gather_s / 1e9
    print(
        f"graph: {n:,} nodes, {e:,} directed edges; batch {args.batch}, fan-outs {fanouts}; "
        f"threads {torch.get_num_threads()}; matmul {flops / 1e9:.1f} GFLOP/s, "
        f"random-row gather {gather_gbps:.2f} GB/s"
    )
    measured = _median_s(step, args.seconds)
    graph = HeteroGraph.homogeneous(nodes=n, edges=e, feature_dim=FEATURES)
    spec = GatSpec(
        heads=HEADS, hidden=HIDDEN, classes=CLASSES, layers=len(fanouts), fanouts=fanouts,
        batch=args.batch, activation_bytes=4,
    )  # fmt: skip
    cost = gat_cost(graph, spec, feature_bytes_per_value=4)
    rate = gather_gbps * 1e9
    gemm = np.maximum(np.asarray(cost.gemm_flops) / flops, np.asarray(cost.gemm_bytes) / rate)
    predicted = float(gemm.sum()) + (cost.edge_bytes + cost.feature_bytes) / rate
    dense = cost.dense_s(tflops=flops / 1e12)
    drawn = [args.batch] + [blk.n_src for blk in blocks[::-1]]
    print(
        "sampled nodes per hop: predicted "
        + ", ".join(f"{v:,.0f}" for v in cost.nodes_per_hop)
        + "; drawn "
        + ", ".join(f"{v:,}" for v in drawn)
    )
    err = predicted / measured - 1.0
    print(
        f"gat   measured {measured * 1e3:8.1f} ms  predicted {predicted * 1e3:8.1f} ms "
        f"({err:+.1%})  dense-adjacency pricing {dense:8.2f} s ({dense / measured:,.0f}x)"
    )
    verdict = "MET" if abs(err) <= TARGET else "NOT MET"
    print(f"\n|error| {abs(err):.1%} (target {TARGET:.0%}): {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
