"""Partitioned full-graph GCN / GraphSAGE on CPU processes (gloo): measured step vs predict.

The graph of ``gnn_cpu.py`` (Chung-Lu power law, ``--nodes`` nodes, ``--edges`` undirected
edges) is split into ``k`` parts -- by METIS (:func:`gpucast.predict.gnn.metis_partition`)
and by a uniformly random partition -- and trained by ``k`` processes, one part each, one
torch thread each, over ``torch.distributed``'s gloo backend (``k = 1`` is the baseline; this
machine has 2 cores, so ``k <= 2``: more processes than cores would time the scheduler). Each
rank holds its nodes' rows of the normalised adjacency, with columns for its own nodes and
then its halo (the other parts' nodes with an edge into it), and its nodes' features and
labels. Every layer, before the aggregation, it receives its halo's current activations
from their owners and sends its own that the others need (one ``all_to_all_single``, which
gloo supports, with per-peer split sizes); backward, an autograd function sends the halo's
gradients back to their owners, who add them to their own. Then the local sparse aggregation
and the dense transform (``gnn_cpu.train_step``), the loss summed over the rank's nodes and
divided by all nodes, an all-reduce of the weight gradients, an SGD step. Every rank starts
a step after a barrier; a step's time is the slowest rank's, the figure is the median step.

The prediction is the product's (:mod:`gpucast.predict.gnn_partition`): ``part_loads`` from
the actual partition, ``partitioned_epoch`` with ``part_compute_s`` at the rates of
``gnn_cpu.py``'s micro-benchmarks -- run by every rank at once on its part's sizes (a dense
``nodes x 64 x 64`` matmul, a random-row gather of the part's in-edges from its nodes and
halo), as the parts share this machine's memory -- and ``exchange_s`` with the link set to a
gloo point-to-point bandwidth between the ranks, fitted (least squares, ``t = latency +
bytes / bandwidth``) to exchanges of plain buffers of 1/8 to 1 times the run's halo message;
the weight all-reduce alone is timed and added. Target (issue #17): within 20%.

Beside it, measured on the same processes: each part's step without the exchange (the halo
fixed) and the exchanges alone, to say which term a miss comes from; and, as ``gnn_cpu.py``
does, the prediction with the ``A^T`` CSR rebuild that autograd's sparse backward pays every
step added (timed alone on the part's adjacency), a column apart: the model prices kernels
that keep ``A^T``. The model charges the halo both ways every layer; the first layer's input
(the features) needs no gradient, so the code sends 3 exchanges a step where the model
prices 4 (printed).

Run: ``python benchmarks/gnn_partition_cpu.py [--nodes 100000] [--edges 1000000]`` (a few
minutes).
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor

from gnn_cpu import (
    CLASSES,
    FEATURES,
    HIDDEN,
    TARGET,
    csr,
    edge_weights,
    initial_weights,
    micro_rates,
    power_law_graph,
    train_step,
)
from gpucast.measure.distributed._proc import child_env, popen_tied, stop
from gpucast.predict.gnn import GnnSpec, bytes_per_halo_node, metis_partition
from gpucast.predict.gnn_partition import (
    PartitionLinks,
    part_loads,
    partitioned_epoch,
)

#: Halo exchanges the code makes a step (forward: both layers; backward: the second layer's
#: input only -- the features need no gradient), as the model prices them
#: (:func:`gpucast.predict.gnn.bytes_per_halo_node`; printed from it, below).
EXCHANGES_MEASURED = 3


@dataclass(frozen=True, slots=True)
class Shard:
    """One rank's share of the graph: its nodes (global ids), its halo (grouped by owner),
    its in-edges in local ids (own nodes ``0..n-1``, then the halo), and the exchange plan:
    rows of the halo from each part, and which of its own nodes each part needs."""

    own: np.ndarray
    halo: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    edge_mask: np.ndarray
    recv_counts: list[int]
    send_index: np.ndarray
    send_counts: list[int]


def shard(src: np.ndarray, dst: np.ndarray, parts: np.ndarray, rank: int) -> Shard:
    """The share of part ``rank`` (messages flow ``src -> dst``)."""
    k = int(parts.max()) + 1
    own = np.flatnonzero(parts == rank)
    into = parts[dst] == rank
    s_in, d_in = src[into], dst[into]
    remote = np.unique(s_in[parts[s_in] != rank])
    halo = remote[np.lexsort((remote, parts[remote]))]  # by owner, then id
    local = np.full(len(parts), -1, dtype=np.int64)
    local[own] = np.arange(len(own))
    local[halo] = len(own) + np.arange(len(halo))
    send = []
    for peer in range(k):
        needed = (parts[dst] == peer) & (parts[src] == rank) if peer != rank else None
        send.append(np.unique(src[needed]) if needed is not None else np.empty(0, np.int64))
    return Shard(
        own=own,
        halo=halo,
        rows=local[d_in],
        cols=local[s_in],
        edge_mask=into,
        recv_counts=np.bincount(parts[halo], minlength=k).tolist(),
        send_index=local[np.concatenate(send)],
        send_counts=[len(s) for s in send],
    )


class HaloExchange:
    """The halo exchange of one rank (one ``all_to_all_single`` each way)."""

    def __init__(self, part: Shard) -> None:
        self.own = len(part.own)
        self.send_index = torch.from_numpy(part.send_index)
        self.send_counts, self.recv_counts = part.send_counts, part.recv_counts

    def activations(self, h: Tensor) -> Tensor:
        """The halo's rows of ``h`` (each owner sends its rows the others need)."""
        out = h.new_empty(sum(self.recv_counts), h.shape[1])
        dist.all_to_all_single(out, h[self.send_index], self.recv_counts, self.send_counts)
        return out

    def gradients(self, grad_halo: Tensor) -> Tensor:
        """The gradients of this rank's sent rows, from the ranks that used them."""
        out = grad_halo.new_empty(len(self.send_index), grad_halo.shape[1])
        dist.all_to_all_single(out, grad_halo.contiguous(), self.send_counts, self.recv_counts)
        return out


