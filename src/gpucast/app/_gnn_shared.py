"""What every ``predict gnn`` path shares: the achieved shares of a GPU's peaks, the limits
the request checks, the feature widths, models and software stacks, and the small pieces the
gcn/sage, partitioned and GAT paths all use (the achieved rates, the degree distribution, the
batch check and the notes on sampling, launches and memory refusals). Re-exported by
:mod:`gpucast.app.gnn`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpucast.domain.errors import InvalidSpecError

if TYPE_CHECKING:
    from gpucast.app.gnn import PredictGnnRequest


#: Achieved share of the GPU's peak on the dense transforms and of HBM on the gathers.
FLOP_EFFICIENCY = 0.4
GATHER_EFFICIENCY = 0.5
#: The most parts a partition is asked for.
MAX_PARTS = 4096
#: HBM kept for the mini-batch's activations and workspace when features are placed on the
#: GPUs: the feature store takes the rest, never more than the usable bytes of the one rule
#: (:func:`gpucast.domain.gpu_memory.share_bytes`; the 10% keeps more on a GPU of 20 GiB or
#: more, the rule on a smaller one).
HBM_RESERVE_SHARE = 0.1
#: Network per GPU (GB/s) between nodes: one 400 Gbit/s NIC per GPU (DGX H100 / H200).
NETWORK_GBPS_PER_GPU = 50.0
#: GPUs per node when neither --gpus-per-node nor a catalog offer says (DGX-style nodes).
DEFAULT_GPUS_PER_NODE = 8
#: ``--split``: the most concurrent functions (AWS Lambda's default account concurrency is
#: 1,000, a quota raised on request; 100,000 leaves room for any raised one, not for 1e9) and
#: the most graph servers (Dorylus ran its graphs on at most a few dozen).
MAX_FUNCTIONS = 100_000
MAX_GRAPH_SERVERS = 10_000
#: Most CPU sampler workers, and the most a user's sampler rate (sampled edges/s a worker).
MAX_SAMPLER_WORKERS = 1024
MAX_SAMPLER_EDGES_PER_S = 1e12
FEATURE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1}
GAT_MODELS = ("gat", "rgat")
#: Software stacks a GAT / R-GAT mini-batch is priced for: ``pytorch`` is the model as priced
#: (eager kernels), the others are calibrated (``catalog/data/gnn_calibration.csv``).
GNN_SOFTWARE = ("pytorch", "tuned")
#: sampled input nodes a step of the MLPerf reference R-GAT (512-2,048 seeds per GPU, fan-outs
#: 15,10,5 on IGBH-full), the scale the ``tuned`` calibration was fitted at
_MLPERF_SAMPLED = "1.6-5.5 million"


def _check_batch(batch: int | None, nodes: int) -> None:
    """Seed nodes per mini-batch: at most the graph's nodes."""
    if batch is not None and batch > nodes:
        raise InvalidSpecError(
            "batch", f"must be <= the graph's {nodes:,} nodes (seed nodes per mini-batch)",
            got=batch, fix="lower --batch, or drop --batch and --fanouts for full-graph",
        )  # fmt: skip


def _degrees(request: PredictGnnRequest, graph: Any) -> tuple[Any, int, int]:
    """The degree distribution (an edge list's own, --degrees, or None: the mean degree) and
    the node and edge counts (from the edge list, the flags or the histogram)."""
    if graph is not None:
        return graph.degree_distribution(), graph.nodes, len(graph.src)
    if request.degrees is None:
        assert request.nodes is not None and request.edges is not None
        return None, request.nodes, request.edges
    from gpucast.inputs.graph import degree_input

    dist = degree_input(str(request.degrees), nodes=request.nodes, edges=request.edges)
    nodes = request.nodes if request.nodes is not None else round(dist.nodes)
    edges = request.edges if request.edges is not None else round(dist.edges)
    return dist, nodes, edges


