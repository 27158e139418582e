"""The figures the parts of :mod:`gpucast.predict.parallel` share (bytes per parameter,
activation and logit bytes, the host's forward share, kernel counts), the cluster a layout
runs on (:func:`cluster_shape`; a group's link, :func:`group_link_gbps`, at NCCL's PCIe
figures with :func:`with_pcie_figures`) and a layout's validation (:func:`validate_layout`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from gpucast.domain.catalog import PCIE_X16_GBIT_PER_S, GpuSpec
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.llm import TransformerSpec
from gpucast.domain.parallel import SWITCHED, ClusterShape, NodeLinks, ParallelLayout

FloatArray = npt.NDArray[np.float64]


IntArray = npt.NDArray[np.int64]


#: a float or an array of them; a flag or an array of them (what the floor prices at once)
_Num = float | FloatArray


_Flag = bool | npt.NDArray[np.bool_]


#: Bytes per trained parameter: 16-bit gradients, fp32 master weights + Adam m and v.
GRADIENT_BYTES_PER_PARAM = 2.0


OPTIMIZER_BYTES_PER_PARAM = 12.0


#: Bytes the Adam step moves per parameter of its shard: reads fp32 master, m, v (12) and
#: the 16-bit gradient (2), writes master, m, v (12) and the 16-bit weight (2).
OPTIMIZER_STEP_BYTES_PER_PARAM = 28.0


#: 16-bit activations and messages.
ACTIVATION_BYTES = 2.0


#: The forward's share of the host's time to issue a layer's forward and backward (a full
#: recomputation issues one more forward): NVIDIA's MLPerf v4.0 LoRA logs, 0.39 of 0.64 s
#: (autograd issues the backward from C++, the forward runs the framework's Python)
HOST_FORWARD_SHARE = 0.6


#: bytes of an fp8 weight
FP8_BYTES = 1.0


#: Bytes per logit held for the loss: the 16-bit output and the fp32 copy cross-entropy reads.
LOGIT_BYTES = 6.0


#: Default node network: 8 x 400 Gb/s (DGX H100, AWS p5.48xlarge: 3,200 Gbit/s per node).
DEFAULT_NODE_NETWORK_GBPS = 3200.0


#: Kernels of one optimizer step per layer (multi-tensor Adam over per-layer buckets).
_OPTIMIZER_KERNELS_PER_LAYER = 4


#: Extra kernels of one MoE layer in forward: router, top-k, permute, unpermute, two grouped
#: GEMM set-ups.
_MOE_KERNELS_PER_LAYER = 6


def weight_bytes_per_param(precision: str) -> float:
    """16-bit weights; fp8 training also keeps an fp8 copy of each matrix (1 B)."""
    return 3.0 if precision == "fp8" else 2.0


def cluster_shape(
    gpu: GpuSpec,
    *,
    gpus_per_node: int = 8,
    node_network_gbps: float = DEFAULT_NODE_NETWORK_GBPS,
    hop_latency_s: float = 25e-6,
    allow_cross_node_tp: bool = False,
    collective: str = "hierarchical",
    mesh: bool = False,
) -> ClusterShape:
    """Links of a cluster of ``gpu`` nodes: NVLink per GPU (datasheet GB/s x 8), else PCIe;
    ``collective`` and ``mesh`` as :class:`~gpucast.domain.parallel.ClusterShape` takes them.

    The rule is :func:`gpucast.plan.inputs.intra_node_gbps`'s, so planner and this model see
    the same link. Datasheet NVLink figures add both directions; a ring sends and receives at
    once, so this is the planner's optimistic convention, not a measured bus bandwidth.
    """
    if gpu.interconnect_gbps is not None:
        intra = float(gpu.interconnect_gbps) * 8.0
    else:
        intra = PCIE_X16_GBIT_PER_S.get(gpu.pcie_generation, 128.0)
    return ClusterShape(
        gpus_per_node=gpus_per_node,
        intra_node_gbps=intra,
        node_network_gbps=node_network_gbps,
        hop_latency_s=hop_latency_s,
        allow_cross_node_tp=allow_cross_node_tp,
        collective=collective,
        mesh=mesh,
    )


def group_link_gbps(gpu: GpuSpec, gpus: int, node: NodeLinks = SWITCHED) -> float:
    """Gbit/s each of ``gpus`` GPUs of one node reaches the others at (:func:`cluster_shape`'s
    link), as ``node`` joins them: on a node of ``mesh_gpus`` GPUs joined pairwise, a group
    smaller than the node reaches only its members' links; on cards bridged in pairs, a group
    beyond a pair crosses PCIe (:meth:`~gpucast.domain.parallel.ClusterShape.group_gbps`);
    GPUs without NVLink reach the all-reduce bus bandwidth ``node`` gives for PCIe
    (:meth:`~gpucast.domain.parallel.NodeLinks.pcie_gbps`: published nccl-tests figures),
    else the x16 link's nominal rate."""
    links = cluster_shape(gpu)
    if node.mesh_gpus > 1 and gpus <= node.mesh_gpus:
        return replace(links, gpus_per_node=node.mesh_gpus, mesh=True).group_gbps(gpus)
    return with_pcie_figures(links, gpu, node, gpus).group_gbps(gpus)


