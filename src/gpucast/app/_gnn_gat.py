"""``predict gnn --model gat|rgat``: the graph (``--nodes``/``--edges``, a catalog
``--graph`` or ``--graph-stats``), a mini-batch of :mod:`gpucast.predict.gat` on each of
``--gpus`` GPUs with its features gathered from where they live (``--feature-location``), or
one full-graph GAT step refused when it does not fit HBM, and the notes on relation sampling,
attention and the ``tuned`` calibration. Used by :mod:`gpucast.app._gnn_step`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpucast.app._gnn_results import PredictGnnResult
from gpucast.app._gnn_shared import (
    _MLPERF_SAMPLED,
    DEFAULT_GPUS_PER_NODE,
    FEATURE_BYTES,
    GATHER_EFFICIENCY,
    HBM_RESERVE_SHARE,
    NETWORK_GBPS_PER_GPU,
    _achieved_rates,
    _check_batch_memory,
    _degrees,
    _gat_compute_note,
    _launch_note,
    _sampling_note,
    _sampling_validated,
    _stray_first,
)
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.units import count_of, format_sig

if TYPE_CHECKING:
    from gpucast.app.gnn import PredictGnnRequest


def _gat_graph(request: PredictGnnRequest) -> tuple[Any, Any, list[str], list[str]]:
    """The graph of a gat/rgat request, its degree distribution (gat: the edge list's or
    --degrees; None: the mean degree), notes on where it came from and warnings."""
    from gpucast.predict import gat

    if request.model == "gat":
        el = None
        if request.edge_list is not None:
            from gpucast.inputs.graph import read_edge_list

            el = read_edge_list(
                request.edge_list, nodes=request.nodes, allow_self_loops=request.allow_self_loops
            )
        degrees, nodes, edges = _degrees(request, el)
        graph = gat.HeteroGraph.homogeneous(
            nodes=nodes, edges=edges, feature_dim=request.feature_dim
        )
        return (
            graph,
            degrees,
            ([] if el is None else el.notes()),
            ([] if el is None else el.warnings()),
        )
    if request.graph_stats is not None:
        from gpucast.inputs.graph import read_graph_stats

        graph, unread = read_graph_stats(request.graph_stats)
        notes = [f"graph statistics from {request.graph_stats}"]
        warnings = [unread] if unread else []
    else:
        from gpucast.catalog.gnn_graphs import graph_stats

        assert request.graph is not None
        graph = graph_stats(request.graph)
        notes = [f"graph {graph.name} from catalog/data/gnn_graphs.csv"]
        warnings = []
    if request.reverse_relations:
        graph = graph.with_reverse()
        notes.append(f"{len(graph.relations)} relations sampled (reverse directions added)")
    return graph, None, notes, warnings


def _predict_gat(request: PredictGnnRequest) -> PredictGnnResult:
    """One data-parallel GAT / R-GAT training step (module docstring)."""
    from gpucast.catalog import load_catalog
    from gpucast.catalog.gnn_graphs import load_gnn_calibrations
    from gpucast.catalog.validation import validation_for
    from gpucast.domain.catalog import PCIE_X16_GBIT_PER_S
    from gpucast.domain.gpu_memory import share_bytes
    from gpucast.plan.inputs import intra_node_gbps
    from gpucast.predict import gat
    from gpucast.predict.comm import DEFAULT_HOP_LATENCY_S, hierarchical_collective_s
    from gpucast.predict.roofline import KERNEL_OVERHEAD_S

    gpu = load_catalog().gpu(request.gpu)
    graph, degrees, notes, warnings = _gat_graph(request)
    spec = gat.GatSpec(
        heads=request.heads,
        hidden=request.hidden,
        classes=request.classes,
        layers=request.layers,
        fanouts=request.fanouts,
        batch=request.batch,
        target=request.target,
    )
    if request.batch is None:
        stray = list(warnings)  # the edge list's (--degrees is refused with one)
        if request.degrees is not None:
            warnings.append(
                "--degrees changes nothing here: the full-graph step needs only the node and "
                "edge counts"
            )
        return _full_graph_gat(request, graph, spec, gpu, notes, warnings, stray)
    feature_bytes = FEATURE_BYTES[request.feature_precision]
    cost = gat.gat_cost(graph, spec, feature_bytes_per_value=feature_bytes, degrees=degrees)
    memory = _check_batch_memory(
        cost.batch_bytes, gpu, batch=request.batch, nodes=cost.input_nodes,
        at_mean=degrees is None and not gat.has_degree_laws(graph),
    )  # fmt: skip
    warnings += [memory] if memory else []
    total_features = graph.feature_bytes(feature_bytes)
    gpus_per_node = request.gpus_per_node or DEFAULT_GPUS_PER_NODE
    per_node = min(request.gpus, gpus_per_node)
    structure = graph.structure_bytes() / per_node  # the graph replicated per node
    free = share_bytes(gpu.memory_gib, 1.0 - HBM_RESERVE_SHARE) - structure
    placement = gat.place_features(
        total_features, gpus=request.gpus, gpus_per_node=gpus_per_node,
        free_bytes_per_gpu=free, location=request.feature_location,
        sharding=request.feature_sharding,
    )  # fmt: skip
    shard = per_node if request.feature_sharding == "node" else request.gpus
    if request.feature_location == "gpu" and total_features > max(free, 0.0) * shard:
        # refused as a full-graph step that does not fit is (QA 35 #27: priced as if they fit)
        raise InvalidSpecError(
            "feature-location",
            f"gpu: the {format_sig(total_features / 1e9)} GB of features do not fit the "
            f"{format_sig(max(free, 0.0) * shard / 1e9)} GB of HBM left on the "
            f"{count_of(shard, 'GPU')} sharing them",
            fix="--feature-location auto (in HBM as far as they fit, the rest in host memory) "
            "or host, more --gpus, or a smaller --feature-precision",
        )
    tflops, hbm = _achieved_rates(gpu)
    peer = intra_node_gbps(gpu) / 8.0 * GATHER_EFFICIENCY
    pcie = PCIE_X16_GBIT_PER_S.get(gpu.pcie_generation, 128.0) / 8.0 * GATHER_EFFICIENCY
    network = NETWORK_GBPS_PER_GPU * GATHER_EFFICIENCY
    params = spec.parameters(graph)
    allreduce = float(
        hierarchical_collective_s(
            4.0 * params,
            request.gpus,
            gpus_per_node,
            intra_node_gbps(gpu),
            NETWORK_GBPS_PER_GPU * 8.0 * per_node,
            DEFAULT_HOP_LATENCY_S,
        )
    )
    step = gat.gat_step_time(
        cost, placement, tflops=tflops, hbm_gbps=hbm, peer_gbps=peer, network_gbps=network,
        host_gbps=pcie, allreduce_s=allreduce, overlap=request.overlap_fetch,
        kernel_overhead_s=KERNEL_OVERHEAD_S,
    )  # fmt: skip
    evaluation = gat.gat_step_time(
        cost.forward_only(), placement, tflops=tflops, hbm_gbps=hbm, peer_gbps=peer,
        network_gbps=network, host_gbps=pcie, overlap=request.overlap_fetch,
        kernel_overhead_s=KERNEL_OVERHEAD_S,
    )  # fmt: skip
    dense = cost.dense_s(tflops=tflops, kernel_overhead_s=KERNEL_OVERHEAD_S)
    dense += step.feature_fetch_s + allreduce
    validation = validation_for(f"gnn-{request.model}", [gpu.name], "bf16", request.gpus)
    phases = {
        "compute_s": step.compute_s,
        "launch_s": step.launch_s,
        "feature_fetch_s": step.feature_fetch_s,
        "allreduce_s": step.allreduce_s,
    }
    step_s, eval_s, fetch_s = step.total_s, evaluation.total_s, step.feature_fetch_s
    calibration = load_gnn_calibrations().get(request.software)
    if calibration is None:
        validated = (
            f"the eager model as priced, not validated against eager runs (--software tuned: "
            f"MLPerf's runs take {_tuned_words()}; {validation.text()})"
        )
    else:
        validated = validation.text()
        scale, per_step_s = calibration.scale, calibration.per_step_s

        def tuned(seconds: float) -> float:
            return scale * seconds + per_step_s

        if per_step_s > scale * step_s:
            warnings.append(
                f"--software {request.software}: its {per_step_s * 1e3:.3g} ms a step of host "
                f"time, fitted at MLPerf's scale (IGBH-full, {_MLPERF_SAMPLED} sampled nodes a "
                f"step), is most of this {scale * step_s * 1e3:.3g} ms step: a batch this small "
                "is outside what the calibration saw"
            )
        step_s, eval_s, dense = tuned(step_s), tuned(eval_s), tuned(dense)
        fetch_s *= scale
        phases = {k: scale * v for k, v in phases.items()}
        phases["host_s"] = per_step_s
    nodes = int(graph.counts().sum())
    edges = sum(r.edges for r in graph.relations)
    return PredictGnnResult(
        model=request.model,
        gpu=gpu.name,
        nodes=nodes,
        edges=edges,
        step_time_s=step_s,
        dense_step_time_s=dense,
        feature_fetch_s=fetch_s,
        nodes_per_hop=cost.nodes_per_hop,
        halo_nodes=None,
        halo_bytes_per_epoch=None,
        notes=tuple(notes),
        phases_s=phases,
        eval_step_time_s=eval_s,
        validated=validated,
        warnings=tuple(warnings),
        data_parallel_gpus=request.gpus,
        assumptions={
            "compute": _gat_compute_note(gpu),
            "launches": _launch_note(cost.kernels, KERNEL_OVERHEAD_S),
            "attention": f"{_attention_note(request)}; sampling "
            f"{gat.SAMPLE_BYTES_PER_EDGE:.0f} HBM bytes per sampled edge (on the GPU)",
            "features": f"{format_sig(total_features / 1e9)} GB of {request.feature_precision} "
            f"features ({request.feature_location}, {request.feature_sharding} sharding): a "
            "sampled row is in "
            f"{placement.describe()}; random rows at {GATHER_EFFICIENCY:.0%} of each link "
            f"(NVLink {intra_node_gbps(gpu) / 8:.0f} GB/s, a {NETWORK_GBPS_PER_GPU * 8:.0f} "
            f"Gbit/s NIC per GPU, PCIe {pcie / GATHER_EFFICIENCY:.0f} GB/s); "
            f"{HBM_RESERVE_SHARE:.0%} of HBM (at least what the one usable-memory rule keeps) "
            "and the graph structure kept out of the feature store",
            "sampling": _sampling_note(degrees)
            if request.model == "gat"
            else _relation_sampling_note(graph, request),
            "sampling validated": _sampling_validated(gpu),
            "gradients": f"{params / 1e6:.1f}M parameters all-reduced in fp32 each step "
            "(NVLink in a node, the NICs across)",
            "phases": "feature gathers overlapped with compute (the slower counts), the "
            "all-reduce added"
            if request.overlap_fetch
            else "added, no overlap",
        }
        | (
            {
                "software": f"{request.software} (MLPerf-class code): {calibration.describe()}; "
                f"the phases are the eager ones x{calibration.scale:.3g}"
            }
            if calibration is not None
            else {
                "software": "pytorch: eager kernels as priced (--software tuned: MLPerf-class "
                f"code, {_tuned_words()})"
            }
        )
        | ({} if degrees is None else {"degrees": degrees.name})
        | (
            {"degrees": "; ".join(r.describe_degrees() for r in graph.relations)}
            if gat.has_degree_laws(graph)
            else {}
        ),
    )


def _tuned_words() -> str:
    from gpucast.catalog.gnn_graphs import load_gnn_calibrations

    tuned = load_gnn_calibrations()["tuned"]
    return f"x{tuned.scale:.3g} of it + {tuned.per_step_s * 1e3:.3g} ms a step"


def _relation_sampling_note(graph: Any, request: PredictGnnRequest) -> str:
    """How an R-GAT's sampled edges and distinct nodes per hop and type were counted."""
    from gpucast.predict import gat

    if not gat.has_degree_laws(graph):
        where = (
            f"the catalog's {graph.name} publishes no per-relation degree laws"
            if request.graph_stats is None
            else "the file gives no in_degree / out_degree laws"
        )
        return (
            f"every node at its relation's mean degree ({where}): fan-outs capped by each "
            "relation's mean in-degree and uniform draws for the distinct nodes per hop and "
            "type (hubs repeat more: an upper estimate)"
        )
    return (
        "per relation from its degree laws (assumption degrees): each reached destination "
        "node samples min(in-degree, fan-out), a draw lands on a source node in proportion to "
        "its out-degree along the relation (an empty out_degree: the in_degree law on the same "
        "nodes within one type, uniform across two), a node reached along several relations "
        "counted once, the relations independent (gnn_degrees.sampled_relations)"
    )


