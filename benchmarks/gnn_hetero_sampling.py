"""Neighbour sampling on a heterogeneous power-law graph (R-GAT): drawn vs predicted per type.

A synthetic graph of two node types (``--papers`` papers, ``--authors`` authors) and three
relations, each a Chung-Lu graph over its own random order of the nodes (the relations
independent, as the model takes them): ``cites`` (paper -> paper, stored both ways: in = out per
paper, degree tail ``d^-2.43``), ``writes`` (author -> paper: authors per paper ``d^-3.0``,
papers per author ``d^-2.33``) and ``rev_writes`` (the same edges reversed). A per-relation
DGL-style block sampler (numpy; :func:`gpucast.workloads.graph.sample_in_edges` per relation:
every node of the relation's destination type reached so far draws ``min(in-degree, f)``
distinct in-neighbours along it) runs ``--runs`` batches of paper seeds for each batch size
and fan-out list. The mean distinct nodes per type up to each hop and the sampled edges per
hop and relation are set against three predictions (:func:`gpucast.predict.gat.sampled_hetero`):

* ``mean``: every node at its relation's mean degree (``--graph-stats`` without degree columns);
* ``powerlaw``: ``in_degree`` / ``out_degree`` ``powerlaw:ALPHA`` per relation, ALPHA fitted by
  the maximum likelihood of ``gnn_sampling.fit_powerlaw_alpha`` (``cites``: its in-degree only,
  the out-degree left empty = the same law on the same nodes; ``rev_writes``: ``writes``' laws
  swapped, as ``--reverse-relations`` does, on the same nodes);
* ``histogram``: each relation's exact in- and out-degree sequences
  (:class:`gpucast.predict.gnn_degrees.RelationDegrees`, ``rev_writes`` sharing ``writes``'
  sides): the model's structure without the fit.

MAPE over the hops of each row and over all rows. Run:
``python benchmarks/gnn_hetero_sampling.py [--papers 60000] [--authors 40000] [--runs 10]``
(about a minute).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from gnn_sampling import fit_powerlaw_alpha
from gpucast.predict import gat
from gpucast.predict.gnn_degrees import RelationDegrees, from_sequences, sampled_relations
from gpucast.workloads.graph import csc, sample_in_edges

BATCHES = (512, 2048)
FANOUTS = ((15, 10), (25, 10), (10, 10, 10))
METHODS = ("mean", "powerlaw", "histogram")
TYPES = ("paper", "author")


def chung_lu(
    n_src: int, n_dst: int, edges: int, b_src: float, b_dst: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``edges`` edges ``src -> dst``, each end drawn by weight ``i^-b`` over its own random
    order of the nodes (degree tails ``d^-(1 + 1/b)``)."""

    def ends(n: int, b: float) -> np.ndarray:
        w = np.arange(1, n + 1, dtype=float) ** -b
        return rng.permutation(n)[rng.choice(n, edges, p=w / w.sum())]

    return ends(n_src, b_src), ends(n_dst, b_dst)


def build(papers: int, authors: int, rng: np.random.Generator) -> dict[str, tuple]:
    """``name -> (src type, dst type, src ids, dst ids)`` of the three relations."""
    s, d = chung_lu(papers, papers, 5 * papers, 0.7, 0.7, rng)
    keep = s != d
    s, d = s[keep], d[keep]
    cites = (0, 0, np.concatenate([s, d]), np.concatenate([d, s]))
    a, p = chung_lu(authors, papers, 3 * papers, 0.75, 0.5, rng)
    return {"cites": cites, "writes": (1, 0, a, p), "rev_writes": (0, 1, p, a)}