def with_pcie_figures(
    links: ClusterShape, gpu: GpuSpec, node: NodeLinks, gpus: int
) -> ClusterShape:
    """``links`` of ``gpus`` GPUs of one node of ``gpu`` with the all-reduce bus bandwidth
    ``node`` gives a group of them over PCIe (:meth:`~gpucast.domain.parallel.NodeLinks.
    pcie_gbps`: the catalog's nccl-tests and NCCL-model figures): on cards bridged in pairs
    the rate beyond a pair (:func:`with_bridges`), on GPUs without NVLink the node's link;
    unchanged for NVLink (a switch or a mesh) and where ``node`` gives no figure. The one
    rule ``predict infer`` (:func:`group_link_gbps`), ``predict llm-train`` and ``plan
    llm-train`` price a tensor-parallel all-reduce over PCIe by."""
    if node.bridged:  # a pair keeps its bridge; a larger group crosses PCIe
        return with_bridges(links, gpu, node.pcie_gbps(gpus))
    pcie = node.pcie_gbps(gpus) if gpu.interconnect_gbps is None else None
    return links if pcie is None else replace(links, intra_node_gbps=pcie)


def with_bridges(links: ClusterShape, gpu: GpuSpec, pcie_gbps: float | None = None) -> ClusterShape:
    """``links`` of ``gpu`` cards bridged in pairs: a group beyond a pair crosses PCIe at
    ``pcie_gbps`` (the all-reduce bus bandwidth the catalog's PCIe figures give, as for GPUs
    without NVLink: :attr:`~gpucast.domain.parallel.NodeLinks.pcie_busbw_gbps`), else at the
    x16 link's nominal rate of the card's generation (unchanged for a GPU without NVLink)."""
    if gpu.interconnect_gbps is None:
        return links
    nominal = PCIE_X16_GBIT_PER_S.get(gpu.pcie_generation, 128.0)
    return replace(links, bridge_pcie_gbps=nominal if pcie_gbps is None else pcie_gbps)


# -- validation ----------------------------------------------------------------------------


