"""One training step of a transformer LLM under 3D parallelism: memory, time, MFU.

Pure: a :class:`~gpucast.domain.llm.TransformerSpec`, a :class:`~gpucast.domain.catalog.GpuSpec`,
a :class:`~gpucast.domain.parallel.ParallelLayout` and a
:class:`~gpucast.domain.parallel.ClusterShape` in, a
:class:`~gpucast.domain.parallel.ParallelStepPrediction` out. Notation: ``s`` sequence length,
``b`` micro-batch size, ``h`` hidden, ``a`` heads, ``f`` MLP width, ``V`` vocabulary, ``L``
layers, ``t`` / ``p`` / ``c`` / ``d`` the tensor / pipeline / context / data-parallel sizes,
``m`` micro-batches per step, ``v`` virtual stages per GPU.

Memory per GPU (:func:`training_memory`), for each pipeline stage, the largest reported
    *Model state* (Rajbhandari et al. 2020, "ZeRO", section 3.1): mixed precision keeps 16-bit
    weights (2 B) and gradients (2 B) and, for Adam, fp32 master weights, momentum and variance
    (12 B): 16 B per trained parameter (fp8 adds a 1-byte fp8 copy of the weights: 17 B). A
    stage holds its ``L / p`` layers, the embedding on the first stage and the LM head on the
    last (a copy of the tied embedding when ``p > 1``); matrices are split ``t`` ways
    (norms and the router are replicated; when ``t`` exceeds the KV heads, each rank holds one
    KV head -- the GQA heads are replicated, not split). Experts are split ``ep`` ways. ZeRO
    shards over the ``d * c`` ranks that hold the same weights (``d * c / ep`` for experts):
    stage 1 the optimizer state, 2 also the gradients, 3 also the weights, plus a gather
    buffer of two layers' weights (the current one and the prefetched next). LoRA (Hu et al.
    2021) freezes the base (no gradients, no optimizer state; one copy at the matmuls'
    precision: 2 B per parameter, 1 B in fp8 -- NeMo's ``fp8_params``, as NVIDIA's MLPerf
    v4.0 Llama-2-70B LoRA ran) and trains ``r (d_in + d_out)`` parameters per adapted matrix
    at 16 B each.

    *Activations* (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
    Transformer Models", section 4): per layer and micro-batch, ``sbh (34 + 5 a s / h)`` bytes
    for GPT-3's shape, ``sbh (10 + 24 / t + 5 a s / (h t))`` with tensor parallelism and
    ``sbh / t (34 + 5 a s / h)`` with sequence parallelism. The 34 is generalised to other
    shapes term by term: 10 ``sbh`` not split by ``t`` without sequence parallelism (the two
    norm inputs 4, attention and MLP inputs 4, two dropout masks 2), Q and the output
    projection's input ``4 s b a d_head``, K and V ``4 s b g d_head`` (fewer with GQA), the MLP
    ``4 s b f`` (GeLU: its input and output) or ``8 s b f`` (SwiGLU: gate, up, their product
    and the activation) times the experts per token; ``5 a s^2 b`` for the attention scores
    (softmax 2, dropout mask 1, dropout output 2). Under LoRA a frozen matrix's input, kept
    only for its weight gradient, is not kept: the attention input (2 ``sbh``) unless q, k or
    v is adapted, the MLP input (2 ``sbh``) unless gate or up is, the down projection's input
    (2 ``s b f``) unless it is. Context parallelism splits the sequence
    ``c`` ways (each rank keeps ``s / c`` queries against all ``s`` keys). ``selective``
    recompute drops the ``5 a s / h`` term; ``full`` keeps ``2 sbh`` per layer (its input; ``/
    t`` with sequence parallelism) plus one layer's working set during its recomputation.
    Under 1F1B (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
    Clusters Using Megatron-LM", section 2.2) stage ``i`` holds ``min(p - i, m)`` micro-batches
    in flight -- the first stage ``p`` of them, i.e. all ``L`` layers' worth; the interleaved
    schedule holds ``min(v m, 2 (p - i - 1) + (v - 1) p + 1)`` model chunks of ``L / (p v)``
    layers (on the first stage ``L (1 + (p - 1) / (p v))`` layers, Korthikanti et al. 4.2.3).
    The last stage also holds one micro-batch's logits, ``6 s b V / t`` bytes (16-bit logits and
    the fp32 copy the cross-entropy reads). Each GPU loses ``framework_overhead_gib`` to NCCL
    buffers and what :func:`gpucast.predict.memory.usable_bytes` reserves.

Time per step (:func:`predict_training_step`)
    *FLOPs* per micro-batch on one GPU of a stage: forward ``2 N_layer b s / (t c)`` per layer
    (its active matmul weights) plus attention ``4 b s^2 a d_head / (t c)``, halved for causal
    masks (fused kernels skip the masked half; Dao 2023, "FlashAttention-2"), the LM head
    ``2 b s V h / (t c)`` on the last stage; backward twice the forward (Narayanan et al. 2021,
    Appendix), recomputation one more forward (``full``) or the attention core (``selective``).
    LoRA's frozen matrices need only input gradients in backward (1x the forward), its
    adapters both (2x). In fp8 the linear layers run at the fp8 rate and the attention core
    and the LM head at the bf16 one (Transformer Engine's ``fp8_autocast`` covers its linear
    layers; fp8 attention is opt-in and Megatron's output layer is not a TE layer). These
    FLOPs and the element-wise traffic -- each stored activation is written and read once in
    forward and twice as much moves in backward (6x the stored
    bytes; +2x when fully recomputed), the optimizer step reads and writes 28 B per parameter
    of its shard -- go through :func:`gpucast.predict.roofline.predict_step_time` as a
    :class:`~gpucast.predict.roofline.RooflineWorkload`, so the roofline's efficiencies (and
    any re-fit of them) apply unchanged. Matmul kernels are compute-bound there, so the
    weights they read are not counted as ``memory_bytes``, exactly as
    :meth:`RooflineWorkload.from_profile` leaves the ``matmul_conv`` bytes out.

    *Tensor parallelism* (Shoeybi et al. 2019, "Megatron-LM"; Korthikanti et al. section 4.2.2):
    two all-reduces of ``2 b s h / c`` bytes per layer in forward and two in backward (two
    more when fully recomputed); sequence parallelism replaces each by an all-gather and a
    reduce-scatter of the same volume. On NVLink via :func:`gpucast.predict.comm.
    hierarchical_collective_s` with the TP group as the node; exposed unless
    ``tp_overlap_fraction``. *Context parallelism*: a ring passes each rank's K and V chunk
    ``c - 1`` times per layer in forward and twice as many bytes in backward, hidden under the
    attention core's compute where it can be. *Expert parallelism*: four all-to-alls of the
    routed tokens (``b s k h / (t c)`` elements) per MoE layer (dispatch and combine, forward and
    backward), exposed. *Pipeline*: the 1F1B bubble is ``(p - 1) / v`` micro-batch times of
    the slowest stage, i.e. ``(p - 1) / (v m)`` of the pipeline's busy time (Narayanan et al.
    2021, section 2.2); activations of ``2 b s h / (t c)`` bytes cross each stage boundary
    once forward and once backward per micro-batch, on NVLink or, when adjacent stages sit on
    different nodes, a 1/``gpus_per_node`` share of the node's NICs, blocking (``2 (v m + p -
    1)`` sends on the critical path). *Data parallelism*: the stage's gradient bytes over the
    ``d * c`` group (ZeRO paper section 7): ZeRO 0-1 an all-reduce once per step (2 passes),
    ZeRO-2 a reduce-scatter per micro-batch and one all-gather of the updated weights
    (``m + 1`` passes), ZeRO-3 two all-gathers and a reduce-scatter per micro-batch (``3 m``);
    the volume per pass is the ZeRO paper's, with ``m = 1`` giving its 2 and 3 passes.
    Overlapped with backward by :func:`gpucast.predict.comm.exposed_comm_s`: ZeRO 0-1 only
    under the last micro-batch, ZeRO 2-3 under all of them.

    *The host*: with ``host_layer_s`` > 0 (:class:`~gpucast.domain.parallel.
    ParallelAssumptions`) a micro-batch takes at least its stage's layers times that (the host
    issuing kernels without CUDA graphs); the difference is the ``host_wait`` term and the
    bubble's micro-batches take as long.

    ``MFU = 6 N tokens / (step time x GPUs x peak)`` (Chowdhery et al. 2022, "PaLM", Appendix
    B, without the attention term), ``N`` the matmul parameters a token passes through
    (:attr:`TransformerSpec.matmul_params_per_token`); 4 instead of 6 with LoRA.

Not modelled: load imbalance between experts (capacity factors), the sliding-window attention
of some models (counted as full attention), communication/computation overlap beyond the
fractions above, CPU offload, fp8 scaling overheads, straggling nodes, and the tokens wasted
by padding.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from gpucast.domain.catalog import PCIE_X16_GBIT_PER_S, GpuSpec
from gpucast.domain.errors import InvalidSpecError, NoFeasiblePlanError
from gpucast.domain.llm import TransformerSpec
from gpucast.domain.parallel import (
    PIPELINE_MAX_ZERO,
    STEP_TERMS,
    SWITCHED,
    ClusterShape,
    FixedLayout,
    LayoutSpace,
    NodeLinks,
    ParallelAssumptions,
    ParallelLayout,
    ParallelMemory,
    ParallelStepPrediction,
)
from gpucast.domain.prediction import Estimate
from gpucast.domain.units import GIB
from gpucast.predict import comm
from gpucast.predict.memory import usable_bytes
from gpucast.predict.roofline import (
    DeviceRoofline,
    RooflineEfficiency,
    RooflineWorkload,
    compute_term_s,
    memory_term_s,
    overhead_term_s,
    predict_step_time,
)

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


# -- per-GPU shapes ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _Shapes:
    """Per-GPU parameter counts and FLOPs that do not depend on the stage."""

    kv_local: int  # KV heads per tensor-parallel rank (>= 1: replicated when tp > kv_heads)
    layer_dense: float  # one layer's non-expert weights per GPU (attention, norms, router)
    layer_expert: float  # one layer's expert (or dense MLP) weights per GPU
    layer_lora: float  # one layer's adapter parameters per GPU
    embedding: float  # first stage
    lm_head: float  # last stage (incl. the final norm; a copy of a tied embedding when pp > 1)
    experts_sharded: bool  # the MLP is an expert MLP (ZeRO over dp*cp/ep)


def _lora_widths(spec: TransformerSpec, targets: Sequence[str], *, routed: bool) -> float:
    """The sum of ``d_in + d_out`` over one layer's adapted matrices: every expert's copy
    (``routed`` False: the parameters), or the copies one token passes (True: the traffic)."""
    h, f = spec.hidden, spec.ffn_hidden
    dims = {
        "q": (h, spec.q_dim),
        "k": (h, spec.kv_dim),
        "v": (h, spec.kv_dim),
        "o": (spec.q_dim, h),
        "gate": (h, f) if spec.gated_mlp else (0, 0),
        "up": (h, f),
        "down": (f, h),
    }
    total = 0.0
    for target in targets:
        d_in, d_out = dims[target]
        copies = 1
        if target in ("gate", "up", "down"):
            copies = spec.experts_per_token if routed else spec.n_experts
        total += copies * (d_in + d_out)
    return total


def _lora_params_per_layer(spec: TransformerSpec, rank: int, targets: Sequence[str]) -> float:
    return rank * _lora_widths(spec, targets, routed=False)


def _lora_traffic_per_layer(
    spec: TransformerSpec,
    layout: ParallelLayout,
    seq_len: int,
    level: str,
    kv_local: int,
    *,
    unfused: bool = True,
) -> float:
    """Element-wise bytes one layer of a LoRA micro-batch moves that its kept activations do
    not count (:func:`_stage_time` prices the rest as 6x the kept bytes): a frozen matrix's
    input is still written and read in forward and its gradient in backward (4x its bytes,
    not kept for a weight gradient), and each adapter runs unfused beside its matrix (Megatron
    / NeMo's ``ParallelLinearAdapter``, PEFT's ``lora.Linear``) -- forward reads the input and
    writes its ``d_out`` output, then adds it to the base output (read two, write one);
    backward reads the output gradient twice (B's gradient, the path to A), reads the input
    again for A's gradient and writes and adds its input gradient (write one, read two, write
    one): ``6 (d_in + d_out)`` elements a token, split ``t`` ways (``unfused`` False: none)."""
    if not layout.lora:
        return 0.0
    kept = _activation_bytes_per_layer(spec, layout, seq_len, level, kv_local)
    whole = _activation_bytes_per_layer(
        spec, replace(layout, lora_rank=0), seq_len, level, kv_local
    )
    tokens = layout.micro_batch_size * seq_len / layout.cp
    widths = _lora_widths(spec, layout.lora_targets, routed=True)
    adapters = 6.0 * ACTIVATION_BYTES * tokens * widths / layout.tp if unfused else 0.0
    return 4.0 * (whole - kept) + adapters


def _shapes(spec: TransformerSpec, layout: ParallelLayout) -> _Shapes:
    t, h = layout.tp, spec.hidden
    kv_local = max(1, spec.kv_heads // t)
    bias = spec.attention_params - spec.attention_matmul_params
    attention = 2 * h * spec.q_dim / t + 2 * h * spec.head_dim * kv_local + bias / t
    norms = spec.norms_per_layer * spec.norm_params
    expert = spec.n_experts / layout.ep * spec.expert_params / t
    embedding = spec.vocab * h / t + (spec.embedding_params - spec.vocab * h)
    if spec.tied_embeddings:
        head = spec.vocab * h / t if layout.pp > 1 else 0.0
    else:
        head = spec.lm_head_params / t
    return _Shapes(
        kv_local=kv_local,
        layer_dense=attention + norms + spec.router_params,
        layer_expert=expert,
        layer_lora=_lora_params_per_layer(spec, layout.lora_rank, layout.lora_targets) / t
        if layout.lora
        else 0.0,
        embedding=embedding,
        lm_head=head + spec.norm_params,
        experts_sharded=spec.is_moe,
    )


def _stage_layers(spec: TransformerSpec, pp: int) -> list[int]:
    base, extra = divmod(spec.layers, pp)
    return [base + (1 if i < extra else 0) for i in range(pp)]


def _activation_bytes_per_layer(
    spec: TransformerSpec, layout: ParallelLayout, seq_len: int, level: str, kv_local: int
) -> float:
    """Bytes one layer keeps for one micro-batch on one GPU (Korthikanti et al. 2022).

    ``level``: ``none`` (scores materialised), ``selective`` (no scores) or ``full`` (the
    layer input only).
    """
    t, c, b = layout.tp, layout.cp, layout.micro_batch_size
    s_local = seq_len / c
    sbh = s_local * b * spec.hidden
    sp_div = t if layout.sp_active else 1
    if level == "full":
        return ACTIVATION_BYTES * sbh / sp_div
    replicated = 10.0 * sbh / sp_div
    q_and_out = 4.0 * s_local * b * spec.q_dim / t
    k_and_v = 4.0 * s_local * b * spec.head_dim * kv_local
    mlp = (8.0 if spec.gated_mlp else 4.0) * s_local * b * spec.ffn_hidden
    if layout.lora:  # a frozen matrix's input serves only its weight gradient: not kept
        targets = set(layout.lora_targets)
        frozen_inputs = [not targets & {"q", "k", "v"}, not targets & {"gate", "up"}]
        replicated -= 2.0 * sbh / sp_div * sum(frozen_inputs)  # attention / MLP input
        if "down" not in targets:  # the down projection's input (the gated product)
            mlp -= 2.0 * s_local * b * spec.ffn_hidden
    mlp *= spec.experts_per_token / t
    scores = 5.0 * spec.heads * s_local * seq_len * b / t if level == "none" else 0.0
    return replicated + q_and_out + k_and_v + mlp + scores


def _in_flight_layers(layout: ParallelLayout, stage: int, layers: int) -> tuple[float, float]:
    """(micro-batches in flight, layer-activations held) on ``stage`` under 1F1B."""
    p, m, v = layout.pp, layout.micro_batches, layout.virtual_stages
    if v == 1:
        n = min(p - stage, m)
        return float(n), float(n * layers)
    chunks = min(m * v, 2 * (p - stage - 1) + (v - 1) * p + 1)
    return chunks / v, chunks * layers / v


@dataclass(frozen=True, slots=True, kw_only=True)
class _StageParams:
    """Parameters of one stage on one GPU before ZeRO sharding."""

    dense: float  # sharded over dp*cp by ZeRO
    expert: float  # sharded over dp*cp/ep by ZeRO
    trained_dense: float  # the dense ones with gradients (LoRA: the adapters)
    trained_expert: float
    adapters: float  # LoRA adapter weights (trained, never ZeRO-3-sharded here)


def _stage_params(layout: ParallelLayout, shapes: _Shapes, stage: int, layers: int) -> _StageParams:
    dense = layers * shapes.layer_dense
    dense += shapes.embedding if stage == 0 else 0.0
    dense += shapes.lm_head if stage == layout.pp - 1 else 0.0
    expert = layers * shapes.layer_expert
    if not shapes.experts_sharded:
        dense, expert = dense + expert, 0.0
    if layout.lora:
        adapters = layers * shapes.layer_lora
        return _StageParams(
            dense=dense,
            expert=expert,
            trained_dense=adapters,
            trained_expert=0.0,
            adapters=adapters,
        )
    return _StageParams(
        dense=dense, expert=expert, trained_dense=dense, trained_expert=expert, adapters=0.0
    )


def _zero_groups(layout: ParallelLayout) -> tuple[int, int]:
    """Ranks ZeRO shards over: (dense, expert) = (dp * cp, dp * cp / ep)."""
    dense = layout.dp * layout.cp
    return dense, max(1, dense // layout.ep)


class _StageState(NamedTuple):
    """The bytes a stage's GPU holds whatever its micro-batches (:func:`_stage_state`)."""

    weights: float
    gradients: float
    optimizer: float
    gather: float  # ZeRO-3: the gathered weights of two layers (prefetch)


