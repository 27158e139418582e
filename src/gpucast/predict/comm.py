"""Pure communication and queueing formulas for distributed data-parallel training.

Numbers in, numbers out; every function accepts floats or numpy arrays (broadcast).
Times are seconds, sizes bytes, bandwidths Gbit/s (10**9 bit/s).

Parameter server (PS)
    Each worker cycles: compute (its *think time* ``Z``) then push gradients / pull
    parameters, during which a PS shard serves it for ``D`` seconds (its *service demand*:
    bytes over the shard's NIC plus a CPU cost per tensor). Asynchronous training is a closed
    queueing network -- the machine-repairman model -- solved exactly by mean value analysis
    (MVA): it is linear in the worker count while the PS is idle and flattens smoothly to the
    bound ``1 / D_max`` of the busiest shard, which is what the CM-DARE P100 data shows.
    Synchronous training waits for the slowest worker, then the busiest shard serves all
    ``n`` updates.

Collectives
    Ring all-reduce moves ``2 (n-1)/n`` times the gradient bytes over the slowest link and
    pays ``2 (n-1)`` hop latencies; FSDP does an all-gather of the parameters in forward, one
    in backward and a reduce-scatter of the gradients: ``3 (n-1)/n`` times the bytes and
    ``3 (n-1)`` hops. Part of that time hides under the backward pass (``exposed_comm_s``).
"""

from __future__ import annotations

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

    The gradient arrives and the parameters leave in opposite directions of a full-duplex
    NIC, so the network term is ``param_bytes`` over the achieved bandwidth
    (``network_efficiency`` x nominal). The CPU term is a fixed cost per tensor (one RPC and
    one apply op per variable in TensorFlow's PS).
    """
    network_s = transfer_time_s(param_bytes, ps_network_gbps * network_efficiency)
    cpu_s = np.asarray(per_tensor_cost_s * np.asarray(n_tensors, dtype=np.float64))
    return network_s, cpu_s


def shard_demands_s(
    total_demand_s: FloatArray,
    shards: FloatArray,
    largest_tensor_fraction: FloatArray,
) -> tuple[FloatArray, FloatArray]:
    """Split a PS demand over ``shards``: (busiest shard's demand, each other shard's).

    Variables are placed whole, so the busiest shard holds at least the largest tensor
    (``largest_tensor_fraction`` of the bytes, 0 when unknown); the rest is spread evenly.
    The demands always add up to ``total_demand_s``.
    """
    busiest = np.maximum(total_demand_s / shards, total_demand_s * largest_tensor_fraction)
    busiest = np.minimum(busiest, total_demand_s)
    others = np.where(shards > 1, (total_demand_s - busiest) / np.maximum(shards - 1, 1), 0.0)
    return busiest, others


def mva_async_throughput(
    think_s: FloatArray,
    busiest_demand_s: FloatArray,
    other_demand_s: FloatArray,
    shards: FloatArray,
    workers: NDArray[np.int64],
) -> tuple[FloatArray, FloatArray]:
    """Exact MVA of ``workers`` identical workers and ``shards`` PS stations, per row.

    Returns (cluster updates per second, utilisation of the busiest shard). Vectorised over
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
    think_s: Numeric, busiest_demand_s: Numeric, workers: Numeric
) -> FloatArray:
    """Synchronous PS step: the slowest worker's compute, then the busiest shard serves all."""
    return np.asarray(
        np.asarray(think_s) + np.asarray(workers) * np.asarray(busiest_demand_s), dtype=np.float64
    )


def slowest_link_gbps(
    workers: int, gpus_per_node: int, intra_node_gbps: float, network_gbps: float
) -> float:
    """The link a ring is limited by: NVLink/PCIe inside one node, else the network NIC."""
    if workers <= gpus_per_node:
        return intra_node_gbps
    return min(intra_node_gbps, network_gbps)


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
    b = np.asarray(data_bytes, dtype=np.float64)
    n = np.maximum(np.asarray(workers, dtype=np.float64), 1.0)
    k = np.minimum(n, np.maximum(np.asarray(gpus_per_node, dtype=np.float64), 1.0))
    m = np.ceil(n / k)
    p = np.asarray(passes, dtype=np.float64)
    intra = np.asarray(intra_node_gbps, dtype=np.float64) * 1e9 / 8.0
    nic = np.asarray(node_network_gbps, dtype=np.float64) * 1e9 / 8.0
    intra_s = np.where(k > 1, p * (k - 1) / k * b / intra + p * (k - 1) * hop_latency_s, 0.0)
    ring_s = p * (m - 1) / m * b / nic + p * (m - 1) * hop_latency_s
    tree_s = p * b / nic + p * np.ceil(np.log2(np.maximum(m, 1.0))) * hop_latency_s
    inter_s = np.where(m > 1, np.minimum(ring_s, tree_s), 0.0)
    return np.asarray(np.where(n > 1, intra_s + inter_s, 0.0), dtype=np.float64)


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
