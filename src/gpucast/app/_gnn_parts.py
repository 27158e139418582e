"""A gcn/sage graph spread over several machines: each GPU's part of a partitioned full-graph
epoch (counted from METIS or a random partition's expectation) and its memory check, the
nodes and price of the epoch (:mod:`gpucast.predict.gnn_partition`), and ``--split``: the
graph operations priced on CPU graph servers or serverless functions beside the GPU-only
epoch (:mod:`gpucast.predict.gnn_split`). Used by :mod:`gpucast.app._gnn_step`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from gpucast.app._gnn_shared import (
    FLOP_EFFICIENCY,
    GATHER_EFFICIENCY,
    NETWORK_GBPS_PER_GPU,
    _stray_first,
)
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.units import count_of

if TYPE_CHECKING:
    from gpucast.app.gnn import PredictGnnRequest


def _part_loads(
    k: int, graph: Any, partition: Any, nodes: int, edges: int, per_node: int, degrees: Any
) -> tuple[tuple[Any, ...], str, dict[str, str]]:
    """Each GPU's part: counted from the METIS partition, or a random partition's expectation."""
    from gpucast.predict import gnn_partition

    if graph is not None:
        loads = gnn_partition.part_loads(graph.src, graph.dst, partition, gpus_per_node=per_node)
        return loads, "metis", {
            "partition": f"METIS (pymetis) into {k} parts, one per GPU; each part's nodes, "
            "in-edges and halo counted from the partition; parts 0..g-1 on the first node"
        }  # fmt: skip
    loads = gnn_partition.random_part_loads(
        nodes=nodes, edges=edges, parts=k, gpus_per_node=per_node, degrees=degrees
    )
    halo = (
        f"every node at the mean out-degree {edges / nodes:.3g} (an upper estimate for skewed "
        "degrees: give --degrees)"
        if degrees is None
        else "the degree distribution (assumption degrees)"
    )
    return loads, "random", {
        "partition": f"a random (hash) partition into {k} parts is assumed (no --edge-list): "
        f"{nodes / k:,.0f} nodes and {edges / k:,.0f} edges a part, the expected halo from "
        f"{halo}; METIS cuts far fewer halo nodes -- give --edge-list for the real partition"
    }  # fmt: skip


def _partition_offer(gpu: Any, k: int) -> Any:
    """The catalog node a partitioned epoch is priced on: the cheapest per GPU among the
    offers with as many GPUs as the epoch needs (or the widest), None without an offer."""
    from gpucast.catalog import load_catalog

    offers = [o for o in load_catalog().find_offers(gpu=gpu.name) if o.gpus > 0]
    if not offers:
        return None
    need = min(k, max(o.gpus for o in offers))
    wide = [o for o in offers if o.gpus >= need]
    return min(wide, key=lambda o: (o.on_demand_usd_per_hour / o.gpus, -o.gpus))


def _partitioned_epoch(
    request: PredictGnnRequest,
    spec: Any,
    gpu: Any,
    offer: Any,
    per_node: int,
    loads: tuple[Any, ...],
    tflops: float,
    hbm: float,
) -> tuple[Any, float | None, dict[str, str]]:
    """The partitioned epoch on the links of the GPU and its offer; the price per GPU-hour."""
    from gpucast.plan.inputs import intra_node_gbps
    from gpucast.predict import gnn_partition
    from gpucast.predict.comm import DEFAULT_HOP_LATENCY_S, hierarchical_collective_s
    from gpucast.predict.roofline import KERNEL_OVERHEAD_S

    k = len(loads)
    intra_gbit = intra_node_gbps(gpu)
    if offer is not None:
        nic_gbit = offer.network_gbps / offer.gpus
        where = (
            f"{offer.provider} {offer.instance_type} ({offer.region}, "
            f"{count_of(offer.gpus, 'GPU')}, {offer.network_gbps:g} Gbit/s)"
        )
    else:
        nic_gbit = NETWORK_GBPS_PER_GPU * 8.0
        where = f"no catalog offer with {gpu.name}: a {nic_gbit:g} Gbit/s NIC per GPU assumed"
    links = gnn_partition.PartitionLinks(
        gpus_per_node=per_node,
        intra_node_gbps=intra_gbit / 8.0 * GATHER_EFFICIENCY,
        network_gbps=nic_gbit / 8.0 * GATHER_EFFICIENCY,
    )
    params = gnn_partition.gnn_parameters(spec)
    allreduce = float(
        hierarchical_collective_s(
            4.0 * params, k, per_node, intra_gbit, nic_gbit * min(k, per_node),
            DEFAULT_HOP_LATENCY_S,
        )
    )  # fmt: skip
    epoch = gnn_partition.partitioned_epoch(
        spec, loads, tflops=tflops, memory_gbps=hbm, links=links, allreduce_s=allreduce,
        kernel_overhead_s=KERNEL_OVERHEAD_S,
    )  # fmt: skip
    if request.price is not None:
        price: float | None = request.price
        priced = f"${request.price:g} per GPU-hour (--price)"
    elif offer is not None:
        price = offer.on_demand_usd_per_hour / offer.gpus
        priced = f"${price:.2f} per GPU-hour on demand, {where} (the catalog's cheapest per GPU)"
    else:
        price, priced = None, f"no price: no catalog offer with {gpu.name}; give --price"
    notes = {
        "exchange": f"every layer, each halo node's input features forward and their gradients "
        "backward but for the first layer's (the input features take no gradient; "
        f"{epoch.bytes_per_halo_node:,.0f} bytes a halo node an epoch) at "
        f"{GATHER_EFFICIENCY:.0%} of the link: {intra_gbit / 8:g} GB/s per GPU inside a node "
        f"of {count_of(per_node, 'GPU')}, {nic_gbit:g} Gbit/s per GPU across nodes ({where}); "
        "the two links run at once, each full duplex",
        "epoch": "the slowest part's compute (at least its kernel launches: assumption "
        "launches) + its halo exchange (NOT overlapped: added) + the "
        f"fp32 all-reduce of the {params:,} weights; every GPU held the whole epoch",
        "price": priced,
    }
    return epoch, price, notes


def _check_part_memory(spec: Any, loads: tuple[Any, ...], gpu: Any, stray: list[str]) -> None:
    """Each part's nodes, halo and in-edges must fit one GPU's usable HBM (the one rule);
    ``stray``: the edge list's stray-id warning, if any (:func:`_stray_first`)."""
    from gpucast.domain.gpu_memory import usable_bytes, usable_text
    from gpucast.domain.units import GIB
    from gpucast.predict import gnn_partition

    need = [gnn_partition.part_memory_bytes(spec, load) for load in loads]
    worst = max(range(len(need)), key=need.__getitem__)
    if need[worst] > usable_bytes(gpu.memory_gib):
        raise InvalidSpecError(
            "gpus",
            f"part {worst} of {len(loads)} needs {need[worst] / GIB:,.0f} GiB (its nodes, halo "
            f"and edges with features, activations and gradients), more than one {gpu.name}'s "
            f"{usable_text(gpu.memory_gib)}",
            fix=_stray_first(
                "use more --gpus, mini-batches (--batch, --fanouts) or a GPU with more memory",
                stray,
            ),
        )