def _stage_state(layout: ParallelLayout, shapes: _Shapes, stage: int, layers: int) -> _StageState:
    """A stage's weights, gradients, optimizer state and ZeRO-3 gather buffer on one GPU."""
    w_bytes = weight_bytes_per_param(layout.precision)
    params = _stage_params(layout, shapes, stage, layers)
    z_dense, z_expert = _zero_groups(layout)
    zero = layout.zero_stage

    def shard(n_dense: float, n_expert: float, from_stage: int) -> float:
        if zero >= from_stage:
            return n_dense / z_dense + n_expert / z_expert
        return n_dense + n_expert

    # LoRA's frozen base needs one copy, at the precision its matmuls read (fp8: NeMo's
    # fp8_params, Transformer Engine's fp8_model_init); trained weights keep 16-bit too
    frozen_bytes = FP8_BYTES if layout.lora and layout.precision == "fp8" else w_bytes
    gather = 0.0
    if zero == 3 and z_dense > 1:
        gather = 2.0 * w_bytes * (shapes.layer_dense + shapes.layer_expert)
    return _StageState(
        weights=frozen_bytes * shard(params.dense, params.expert, 3) + w_bytes * params.adapters,
        gradients=GRADIENT_BYTES_PER_PARAM * shard(params.trained_dense, params.trained_expert, 2),
        optimizer=OPTIMIZER_BYTES_PER_PARAM * shard(params.trained_dense, params.trained_expert, 1),
        gather=gather,
    )


def _stage_memory(
    spec: TransformerSpec,
    layout: ParallelLayout,
    shapes: _Shapes,
    seq_len: int,
    stage: int,
    layers: int,
    framework_bytes: float,
    usable: float,
) -> ParallelMemory:
    first, last = stage == 0, stage == layout.pp - 1
    state = _stage_state(layout, shapes, stage, layers)
    in_flight, layer_acts = _in_flight_layers(layout, stage, layers)
    if layout.recompute == "full":
        per_layer = _activation_bytes_per_layer(spec, layout, seq_len, "full", shapes.kv_local)
        working = _activation_bytes_per_layer(spec, layout, seq_len, "selective", shapes.kv_local)
        activations = layer_acts * per_layer + working
    else:
        per_layer = _activation_bytes_per_layer(
            spec, layout, seq_len, layout.recompute, shapes.kv_local
        )
        activations = layer_acts * per_layer
    s_local = seq_len / layout.cp
    if first:  # the embedding's dropout mask, 1 byte per element
        sp_div = layout.tp if layout.sp_active else 1
        activations += in_flight * s_local * layout.micro_batch_size * spec.hidden / sp_div
    logits = (
        LOGIT_BYTES * s_local * layout.micro_batch_size * spec.vocab / layout.tp if last else 0.0
    )
    return ParallelMemory(
        stage=stage,
        weights_bytes=state.weights,
        gradients_bytes=state.gradients,
        optimizer_bytes=state.optimizer,
        activations_bytes=activations,
        logits_bytes=logits,
        gather_buffer_bytes=state.gather,
        framework_bytes=framework_bytes,
        usable_bytes=usable,
        in_flight_micro_batches=in_flight,
    )


