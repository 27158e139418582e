"""The work of ``predict gnn`` (:func:`predicted_gnn`): GAT / R-GAT handed to
:mod:`gpucast.app._gnn_gat`; a GCN / GraphSAGE step priced sparse and dense
(:mod:`gpucast.predict.gnn`) from the graph's statistics or edge list (METIS halos with
``--parts``), with CPU neighbour sampling for mini-batches, a partitioned epoch over
``--gpus N`` and ``--split`` (:mod:`gpucast.app._gnn_parts`). Called by
:mod:`gpucast.app.gnn`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gpucast.app._gnn_gat import _predict_gat
from gpucast.app._gnn_options import ignored_options
from gpucast.app._gnn_parts import (
    _check_part_memory,
    _part_loads,
    _partition_offer,
    _partitioned_epoch,
    _split,
)
from gpucast.app._gnn_results import PredictGnnResult
from gpucast.app._gnn_shared import (
    DEFAULT_GPUS_PER_NODE,
    FLOP_EFFICIENCY,
    GAT_MODELS,
    GATHER_EFFICIENCY,
    _achieved_rates,
    _check_batch,
    _check_batch_memory,
    _degrees,
    _launch_note,
    _sampling_note,
    _sampling_validated,
    _stray_first,
)
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.units import format_sig

if TYPE_CHECKING:
    from gpucast.app.gnn import PredictGnnRequest


def predicted_gnn(request: PredictGnnRequest) -> PredictGnnResult:
    """:func:`gpucast.app.gnn.predict_gnn` on a resolved request."""
    from gpucast.catalog import load_catalog
    from gpucast.domain.catalog import PCIE_X16_GBIT_PER_S
    from gpucast.domain.gpu_memory import usable_bytes, usable_text
    from gpucast.domain.units import GIB
    from gpucast.predict import gnn
    from gpucast.predict.roofline import KERNEL_OVERHEAD_S

    ignored = ignored_options(request)  # options this model and mode do not read: warnings
    if request.model in GAT_MODELS:
        result = _predict_gat(request)
        return replace(result, warnings=(*ignored, *result.warnings))
    if request.model not in gnn.GNN_MODELS:
        raise InvalidSpecError(
            "model", "must be gcn, sage, gat or rgat", got=request.model, fix="e.g. --model sage"
        )
    gpu = load_catalog().gpu(request.gpu)
    spec = gnn.GnnSpec(
        model=request.model,
        feature_dim=request.feature_dim,
        hidden=request.hidden,
        classes=request.classes,
        layers=request.layers,
        fanouts=request.fanouts,
        batch=request.batch,
    )
    notes: list[str] = []
    warnings: list[str] = ignored
    halo = halo_bytes = None
    k = request.partition_gpus  # GPUs of a partitioned full-graph epoch (None: one, no parts)
    graph = None
    partition = None
    if request.edge_list is not None:
        from gpucast.inputs.graph import read_edge_list

        graph = read_edge_list(
            request.edge_list, nodes=request.nodes, allow_self_loops=request.allow_self_loops
        )
        nodes, edges = graph.nodes, len(graph.src)
        notes += graph.notes()
        warnings += graph.warnings()
        parts = request.parts if request.parts is not None else k
        if parts is not None:
            if parts > nodes:
                flag = "parts" if request.parts is not None else "gpus"
                raise InvalidSpecError(
                    flag, f"must be <= the {nodes:,} nodes (one part per GPU)", got=parts,
                    fix=f"use --{flag} {nodes:,} or fewer (a part needs a node)",
                )  # fmt: skip
            partition = gnn.metis_partition(nodes, graph.src, graph.dst, parts)
            counted = gnn.halo_nodes(graph.src, graph.dst, partition)
            halo = tuple(int(v) for v in counted)
            halo_bytes = gnn.halo_bytes_per_epoch(counted, spec)
    degrees, nodes, edges = _degrees(request, graph)
    _check_batch(request.batch, nodes)  # the edge list's or histogram's nodes, when not given
    if request.batch is None and (k is None or graph is not None):  # no sampling, no random parts
        if request.degrees is not None:
            warnings.append(
                "--degrees changes nothing here: a single-GPU full-graph step needs only the "
                "node and edge counts (it shapes mini-batch sampling and random-partition halos)"
            )
        degrees = None
    hbm_bytes = usable_bytes(gpu.memory_gib)  # the one rule: what a job can fill
    graph_bytes = None  # full graph: its edges, features and activations, all in HBM
    batch_bytes = None  # a mini-batch's sampled edges, features and activations in HBM
    if request.batch is not None:
        cost = gnn.sampled_cost(spec, nodes=nodes, edges=edges, degrees=degrees)
        batch_bytes = gnn.sampled_bytes(spec, cost)
        memory = _check_batch_memory(
            batch_bytes, gpu, batch=request.batch, nodes=cost.nodes_per_hop[-1],
            at_mean=degrees is None,
        )  # fmt: skip
        warnings += [memory] if memory else []
    else:
        cost = gnn.full_graph_cost(spec, nodes=nodes, edges=edges)
        graph_bytes = gnn.full_graph_bytes(spec, nodes=nodes, edges=edges)
        spread = k is not None and k > 1  # the parts are checked against HBM instead
        if graph_bytes > hbm_bytes and not request.split and not spread:
            raise InvalidSpecError(
                "nodes",
                f"full-graph training needs {graph_bytes / GIB:,.0f} GiB (edges, features, "
                "activations and gradients), more than one "
                f"{gpu.name}'s {usable_text(gpu.memory_gib)}",
                fix=_stray_first(
                    "train on mini-batches (e.g. --batch 1024 --fanouts 15,10), partition it "
                    "over --gpus N, price the graph operations on CPU servers (--split) or use "
                    "a GPU with more memory",
                    [] if graph is None else graph.warnings(),
                ),
            )
        if graph_bytes > hbm_bytes:  # --split / --gpus: the other options are the point
            notes.insert(
                0,
                f"does NOT fit: the full graph needs {graph_bytes / GIB:,.0f} GiB, one "
                f"{gpu.name} has {usable_text(gpu.memory_gib)}; the 1-GPU step"
                + (" and the GPU-only epoch are" if request.split else " is")
                + " priced as if it did",
            )
    tflops, hbm = _achieved_rates(gpu)
    link = PCIE_X16_GBIT_PER_S.get(gpu.pcie_generation, 128.0) / 8.0
    # random feature rows over PCIe at the gathers' one rate, as GAT/R-GAT's (MLPerf-fitted)
    host = link * GATHER_EFFICIENCY if request.batch is not None else None
    step = cost.step_time_s(
        tflops=tflops, memory_gbps=hbm, host_link_gbps=host, kernel_overhead_s=KERNEL_OVERHEAD_S
    )
    assumptions = {
        "compute": f"{FLOP_EFFICIENCY:.0%} of {gpu.peak_text('bf16')} on the transforms",
        "gathers": f"{GATHER_EFFICIENCY:.0%} of HBM bandwidth; x3 for forward + backward",
        "launches": _launch_note(cost.kernels, KERNEL_OVERHEAD_S),
        "features": f"mini-batch features in host memory, gathered over PCIe at "
        f"{GATHER_EFFICIENCY:.0%} of its {link:g} GB/s (random rows, as GAT and R-GAT fetch them);"
        f" a batch's features, activations and edges take {format_sig(batch_bytes / GIB)} of "
        f"{usable_text(gpu.memory_gib)}"
        if batch_bytes is not None
        else f"full graph: edges, features and activations in HBM ({(graph_bytes or 0) / GIB:,.3g} "
        f"of {usable_text(gpu.memory_gib)})",
    }
    validated = (
        "not validated against GPU measurements (benchmarks/gnn_cpu.py checks the pricing on "
        "the CPU)"
    )
    sampling = gpu_step = None
    bound = ""
    if request.batch is not None:
        sampling, sampling_note = _cpu_sampling(request, cost.edges)
        gpu_step = step
        step = gnn.bounded_step_s(gpu_step, sampling, prefetch=request.prefetch)
        bound = "sampling" if sampling > gpu_step else "gpu"
        assumptions["sampling"] = _sampling_note(degrees) + "; " + sampling_note
        assumptions["sampling validated"] = _sampling_validated(gpu)
    if degrees is not None:
        assumptions["degrees"] = degrees.name
    partitioned = None
    method = ""
    price = usd = None
    if k is not None:
        offer = _partition_offer(gpu, k)
        per_node = request.gpus_per_node or (offer.gpus if offer else DEFAULT_GPUS_PER_NODE)
        loads, method, partition_notes = _part_loads(
            k, graph, partition, nodes, edges, per_node, degrees
        )
        partitioned, price, hw_notes = _partitioned_epoch(
            request, spec, gpu, offer, per_node, loads, tflops, hbm
        )
        if partitioned.gpus > 1:
            _check_part_memory(spec, loads, gpu, [] if graph is None else graph.warnings())
        usd = None if price is None else partitioned.usd_per_epoch(price)
        assumptions |= partition_notes | hw_notes
        if partitioned.gpus > 1:  # QA 39: the epoch over N GPUs named no validation
            from gpucast.catalog.validation import validation_for

            assumptions["partition validated"] = validation_for(
                "gnn-partition", [gpu.name], "fp32", partitioned.gpus
            ).text()
    split: tuple[Any, ...] = ()
    if request.split:
        split, split_notes = _split(request, spec, cost, nodes, edges, gpu, tflops, hbm)
        assumptions |= split_notes
    return PredictGnnResult(
        model=request.model,
        gpu=gpu.name,
        nodes=nodes,
        edges=edges,
        step_time_s=step,
        dense_step_time_s=cost.dense_step_time_s(
            tflops=tflops, kernel_overhead_s=KERNEL_OVERHEAD_S, host_link_gbps=host
        ),
        feature_fetch_s=cost.fetch_s(host),
        nodes_per_hop=cost.nodes_per_hop,
        halo_nodes=halo,
        halo_bytes_per_epoch=halo_bytes,
        notes=tuple(notes),
        assumptions=assumptions,
        validated=validated,
        split=split,
        warnings=tuple(warnings),
        gpu_step_time_s=gpu_step,
        sampling_s=sampling,
        bound=bound,
        partitioned=partitioned,
        partition_method=method,
        usd_per_gpu_hour=price,
        usd_per_epoch=usd,
    )


def _cpu_sampling(request: PredictGnnRequest, sampled_edges: float) -> tuple[float, str]:
    """Seconds of CPU neighbour sampling a mini-batch and what they rest on."""
    from gpucast.catalog.gnn_samplers import gnn_sampler
    from gpucast.predict import gnn

    if request.sampler_edges_per_s is not None:
        rate, source = request.sampler_edges_per_s, "--sampler-edges-per-s"
    else:
        sampler = gnn_sampler()
        rate, source = sampler.edges_per_s, f"PyG's CPU sampler, {sampler.source}"
    workers = request.sampler_workers
    seconds = gnn.cpu_sampling_s(sampled_edges, edges_per_s=rate, workers=workers)
    overlap = (
        "prefetched: the workers sample the next batches while the GPU trains, the step is "
        "the slower of the two"
        if request.prefetch
        else "not prefetched (--no-prefetch): the step waits for its batch, sampling added"
    )
    return seconds, (
        f"CPU sampling of {sampled_edges:,.0f} sampled edges a batch at {rate / 1e6:.3g} M "
        f"edges/s per worker ({source}) on {workers} workers in parallel (linear in workers: "
        f"enough free cores assumed); {overlap}"
    )