def sample(
    rels: dict[str, tuple], cscs: dict[str, tuple], counts: list[int], seeds: np.ndarray,
    fanouts: tuple[int, ...], rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Distinct nodes per type up to each hop (seeds first) and sampled edges per relation."""
    frontier = [seeds, np.zeros(0, dtype=np.int64)]
    nodes, edges = [[len(seeds), 0]], []
    for f in fanouts:
        found: list[list[np.ndarray]] = [[frontier[t]] for t in range(len(counts))]
        hop = []
        for name, (src_t, dst_t, _, _) in rels.items():
            neighbours, _ = sample_in_edges(frontier[dst_t], *cscs[name], f, rng)
            found[src_t].append(neighbours)
            hop.append(len(neighbours))
        frontier = [np.unique(np.concatenate(parts)) for parts in found]
        nodes.append([len(x) for x in frontier])
        edges.append(hop)
    return np.array(nodes, dtype=float), np.array(edges, dtype=float)


def predictions(
    rels: dict[str, tuple], counts: list[int], batch: int, fanouts: tuple[int, ...],
    alphas: dict[str, tuple[float | None, float | None]],
) -> dict[str, tuple[np.ndarray, np.ndarray]]:  # fmt: skip
    node_types = tuple(
        gat.NodeType(name=t, count=n, feature_dim=1) for t, n in zip(TYPES, counts, strict=True)
    )

    def graph(laws: bool) -> gat.HeteroGraph:
        relations = tuple(
            gat.Relation(
                name=name,
                src=TYPES[s],
                dst=TYPES[d],
                edges=len(src),
                in_alpha=alphas[name][0] if laws else None,
                out_alpha=alphas[name][1] if laws else None,
            )
            for name, (s, d, src, _) in rels.items()
        )
        return gat.HeteroGraph(name="synthetic", node_types=node_types, relations=relations)

    exact: dict[str, RelationDegrees] = {}
    for name, (s, d, src, dst) in rels.items():
        forward = exact.get(name.removeprefix("rev_"))
        if forward is not None:  # the same nodes and degrees as the relation it reverses
            exact[name] = RelationDegrees(src=s, dst=d, into=forward.out_of, out_of=forward.into)
            continue
        in_deg, out_deg = (
            np.bincount(dst, minlength=counts[d]),
            np.bincount(src, minlength=counts[s]),
        )
        if s == d:
            joint = from_sequences(in_deg, out_deg, name="exact")
            exact[name] = RelationDegrees(src=s, dst=d, into=joint, out_of=joint)
        else:
            exact[name] = RelationDegrees(
                src=s, dst=d, into=from_sequences(in_deg, in_deg, name="in"),
                out_of=from_sequences(out_deg, out_deg, name="out"),
            )  # fmt: skip
    seeds = [batch, 0]
    return {
        "mean": gat.sampled_hetero(graph(False), "paper", batch, fanouts),
        "powerlaw": gat.sampled_hetero(graph(True), "paper", batch, fanouts),
        "histogram": sampled_relations(counts, list(exact.values()), seeds, fanouts),
    }


def fitted_alphas(rels: dict[str, tuple], counts: list[int]) -> dict[str, tuple]:
    """``name -> (in_degree ALPHA, out_degree ALPHA or None)`` fitted by maximum likelihood."""
    s, d, src, dst = rels["writes"]
    a_in = fit_powerlaw_alpha(np.bincount(dst, minlength=counts[d]))[0]
    a_out = fit_powerlaw_alpha(np.bincount(src, minlength=counts[s]))[0]
    _, d, _, dst = rels["cites"]
    a_cites = fit_powerlaw_alpha(np.bincount(dst, minlength=counts[d]))[0]
    return {"cites": (a_cites, None), "writes": (a_in, a_out), "rev_writes": (a_out, a_in)}


def _mape(predicted: np.ndarray, drawn: np.ndarray) -> float:
    ok = drawn > 0
    return float(np.mean(np.abs(predicted[ok] / drawn[ok] - 1.0)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", type=int, default=60_000)
    parser.add_argument("--authors", type=int, default=40_000)
    parser.add_argument("--runs", type=int, default=10, help="batches sampled per row")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rng = np.random.default_rng(1)
    counts = [args.papers, args.authors]
    rels = build(args.papers, args.authors, np.random.default_rng(0))
    cscs = {name: csc(src, dst, counts[d]) for name, (_, d, src, dst) in rels.items()}
    alphas = fitted_alphas(rels, counts)
    for name, (s, d, src, dst) in rels.items():
        in_deg = np.bincount(dst, minlength=counts[d])
        print(
            f"{name} ({TYPES[s]} -> {TYPES[d]}): {len(src):,} edges, mean in-degree "
            f"{len(src) / counts[d]:.2f} (max {in_deg.max():,}), mean out-degree "
            f"{len(src) / counts[s]:.2f}; fitted in_degree powerlaw:{alphas[name][0]:.2f}, "
            "out_degree "
            + (
                "(empty: the same)"
                if alphas[name][1] is None
                else f"powerlaw:{alphas[name][1]:.2f}"
            )
        )
    errors = {m: {"nodes": [], "edges": []} for m in METHODS}
    print(
        "\n| seeds | fan-outs | hop | type / relation | drawn | mean | powerlaw | histogram |\n|"
        + "---|" * 8
    )
    rows = []
    for batch in BATCHES:
        for fanouts in FANOUTS:
            runs = [
                sample(
                    rels, cscs, counts, rng.choice(args.papers, batch, replace=False), fanouts, rng
                )
                for _ in range(args.runs)
            ]
            nodes = np.mean([r[0] for r in runs], axis=0)[1:]
            edges = np.mean([r[1] for r in runs], axis=0)
            predicted = predictions(rels, counts, batch, fanouts, alphas)
            label = ",".join(map(str, fanouts))
            for hop in range(len(fanouts)):
                for what, drawn, index, names in (
                    ("nodes", nodes, 0, TYPES), ("edges", edges, 1, tuple(rels)),
                ):  # fmt: skip
                    for j, name in enumerate(names):
                        if drawn[hop, j] == 0:
                            continue
                        cells = [
                            f"{predicted[m][index][hop + 1 - index, j] / drawn[hop, j] - 1:+.1%}"
                            for m in METHODS
                        ]
                        print(
                            f"| {batch} | {label} | {hop + 1} | {what}: {name} | "
                            f"{drawn[hop, j]:,.0f} | " + " | ".join(cells) + " |"
                        )
            row = []
            for m in METHODS:
                errors[m]["nodes"].append(_mape(predicted[m][0][1:], nodes))
                errors[m]["edges"].append(_mape(predicted[m][1], edges))
                row.append(f"{errors[m]['nodes'][-1]:.1%} / {errors[m]['edges'][-1]:.1%}")
            rows.append(f"| {batch} | {label} | " + " | ".join(row) + " |")
    print(
        "\nMAPE over the hops and types (distinct nodes) / relations (sampled edges):\n"
        "| seeds | fan-outs | mean | powerlaw | histogram |\n|" + "---|" * 5
    )
    print("\n".join(rows))
    print(
        "\nMAPE over every hop and type / relation of every row (distinct nodes / sampled edges):"
    )
    for m in METHODS:
        print(
            f"  {m:9s} nodes {np.mean(errors[m]['nodes']):6.1%} (worst row "
            f"{np.max(errors[m]['nodes']):.1%})   edges {np.mean(errors[m]['edges']):6.1%} "
            f"(worst row {np.max(errors[m]['edges']):.1%})"
        )
    print(f"[{time.perf_counter() - started:.0f} s]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
