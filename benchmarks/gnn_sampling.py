"""Neighbour sampling on power-law graphs: drawn vs predicted sampled edges and distinct nodes.

Chung-Lu graphs (``gnn_cpu.power_law_graph``: ``--nodes`` nodes, ``--edges`` undirected edges
stored both ways, node weights ``i^-b`` for a degree tail ``d^-(1 + 1/b)``), sampled by the
DGL-style block sampler of :func:`gpucast.workloads.graph.sample_blocks` (every node reached so
far draws ``min(in-degree, f)`` distinct in-neighbours per hop, numpy over CSC) for each batch
size and fan-out list, ``--runs`` batches each. The mean sampled edges and distinct nodes per
hop are set against three predictions from statistics:

* ``mean``: every node at the mean degree (``predict.gnn.sampled_nodes``, fan-outs capped by
  the mean; what ``predict gnn`` does without ``--degrees``);
* ``powerlaw``: ``--degrees powerlaw:ALPHA`` with ALPHA fitted to the graph's degree tail by
  maximum likelihood (Clauset, Shalizi & Newman 2009: the discrete approximation
  ``1 + n / sum ln(d / (d_min - 1/2))``, ``d_min`` minimising the Kolmogorov-Smirnov distance);
* ``histogram``: the graph's exact degree histogram (``--degrees FILE``, or ``--edge-list``).

MAPE over the hops of each row and over all rows. Run:
``python benchmarks/gnn_sampling.py [--nodes 100000] [--edges 1000000] [--runs 10]``
(about a minute).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from gnn_cpu import power_law_graph
from gpucast.predict.gnn import sampled_nodes
from gpucast.predict.gnn_degrees import from_sequences, powerlaw, sampled_hops
from gpucast.workloads.graph import csc, sample_blocks

EXPONENTS = (0.6, 0.8)  # Chung-Lu weights: degree tails d^-2.67 and d^-2.25
BATCHES = (1024, 4096)
FANOUTS = ((15, 10), (25, 10), (10, 10, 10))
METHODS = ("mean", "powerlaw", "histogram")


def fit_powerlaw_alpha(degrees: np.ndarray) -> tuple[float, int]:
    """Discrete power-law tail by maximum likelihood, ``d_min`` by the KS distance."""
    d = np.sort(degrees[degrees > 0]).astype(float)
    best = (np.inf, 2.0, 1)
    for d_min in np.unique(d)[:200]:
        tail = d[d >= d_min]
        if len(tail) < 100:
            break
        alpha = 1.0 + len(tail) / np.log(tail / (d_min - 0.5)).sum()
        empirical = np.arange(len(tail), 0, -1) / len(tail)  # P(D >= tail[i])
        model = (tail / d_min) ** (1.0 - alpha)
        ks = float(np.abs(empirical - model).max())
        if ks < best[0]:
            best = (ks, alpha, int(d_min))
    return best[1], best[2]


def _mape(predicted: list[float], drawn: np.ndarray) -> float:
    return float(np.mean(np.abs(np.array(predicted) / drawn - 1.0)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--edges", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=10, help="batches sampled per row")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(1)
    n = args.nodes
    errors: dict[str, dict[str, list[float]]] = {m: {"nodes": [], "edges": []} for m in METHODS}
    print(
        "| tail | seeds | fan-outs | hop | drawn nodes | mean | powerlaw | histogram "
        "| drawn edges | mean | powerlaw | histogram |\n|" + "---|" * 12
    )
    summary: list[str] = []
    rows: list[str] = []
    for exponent in EXPONENTS:
        started = time.perf_counter()
        src, dst = power_law_graph(n, args.edges, seed=0, exponent=exponent)
        e = len(src)
        in_deg, out_deg = np.bincount(dst, minlength=n), np.bincount(src, minlength=n)
        alpha, d_min = fit_powerlaw_alpha(in_deg)
        dists = {
            "powerlaw": powerlaw(alpha, nodes=n, edges=e),
            "histogram": from_sequences(in_deg, out_deg, name="histogram"),
        }
        tail = f"d^-{1 + 1 / exponent:.2f}"
        summary.append(
            f"{tail}: {n:,} nodes, {e:,} directed edges (mean {e / n:.1f}, max {in_deg.max():,}, "
            f"{int((in_deg == 0).sum()):,} isolated); fitted powerlaw:{alpha:.2f} (d_min "
            f"{d_min}) -> {dists['powerlaw'].name}"
        )
        indptr, indices = csc(src, dst, n)
        for batch in BATCHES:
            for fanouts in FANOUTS:
                drawn_nodes, drawn_edges = [], []
                for _ in range(args.runs):
                    seeds = rng.choice(n, batch, replace=False)
                    _, blocks = sample_blocks(seeds, indptr, indices, fanouts, rng)
                    drawn_nodes.append([b.n_src for b in blocks[::-1]])
                    drawn_edges.append([len(b.src) for b in blocks[::-1]])
                nodes = np.mean(drawn_nodes, axis=0)
                edges = np.mean(drawn_edges, axis=0)
                fan = [min(f, e / n) for f in fanouts]
                flat = sampled_nodes(n, batch, fan)
                predicted = {"mean": (flat[1:], [flat[h] * f for h, f in enumerate(fan)])}
                for name, dist in dists.items():
                    hops, per_hop = sampled_hops(dist, batch, fanouts)
                    predicted[name] = (hops[1:], per_hop)
                row = []
                for m in METHODS:
                    errors[m]["nodes"].append(_mape(predicted[m][0], nodes))
                    errors[m]["edges"].append(_mape(predicted[m][1], edges))
                    row.append(f"{errors[m]['nodes'][-1]:.1%} / {errors[m]['edges'][-1]:.1%}")
                rows.append(
                    f"| {tail} | {batch} | {','.join(map(str, fanouts))} | "
                    + " | ".join(row)
                    + " |"
                )
                for hop in range(len(fanouts)):
                    cells = [f"{nodes[hop]:,.0f}"]
                    cells += [f"{predicted[m][0][hop] / nodes[hop] - 1:+.1%}" for m in METHODS]
                    cells += [f"{edges[hop]:,.0f}"]
                    cells += [f"{predicted[m][1][hop] / edges[hop] - 1:+.1%}" for m in METHODS]
                    label = ",".join(map(str, fanouts))
                    print(f"| {tail} | {batch} | {label} | {hop + 1} | " + " | ".join(cells) + " |")
        summary[-1] += f" [{time.perf_counter() - started:.0f} s]"
    print()
    for line in summary:
        print(line)
    print(
        "\nMAPE over the hops, distinct nodes / sampled edges:\n"
        "| tail | seeds | fan-outs | mean | powerlaw | histogram |\n|" + "---|" * 6
    )
    print("\n".join(rows))
    print("\nMAPE over every hop of every row (distinct nodes / sampled edges):")
    for m in METHODS:
        print(
            f"  {m:9s} nodes {np.mean(errors[m]['nodes']):6.1%} (worst row "
            f"{np.max(errors[m]['nodes']):.1%})   edges {np.mean(errors[m]['edges']):6.1%} "
            f"(worst row {np.max(errors[m]['edges']):.1%})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