def _attention_note(request: PredictGnnRequest) -> str:
    from gpucast.predict import gat

    return (
        f"per edge: the message ({request.hidden} values) and {gat.SOFTMAX_PASSES} passes over "
        f"{request.heads} logits, HBM-bound"
    )


def _full_graph_gat(
    request: PredictGnnRequest, graph: Any, spec: Any, gpu: Any, notes: list[str],
    warnings: list[str], stray: list[str],
) -> PredictGnnResult:  # fmt: skip
    """One full-graph GAT training step on one GPU, refused when it does not fit its HBM
    (``stray``: the edge list's stray-id warning, :func:`_stray_first`)."""
    from gpucast.catalog.validation import validation_for
    from gpucast.domain.gpu_memory import usable_bytes, usable_text
    from gpucast.domain.units import GIB
    from gpucast.predict import gat
    from gpucast.predict.gnn import launch_floor_s
    from gpucast.predict.roofline import KERNEL_OVERHEAD_S

    need = gat.full_graph_gat_bytes(
        graph, spec, feature_bytes_per_value=FEATURE_BYTES[request.feature_precision]
    )
    if need > usable_bytes(gpu.memory_gib):
        raise InvalidSpecError(
            "nodes",
            f"full-graph gat training needs {need / GIB:,.0f} GiB (the graph, features, every "
            "layer's activations and attention coefficients with their gradients), more than "
            f"one {gpu.name}'s {usable_text(gpu.memory_gib)}",
            fix=_stray_first(
                "train on mini-batches (e.g. --batch 1024 --fanouts 10,5) or use a GPU with "
                "more memory",
                stray,
            ),
        )
    cost = gat.full_graph_gat_cost(graph, spec)
    tflops, hbm = _achieved_rates(gpu)
    work = cost.compute_s(tflops=tflops, hbm_gbps=hbm)
    step = launch_floor_s(work, cost.kernels, KERNEL_OVERHEAD_S)
    fwd = cost.forward_only()
    nodes, edges = int(graph.counts().sum()), sum(r.edges for r in graph.relations)
    return PredictGnnResult(
        model=request.model,
        gpu=gpu.name,
        nodes=nodes,
        edges=edges,
        step_time_s=step,
        dense_step_time_s=cost.dense_s(tflops=tflops, kernel_overhead_s=KERNEL_OVERHEAD_S),
        feature_fetch_s=0.0,
        nodes_per_hop=(),
        halo_nodes=None,
        halo_bytes_per_epoch=None,
        notes=tuple(notes),
        phases_s={"compute_s": work, "launch_s": cost.kernels * KERNEL_OVERHEAD_S},
        eval_step_time_s=launch_floor_s(
            fwd.compute_s(tflops=tflops, hbm_gbps=hbm), fwd.kernels, KERNEL_OVERHEAD_S
        ),
        validated=validation_for("gnn-gat", [gpu.name], "bf16", 1).text(),
        warnings=tuple(warnings),
        assumptions={
            "compute": _gat_compute_note(gpu),
            "launches": _launch_note(cost.kernels, KERNEL_OVERHEAD_S),
            "attention": _attention_note(request),
            "full graph": f"every layer on all {nodes:,} nodes and {edges:,} edges, no "
            f"sampling; the graph, its {request.feature_precision} features and every layer's "
            f"activations and attention coefficients with their gradients in HBM "
            f"({need / GIB:,.3g} of {usable_text(gpu.memory_gib)})",
        },
    )