def _divisors(n: int) -> list[int]:
    """The divisors of ``n``, ascending (O(sqrt n): ``--gpus`` may be large)."""
    small = [k for k in range(1, math.isqrt(n) + 1) if n % k == 0]
    return small + [n // k for k in reversed(small) if k * k != n]


def _listing(values: Sequence[int], limit: int = 8) -> str:
    shown = ", ".join(str(v) for v in values[:limit])
    return shown + (", ..." if len(values) > limit else "")


def _tp_choices(spec: TransformerSpec, limit: int) -> list[int]:
    return [
        t
        for t in range(1, limit + 1)
        if spec.heads % t == 0
        and (spec.kv_heads % t == 0 or t % spec.kv_heads == 0)
        and spec.ffn_hidden % t == 0
    ]


def validate_layout(
    spec: TransformerSpec,
    layout: ParallelLayout,
    *,
    seq_len: int,
    gpus_per_node: int,
    gpus: int | None = None,
    allow_cross_node_tp: bool = False,
    allow_uneven_pp: bool = False,
) -> None:
    """Raise :class:`InvalidSpecError` naming the field when ``layout`` cannot run ``spec``."""
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1:
        raise InvalidSpecError("seq_len", "must be an integer >= 1", got=seq_len)
    if gpus is not None and layout.gpus != gpus:
        rest = layout.tp * layout.pp * layout.cp
        hint = (
            f"try dp={gpus // rest}"
            if gpus % rest == 0
            else f"tp*pp*cp = {rest} must divide {gpus}"
        )
        raise InvalidSpecError(
            "dp",
            f"dp*tp*pp*cp must equal the {gpus} GPUs",
            got=f"{layout.dp}*{layout.tp}*{layout.pp}*{layout.cp} = {layout.gpus}",
            fix=hint,
        )
    t = layout.tp
    valid_tp = _tp_choices(spec, max(gpus_per_node, 1))
    if spec.heads % t:
        raise InvalidSpecError(
            "tp",
            f"must divide the {spec.heads} attention heads of {spec.name}",
            got=t,
            fix=f"try tp in {_listing(valid_tp)}",
        )
    if spec.kv_heads % t and t % spec.kv_heads:
        raise InvalidSpecError(
            "tp",
            f"must divide the {spec.kv_heads} KV heads of {spec.name} or be a multiple of them "
            "(then each KV head is replicated)",
            got=t,
            fix=f"try tp in {_listing(valid_tp)}",
        )
    if spec.ffn_hidden % t:
        raise InvalidSpecError(
            "tp",
            f"must divide the MLP width {spec.ffn_hidden} of {spec.name}",
            got=t,
            fix=f"try tp in {_listing(valid_tp)}",
        )
    if t > gpus_per_node and not allow_cross_node_tp:
        raise InvalidSpecError(
            "tp",
            f"must be <= the {gpus_per_node} GPUs of a node (its all-reduces run every layer "
            "and need NVLink)",
            got=t,
            fix=f"use tp <= {gpus_per_node} and more pipeline stages, or allow cross-node TP",
        )
    p = layout.pp
    if p > spec.layers:
        raise InvalidSpecError(
            "pp",
            f"must be <= the {spec.layers} layers of {spec.name}",
            got=p,
            fix=f"try pp in {_listing(_divisors(spec.layers))}",
        )
    if spec.layers % p and not allow_uneven_pp:
        raise InvalidSpecError(
            "pp",
            f"must divide the {spec.layers} layers of {spec.name}",
            got=p,
            fix=f"try pp in {_listing(_divisors(spec.layers))}, or allow uneven stages",
        )
    v = layout.virtual_stages
    if v > 1:
        if spec.layers < p * v:
            raise InvalidSpecError(
                "virtual_stages",
                f"pp * virtual_stages must be at most the {spec.layers} layers (a layer a "
                "model chunk at least)",
                got=v,
                fix=f"try virtual_stages <= {max(1, spec.layers // p)}",
            )
        if spec.layers % (p * v) and not allow_uneven_pp:
            raise InvalidSpecError(
                "virtual_stages",
                f"pp * virtual_stages must divide the {spec.layers} layers",
                got=v,
                fix=f"try virtual_stages in {_listing(_divisors(spec.layers // p or 1))}, "
                "or allow uneven stages",
            )
        if layout.micro_batches % p:
            raise InvalidSpecError(
                "micro_batches",
                f"must be a multiple of pp={p} for the interleaved schedule",
                got=layout.micro_batches,
            )
    c = layout.cp
    if c > 1 and seq_len % (2 * c):
        raise InvalidSpecError(
            "cp",
            f"2*cp must divide the sequence length {seq_len} (causal load balancing)",
            got=c,
        )
    if layout.sp_active and (seq_len // c) % t:
        raise InvalidSpecError(
            "sequence_parallel",
            f"needs tp={t} to divide the {seq_len // c} tokens per context-parallel rank",
            got=True,
            fix="turn sequence parallelism off or change tp",
        )
    e = layout.ep
    if e > 1:
        if not spec.is_moe:
            raise InvalidSpecError(
                "ep", f"needs a mixture-of-experts model; {spec.name} is dense", got=e, fix="ep=1"
            )
        if spec.n_experts % e:
            raise InvalidSpecError(
                "ep",
                f"must divide the {spec.n_experts} experts of {spec.name}",
                got=e,
                fix=f"try ep in {_listing(_divisors(spec.n_experts))}",
            )
        if (layout.dp * c) % e:
            raise InvalidSpecError(
                "ep",
                f"must divide dp*cp = {layout.dp * c} (experts are spread over data-parallel "
                "ranks)",
                got=e,
            )