def _sampling_note(degrees: Any) -> str:
    """How the sampled edges and distinct nodes per hop were counted."""
    if degrees is None:
        return (
            "every node at the mean degree: fan-outs capped by it and uniform draws for the "
            "distinct nodes per hop (on a skewed graph both overestimate: give --degrees)"
        )
    return (
        "from the degree distribution: each node reached samples min(degree, fan-out), a draw "
        "lands on a node in proportion to its degree, hubs counted once (gnn_degrees)"
    )


def _achieved_rates(gpu: Any) -> tuple[float, float]:
    """TFLOP/s on the transforms and GB/s on the gathers: shares of the GPU's peaks."""
    return gpu.peak_tflops("bf16") * FLOP_EFFICIENCY, gpu.memory_bandwidth_gbps * GATHER_EFFICIENCY


def _sampling_validated(gpu: Any) -> str:
    """The sampled counts against a real sampler (GPU-independent)."""
    from gpucast.catalog.validation import validation_for

    return validation_for("gnn-sampling", [gpu.name], "bf16").text()


def _stray_first(fix: str, stray: list[str]) -> str:
    """A memory refusal's fix, led by the edge list's stray-id warning where it has one: the
    node count a stray id inflated may be all that is wrong (the warning alone is lost when
    the request is refused)."""
    return f"{stray[0]}; else {fix}" if stray else fix


def _launch_note(kernels: float, kernel_overhead_s: float) -> str:
    """The launch floor every GNN step carries (predict.gnn.launch_floor_s)."""
    return (
        f"{kernels:,.0f} kernel launches a training step at {kernel_overhead_s * 1e6:.0f} us "
        f"each (the roofline's per-kernel prior, predict.roofline.KERNEL_OVERHEAD_S): the GPU "
        f"takes at least {kernels * kernel_overhead_s * 1e3:.3g} ms, the slower of that and "
        "its kernels' work"
    )


def _gat_compute_note(gpu: Any) -> str:
    """The rates every GAT step rests on."""
    return (
        f"matmuls at the slower of {FLOP_EFFICIENCY:.0%} of {gpu.peak_text('bf16')} and "
        f"{GATHER_EFFICIENCY:.0%} of HBM; activations in 16 bits; x3 for forward + backward "
        "(x2 for the first layer: no gradient for the input features)"
    )


#: How far the sampled nodes may overstate a batch: at the mean degree uniform draws came out
#: up to 150% above a real sampler's distinct nodes (README, "Degree distributions"); from a
#: degree law or histogram within 9% (the same table's worst rows).
BATCH_OVERESTIMATE = {"mean": 2.5, "degrees": 1.1}


def _check_batch_memory(
    need_bytes: float, gpu: Any, *, batch: int, nodes: float, at_mean: bool
) -> str:
    """A mini-batch's HBM against one GPU's usable memory: an error (exit 2) where even the
    sampled nodes' worst overstatement (:data:`BATCH_OVERESTIMATE`) leaves it too large; a
    warning where it exceeds HBM as estimated but might fit; empty where it fits."""
    from gpucast.domain.gpu_memory import usable_bytes, usable_text
    from gpucast.domain.units import GIB

    held = usable_bytes(gpu.memory_gib)
    if need_bytes <= held:
        return ""
    what = (
        f"a mini-batch of {batch:,} seeds needs {need_bytes / GIB:,.0f} GiB (its {nodes:,.0f} "
        "sampled nodes' features, every layer's activations and gradients, the sampled "
        f"edges), more than one {gpu.name}'s {usable_text(gpu.memory_gib)}"
    )
    fix = "use a smaller --batch, --fanouts or --hidden, or a GPU with more memory"
    over = BATCH_OVERESTIMATE["mean" if at_mean else "degrees"]
    if need_bytes > over * held:
        raise InvalidSpecError("batch", what, fix=fix)
    estimate = (
        "the sampled nodes at the mean degree are an upper estimate (give --degrees)"
        if at_mean
        else "the sampled nodes follow the degrees given"
    )
    return f"{what}: it may not fit ({estimate}); the step is priced as if it did; {fix}"