def _all_stage_memory(
    spec: TransformerSpec,
    gpu: GpuSpec,
    layout: ParallelLayout,
    seq_len: int,
    assumptions: ParallelAssumptions,
    shapes: _Shapes | None = None,
) -> list[ParallelMemory]:
    """Per-GPU memory of the stages that can need the most (:func:`_candidate_stages`);
    ``shapes``: the layout's (:func:`_shapes`), if known."""
    shapes = shapes or _shapes(spec, layout)
    usable = usable_bytes(
        gpu, reserved_gib=assumptions.reserved_gib, reserved_fraction=assumptions.reserved_fraction
    )
    framework = assumptions.framework_overhead_gib * GIB
    return [
        _stage_memory(spec, layout, shapes, seq_len, i, n, framework, usable)
        for i, n in _candidate_stages(_stage_layers(spec, layout.pp))
    ]


def _candidate_stages(layers: Sequence[int]) -> list[tuple[int, int]]:
    """(stage, layers) of the stages that can need the most memory: the first (embedding), the
    last (LM head, logits) and, per layer count, the earliest middle stage. Middle stages
    with as many layers hold the same weights and states, and a later stage never holds more
    micro-batches in flight (1F1B, interleaved or not), so the earliest bounds the rest."""
    last = len(layers) - 1
    chosen = {0, last}
    seen: set[int] = set()
    for i in range(1, last):
        if layers[i] not in seen:
            seen.add(layers[i])
            chosen.add(i)
    return [(i, layers[i]) for i in sorted(chosen)]


def training_memory(
    spec: TransformerSpec,
    gpu: GpuSpec,
    layout: ParallelLayout,
    *,
    seq_len: int,
    assumptions: ParallelAssumptions | None = None,
) -> ParallelMemory:
    """Per-GPU bytes on the stage that needs the most; see the module docstring."""
    opts = assumptions or ParallelAssumptions()
    stages = _all_stage_memory(spec, gpu, layout, seq_len, opts)
    return max(stages, key=lambda mem: mem.total_bytes)


# -- time ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _StageTime:
    estimate: Estimate  # roofline of one micro-batch (forward + backward + recompute)
    optimizer: Estimate  # roofline of the optimizer step
    matmul_flops: float  # per micro-batch, one GPU
    tp_s: float  # exposed TP communication per micro-batch
    cp_s: float  # exposed context-parallel communication per micro-batch
    moe_s: float  # all-to-all per micro-batch

    @property
    def micro_batch_s(self) -> float:
        return self.estimate.value + self.tp_s + self.cp_s + self.moe_s


@dataclass(slots=True)
class SearchMemo:
    """What one layout search computes once and its layouts share (every other argument of
    :func:`predict_training_step` the same): stage times and data-parallel traffic by the
    layout without its virtual stages (which change the bubble, the point-to-point sends and
    the memory alone), the step-time floor's parts, and (``table``) the peak memory
    :func:`best_layout` already computed.

    None of it depends on the host's pace (``ParallelAssumptions.host_layer_s``, applied per
    step): searches that differ only in it may share one memo (:func:`best_layout`
    ``memo``), as the fit of that pace does. ``layouts`` and ``table`` do not depend on the
    GPU or its links either: searches of the same model, GPU count, node size, batch,
    sequence, space and assumptions on other GPUs may share them (:meth:`sibling`; ``plan
    llm-train`` does)."""

    #: the layouts :func:`best_layout` enumerated (None until it has)
    layouts: tuple[ParallelLayout, ...] | None = None
    stage_times: dict[tuple[ParallelLayout, int, bool, bool], _StageTime] = field(
        default_factory=dict
    )
    dp_comm_s: dict[ParallelLayout, float] = field(default_factory=dict)
    #: the roofline's interval per regime (``predict_step_time(intervals=...)``)
    intervals: dict[str, tuple[float, float, str, str]] = field(default_factory=dict)
    #: per-GPU shapes by what they depend on (:func:`_shapes_of`)
    shapes: dict[tuple[int, int, bool, int, tuple[str, ...]], _Shapes] = field(default_factory=dict)
    #: the step-time floor's parts on this GPU and links (:func:`_floor_parts`)
    floor_parts: tuple[FloatArray, FloatArray, FloatArray] | None = None
    #: what the search knows of ``layouts`` that depends on no GPU, no links and no host
    #: pace: their floor's parts and their peak memory (:class:`_SearchTable`)
    table: _SearchTable | None = None

    def sibling(self) -> SearchMemo:
        """A memo for the same search on another GPU or other links: it shares ``layouts``
        and their table (none of which depends on the GPU, its links or the host's pace),
        and starts the rest afresh."""
        if self.layouts is not None and self.table is None:
            self.table = _SearchTable.of(self.layouts)
        return SearchMemo(layouts=self.layouts, table=self.table)


def _shapes_of(memo: SearchMemo, spec: TransformerSpec, layout: ParallelLayout) -> _Shapes:
    """:func:`_shapes`, once per search for each (tp, ep, pp > 1, LoRA) it depends on."""
    key = (layout.tp, layout.ep, layout.pp > 1, layout.lora_rank, layout.lora_targets)
    if key not in memo.shapes:
        memo.shapes[key] = _shapes(spec, layout)
    return memo.shapes[key]


def _wide_factor(gpu: GpuSpec, precision: str, efficiency: RooflineEfficiency) -> float:
    """How many FLOPs at ``precision``'s rate one FLOP of 16-bit matrix work costs: 1 but in
    fp8, where it is the fp8 rate (efficiency x peak) over the bf16 one."""
    if precision != "fp8":
        return 1.0
    fp8 = efficiency.compute_efficiency("fp8") * gpu.matrix_tflops("fp8")
    wide = efficiency.compute_efficiency("bf16") * gpu.matrix_tflops("bf16")
    return max(1.0, fp8 / wide)


class _StageWork(NamedTuple):
    """What one micro-batch of one stage does on one GPU, whatever the GPU
    (:func:`_stage_work`)."""

    matmul: float  # every matrix FLOP: forward, backward, recompute, the head on the last
    sixteen_bit: float  # those of the attention core and the LM head (16-bit under fp8)
    attn: float  # the attention core's forward of one layer
    memory_bytes: float  # element-wise traffic
    kernels: int

    def priced(self, wide: float) -> float:
        """The FLOPs at the layout's precision's rate (:func:`_wide_factor` ``wide``): fp8
        covers the linear layers (Transformer Engine's fp8_autocast); the attention core and
        the LM head run at 16 bits, priced as that many more FLOPs at the fp8 rate."""
        return self.matmul + (wide - 1.0) * self.sixteen_bit


def _stage_work(
    spec: TransformerSpec,
    layout: ParallelLayout,
    shapes: _Shapes,
    seq_len: int,
    layers: int,
    last: bool,
    assumptions: ParallelAssumptions,
) -> _StageWork:
    """The FLOPs, bytes and kernels of one micro-batch on one GPU of a stage of ``layers``
    layers (``last``: it holds the LM head), as :func:`_stage_time` prices them (the module
    docstring)."""
    t, c, b = layout.tp, layout.cp, layout.micro_batch_size
    s_local = seq_len / c
    tokens = b * s_local
    h = spec.hidden
    full = layout.recompute == "full"
    # -- FLOPs of one micro-batch on one GPU
    layer_matmul = (
        2 * h * spec.q_dim / t
        + 2 * h * spec.head_dim * shapes.kv_local
        + spec.experts_per_token * spec.expert_matmul_params / t
        + spec.router_params
    )
    fwd_mm = 2.0 * tokens * layer_matmul
    attn = 4.0 * b * s_local * seq_len * spec.q_dim / t * (0.5 if assumptions.causal else 1.0)
    lora = 2.0 * tokens * shapes.layer_lora
    if layout.lora:
        fwd = fwd_mm + attn + lora
        bwd = fwd_mm + 2.0 * attn + 2.0 * lora
    else:
        fwd = fwd_mm + attn
        bwd = 2.0 * fwd
    recompute = fwd if full else (attn if layout.recompute == "selective" else 0.0)
    matmul = layers * (fwd + bwd + recompute)
    # the attention core's FLOPs of one micro-batch: forward, backward (2x) and any recompute
    attn_all = layers * attn * (4.0 if recompute else 3.0)
    head_all = 0.0
    if last:
        head_all = 2.0 * tokens * spec.vocab * h / t * (2.0 if layout.lora else 3.0)
        matmul += head_all
    # -- element-wise bytes and kernels
    traffic_level = "none" if layout.recompute == "none" else "selective"
    acts = _activation_bytes_per_layer(spec, layout, seq_len, traffic_level, shapes.kv_local)
    memory = layers * acts * (8.0 if full else 6.0)
    memory += layers * _lora_traffic_per_layer(
        spec, layout, seq_len, traffic_level, shapes.kv_local, unfused=assumptions.lora_unfused
    )
    kernels_fwd = assumptions.kernels_per_layer_forward + (
        _MOE_KERNELS_PER_LAYER if spec.is_moe else 0
    )
    kernels = layers * kernels_fwd * (4 if full else 3)
    if last:
        logits = LOGIT_BYTES * tokens * spec.vocab / t
        memory += 2.0 * logits
        kernels += 6
    return _StageWork(
        matmul=matmul,
        sixteen_bit=attn_all + head_all,
        attn=attn,
        memory_bytes=memory,
        kernels=kernels,
    )


class _CommWork(NamedTuple):
    """What a stage's micro-batch sends over TP, CP and expert parallelism, whatever the GPU
    and its links (:func:`_comm_work`): floats, or arrays of them for many stages."""

    tp: _Num
    tp_message: _Num  # bytes of one TP collective: b s h / c activations
    tp_count: _Num  # TP collectives of a micro-batch
    cp: _Num
    cp_chunk: _Num  # bytes of one ring pass of a rank's K and V chunk
    cp_passes: _Num
    cp_attn: _Num  # the attention core's FLOPs the ring hides under (its passes of a layer)
    layers: _Num
    ep: _Num
    moe_routed: _Num  # bytes of the routed tokens one all-to-all moves
    moe_count: _Num  # all-to-alls of a micro-batch