def _split(
    request: PredictGnnRequest,
    spec: Any,
    cost: Any,
    nodes: int,
    edges: int,
    gpu: Any,
    tflops: float,
    hbm: float,
) -> tuple[tuple[Any, ...], dict[str, str]]:
    """The Dorylus-style epochs (:mod:`gpucast.predict.gnn_split`) with catalog prices."""
    from gpucast.catalog import load_catalog
    from gpucast.catalog.function_compute import function_compute
    from gpucast.predict import gnn_split
    from gpucast.predict.roofline import KERNEL_OVERHEAD_S
    from gpucast.predict.serving import CPU_GFLOPS_PER_VCPU, cpu_device

    catalog = load_catalog()
    gpu_offers = [o for o in catalog.find_offers(gpu=gpu.name) if o.gpus > 0]
    if not gpu_offers:
        raise InvalidSpecError(
            "split", f"needs a price: no offer with {gpu.name} in the catalog",
            fix="pick a GPU with offers (gpucast catalog offers)",
        )  # fmt: skip
    g = min(gpu_offers, key=lambda o: (o.on_demand_usd_per_hour / o.gpus, -o.gpus))
    servers = [
        o for o in catalog.find_offers(cpu_only=True) if o.instance_type == request.graph_server
    ]
    if not servers:
        known = sorted({o.instance_type for o in catalog.find_offers(cpu_only=True)})
        raise InvalidSpecError(
            "graph-server", f"no CPU offer {request.graph_server!r}",
            fix=f"use one of {', '.join(known[:8])}, ...",
        )  # fmt: skip
    server = min(servers, key=lambda o: o.on_demand_usd_per_hour)
    from gpucast.predict.gnn import full_graph_bytes

    # the graph, its features and every layer's activations and gradients in DRAM
    graph_bytes = full_graph_bytes(spec, nodes=nodes, edges=edges)
    count = request.graph_servers or max(
        1, math.ceil(graph_bytes / (0.8 * server.memory_gib * 2**30))
    )
    if count > nodes:
        raise InvalidSpecError(
            "graph-servers", f"{count:,} servers for a graph of {nodes:,} nodes leave some "
            "without a vertex", got=count,
            fix=f"use --graph-servers {nodes:,} or fewer, or leave it out",
        )  # fmt: skip
    fn = function_compute(request.function)
    device = cpu_device(server)
    hw = gnn_split.SplitHardware(
        gpu_tflops=tflops,
        gpu_memory_gbps=hbm,
        gpu_network_gbps=g.network_gbps / g.gpus,
        gpu_usd_per_hour=g.on_demand_usd_per_hour / g.gpus,
        graph_servers=count,
        server_memory_gbps=device.memory_bandwidth_gbps * GATHER_EFFICIENCY,
        server_network_gbps=server.network_gbps,
        server_usd_per_hour=server.on_demand_usd_per_hour,
        function=fn,
        functions=request.functions,
        function_gb=request.function_memory_gb,
        function_gflops_per_vcpu=CPU_GFLOPS_PER_VCPU * FLOP_EFFICIENCY,
        kernel_overhead_s=KERNEL_OVERHEAD_S,
    )
    options = gnn_split.split_epoch(cost, spec, nodes=nodes, hw=hw)
    notes = {
        "split": f"Dorylus-style epochs pipelined over {hw.intervals} vertex intervals (slowest "
        "stage + fill); the GPU-only epoch is the full-graph step above; the CPU and serverless "
        "parts are a model with no measurement behind it",
        "split gpu": f"{g.provider} {g.instance_type} ({g.region}): "
        f"${hw.gpu_usd_per_hour:.2f} per GPU-hour, {hw.gpu_network_gbps:g} Gbit/s per GPU",
        "graph servers": f"{count} x {server.provider} {server.instance_type} ({server.region}, "
        f"${server.on_demand_usd_per_hour:g}/h, {server.memory_gib:g} GiB, "
        f"{server.network_gbps:g} Gbit/s): gathers at {GATHER_EFFICIENCY:.0%} of "
        f"{device.memory_bandwidth_gbps:g} GB/s (the CPU roofline prior)"
        + (
            ""
            if request.graph_servers
            else f"; enough for {graph_bytes / 2**30:,.1f} GiB of "
            "graph, features and activations at 80% of memory"
        ),
        "functions": f"{request.functions} x {fn.name} of {request.function_memory_gb:g} GB "
        f"({request.function_memory_gb / fn.gb_per_vcpu:.1f} vCPUs at "
        f"{hw.function_gflops_per_vcpu:g} GFLOP/s each, {FLOP_EFFICIENCY:.0%} of the "
        f"{CPU_GFLOPS_PER_VCPU:g} GFLOP/s prior), billed per GB-second busy and per request "
        f"({fn.source})",
    }
    from gpucast.catalog.validation import validation_for

    notes["split validated"] = validation_for("gnn-split", [gpu.name], "fp32").text()
    return options, notes