class _WithHalo(torch.autograd.Function):
    """``[h; halo rows]`` forward; backward adds the halo's gradients to their owners' rows."""

    @staticmethod
    def forward(ctx: Any, h: Tensor, exchange: HaloExchange) -> Tensor:
        ctx.exchange = exchange
        return torch.cat([h, exchange.activations(h)])

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        ex: HaloExchange = ctx.exchange
        grad_own = grad[: ex.own].clone()
        grad_own.index_add_(0, ex.send_index, ex.gradients(grad[ex.own :]))
        return grad_own, None


# ------------------------------------------------------------------------------ one rank
def _synchronised_s(fn: Callable[[], object], reps: int) -> list[float]:
    """Seconds of each of ``reps`` calls of ``fn``, every call started after a barrier."""
    fn()  # warm up
    times = []
    for _ in range(reps):
        dist.barrier()
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return times


def _link_fit(rows: int, reps: int) -> tuple[float, float]:
    """(latency s, GB/s) of exchanges of plain ``rows x FEATURES`` fp32 buffers with every
    peer (1/8 to 1 times ``rows``), fitted by least squares (no positive slope: latency 0 and
    the largest exchange's average rate)."""
    k = dist.get_world_size()
    sizes, seconds = [], []
    for share in (8, 4, 2, 1):
        r = max(rows // share, 1)
        send, recv = torch.randn(k * r, FEATURES), torch.empty(k * r, FEATURES)
        t = float(np.median(_synchronised_s(partial(dist.all_to_all_single, recv, send), reps)))
        sizes.append(r * FEATURES * 4.0)  # bytes to each peer
        seconds.append(t)
    slope, intercept = np.polyfit(sizes, seconds, 1)
    if slope <= 0:  # latency-bound messages, no bandwidth to fit: the largest's average rate
        return 0.0, sizes[-1] / seconds[-1] / 1e9
    return max(float(intercept), 0.0), 1.0 / float(slope) / 1e9


def worker(data: Path, rank: int, world: int, init: str, steps: int, reps: int) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    graph = np.load(data / "graph.npz")
    src, dst, parts = graph["src"], graph["dst"], graph["parts"]
    kind, n = str(graph["kind"]), len(parts)
    part = shard(src, dst, parts, rank)
    n_own, n_halo = len(part.own), len(part.halo)
    values = edge_weights(src, dst, n)[kind][part.edge_mask]
    adj = csr(part.rows, part.cols, values, (n_own, n_own + n_halo))
    x = torch.from_numpy(graph["x"][part.own])
    y = torch.from_numpy(graph["y"][part.own])
    exchange = HaloExchange(part)
    record: dict[str, Any] = {}

    def reduce_grads(grads: list[Tensor]) -> None:
        flat = torch.cat([g.flatten() for g in grads])
        dist.all_reduce(flat)
        if "grads" not in record:
            record["grads"] = flat.tolist()
        offset = 0
        for g in grads:
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()

    def with_halo(h: Tensor) -> Tensor:
        return _WithHalo.apply(h, exchange)  # type: ignore[no-any-return]

    step = train_step(
        kind, adj, x, y, initial_weights(kind), nodes_total=n,
        halo=with_halo if world > 1 else None, reduce_grads=reduce_grads,
    )  # fmt: skip
    loss = step()  # the first step, from the initial weights: checked against one process
    dist.all_reduce(loss)
    record["loss"] = float(loss)
    record["step_s"] = _synchronised_s(step, steps)
    fixed = {d: torch.randn(n_halo, d) for d in (FEATURES, HIDDEN)}
    alone = train_step(
        kind, adj, x, y, initial_weights(kind), nodes_total=n,
        halo=lambda h: torch.cat([h, fixed[h.shape[1]]]),
    )  # fmt: skip
    record["compute_s"] = _synchronised_s(alone, steps)
    h, g = torch.randn(n_own, HIDDEN), torch.randn(n_halo, HIDDEN)
    record["exchange_s"] = [0.0] * steps
    if world > 1:
        record["exchange_s"] = _synchronised_s(
            lambda: (exchange.activations(x), exchange.activations(h), exchange.gradients(g)),
            steps,
        )
    flat = torch.zeros(sum(w.numel() for w in initial_weights(kind)))
    record["allreduce_s"] = _synchronised_s(lambda: dist.all_reduce(flat), reps)
    if world > 1:
        rows = max(max(part.recv_counts), max(part.send_counts), 1)
        record["link_latency_s"], record["link_gbps"] = _link_fit(rows, reps)

    def timer(fn: Callable[[], object]) -> float:
        return float(np.median(_synchronised_s(fn, reps)))

    features = torch.randn(n_own + n_halo, FEATURES)
    gather_rows = torch.from_numpy(part.cols[np.random.default_rng(1).permutation(len(values))])
    record["flops"], record["gather_gbps"] = micro_rates(n_own, features, gather_rows, timer)
    record["rebuild_s"] = timer(lambda: adj.t().to_sparse_csr())
    record.update(halo_in=n_halo, halo_out=len(part.send_index), nodes=n_own, edges=len(values))
    records: list[Any] = [None] * world
    dist.all_gather_object(records, record)
    if rank == 0:
        (data / "result.json").write_text(json.dumps(records))
    dist.destroy_process_group()


# ----------------------------------------------------------------------------- the driver
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_partitioned(
    src: np.ndarray, dst: np.ndarray, parts: np.ndarray, x: np.ndarray, y: np.ndarray,
    kind: str, *, steps: int, reps: int, timeout_s: float = 900.0,
) -> list[dict[str, Any]]:  # fmt: skip
    """Train on ``parts`` (node -> rank) with one process a part; each rank's record (timings,
    halo, rates, the first step's loss and all-reduced weight gradients)."""
    world = int(parts.max()) + 1
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        np.savez(folder / "graph.npz", src=src, dst=dst, parts=parts, x=x, y=y, kind=kind)
        init = f"tcp://127.0.0.1:{_free_port()}"
        env = child_env({"OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"})
        procs, logs = [], []
        for rank in range(world):
            log = (folder / f"rank{rank}.log").open("wb")
            logs.append(log)
            command = [sys.executable, __file__, "--worker", tmp, "--rank", str(rank),
                       "--world", str(world), "--init", init, "--steps", str(steps),
                       "--reps", str(reps)]  # fmt: skip
            procs.append(popen_tied(command, env=env, stdout=log, stderr=subprocess.STDOUT))
        try:
            deadline = time.monotonic() + timeout_s
            for p in procs:
                p.wait(timeout=max(deadline - time.monotonic(), 1.0))
        finally:
            stop(procs)
            for log in logs:
                log.close()
        failed = [r for r, p in enumerate(procs) if p.returncode != 0]
        if failed:
            tail = (folder / f"rank{failed[0]}.log").read_text()[-2000:]
            raise RuntimeError(f"rank {failed[0]} exited {procs[failed[0]].returncode}:\n{tail}")
        return list(json.loads((folder / "result.json").read_text()))


@dataclass(frozen=True, slots=True)
class Row:
    k: int
    partition: str
    halo: int
    measured_s: float
    predicted_s: float
    rebuild_s: float
    compute_s: float
    model_compute_s: float
    exchange_s: float
    model_exchange_s: float
    allreduce_s: float
    link_gbps: float
    link_latency_s: float

    @property
    def error(self) -> float:
        return self.predicted_s / self.measured_s - 1.0


def _median_of_slowest(records: list[dict[str, Any]], key: str) -> float:
    """Median over steps of the slowest rank's time."""
    return float(np.median(np.max([r[key] for r in records], axis=0)))


def predict_row(
    src: np.ndarray, dst: np.ndarray, parts: np.ndarray, kind: str, name: str,
    records: list[dict[str, Any]],
) -> Row:  # fmt: skip
    """The product's epoch for the partition at the rates the ranks measured."""
    k = len(records)
    spec = GnnSpec(model=kind, feature_dim=FEATURES, hidden=HIDDEN, classes=CLASSES)  # type: ignore[arg-type]
    loads = part_loads(src, dst, parts, gpus_per_node=k)
    gbps = float(np.mean([r.get("link_gbps", 1.0) for r in records]))
    links = PartitionLinks(gpus_per_node=k, intra_node_gbps=gbps, network_gbps=gbps)
    allreduce = float(np.median(np.max([r["allreduce_s"] for r in records], axis=0)))
    epoch = partitioned_epoch(
        spec, loads, links=links, allreduce_s=allreduce if k > 1 else 0.0,
        tflops=float(np.mean([r["flops"] for r in records])) / 1e12,
        memory_gbps=float(np.mean([r["gather_gbps"] for r in records])),
    )  # fmt: skip
    slow = epoch.slowest
    return Row(
        k=k,
        partition=name,
        halo=int(sum(r["halo_in"] for r in records)),
        measured_s=_median_of_slowest(records, "step_s"),
        predicted_s=epoch.epoch_s,
        rebuild_s=(spec.layers - 1) * records[slow]["rebuild_s"],
        compute_s=_median_of_slowest(records, "compute_s"),
        model_compute_s=epoch.compute_s[slow],
        exchange_s=_median_of_slowest(records, "exchange_s") if k > 1 else 0.0,
        model_exchange_s=epoch.exchange_s[slow],
        allreduce_s=allreduce,
        link_gbps=gbps if k > 1 else float("nan"),
        link_latency_s=float(np.mean([r.get("link_latency_s", np.nan) for r in records])),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--edges", type=int, default=1_000_000)
    parser.add_argument("--parts", type=int, default=2, help="k (one process, one core each)")
    parser.add_argument("--models", default="gcn,sage")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per figure")
    parser.add_argument("--reps", type=int, default=5, help="calls per micro-benchmark")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--world", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--init", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        worker(args.worker, args.rank, args.world, args.init, args.steps, args.reps)
        return 0
    n, k = args.nodes, args.parts
    src, dst = power_law_graph(n, args.edges)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((n, FEATURES), dtype=np.float32)
    y = rng.integers(0, CLASSES, n)
    partitions = {"-": np.zeros(n, dtype=np.int64)}
    if k > 1:
        partitions.update(METIS=metis_partition(n, src, dst, k), random=rng.integers(0, k, n))
    priced = bytes_per_halo_node(GnnSpec(model="gcn", feature_dim=FEATURES, hidden=HIDDEN,
                                         classes=CLASSES)) / (4 * HIDDEN)  # fmt: skip
    print(f"graph: {n:,} nodes, {len(src):,} directed edges; one thread a rank; halo "
          f"exchanges a step: {priced:g} priced, {EXCHANGES_MEASURED} made")  # fmt: skip
    print(f"{'model':5} {'k':>2} {'partition':9} {'halo':>7} {'measured':>9} {'predicted':>9} "
          f"{'error':>7} {'+A^T':>7} {'error':>7} | {'compute':>8} {'model':>7} "
          f"{'exchange':>8} {'model':>7} {'allred':>6} {'link GB/s':>9} {'lat us':>6}")  # fmt: skip
    rows = []
    for kind in args.models.split(","):
        for name, parts in partitions.items():
            started = time.perf_counter()
            records = run_partitioned(src, dst, parts, x, y, kind, steps=args.steps,
                                      reps=args.reps)  # fmt: skip
            r = predict_row(src, dst, parts, kind, name, records)
            rows.append(r)
            eager = r.predicted_s + r.rebuild_s
            print(f"{kind:5} {r.k:>2} {name:9} {r.halo:>7,} {r.measured_s * 1e3:7.1f}ms "
                  f"{r.predicted_s * 1e3:7.1f}ms {r.error:+7.1%} {eager * 1e3:5.0f}ms "
                  f"{eager / r.measured_s - 1:+7.1%} | {r.compute_s * 1e3:6.1f}ms "
                  f"{r.model_compute_s * 1e3:5.1f}ms {r.exchange_s * 1e3:6.1f}ms "
                  f"{r.model_exchange_s * 1e3:5.1f}ms {r.allreduce_s * 1e3:5.2f} "
                  f"{r.link_gbps:9.2f} {r.link_latency_s * 1e6:6.0f}  "
                  f"[{time.perf_counter() - started:.0f} s]")  # fmt: skip
    worst = max(abs(r.error) for r in rows)
    print(f"\nworst |error| {worst:.1%} (target {TARGET:.0%}): "
          f"{'MET' if worst <= TARGET else 'NOT MET'}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