def _comm_work(
    spec: TransformerSpec,
    layout: ParallelLayout,
    shapes: _Shapes,
    seq_len: int,
    layers: int,
    last: bool,
    attn: float,
) -> _CommWork:
    """:class:`_CommWork` of a stage of ``layers`` layers (``last``: with the LM head);
    ``attn``: the attention core's forward of one layer (:class:`_StageWork`)."""
    t, c, b = layout.tp, layout.cp, layout.micro_batch_size
    tokens = b * (seq_len / c)
    passes = 4.0 if layout.recompute == "full" else 3.0
    sp_div = t if layout.sp_active else 1
    return _CommWork(
        tp=t,
        tp_message=ACTIVATION_BYTES * tokens * spec.hidden,
        tp_count=layers * (6 if passes == 4.0 else 4) + (2 if last else 0),
        cp=c,
        cp_chunk=2.0 * ACTIVATION_BYTES * b * (seq_len / c) * spec.head_dim * shapes.kv_local,
        cp_passes=passes,
        cp_attn=passes * attn,
        layers=layers,
        ep=layout.ep,
        moe_routed=ACTIVATION_BYTES * tokens * spec.experts_per_token * spec.hidden / sp_div,
        moe_count=layers * (6 if passes == 4.0 else 4),
    )


def _group_gbps(links: ClusterShape, gpus: _Num) -> FloatArray:
    """:meth:`ClusterShape.group_gbps` of each of ``gpus`` (a count or an array of them)."""
    counts = np.asarray(gpus)
    flat = counts.reshape(-1).tolist()
    rate = {k: links.group_gbps(int(k)) for k in set(flat)}
    return np.asarray([rate[k] for k in flat], dtype=np.float64).reshape(counts.shape)


