"""Pure communication and queueing formulas for distributed data-parallel training.

Numbers in, numbers out; every function accepts floats or numpy arrays (broadcast).
Times are seconds, sizes bytes, bandwidths Gbit/s (10**9 bit/s).

Parameter server (PS)
    Each worker cycles: compute (its *think time* ``Z``), then it pulls the parameters and
    pushes its gradients; neither transfer overlaps its compute. A PS shard is a CPU VM with
    a full-duplex NIC: pushes arrive on one direction and are applied by its CPU (the *push*
    station: ingress bytes plus a CPU cost per tensor), pulls leave on the other (the *pull*
    station: egress bytes), so the two serve different workers at once. ``k`` shards are
    separate VMs; the busiest one (it holds the largest tensor) sets both a worker's wait and
    the bound (:func:`shard_demands_s`), and a worker's own NIC, which carries every shard's
    bytes, adds a delay when it is the slower end (:func:`worker_nic_delay_s`).
    Asynchronous training is a closed queueing network -- the machine-repairman model --
    solved exactly by mean value analysis (MVA, :func:`ps_async_throughput`): linear in the
    worker count while the PS is idle, flattening to ``1 / push`` of the busiest shard, which
    is what the CM-DARE P100 data shows. Synchronous training waits for the slowest worker,
    then the busiest shard serves all ``n`` pushes and pulls (:func:`sync_ps_step_time_s`).

Collectives
    Ring all-reduce moves ``2 (n-1)/n`` times the gradient bytes over the slowest link and
    pays ``2 (n-1)`` hop latencies; FSDP does an all-gather of the parameters in forward, one
    in backward and a reduce-scatter of the gradients: ``3 (n-1)/n`` times the bytes and
    ``3 (n-1)`` hops. Part of that time hides under the backward pass (``exposed_comm_s``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import numpy.typing as npt
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
#: A scalar or an array of them; the formulas broadcast.
Numeric = float | FloatArray

#: Bits per byte; bandwidths are in Gbit/s, sizes in bytes.
_BITS_PER_BYTE = 8.0

#: Default share of communication that can overlap the backward pass. Bucketed gradient
#: reduction (PyTorch DDP, Horovod) starts reducing early buckets while later layers still
#: run backward, but the last bucket and the optimizer step cannot overlap. 0.7 is an
#: uncalibrated prior, not a measured value; pass your own ``overlap_fraction`` when a
#: measured run says otherwise.
DEFAULT_OVERLAP_FRACTION = 0.7
#: Latency of one hop of a ring or tree step (NCCL's per-step launch and network latency);
#: the cluster model's and the planner's default.
DEFAULT_HOP_LATENCY_S = 25e-6
#: Backward takes about twice the forward FLOPs, so ~2/3 of a step's compute.
DEFAULT_BACKWARD_FRACTION = 2.0 / 3.0


def transfer_time_s(n_bytes: Numeric, bandwidth_gbps: Numeric) -> FloatArray:
    """Seconds to move ``n_bytes`` over a link of ``bandwidth_gbps`` (as an array)."""
    return np.asarray(
        np.asarray(n_bytes, dtype=np.float64) * _BITS_PER_BYTE / (np.asarray(bandwidth_gbps) * 1e9),
        dtype=np.float64,
    )


def ps_service_demand_s(
    param_bytes: Numeric,
    n_tensors: Numeric,
    *,
    ps_network_gbps: float,
    network_efficiency: float,
    per_tensor_cost_s: float,
) -> tuple[FloatArray, FloatArray]:
    """Seconds one PS (all shards together) spends on one worker update: (network, cpu).

    ``network`` is one direction of the full-duplex NIC: ``param_bytes`` over the achieved
    bandwidth (``network_efficiency`` x nominal) -- the gradients arrive (ingress) and the
    parameters leave (egress) in that time each, on the two directions. ``cpu`` is a fixed
    cost per tensor (one RPC and one apply op per variable in TensorFlow's PS).
    """
    network_s = transfer_time_s(param_bytes, ps_network_gbps * network_efficiency)
    cpu_s = np.asarray(per_tensor_cost_s * np.asarray(n_tensors, dtype=np.float64))
    return network_s, cpu_s


def shard_demands_s(
    network_s: Numeric,
    cpu_s: Numeric,
    shards: Numeric,
    largest_tensor_fraction: Numeric,
) -> tuple[FloatArray, FloatArray]:
    """Per-update demands at the busiest of ``shards`` PS shards: (push, pull) seconds.

    Each shard is a VM of its own, with its own full-duplex NIC and CPU. Variables are
    placed whole, so the busiest shard holds at least the largest tensor: a share
    ``max(1/k, largest_tensor_fraction)`` of the bytes (``largest_tensor_fraction`` 0 when
    unknown); the tensors are spread evenly (round-robin placement), so each shard applies
    ``1/k`` of them. Two stations per shard, serving different workers at the same time:

    * **push** -- the shard's share of the gradient arriving (NIC ingress) and its apply
      (CPU), one station: a worker's gradients are applied as they are received;
    * **pull** -- the shard's share of the parameters leaving (NIC egress), the other
      direction of the NIC.

    The busiest shard is the slowest to serve a worker and the first to saturate: a worker
    waits for all shards (it talks to them in parallel), so it waits for that one.
    """
    k = np.maximum(np.asarray(shards, dtype=np.float64), 1.0)
    share = np.clip(np.maximum(1.0 / k, np.asarray(largest_tensor_fraction)), 0.0, 1.0)
    pull = np.asarray(share * np.asarray(network_s, dtype=np.float64), dtype=np.float64)
    push = np.asarray(pull + np.asarray(cpu_s, dtype=np.float64) / k, dtype=np.float64)
    return push, pull


def worker_nic_delay_s(pull_s: Numeric, worker_transfer_s: Numeric) -> FloatArray:
    """Per step, the time a worker's own NIC adds to its transfers: ``2 max(0, w - pull)``.

    A worker pulls all the parameters and pushes all the gradients through its own NIC
    (``worker_transfer_s`` = the bytes over it, each direction) while the busiest shard's NIC
    carries only its share (``pull_s``). A transfer lasts as long as the slower end, so the
    excess is a delay the worker pays alone (it queues for nothing). Zero with one PS whose
    NIC is no faster than the worker's (CM-DARE: 8 vs 16 Gbit/s).
    """
    w = np.asarray(worker_transfer_s, dtype=np.float64)
    return np.asarray(2.0 * np.maximum(w - np.asarray(pull_s), 0.0), dtype=np.float64)


def ps_step_latency_s(push_s: Numeric, pull_s: Numeric, worker_transfer_s: Numeric) -> FloatArray:
    """PS time in one worker's step on an idle PS: pull, then (after compute) push.

    Neither overlaps the worker's compute (TF1's PS worker reads the variables before the
    forward pass and sends its gradients after the backward pass), so both count:
    ``push + pull`` at the busiest shard plus :func:`worker_nic_delay_s`.
    """
    return np.asarray(
        np.asarray(push_s) + np.asarray(pull_s) + worker_nic_delay_s(pull_s, worker_transfer_s),
        dtype=np.float64,
    )


def _ps_mva(
    think_s: FloatArray, push_s: FloatArray, pull_s: FloatArray, n_max: int
) -> Iterator[FloatArray]:
    """Exact MVA of a delay (think) and the busiest shard's push and pull stations: yields
    the throughput at 1, 2, ..., ``n_max`` workers."""
    q_push = np.zeros_like(push_s)
    q_pull = np.zeros_like(pull_s)
    for n in range(1, n_max + 1):
        r_push = push_s * (1.0 + q_push)
        r_pull = pull_s * (1.0 + q_pull)
        x = n / (think_s + r_push + r_pull)
        q_push = x * r_push
        q_pull = x * r_pull
        yield x


def ps_async_throughput(
    think_s: FloatArray, push_s: FloatArray, pull_s: FloatArray, workers: NDArray[np.int64]
) -> tuple[FloatArray, FloatArray]:
    """Asynchronous PS: updates/s of ``workers`` identical workers, and the busiest station's
    utilisation, per row (exact MVA; ``think_s`` is each worker's compute plus its delays,
    e.g. :func:`worker_nic_delay_s`).

    Linear in the workers while the PS idles, it flattens to ``1 / push`` (the busiest
    shard's push path; ``push >= pull``). Vectorised over rows; the loop runs over the
    worker count only (``max(workers)`` iterations).
    """
    think = np.asarray(think_s, dtype=np.float64)
    push = np.broadcast_to(np.asarray(push_s, dtype=np.float64), think.shape)
    pull = np.broadcast_to(np.asarray(pull_s, dtype=np.float64), think.shape)
    out = np.zeros(think.shape)
    n_max = int(workers.max()) if workers.size else 0
    for n, x in enumerate(_ps_mva(think, push, pull, n_max), start=1):
        out = np.where(workers == n, x, out)
    return out, out * np.maximum(push, pull)


def ps_async_table(
    think_s: FloatArray, push_s: FloatArray, pull_s: FloatArray, n_max: int
) -> FloatArray:
    """(rows, n_max): :func:`ps_async_throughput` at every worker count 1..n_max."""
    think = np.asarray(think_s, dtype=np.float64)
    out = np.zeros((think.shape[0], max(n_max, 1)))
    for n, x in enumerate(_ps_mva(think, push_s, pull_s, n_max), start=1):
        out[:, n - 1] = x
    return out


class AsyncTableMemo:
    """:func:`ps_async_table` rows kept across calls, keyed by the exact bits of each row's
    (think, push, pull): a planner evaluates its space a chunk at a time and most chunks
    share their PS networks, so each network is solved once, up to ``n_max`` workers (further
    when a call asks), not once per chunk. Same numbers as :func:`ps_async_table`: the
    recurrence runs element by element, whichever rows share a call."""

    def __init__(self, n_max: int) -> None:
        self.n_max = int(n_max)
        self._rows: dict[bytes, FloatArray] = {}

    def __len__(self) -> int:
        return len(self._rows)

    def table(
        self, think_s: FloatArray, push_s: FloatArray, pull_s: FloatArray, n_max: int
    ) -> FloatArray:
        """(rows, n_max): as :func:`ps_async_table`, solving only the rows not seen before."""
        cols = np.stack(
            [np.broadcast_to(np.asarray(a, dtype=np.float64), np.shape(think_s))
             for a in (think_s, push_s, pull_s)],
            axis=1,
        )  # fmt: skip
        width = max(n_max, 1)
        keys = [row.tobytes() for row in cols]
        new = [i for i, k in enumerate(keys) if k not in self._rows or self._rows[k].size < width]
        if new:
            fresh = ps_async_table(cols[new, 0], cols[new, 1], cols[new, 2], max(n_max, self.n_max))
            for j, i in enumerate(new):
                self._rows[keys[i]] = fresh[j]
        if not keys:
            return np.zeros((0, width))
        return np.stack([self._rows[k][:width] for k in keys])


def mva_async_throughput(
    think_s: FloatArray,
    busiest_demand_s: FloatArray,
    other_demand_s: FloatArray,
    shards: FloatArray,
    workers: NDArray[np.int64],
) -> tuple[FloatArray, FloatArray]:
    """Exact MVA of ``workers`` identical workers visiting ``shards`` stations in series: one
    of ``busiest_demand_s``, the others ``other_demand_s`` each (a general solver; the PS
    model is :func:`ps_async_throughput`), per row.

    Returns (cluster updates per second, utilisation of the busiest station). Vectorised over
    rows; the loop runs over the worker count only (``max(workers)`` iterations).
    """
    n_rows = think_s.shape[0]
    q_busy = np.zeros(n_rows)
    q_other = np.zeros(n_rows)
    out = np.zeros(n_rows)
    n_max = int(workers.max()) if n_rows else 0
    m_other = shards - 1.0
    for n in range(1, n_max + 1):
        r_busy = busiest_demand_s * (1.0 + q_busy)
        r_other = other_demand_s * (1.0 + q_other)
        x = n / (think_s + r_busy + m_other * r_other)
        q_busy = x * r_busy
        q_other = x * r_other
        out = np.where(workers == n, x, out)
    return out, out * busiest_demand_s


def equivalent_think_time_s(think_s: FloatArray, demand_s: float) -> float:
    """One think time standing for workers of different speeds (heterogeneous async PS).

    Chosen so that ``n`` identical workers would reach the same summed rate as the real
    ones on an idle PS (``n / (Z_eq + D) = sum 1 / (Z_i + D)``). Solving exact MVA with it
    is exact for identical workers, exact at light load (rates add) and at saturation (the
    PS bound), and continuous in between -- unlike a per-worker approximate MVA.
    """
    idle_rate = float(np.sum(1.0 / (think_s + demand_s)))
    return max(len(think_s) / idle_rate - demand_s, 0.0)


def sync_ps_step_time_s(
    think_s: Numeric,
    push_s: Numeric,
    pull_s: Numeric,
    worker_transfer_s: Numeric,
    workers: Numeric,
) -> FloatArray:
    """Synchronous PS step: the slowest worker's compute, then all ``n`` workers push (the
    busiest shard receives and applies ``n`` shares), then all pull.

    Each phase's transfer lasts as long as the slower of the busiest shard's NIC (``n``
    shares) and a worker's own NIC (``worker_transfer_s``): ``think + n (push - pull) +
    2 max(n pull, w)``. At one worker it is the idle latency of :func:`ps_step_latency_s`.
    """
    n = np.asarray(workers, dtype=np.float64)
    push = np.asarray(push_s, dtype=np.float64)
    pull = np.asarray(pull_s, dtype=np.float64)
    transfer = np.maximum(n * pull, np.asarray(worker_transfer_s, dtype=np.float64))
    return np.asarray(np.asarray(think_s) + n * (push - pull) + 2.0 * transfer, dtype=np.float64)


def slowest_link_gbps(
    workers: int, gpus_per_node: int, intra_node_gbps: float, network_gbps: float
) -> float:
    """The link a ring is limited by: NVLink/PCIe inside one node, else the network NIC."""
    if workers <= gpus_per_node:
        return intra_node_gbps
    return min(intra_node_gbps, network_gbps)


def _ring_terms(
    data_bytes: npt.ArrayLike,
    workers: npt.ArrayLike,
    gpus_per_node: npt.ArrayLike,
    intra_node_gbps: npt.ArrayLike,
    node_network_gbps: npt.ArrayLike,
    passes: npt.ArrayLike,
) -> tuple[FloatArray, ...]:
    """Bytes, GPUs ``n``, GPUs per node ``k`` (at most ``n``), nodes ``m``, passes, and the
    intra-node and NIC bandwidths in bytes/s, as float arrays."""
    b = np.asarray(data_bytes, dtype=np.float64)
    n = np.maximum(np.asarray(workers, dtype=np.float64), 1.0)
    k = np.minimum(n, np.maximum(np.asarray(gpus_per_node, dtype=np.float64), 1.0))
    intra = np.asarray(intra_node_gbps, dtype=np.float64) * 1e9 / 8.0
    nic = np.asarray(node_network_gbps, dtype=np.float64) * 1e9 / 8.0
    return b, n, k, np.ceil(n / k), np.asarray(passes, dtype=np.float64), intra, nic


def hierarchical_collective_s(
    data_bytes: npt.ArrayLike,
    workers: npt.ArrayLike,
    gpus_per_node: npt.ArrayLike,
    intra_node_gbps: npt.ArrayLike,
    node_network_gbps: npt.ArrayLike,
    hop_latency_s: float,
    *,
    passes: npt.ArrayLike = 2.0,
) -> FloatArray:
    """A collective as NCCL runs it across nodes (vectorised over rows).

    ``passes`` is how often the data crosses the links: 2 for all-reduce (reduce-scatter then
    all-gather), 3 for FSDP (two all-gathers and a reduce-scatter). With ``k`` GPUs per node
    and ``m`` nodes: an intra-node phase over NVLink/PCIe, ``passes (k-1)/k`` x the bytes plus
    ``passes (k-1)`` hops; then the nodes exchange their shards through their NICs, as a ring
    (``passes (m-1)/m`` x the bytes, ``passes (m-1)`` hops) or a tree (``passes`` x the bytes,
    ``passes ceil(log2 m)`` hops), whichever is faster -- NCCL switches to trees at scale, so
    the latency grows with log m, not with the GPU count.
    """
    b, n, k, m, p, intra, nic = _ring_terms(
        data_bytes, workers, gpus_per_node, intra_node_gbps, node_network_gbps, passes
    )
    intra_s = np.where(k > 1, p * (k - 1) / k * b / intra + p * (k - 1) * hop_latency_s, 0.0)
    ring_s = p * (m - 1) / m * b / nic + p * (m - 1) * hop_latency_s
    tree_s = p * b / nic + p * np.ceil(np.log2(np.maximum(m, 1.0))) * hop_latency_s
    inter_s = np.where(m > 1, np.minimum(ring_s, tree_s), 0.0)
    return np.asarray(np.where(n > 1, intra_s + inter_s, 0.0), dtype=np.float64)


def flat_ring_collective_s(
    data_bytes: npt.ArrayLike,
    workers: npt.ArrayLike,
    gpus_per_node: npt.ArrayLike,
    intra_node_gbps: npt.ArrayLike,
    node_network_gbps: npt.ArrayLike,
    hop_latency_s: float,
    *,
    passes: npt.ArrayLike = 2.0,
) -> FloatArray:
    """A collective as NCCL's ring runs it over one NIC per node without RDMA (vectorised).

    NCCL's ring goes through all ``n`` GPUs, every link carrying ``passes (n-1)/n`` x the
    bytes at once, so it runs at its slowest link: the intra-node link inside one node, the
    node's NIC once the ring leaves it (the NIC carries the whole ring's share, not a shard as
    in :func:`hierarchical_collective_s`, whose intra-node phase reduces first). Across nodes
    a tree (``passes`` x the bytes through the NIC, ``k - 1`` hops inside each node and
    ``ceil(log2 m)`` between nodes per pass) is taken where it is faster.
    """
    b, n, k, m, p, intra, nic = _ring_terms(
        data_bytes, workers, gpus_per_node, intra_node_gbps, node_network_gbps, passes
    )
    link = np.where(m > 1, np.minimum(intra, nic), intra)
    ring_s = p * (n - 1) / n * b / link + p * (n - 1) * hop_latency_s
    depth = (k - 1) + np.ceil(np.log2(np.maximum(m, 1.0)))
    tree_s = p * b / link + p * depth * hop_latency_s
    out = np.where(m > 1, np.minimum(ring_s, tree_s), ring_s)
    return np.asarray(np.where(n > 1, out, 0.0), dtype=np.float64)


def collective_function(algorithm: str) -> Callable[..., FloatArray]:
    """The pricing function of a collective ``algorithm`` (``hierarchical`` or
    ``flat_ring``, :data:`gpucast.domain.parallel.COLLECTIVE_ALGORITHMS`): one dispatch for
    the fitted collective constants and the 3D-parallel model alike."""
    return flat_ring_collective_s if algorithm == "flat_ring" else hierarchical_collective_s


def exposed_comm_s(
    comm_s: float,
    compute_s: float,
    *,
    overlap_fraction: float = DEFAULT_OVERLAP_FRACTION,
    backward_fraction: float = DEFAULT_BACKWARD_FRACTION,
) -> float:
    """Communication left on the critical path after overlapping it with backward compute.

    At most ``overlap_fraction`` of the communication can hide, and never more than the
    backward pass lasts (``backward_fraction`` of the compute time).
    """
    hidden = min(overlap_fraction * comm_s, backward_fraction * compute_s)
    return comm_s - hidden