def _comm_s(
    w: _CommWork, links: ClusterShape, wide: _Num, rate: _Num, tp_overlap: float
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The exposed TP, CP and expert-parallel seconds of a stage's micro-batch (floats, or
    arrays for many stages) on ``links``; ``wide`` (:func:`_wide_factor`) and ``rate`` (FLOP/s
    of the layout's precision) price the attention the CP ring hides under."""
    gpn = links.gpus_per_node
    nic_per_gpu = links.node_network_gbps / gpn
    near, far = links.nvlink_hop_latency_s, links.hop_latency_s
    t, c, e = (np.asarray(v) for v in (w.tp, w.cp, w.ep))
    # -- tensor parallelism: all-reduces (or all-gather + reduce-scatter) of b s h / c
    one = comm.hierarchical_collective_s(
        w.tp_message,
        t,
        np.minimum(t, gpn),
        _group_gbps(links, t),
        links.node_network_gbps,
        np.where(t <= gpn, near, far),  # type: ignore[arg-type]
        passes=2.0,
    )
    tp_s = np.where(t > 1, w.tp_count * one * (1.0 - tp_overlap), 0.0)
    # -- context parallelism: ring passes of the K and V chunks, hidden under attention
    in_node = c * t <= gpn
    gbps = np.where(in_node, links.group_gbps(2), nic_per_gpu)  # a ring: one peer each way
    link = comm.transfer_time_s(w.cp_chunk, gbps) + np.where(in_node, near, far)
    ring = w.cp_passes * (c - 1) * link
    attn_s = w.cp_attn * wide / rate
    cp_s = np.where(c > 1, w.layers * np.maximum(0.0, ring - attn_s), 0.0)
    # -- expert parallelism: all-to-all of the routed tokens
    on_node = np.maximum(1, np.minimum(e, gpn // t))
    intra_s = w.moe_routed * (on_node - 1) / e * 8.0 / (_group_gbps(links, on_node) * 1e9)
    inter_s = w.moe_routed * (e - on_node) / e * 8.0 / (nic_per_gpu * 1e9)
    latency = np.where(on_node == e, near, far)
    moe_s = np.where(e > 1, w.moe_count * (np.maximum(intra_s, inter_s) + latency), 0.0)
    return tp_s, cp_s, moe_s


def _stage_time(
    spec: TransformerSpec,
    gpu: GpuSpec,
    layout: ParallelLayout,
    shapes: _Shapes,
    cluster: ClusterShape,
    seq_len: int,
    layers: int,
    stage: int,
    efficiency: RooflineEfficiency,
    assumptions: ParallelAssumptions,
    intervals: dict[str, tuple[float, float, str, str]],
) -> _StageTime:
    b = layout.micro_batch_size
    last = stage == layout.pp - 1
    work = _stage_work(spec, layout, shapes, seq_len, layers, last, assumptions)
    wide = _wide_factor(gpu, layout.precision, efficiency)
    workload = RooflineWorkload(
        name=f"{spec.name} stage {stage}",
        batch_size=b,
        matmul_flops=work.priced(wide),
        memory_bytes=work.memory_bytes,
        n_kernels=work.kernels,
    )
    # fp8 here is the LLM path its efficiency was fitted and validated on (whole GPT-3 runs)
    estimate = predict_step_time(
        workload, gpu, layout.precision, efficiency=efficiency, intervals=intervals,
        precision_validated=True,
    )  # fmt: skip
    # -- the optimizer step, once per step
    params = _stage_params(layout, shapes, stage, layers)
    z_dense, z_expert = _zero_groups(layout)
    shard_params = params.trained_dense + params.trained_expert
    if layout.zero_stage >= 1:
        shard_params = params.trained_dense / z_dense + params.trained_expert / z_expert
    optimizer = predict_step_time(
        RooflineWorkload(
            name=f"{spec.name} stage {stage} optimizer",
            batch_size=b,
            matmul_flops=0.0,
            memory_bytes=OPTIMIZER_STEP_BYTES_PER_PARAM * shard_params,
            n_kernels=_OPTIMIZER_KERNELS_PER_LAYER * max(1, layers),
        ),
        gpu,
        layout.precision,
        efficiency=efficiency,
        intervals=intervals,
        precision_validated=True,
    )
    rate = (
        efficiency.compute_efficiency(layout.precision) * gpu.matrix_tflops(layout.precision) * 1e12
    )
    tp_s, cp_s, moe_s = (
        float(term)
        for term in _comm_s(
            _comm_work(spec, layout, shapes, seq_len, layers, last, work.attn),
            cluster,
            wide,
            rate,
            assumptions.tp_overlap_fraction,
        )
    )
    return _StageTime(
        estimate=estimate,
        optimizer=optimizer,
        matmul_flops=work.matmul,
        tp_s=tp_s,
        cp_s=cp_s,
        moe_s=moe_s,
    )


def _dp_comm_s(
    layout: ParallelLayout,
    shapes: _Shapes,
    stage: int,
    cluster: ClusterShape,
    stage_layers: int,
    micro_batch_s: float,
    assumptions: ParallelAssumptions,
) -> float:
    """Exposed data-parallel communication of one stage (see the module docstring)."""
    if layout.dp * layout.cp == 1:
        return 0.0
    traffic = _dp_traffic(layout, shapes, stage, cluster, stage_layers)
    return comm.exposed_comm_s(
        traffic.total_s,
        traffic.window_micro_batches * micro_batch_s,
        overlap_fraction=assumptions.dp_overlap_fraction,
        backward_fraction=traffic.backward_fraction,
    )


class _DpTraffic(NamedTuple):
    """A stage's data-parallel collectives of one step (s), the micro-batches whose backward
    they can hide under and the share of those that is backward."""

    total_s: float
    window_micro_batches: int
    backward_fraction: float


class _DpCollective(NamedTuple):
    """One data-parallel collective of a stage's step: bytes per pass, ranks, ranks on a node
    and passes."""

    n_bytes: float
    size: int
    on_node: int
    passes: float


def _dp_collectives(
    layout: ParallelLayout, shapes: _Shapes, stage: int, gpus_per_node: int, stage_layers: int
) -> list[_DpCollective]:
    """:func:`_dp_traffic`'s collectives of one step, those that move anything."""
    group = layout.dp * layout.cp
    m = layout.micro_batches
    zero = layout.zero_stage
    params = _stage_params(layout, shapes, stage, stage_layers)
    _, expert_group = _zero_groups(layout)
    # (bytes per pass, passes) for the dense and the expert parameters
    grad = GRADIENT_BYTES_PER_PARAM
    if zero <= 1:
        dense = [(grad * params.trained_dense, 2.0)]
        expert = [(grad * params.trained_expert, 2.0)]
    elif zero == 2:
        dense = [(grad * params.trained_dense, m + 1.0)]
        expert = [(grad * params.trained_expert, m + 1.0)]
    else:  # all-gathers of every (16-bit) weight, reduce-scatters of the trained gradients
        dense = [(ACTIVATION_BYTES * params.dense, 2.0 * m), (grad * params.trained_dense, m)]
        expert = [(ACTIVATION_BYTES * params.expert, 2.0 * m), (grad * params.trained_expert, m)]
    out = []
    for parts, size, stride in (
        (dense, group, layout.tp),
        (expert, expert_group, layout.tp * layout.ep),
    ):
        on_node = max(1, min(size, gpus_per_node // stride))
        out += [
            _DpCollective(n_bytes=n_bytes, size=size, on_node=on_node, passes=float(passes))
            for n_bytes, passes in parts
            if n_bytes > 0 and size > 1
        ]
    return out


def _dp_window(layout: ParallelLayout) -> tuple[int, float]:
    """The micro-batches whose backward a layout's data-parallel collectives can hide under,
    and the share of those that is backward."""
    zero = layout.zero_stage
    return (
        1 if zero <= 1 else layout.micro_batches,
        1.0 if zero == 3 else comm.DEFAULT_BACKWARD_FRACTION,
    )


def _dp_traffic(
    layout: ParallelLayout,
    shapes: _Shapes,
    stage: int,
    cluster: ClusterShape,
    stage_layers: int,
) -> _DpTraffic:
    """:func:`_dp_comm_s`'s collectives before overlap (``dp * cp`` > 1)."""
    gpn = cluster.gpus_per_node
    collective = comm.collective_function(cluster.collective)
    total = 0.0
    for one in _dp_collectives(layout, shapes, stage, gpn, stage_layers):
        total += float(
            collective(
                one.n_bytes,
                one.size,
                one.on_node,
                cluster.group_gbps(one.on_node),
                cluster.node_network_gbps * one.on_node / gpn,
                cluster.hop_latency_s,
                passes=one.passes,
            )
        )
    window, backward = _dp_window(layout)
    return _DpTraffic(total_s=total, window_micro_batches=window, backward_fraction=backward)


def _pp_sends(
    spec: TransformerSpec, layout: ParallelLayout, seq_len: int, gpus_per_node: int
) -> tuple[float, float, bool]:
    """The pipeline's blocking sends of one step (``pp`` > 1; the module docstring): the bytes
    of one, how many, and whether they cross nodes."""
    m, p, v = layout.micro_batches, layout.pp, layout.virtual_stages
    message = ACTIVATION_BYTES * layout.micro_batch_size * seq_len / layout.cp
    message *= spec.hidden / layout.tp  # Megatron sends 1/t per TP rank
    # ranks are ordered tp, cp, dp, pp (pp outermost): a pipeline of more GPUs than a node
    # holds has adjacent stages on different nodes, even where a stage is smaller than a node
    # (QA session 37: dp=2 cp=2 pp=4 on two 8-GPU nodes was priced on NVLink alone); its
    # blocking sends wait on the slowest boundary, the NICs
    return message, 2.0 * (v * m + p - 1), layout.gpus > gpus_per_node


def _sends_s(message: _Num, count: _Num, across: _Flag, links: ClusterShape) -> FloatArray:
    """Seconds of ``count`` sends of ``message`` bytes (floats, or arrays of them) to the next
    stage's GPU: over a GPU's share of the node's NICs ``across`` nodes, else inside it."""
    gpn = links.gpus_per_node
    inter = comm.transfer_time_s(message, links.node_network_gbps / gpn) + links.hop_latency_s
    intra = comm.transfer_time_s(message, links.group_gbps(2)) + links.nvlink_hop_latency_s
    return np.asarray(count * np.where(across, inter, intra), dtype=np.float64)


def _pp_p2p_s(
    spec: TransformerSpec, layout: ParallelLayout, links: ClusterShape, seq_len: int
) -> float:
    """The pipeline's blocking sends of one step (``pp`` > 1; the module docstring)."""
    message, count, across = _pp_sends(spec, layout, seq_len, links.gpus_per_node)
    return float(_sends_s(message, count, across, links))


#: The step terms a micro-batch paced by the host spends waiting on it, the wait included
_MICRO_BATCH_TERMS = frozenset(
    (
        "compute",
        "memory_bandwidth",
        "kernel_overhead",
        "tp_comm",
        "cp_comm",
        "moe_comm",
        "host_wait",
    )
)


def _bottleneck(terms: dict[str, float], host_paced_s: float) -> str:
    """The largest term; where the host paces the micro-batches (``host_paced_s`` > 0: their
    time in all), their terms count as one, the host's (``host_wait``), since faster GPUs or
    links would not shorten them."""
    if host_paced_s > 0:
        others = {k: v for k, v in terms.items() if k not in _MICRO_BATCH_TERMS}
        if host_paced_s >= max(others.values(), default=0.0):
            return "host_wait"
        return max(others, key=lambda k: others[k])
    return max(terms, key=lambda k: terms[k])


def predict_training_step(
    spec: TransformerSpec,
    gpu: GpuSpec,
    layout: ParallelLayout,
    *,
    seq_len: int,
    cluster: ClusterShape | None = None,
    efficiency: RooflineEfficiency | None = None,
    assumptions: ParallelAssumptions | None = None,
    memo: SearchMemo | None = None,
) -> ParallelStepPrediction:
    """One optimizer step of ``spec`` on ``layout.gpus`` GPUs of type ``gpu``.

    Raises :class:`InvalidSpecError` (naming the field) when the layout cannot run the model;
    a layout that runs but does not fit in memory is returned with ``fits`` False. ``memo``:
    what the layouts of one search share (:class:`SearchMemo`; :func:`rank_layouts` and
    :func:`best_layout` pass one per search).
    """
    links = cluster or cluster_shape(gpu)
    opts = assumptions or ParallelAssumptions()
    eff = efficiency or RooflineEfficiency()
    validate_layout(
        spec,
        layout,
        seq_len=seq_len,
        gpus_per_node=links.gpus_per_node,
        allow_cross_node_tp=links.allow_cross_node_tp,
        allow_uneven_pp=opts.allow_uneven_pp,
    )
    cache = memo if memo is not None else SearchMemo()
    shapes = _shapes_of(cache, spec, layout)
    layers = _stage_layers(spec, layout.pp)
    stage_memory = _all_stage_memory(spec, gpu, layout, seq_len, opts, shapes)
    # stages differ only by their layer count and by being first (the embedding's optimizer
    # state) or last (the head's FLOPs and optimizer state)
    flat = replace(layout, virtual_stages=1)
    times: list[_StageTime] = []
    for i, n in enumerate(layers):
        key = (flat, n, i == 0, i == layout.pp - 1)
        if key not in cache.stage_times:
            cache.stage_times[key] = _stage_time(
                spec, gpu, layout, shapes, links, seq_len, n, i, eff, opts, cache.intervals
            )
        times.append(cache.stage_times[key])
    slowest = max(range(layout.pp), key=lambda i: times[i].micro_batch_s)
    pace = times[slowest]
    m, p, v = layout.micro_batches, layout.pp, layout.virtual_stages
    roof = pace.estimate.breakdown
    terms = dict.fromkeys(STEP_TERMS, 0.0)
    terms["compute"] = m * roof["compute"]
    terms["memory_bandwidth"] = m * roof["memory_bandwidth"]
    terms["kernel_overhead"] = m * roof["overhead"]
    terms["optimizer"] = max(st.optimizer.value for st in times)
    terms["tp_comm"] = m * pace.tp_s
    terms["cp_comm"] = m * pace.cp_s
    terms["moe_comm"] = m * pace.moe_s
    # a host slower than the GPUs paces every micro-batch (no CUDA graphs, a Python-heavy stack)
    host_mb = (
        opts.host_layer_s * max(layers) * (1.0 + HOST_FORWARD_SHARE * (flat.recompute == "full"))
    )
    wait = max(0.0, host_mb - pace.micro_batch_s)
    terms["host_wait"] = m * wait
    terms["pp_bubble"] = (p - 1) / v * (pace.micro_batch_s + wait)
    if p > 1:
        terms["pp_p2p"] = _pp_p2p_s(spec, layout, links, seq_len)
    if flat not in cache.dp_comm_s:
        # a stage's share depends on its layer count and on holding the embedding or the head
        per_kind: dict[tuple[int, bool, bool], float] = {}
        for i, n in enumerate(layers):
            kind = (n, i == 0, i == layout.pp - 1)
            if kind not in per_kind:
                per_kind[kind] = _dp_comm_s(
                    layout, shapes, i, links, n, times[i].micro_batch_s, opts
                )
        cache.dp_comm_s[flat] = max(per_kind.values())
    terms["dp_comm"] = cache.dp_comm_s[flat]
    step = sum(terms.values())
    lower = step * pace.estimate.lower / pace.estimate.value
    upper = step * pace.estimate.upper / pace.estimate.value
    notes = list(pace.estimate.notes)
    if spec.layers % p:
        chunks = f" in {v} chunks each" if v > 1 else ""
        notes.append(
            f"uneven pipeline: stages hold {max(layers)} or {min(layers)} of {spec.layers} "
            f"layers{chunks}; the slowest sets the pace"
        )
    elif spec.layers % (p * v):
        notes.append(
            f"uneven chunks: each stage's {layers[0]} layers in {v} chunks that differ by a "
            "layer, priced at their mean (the bubble (pp - 1) / vpp of a stage's micro-batch)"
        )
    if layout.tp > spec.kv_heads:
        notes.append(
            f"tp={layout.tp} exceeds the {spec.kv_heads} KV heads: each KV head is replicated "
            f"{layout.tp // spec.kv_heads} times"
        )
    if seq_len > spec.max_context:
        notes.append(
            f"seq_len {seq_len} exceeds the {spec.max_context} tokens {spec.name} was "
            "published with (context extension)"
        )
    if layout.precision == "fp8":
        notes.append(
            "fp8: the linear layers at the fp8 rate; the attention core and the LM head at "
            "the bf16 rate (Transformer Engine's default)"
        )
    n_mm = float(spec.matmul_params_per_token)
    tokens = layout.global_batch_size * seq_len
    model_flops = (4.0 if layout.lora else 6.0) * n_mm * tokens
    gpus_per_stage = layout.dp * layout.tp * layout.cp
    hardware_flops = m * gpus_per_stage * sum(st.matmul_flops for st in times)
    memory = max(stage_memory, key=lambda mem: mem.total_bytes)
    estimate = Estimate(
        value=step,
        lower=lower,
        upper=upper,
        unit="s",
        bottleneck=_bottleneck(terms, m * (pace.micro_batch_s + wait) if wait > 0 else 0.0),
        source=pace.estimate.source,
        breakdown=terms,
        notes=tuple(notes),
    )
    return ParallelStepPrediction(
        model=spec.name,
        gpu=gpu.name,
        layout=layout,
        seq_len=seq_len,
        step_time=estimate,
        model_flops_per_step=model_flops,
        hardware_flops_per_step=hardware_flops,
        peak_flops_per_gpu=gpu.peak_tflops(layout.precision) * 1e12,
        memory=memory,
        notes=tuple(notes),
    )


# -- search --------------------------------------------------------------------------------


def enumerate_layouts(
    spec: TransformerSpec,
    gpus: int,
    gpus_per_node: int,
    global_batch: int,
    *,
    seq_len: int,
    space: LayoutSpace | None = None,
    allow_cross_node_tp: bool = False,
    allow_uneven_pp: bool = False,
) -> tuple[ParallelLayout, ...]:
    """Every valid layout of ``gpus`` GPUs with ``global_batch`` sequences per step.

    ``dp * tp * pp * cp = gpus``, ``dp * micro_batch_size * micro_batches = global_batch``;
    ``space`` bounds the other choices. ZeRO stages above 0 are only tried when ``dp * cp >
    1`` (they shard nothing otherwise), and ZeRO-3 only at ``pp = 1`` (:data:`PIPELINE_MAX_ZERO`).
    """
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise InvalidSpecError("gpus", "must be an integer >= 1", got=gpus)
    if isinstance(global_batch, bool) or not isinstance(global_batch, int) or global_batch < 1:
        raise InvalidSpecError("global_batch", "must be an integer >= 1", got=global_batch)
    sp = space or LayoutSpace()
    out: list[ParallelLayout] = []
    ep_sizes = sp.ep_sizes or tuple(_divisors(spec.n_experts))

    def check(sized: Callable[..., ParallelLayout], ep: int, v: int) -> bool:
        try:
            validate_layout(
                spec, sized(ep=ep, virtual_stages=v), seq_len=seq_len,
                gpus_per_node=gpus_per_node, gpus=gpus, allow_cross_node_tp=allow_cross_node_tp,
                allow_uneven_pp=allow_uneven_pp,
            )  # fmt: skip
        except InvalidSpecError:
            return False
        return True

    for tp in _divisors(gpus):
        for pp in _divisors(gpus // tp):
            for cp in sp.cp_sizes:
                if (gpus // tp // pp) % cp:
                    continue
                dp = gpus // (tp * pp * cp)
                if global_batch % dp:
                    continue
                per_replica = global_batch // dp
                for b in sp.micro_batch_sizes:
                    if per_replica % b:
                        continue
                    m = per_replica // b
                    zeros = sorted(set(sp.zero_stages if dp * cp > 1 else (0,)))
                    if pp > 1:  # ZeRO-3 with a pipeline is not planned (PIPELINE_ZERO_NOTE)
                        zeros = [z for z in zeros if z <= PIPELINE_MAX_ZERO]
                    sized = functools.partial(
                        ParallelLayout, dp=dp, tp=tp, pp=pp, cp=cp,
                        sequence_parallel=sp.sequence_parallel, micro_batch_size=b,
                        micro_batches=m, precision=sp.precision, lora_rank=sp.lora_rank,
                        lora_targets=sp.lora_targets,
                    )  # fmt: skip
                    # whether a layout runs does not depend on its ZeRO stage or recomputation:
                    # check each (ep, virtual stages) once, then emit the recipes in order
                    runs = [
                        (ep, v)
                        for ep in ep_sizes
                        for v in sp.virtual_stages
                        if not (v > 1 and pp == 1) and check(sized, ep, v)
                    ]
                    for zero in zeros:
                        for recompute in sp.recompute:
                            for ep, v in runs:
                                try:
                                    out.append(
                                        sized(
                                            ep=ep, virtual_stages=v, zero_stage=zero,
                                            recompute=recompute,
                                        )
                                    )  # fmt: skip
                                except InvalidSpecError:
                                    continue
    return tuple(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class LayoutConflict:
    """A rule that a :class:`~gpucast.domain.parallel.FixedLayout` breaks on its own at a GPU
    count: ``rule`` in the same words at every count and node that breaks it (what a plan
    counts the shapes it leaves out by), ``detail`` in this count's own words, ``flags`` the
    fixed choices it involves (those to drop)."""

    rule: str
    detail: str
    flags: tuple[str, ...]


def fixed_layout_conflict(
    spec: TransformerSpec,
    fixed: FixedLayout,
    *,
    gpus: int,
    gpus_per_node: int,
    global_batch: int,
    allow_cross_node_tp: bool = False,
) -> LayoutConflict | None:
    """The first rule the fixed choices break on ``gpus`` GPUs of ``gpus_per_node`` a node,
    whatever the searched choices are (None: some layout may take them -- or only their
    combination fails, which the search finds): the model's heads and layers first, then the
    node, then the GPU count, then the batch."""
    tp, pp, cp, mb = fixed.tp, fixed.pp, fixed.cp, fixed.micro_batch
    if tp is not None and spec.heads % tp:
        rule = f"tp={tp} does not divide the {spec.heads} attention heads"
        return LayoutConflict(rule=rule, detail=rule, flags=("tp",))
    if pp is not None and pp > spec.layers:
        rule = f"pp={pp} is more than the {spec.layers} layers"
        return LayoutConflict(rule=rule, detail=rule, flags=("pp",))
    if fixed.vpp is not None and fixed.vpp > 1 and pp is not None:
        if pp == 1:
            rule = f"vpp={fixed.vpp} interleaves pipeline stages, and pp=1 has one"
            return LayoutConflict(rule=rule, detail=rule, flags=("pp", "vpp"))
        if pp * fixed.vpp > spec.layers:
            rule = f"pp x vpp = {pp * fixed.vpp} is more than the {spec.layers} layers"
            return LayoutConflict(rule=rule, detail=rule, flags=("pp", "vpp"))
    if tp is not None and tp > gpus_per_node and not allow_cross_node_tp:
        return LayoutConflict(
            rule=f"tp={tp} needs {tp} GPUs per node",
            detail=f"tp={tp} is more than the {gpus_per_node} GPUs of a node",
            flags=("tp",),
        )
    split = (tp or 1) * (pp or 1) * (cp or 1)
    named = tuple(f for f, v in (("tp", tp), ("pp", pp), ("cp", cp)) if v is not None and v > 1)
    if gpus % split:
        return LayoutConflict(
            rule=f"tp x pp x cp = {split} needs a multiple of {split} GPUs",
            detail=f"tp x pp x cp = {split} does not divide the {gpus} GPUs",
            flags=named,
        )
    if mb:
        rest = gpus // split
        shares = sorted(
            {global_batch // dp for dp in _divisors(rest) if global_batch % dp == 0},
            reverse=True,
        )
        if shares and all(share % mb for share in shares):
            rule = (
                f"micro-batch {mb} divides no data-parallel replica's share of the "
                f"{global_batch} sequences"
            )
            listed = ", ".join(str(v) for v in shares[:6]) + (", ..." if len(shares) > 6 else "")
            return LayoutConflict(
                rule=rule, detail=f"{rule} ({listed} per replica)", flags=("micro-batch",)
            )
    return None


def rank_layouts(
    spec: TransformerSpec,
    gpu: GpuSpec,
    gpus: int,
    global_batch: int,
    *,
    seq_len: int,
    cluster: ClusterShape | None = None,
    space: LayoutSpace | None = None,
    efficiency: RooflineEfficiency | None = None,
    assumptions: ParallelAssumptions | None = None,
) -> tuple[ParallelStepPrediction, ...]:
    """Predictions for every valid layout: those that fit first, fastest first."""
    links = cluster or cluster_shape(gpu)
    opts = assumptions or ParallelAssumptions()
    layouts = _search(spec, gpus, global_batch, seq_len, links, space, opts)
    memo = SearchMemo()  # shared by the layouts of this search
    time = functools.partial(
        predict_training_step, spec, gpu, seq_len=seq_len, cluster=links, efficiency=efficiency,
        assumptions=opts, memo=memo,
    )  # fmt: skip
    predictions = [time(layout) for layout in layouts]
    return tuple(sorted(predictions, key=lambda pr: (not pr.fits, pr.step_time_s)))


def _search(
    spec: TransformerSpec,
    gpus: int,
    global_batch: int,
    seq_len: int,
    links: ClusterShape,
    space: LayoutSpace | None,
    opts: ParallelAssumptions,
) -> tuple[ParallelLayout, ...]:
    """:func:`enumerate_layouts` on ``links``' node shape under ``opts``."""
    return enumerate_layouts(
        spec, gpus, links.gpus_per_node, global_batch, seq_len=seq_len, space=space,
        allow_cross_node_tp=links.allow_cross_node_tp, allow_uneven_pp=opts.allow_uneven_pp,
    )  # fmt: skip


#: How far below a layout's floor (:func:`_step_time_floors`) its computed step time may fall
#: by rounding alone: the step and the floor add and scale a dozen terms in other orders,
#: each operation off by a relative 1.1e-16 at most; pruning keeps a layout whose floor is
#: within this of the best time found (whether it wins is then left to timing it)
_FLOOR_MARGIN = 1e-9


def _flop_s(gpu: GpuSpec, precision: str, efficiency: RooflineEfficiency) -> float:
    """The roofline's ``compute`` term of one matrix FLOP at ``precision`` on ``gpu``
    (:func:`gpucast.predict.roofline.compute_term_s`). Without convolutions that term is
    ``factor x min(FLOPs / (efficiency x peak), FLOPs / FP32 rate)`` (or FLOPs over the FP32
    rate in fp32): FLOPs times this, up to rounding."""
    one = RooflineWorkload(
        name="one FLOP", batch_size=1, matmul_flops=1.0, memory_bytes=0.0, n_kernels=0
    )
    return compute_term_s(one, DeviceRoofline.of_gpu(gpu, precision), precision, efficiency)


class _WorkArrays(NamedTuple):
    """:class:`_StageWork` of many stages, as arrays."""

    matmul: FloatArray
    sixteen_bit: FloatArray
    memory_bytes: FloatArray
    kernels: FloatArray

    @classmethod
    def of(cls, works: Sequence[_StageWork]) -> _WorkArrays:
        return cls(
            *(np.asarray([getattr(w, k) for w in works], dtype=np.float64) for k in cls._fields)
        )


@dataclass(slots=True, kw_only=True)
class _SearchTable:
    """What a search knows of its layouts that depends on no GPU, no links and no host pace,
    shared by the searches of a memo and its siblings (:meth:`SearchMemo.sibling`): for
    :func:`_step_time_floors`, one layout for each distinct value of a part of the floor, for
    each layout the one it takes, and (:meth:`fill`, by the first search: it needs the model,
    the sequence, the node size and the assumptions, which its siblings share) the work of
    each part; and each layout's peak memory, once a search has needed it."""

    #: by what :func:`_stage_work` reads: tp, ep, pp, cp, micro-batch size, sequence
    #: parallelism, recompute, precision and LoRA (not dp, the micro-batch count, the ZeRO
    #: stage or vpp)
    compute: tuple[ParallelLayout, ...]
    compute_of: IntArray
    #: by what :func:`_dp_collectives` and :func:`_dp_window` read (ZeRO-0 and 1 move the
    #: same bytes whatever the micro-batch count); -1: no data-parallel traffic (dp x cp = 1)
    dp: tuple[ParallelLayout, ...]
    dp_of: IntArray
    #: by what :func:`_pp_sends` reads; -1: no pipeline (pp = 1)
    sends: tuple[ParallelLayout, ...]
    sends_of: IntArray
    #: by what :func:`_stage_state` reads (tp, ep, pp, dp, cp, ZeRO, precision, LoRA)
    state: tuple[ParallelLayout, ...]
    state_of: IntArray
    #: each layout's micro-batch slots ``m + (p - 1) / v``, stages and full recomputation
    paced: FloatArray
    pp: IntArray
    full: npt.NDArray[np.bool_]
    #: per ``compute`` layout: the work of its first and its last stage, and their traffic
    first: _WorkArrays | None = None
    last: _WorkArrays | None = None
    first_comm: _CommWork | None = None
    last_comm: _CommWork | None = None
    #: the ``dp`` layouts' first-stage collectives, a row each: the layout's index, bytes per
    #: pass, ranks, ranks on a node, passes
    collectives: tuple[IntArray, FloatArray, FloatArray, FloatArray, FloatArray] | None = None
    #: per ``dp`` layout: the backward share x the micro-batches its collectives hide under
    dp_window: FloatArray | None = None
    #: per ``sends`` layout: bytes of a send, sends a step, whether they cross nodes
    sends_work: tuple[FloatArray, FloatArray, npt.NDArray[np.bool_]] | None = None
    #: per layout: a floor on its peak memory, its first stage's bytes (:func:`_stage_memory`)
    #: with one micro-batch's activations through its layers and no logits -- a GPU with
    #: fewer usable bytes does not fit it
    memory_floor: FloatArray | None = None
    #: each layout's bytes per GPU on the stage that needs the most (:func:`training_memory`'s
    #: ``total_bytes``), which a GPU's usable bytes must hold; NaN until a search needs it
    peak_bytes: list[float] = field(default_factory=list)

    @classmethod
    def of(cls, layouts: Sequence[ParallelLayout]) -> _SearchTable:
        index: tuple[dict[tuple[object, ...], int], ...] = ({}, {}, {}, {})
        reps: tuple[list[ParallelLayout], ...] = ([], [], [], [])
        which: tuple[list[int], ...] = ([], [], [], [])
        for x in layouts:
            zero = max(x.zero_stage, 1)
            keys = (
                (x.tp, x.ep, x.pp, x.cp, x.micro_batch_size, x.sequence_parallel, x.recompute,
                 x.precision, x.lora_rank, x.lora_targets),
                None
                if x.dp * x.cp == 1
                else (x.dp, x.tp, x.pp, x.cp, x.ep, x.micro_batches if zero > 1 else 0,
                      zero, x.lora_rank, x.lora_targets),
                None
                if x.pp == 1
                else (x.tp, x.cp, x.dp, x.pp, x.virtual_stages, x.micro_batches,
                      x.micro_batch_size),
                (x.tp, x.ep, x.pp, x.dp, x.cp, x.zero_stage, x.precision, x.lora_rank,
                 x.lora_targets),
            )  # fmt: skip
            for key, seen, rep, of in zip(keys, index, reps, which, strict=True):
                if key is None:
                    of.append(-1)
                    continue
                if key not in seen:
                    seen[key] = len(rep)
                    rep.append(x)
                of.append(seen[key])
        compute_of, dp_of, sends_of, state_of = (np.asarray(of, dtype=np.int64) for of in which)
        return cls(
            compute=tuple(reps[0]),
            compute_of=compute_of,
            dp=tuple(reps[1]),
            dp_of=dp_of,
            sends=tuple(reps[2]),
            sends_of=sends_of,
            state=tuple(reps[3]),
            state_of=state_of,
            paced=np.asarray(
                [x.micro_batches + (x.pp - 1) / x.virtual_stages for x in layouts],
                dtype=np.float64,
            ),
            pp=np.asarray([x.pp for x in layouts], dtype=np.int64),
            full=np.asarray([x.recompute == "full" for x in layouts], dtype=np.bool_),
            peak_bytes=[math.nan] * len(layouts),
        )

    def fill(
        self,
        spec: TransformerSpec,
        seq_len: int,
        gpus_per_node: int,
        assumptions: ParallelAssumptions,
        memo: SearchMemo,
    ) -> None:
        """Work out each part's work, once (a sibling's search may have)."""
        if self.first is not None:
            return

        def column(values: Sequence[float]) -> FloatArray:
            return np.asarray(values, dtype=np.float64)

        first: list[_StageWork] = []
        last: list[_StageWork] = []
        first_comm: list[_CommWork] = []
        last_comm: list[_CommWork] = []
        acts = []
        for x in self.compute:
            shapes = _shapes_of(memo, spec, x)
            layers = _stage_layers(spec, x.pp)
            # full recomputation keeps each layer's input and one layer's working set more
            per_layer = _activation_bytes_per_layer(spec, x, seq_len, x.recompute, shapes.kv_local)
            acts.append(layers[0] * per_layer)
            for n, end, works, comms in (
                (layers[0], x.pp == 1, first, first_comm),
                (layers[-1], True, last, last_comm),
            ):
                works.append(_stage_work(spec, x, shapes, seq_len, n, end, assumptions))
                comms.append(_comm_work(spec, x, shapes, seq_len, n, end, works[-1].attn))
        rows = [
            (j, one)
            for j, x in enumerate(self.dp)
            for one in _dp_collectives(
                x, _shapes_of(memo, spec, x), 0, gpus_per_node, _stage_layers(spec, x.pp)[0]
            )
        ]
        self.collectives = (
            np.asarray([j for j, _ in rows], dtype=np.int64),
            column([one.n_bytes for _, one in rows]),
            column([one.size for _, one in rows]),
            column([one.on_node for _, one in rows]),
            column([one.passes for _, one in rows]),
        )
        self.dp_window = np.asarray(
            [backward * window for window, backward in map(_dp_window, self.dp)],
            dtype=np.float64,
        )
        sends = [_pp_sends(spec, x, seq_len, gpus_per_node) for x in self.sends]
        self.sends_work = (
            np.asarray([m for m, _, _ in sends], dtype=np.float64),
            np.asarray([n for _, n, _ in sends], dtype=np.float64),
            np.asarray([a for _, _, a in sends], dtype=np.bool_),
        )
        states = [
            _stage_state(x, _shapes_of(memo, spec, x), 0, _stage_layers(spec, x.pp)[0])
            for x in self.state
        ]
        # ParallelMemory.total_bytes' order: weights, gradients, optimizer, activations,
        # logits (none here), gather buffer, framework -- each sum at most the stage's
        held = column([st.weights + st.gradients + st.optimizer for st in states])
        gather = column([st.gather for st in states])
        self.memory_floor = (
            held[self.state_of] + column(acts)[self.compute_of] + gather[self.state_of]
        ) + assumptions.framework_overhead_gib * GIB
        self.first_comm, self.last_comm = (
            _CommWork(*(column([getattr(w, k) for w in comms]) for k in _CommWork._fields))
            for comms in (first_comm, last_comm)
        )
        self.first, self.last = _WorkArrays.of(first), _WorkArrays.of(last)


def _slowest_stage_s(
    gpu: GpuSpec,
    table: _SearchTable,
    links: ClusterShape,
    efficiency: RooflineEfficiency,
    assumptions: ParallelAssumptions,
) -> FloatArray:
    """Per ``compute`` layout of ``table``: the slower micro-batch of its first and last stage
    on ``gpu`` and ``links``: its roofline (compute at :func:`_flop_s`, memory and overhead
    terms) and its TP, CP and expert traffic, as :class:`_StageTime` adds them."""
    out = np.zeros(len(table.compute), dtype=np.float64)
    precisions = [x.precision for x in table.compute]
    for precision in dict.fromkeys(precisions):
        mask = np.asarray([p == precision for p in precisions], dtype=np.bool_)
        device = DeviceRoofline.of_gpu(gpu, precision)
        flop_s = _flop_s(gpu, precision, efficiency)
        wide = _wide_factor(gpu, precision, efficiency)
        rate = efficiency.compute_efficiency(precision) * gpu.matrix_tflops(precision) * 1e12
        for work, traffic in ((table.first, table.first_comm), (table.last, table.last_comm)):
            assert work is not None and traffic is not None
            tp_s, cp_s, moe_s = _comm_s(traffic, links, wide, rate, assumptions.tp_overlap_fraction)
            micro_batch = (
                (work.matmul + (wide - 1.0) * work.sixteen_bit) * flop_s
                + memory_term_s(work.memory_bytes, device, efficiency)
                + overhead_term_s(work.kernels, device, efficiency)
            )
            micro_batch = micro_batch + tp_s + cp_s + moe_s
            out = np.where(mask, np.maximum(out, micro_batch), out)
    return out


def _step_time_floors(
    spec: TransformerSpec,
    gpu: GpuSpec,
    seq_len: int,
    links: ClusterShape,
    efficiency: RooflineEfficiency,
    assumptions: ParallelAssumptions,
    memo: SearchMemo,
) -> FloatArray:
    """A lower bound on :func:`predict_training_step`'s step time of each of ``memo``'s
    layouts, all at once: from its first and last stage's micro-batch, the host's pace, its
    pipeline sends and its first stage's data-parallel traffic (no optimizer, no interval).

    The step adds terms that are never negative (the roofline's three -- efficiencies and
    GPU factors are > 0, bytes and kernels >= 0 --, TP traffic times ``1 - tp_overlap`` >=
    0, the exposed parts of CP, expert and data-parallel traffic, the optimizer, the
    sends). Let ``M`` be the slowest stage's micro-batch (its roofline plus its TP, CP and
    expert traffic), ``H`` the host's time for one, ``X = max(M, H)``, ``A = m + (p - 1) /
    v``. The micro-batch terms add to ``m X`` (``host_wait`` is ``m max(0, H - M)``) and the
    bubble is ``(p - 1) / v X``: ``A X`` together. ``M`` is at least any stage's micro-batch:
    the work :func:`_stage_work` gives the stage, its FLOPs times ``flop_s`` (:func:`_flop_s`;
    the ``compute`` term up to rounding, which :data:`_FLOOR_MARGIN` covers) plus its
    ``memory_bandwidth`` and ``overhead`` terms, as :func:`predict_step_time` prices them, and
    its traffic (:func:`_comm_s`, as the step prices it). So ``X >= X0 = max(micro-batch of
    the first stage (the most layers), of the last (the head), H)``. The data-parallel term is
    at least the first stage's exposed traffic (:func:`_dp_comm_s`), ``max((1 - f) T, T - b w
    M0)`` (``T`` its collectives, ``f`` the overlap fraction, ``b`` the backward share, ``w``
    the micro-batches of the window, ``M0 <= M`` the stage's micro-batch). So the step is at
    least ``A X + max((1 - f) T, T - c X)`` with ``c = b w <= A`` (b <= 1 and w is 1 or
    ``m``), which over ``X >= X0`` is least at ``X0``: ``max(A X0 + (1 - f) T, (A - c) X0 +
    T)``, plus the sends, which it computes as the step does.
    """
    assert memo.layouts is not None
    if memo.table is None:
        memo.table = _SearchTable.of(memo.layouts)
    table = memo.table
    table.fill(spec, seq_len, links.gpus_per_node, assumptions, memo)
    if memo.floor_parts is None:  # once per memo: none of it depends on the host's pace
        memo.floor_parts = _floor_parts(table, gpu, links, efficiency, assumptions)
    slowest, dp_total, sends = memo.floor_parts
    paced = table.paced
    # the host's time for a micro-batch of the stage with the most layers, ceil(layers / pp)
    host_mb = (
        assumptions.host_layer_s
        * -(-spec.layers // table.pp)
        * (1.0 + HOST_FORWARD_SHARE * table.full)
    )
    x0 = np.maximum(slowest[table.compute_of], host_mb)
    floor = paced * x0
    if table.dp:
        assert table.dp_window is not None
        has = table.dp_of >= 0
        total, c = dp_total[table.dp_of], table.dp_window[table.dp_of]  # -1: masked below
        floor = np.where(has, floor + (1.0 - assumptions.dp_overlap_fraction) * total, floor)
        # c <= paced always (the docstring); the sharper bound needs it
        sharper = has & (c <= paced)
        floor = np.where(sharper, np.maximum(floor, (paced - c) * x0 + total), floor)
    if table.sends:
        floor = np.where(table.sends_of >= 0, floor + sends[table.sends_of], floor)
    return np.asarray(floor, dtype=np.float64)


def _floor_parts(
    table: _SearchTable,
    gpu: GpuSpec,
    links: ClusterShape,
    efficiency: RooflineEfficiency,
    assumptions: ParallelAssumptions,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The floor's parts on ``gpu`` and ``links``, by ``table`` entry: the slowest stage's
    micro-batch (:func:`_slowest_stage_s`), the first stage's data-parallel collectives and
    the pipeline's sends of a step."""
    assert table.collectives is not None and table.sends_work is not None
    owner, n_bytes, size, on_node, passes = table.collectives
    seconds = comm.collective_function(links.collective)(
        n_bytes,
        size,
        on_node,
        _group_gbps(links, on_node),
        links.node_network_gbps * on_node / links.gpus_per_node,
        links.hop_latency_s,
        passes=passes,
    )
    # each layout's collectives summed in their order, as _dp_traffic sums them
    dp_total = np.bincount(owner, weights=seconds, minlength=len(table.dp))
    return (
        _slowest_stage_s(gpu, table, links, efficiency, assumptions),
        np.asarray(dp_total, dtype=np.float64),
        _sends_s(*table.sends_work, links),
    )


def _describe(layout: ParallelLayout) -> str:
    zero = (
        f"ZeRO-{layout.zero_stage}"
        if layout.dp * layout.cp > 1
        else f"dp={layout.dp} (ZeRO has nothing to shard)"
    )
    where = f"tp={layout.tp}, pp={layout.pp}" + (f", cp={layout.cp}" if layout.cp > 1 else "")
    recompute = "no recompute" if layout.recompute == "none" else f"{layout.recompute} recompute"
    return f"{zero} + {recompute} at {where}"


def _fastest(
    spec: TransformerSpec,
    gpu: GpuSpec,
    layouts: Sequence[ParallelLayout],
    floors: FloatArray,
    fits: Callable[[int], bool],
    seq_len: int,
    links: ClusterShape,
    efficiency: RooflineEfficiency | None,
    opts: ParallelAssumptions,
    memo: SearchMemo,
) -> ParallelStepPrediction | None:
    """The prediction of the fastest of ``layouts`` that ``fits`` (asked by index; the first
    of equals in their order, as ``min`` and :func:`rank_layouts`' sort take it; None: none
    fits), by branch and bound: layouts are taken in the order of their ``floors``
    (:func:`_step_time_floors`), and the search stops at the first whose floor exceeds the
    best time found -- it and every later one are slower. Whether a layout fits is asked only
    of those taken, so memory is computed for the layouts whose floor can win and no other."""
    best: ParallelStepPrediction | None = None
    best_index = 0
    bound = floors.tolist()
    for i in np.argsort(floors, kind="stable").tolist():
        if best is not None and bound[i] * (1.0 - _FLOOR_MARGIN) > best.step_time_s:
            break
        if not fits(i):
            continue
        found = predict_training_step(
            spec, gpu, layouts[i], seq_len=seq_len, cluster=links, efficiency=efficiency,
            assumptions=opts, memo=memo,
        )  # fmt: skip
        if best is None or (found.step_time_s, i) < (best.step_time_s, best_index):
            best, best_index = found, i
    return best


def _least_memory(floors: FloatArray, peak: Callable[[int], float]) -> int:
    """The index of the least ``peak`` (the first of equals, as ``min`` takes it), working out
    peaks lowest ``floors`` first and stopping where a floor exceeds the least found."""
    least, least_peak = -1, math.inf
    bound = floors.tolist()
    for i in np.argsort(floors, kind="stable").tolist():
        if bound[i] > least_peak:
            break
        if (found := peak(i)) < least_peak or (found == least_peak and i < least):
            least, least_peak = i, found
    return least


def best_layout(
    spec: TransformerSpec,
    gpu: GpuSpec,
    gpus: int,
    global_batch: int,
    *,
    seq_len: int,
    cluster: ClusterShape | None = None,
    space: LayoutSpace | None = None,
    efficiency: RooflineEfficiency | None = None,
    assumptions: ParallelAssumptions | None = None,
    memo: SearchMemo | None = None,
    only: Callable[[ParallelLayout], bool] | None = None,
) -> ParallelStepPrediction:
    """The fastest layout that fits; :class:`NoFeasiblePlanError` saying why when none does.
    ``only``: the layouts the caller allows (e.g. a fixed tp and pp; None: every one).

    Layouts are taken lowest floor on the step time first (:func:`_step_time_floors`, computed
    for all of them at once), and the search stops where the floor exceeds the best step found
    (:func:`_fastest`); only the layouts it takes get their memory computed, and only those
    that fit are timed: the same pick as the head of :func:`rank_layouts`, for a fraction of
    the work (``plan llm-train`` calls this for every GPU type and count).
    ``memo``: one from an earlier search with every argument the same but the host's pace
    (``assumptions.host_layer_s``), whose layouts, memory, floor parts and stage times are
    reused, or one whose layouts and table (only: peak memory and the floor's GPU-free parts)
    come from a search on another GPU (:meth:`SearchMemo.sibling`)."""
    links = cluster or cluster_shape(gpu)
    opts = assumptions or ParallelAssumptions()
    memo = memo if memo is not None else SearchMemo()
    if memo.layouts is None:
        memo.layouts = _search(spec, gpus, global_batch, seq_len, links, space, opts)
    if memo.table is None:
        memo.table = _SearchTable.of(memo.layouts)
    everything, peaks = memo.layouts, memo.table.peak_bytes
    allowed = [i for i, x in enumerate(everything) if only is None or only(x)]
    layouts = [everything[i] for i in allowed]
    usable = usable_bytes(
        gpu, reserved_gib=opts.reserved_gib, reserved_fraction=opts.reserved_fraction
    )

    def peak(j: int) -> float:
        """The peak memory of ``memo.layouts[j]``, computed once per table."""
        if math.isnan(peaks[j]):
            layout = everything[j]
            stages = _all_stage_memory(
                spec, gpu, layout, seq_len, opts, _shapes_of(memo, spec, layout)
            )
            peaks[j] = max(mem.total_bytes for mem in stages)
        return peaks[j]

    if not layouts:
        raise NoFeasiblePlanError(
            f"no valid layout of {gpus} GPUs runs {spec.name} with a global batch of "
            f"{global_batch} sequences of {seq_len} tokens",
            fix="the global batch must be divisible by dp; tp must divide the heads and fit "
            "in a node, pp the layers -- try a GPU count and batch with more divisors",
        )
    eff = efficiency or RooflineEfficiency()
    floors = _step_time_floors(spec, gpu, seq_len, links, eff, opts, memo)[allowed]
    table = memo.table
    assert table.memory_floor is not None  # filled by _step_time_floors
    may_fit = (table.memory_floor[allowed] <= usable).tolist()
    # ParallelMemory.fits: the peak stage's total within the usable bytes
    found = _fastest(
        spec, gpu, layouts, floors, lambda i: may_fit[i] and peak(allowed[i]) <= usable,
        seq_len, links, efficiency, opts, memo,
    )  # fmt: skip
    if found is not None:
        return found
    smallest = layouts[_least_memory(table.memory_floor[allowed], lambda i: peak(allowed[i]))]
    mem = training_memory(spec, gpu, smallest, seq_len=seq_len, assumptions=opts)
    raise NoFeasiblePlanError(
        f"{spec.name} does not fit on {gpus} x {gpu.name} even with "
        f"{_describe(smallest)} (micro-batch {smallest.micro_batch_size}): "
        f"needs {mem.total_bytes / GIB:.1f} GiB per GPU of {mem.usable_bytes / GIB:.1f} GiB "
        "usable",
        fix=_no_fit_fix(layouts),
    )


def _no_fit_fix(searched: Sequence[ParallelLayout]) -> str:
    """What to change when none of ``searched`` fits: only what the search left out (ZeRO-3
    where some layout had data-parallel ranks to shard over, full recompute, LoRA)."""
    left_out: list[tuple[str, str]] = []
    if not any(x.zero_stage == 3 for x in searched) and any(x.dp * x.cp > 1 for x in searched):
        left_out.append(("ZeRO-3", "--zero 3"))
    if not any(x.recompute == "full" for x in searched):
        left_out.append(("full recompute", "--recompute full"))
    fixes = ["use more GPUs or GPUs with more memory"]
    if not any(x.lora_rank for x in searched):
        fixes.append("train LoRA adapters (--lora-rank)")
    if left_out:
        names, flags = zip(*left_out, strict=True)
        fixes.append(f"allow {' and '.join(names)} ({', '.join(flags)})")
    return ", ".join(fixes[:-1]) + (" or " if len(fixes) > 1 else "") + fixes[-1]


__all__ = [
    "LayoutConflict",
    "SearchMemo",
    "best_layout",
    "cluster_shape",
    "enumerate_layouts",
    "fixed_layout_conflict",
    "predict_training_step",
    "rank_layouts",
    "training_memory",
    "validate_layout",
    "weight_bytes_per_param",
]
