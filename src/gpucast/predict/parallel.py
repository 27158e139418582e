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

from gpucast.domain.catalog import PCIE_X16_GBPS, GpuSpec
from gpucast.domain.errors import InvalidSpecError, NoFeasiblePlanError
from gpucast.domain.llm import TransformerSpec
from gpucast.domain.parallel import (
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
    predict_step_time,
)

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
        intra = PCIE_X16_GBPS.get(gpu.pcie_generation, 128.0)
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
    beyond a pair crosses PCIe (:meth:`~gpucast.domain.parallel.ClusterShape.group_gbps`)."""
    links = cluster_shape(gpu)
    if node.mesh_gpus > 1 and gpus <= node.mesh_gpus:
        return replace(links, gpus_per_node=node.mesh_gpus, mesh=True).group_gbps(gpus)
    if node.bridged:
        return with_bridges(links, gpu).group_gbps(gpus)
    return links.intra_node_gbps


def with_bridges(links: ClusterShape, gpu: GpuSpec) -> ClusterShape:
    """``links`` of ``gpu`` cards bridged in pairs: a group beyond a pair crosses PCIe x16 at
    the card's generation (unchanged for a GPU without NVLink)."""
    if gpu.interconnect_gbps is None:
        return links
    return replace(links, bridge_pcie_gbps=PCIE_X16_GBPS.get(gpu.pcie_generation, 128.0))


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
    weights = frozen_bytes * shard(params.dense, params.expert, 3) + w_bytes * params.adapters
    gradients = GRADIENT_BYTES_PER_PARAM * shard(params.trained_dense, params.trained_expert, 2)
    optimizer = OPTIMIZER_BYTES_PER_PARAM * shard(params.trained_dense, params.trained_expert, 1)
    gather = 0.0
    if zero == 3 and z_dense > 1:
        gather = 2.0 * w_bytes * (shapes.layer_dense + shapes.layer_expert)
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
        weights_bytes=weights,
        gradients_bytes=gradients,
        optimizer_bytes=optimizer,
        activations_bytes=activations,
        logits_bytes=logits,
        gather_buffer_bytes=gather,
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
    the memory alone), and each layout's peak memory :func:`best_layout` already computed.

    None of it depends on the host's pace (``ParallelAssumptions.host_layer_s``, applied per
    step): searches that differ only in it may share one memo (:func:`best_layout`
    ``memo``), as the fit of that pace does. ``layouts`` and ``peak_bytes`` do not depend on
    the GPU or its links either: searches of the same model, GPU count, node size, batch,
    sequence, space and assumptions on other GPUs may share them (``plan llm-train`` does)."""

    #: the layouts :func:`best_layout` enumerated (None until it has)
    layouts: tuple[ParallelLayout, ...] | None = None
    stage_times: dict[tuple[ParallelLayout, int, bool, bool], _StageTime] = field(
        default_factory=dict
    )
    dp_comm_s: dict[ParallelLayout, float] = field(default_factory=dict)
    #: the bytes per GPU of each layout's stage that needs the most (:func:`training_memory`'s
    #: ``total_bytes``), which a GPU's usable bytes must hold
    peak_bytes: dict[ParallelLayout, float] = field(default_factory=dict)
    #: the roofline's interval per regime (``predict_step_time(intervals=...)``)
    intervals: dict[str, tuple[float, float, str, str]] = field(default_factory=dict)
    #: per-GPU shapes by what they depend on (:func:`_shapes_of`)
    shapes: dict[tuple[int, int, bool, int, tuple[str, ...]], _Shapes] = field(default_factory=dict)
    #: the first stage's data-parallel collectives by what they depend on (the step-time
    #: floor's, :func:`_step_time_floor`)
    dp_traffic: dict[tuple[object, ...], _DpTraffic] = field(default_factory=dict)


def _shapes_of(memo: SearchMemo, spec: TransformerSpec, layout: ParallelLayout) -> _Shapes:
    """:func:`_shapes`, once per search for each (tp, ep, pp > 1, LoRA) it depends on."""
    key = (layout.tp, layout.ep, layout.pp > 1, layout.lora_rank, layout.lora_targets)
    if key not in memo.shapes:
        memo.shapes[key] = _shapes(spec, layout)
    return memo.shapes[key]


def _link_s(n_bytes: float, gbps: float, latency_s: float) -> float:
    return float(comm.transfer_time_s(n_bytes, gbps)) + latency_s


def _wide_factor(gpu: GpuSpec, precision: str, efficiency: RooflineEfficiency) -> float:
    """How many FLOPs at ``precision``'s rate one FLOP of 16-bit matrix work costs: 1 but in
    fp8, where it is the fp8 rate (efficiency x peak) over the bf16 one."""
    if precision != "fp8":
        return 1.0
    fp8 = efficiency.compute_efficiency("fp8") * gpu.matrix_tflops("fp8")
    wide = efficiency.compute_efficiency("bf16") * gpu.matrix_tflops("bf16")
    return max(1.0, fp8 / wide)


class _StageFlops(NamedTuple):
    """FLOPs of one micro-batch of one stage on one GPU (:func:`_stage_flops`)."""

    matmul: float  # every matrix FLOP: forward, backward, recompute, the head on the last
    priced: float  # the same at the layout's precision's rate (fp8: attention, head wider)
    attn: float  # the attention core's forward of one layer
    wide: float  # :func:`_wide_factor`


def _stage_flops(
    spec: TransformerSpec,
    gpu: GpuSpec,
    layout: ParallelLayout,
    shapes: _Shapes,
    seq_len: int,
    layers: int,
    last: bool,
    efficiency: RooflineEfficiency,
    assumptions: ParallelAssumptions,
) -> _StageFlops:
    """The FLOPs of one micro-batch on one GPU of a stage of ``layers`` layers (``last``: it
    holds the LM head), as :func:`_stage_time` prices them (the module docstring)."""
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
    # fp8 covers the linear layers (Transformer Engine's fp8_autocast); the attention core and
    # the LM head run at 16 bits: priced at their rate, as that many FLOPs at the fp8 rate
    wide = _wide_factor(gpu, layout.precision, efficiency)
    priced = matmul + (wide - 1.0) * (attn_all + head_all)
    return _StageFlops(matmul=matmul, priced=priced, attn=attn, wide=wide)


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
    t, c, b = layout.tp, layout.cp, layout.micro_batch_size
    last = stage == layout.pp - 1
    s_local = seq_len / c
    tokens = b * s_local
    h = spec.hidden
    full = layout.recompute == "full"
    flops = _stage_flops(spec, gpu, layout, shapes, seq_len, layers, last, efficiency, assumptions)
    matmul, priced, attn, wide = flops.matmul, flops.priced, flops.attn, flops.wide
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
    workload = RooflineWorkload(
        name=f"{spec.name} stage {stage}",
        batch_size=b,
        matmul_flops=priced,
        memory_bytes=memory,
        n_kernels=kernels,
    )
    estimate = predict_step_time(
        workload, gpu, layout.precision, efficiency=efficiency, intervals=intervals
    )
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
    )
    gpn = cluster.gpus_per_node
    nic_per_gpu = cluster.node_network_gbps / gpn
    # -- tensor parallelism: all-reduces (or all-gather + reduce-scatter) of b s h / c
    tp_s = 0.0
    if t > 1:
        message = ACTIVATION_BYTES * tokens * h
        in_node = t <= gpn
        one = float(
            comm.hierarchical_collective_s(
                message,
                t,
                min(t, gpn),
                cluster.group_gbps(t),
                cluster.node_network_gbps,
                cluster.nvlink_hop_latency_s if in_node else cluster.hop_latency_s,
                passes=2.0,
            )
        )
        count = layers * (6 if full else 4) + (2 if last else 0)
        tp_s = count * one * (1.0 - assumptions.tp_overlap_fraction)
    # -- context parallelism: ring passes of the K and V chunks, hidden under attention
    cp_s = 0.0
    if c > 1:
        chunk = 2.0 * ACTIVATION_BYTES * b * s_local * spec.head_dim * shapes.kv_local
        in_node = c * t <= gpn
        gbps = cluster.group_gbps(2) if in_node else nic_per_gpu  # a ring: one peer each way
        latency = cluster.nvlink_hop_latency_s if in_node else cluster.hop_latency_s
        passes = 4.0 if full else 3.0
        ring = passes * (c - 1) * _link_s(chunk, gbps, latency)
        attn_passes = 4.0 if full else 3.0
        attn_s = (
            attn_passes
            * attn
            * wide
            / (
                efficiency.compute_efficiency(layout.precision)
                * gpu.matrix_tflops(layout.precision)
                * 1e12
            )
        )
        cp_s = layers * max(0.0, ring - attn_s)
    # -- expert parallelism: all-to-all of the routed tokens
    moe_s = 0.0
    if layout.ep > 1:
        e = layout.ep
        sp_div = t if layout.sp_active else 1
        routed = ACTIVATION_BYTES * tokens * spec.experts_per_token * h / sp_div
        on_node = max(1, min(e, gpn // t))
        intra_s = routed * (on_node - 1) / e * 8.0 / (cluster.group_gbps(on_node) * 1e9)
        inter_s = routed * (e - on_node) / e * 8.0 / (nic_per_gpu * 1e9)
        latency = cluster.nvlink_hop_latency_s if on_node == e else cluster.hop_latency_s
        one = max(intra_s, inter_s) + latency
        moe_s = layers * (6 if full else 4) * one
    return _StageTime(
        estimate=estimate,
        optimizer=optimizer,
        matmul_flops=matmul,
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


def _dp_traffic(
    layout: ParallelLayout,
    shapes: _Shapes,
    stage: int,
    cluster: ClusterShape,
    stage_layers: int,
) -> _DpTraffic:
    """:func:`_dp_comm_s`'s collectives before overlap (``dp * cp`` > 1)."""
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
    gpn = cluster.gpus_per_node
    collective = comm.collective_function(cluster.collective)
    total = 0.0
    for parts, size, stride in (
        (dense, group, layout.tp),
        (expert, expert_group, layout.tp * layout.ep),
    ):
        on_node = max(1, min(size, gpn // stride))
        for n_bytes, passes in parts:
            if n_bytes <= 0 or size <= 1:
                continue
            total += float(
                collective(
                    n_bytes,
                    size,
                    on_node,
                    cluster.group_gbps(on_node),
                    cluster.node_network_gbps * on_node / gpn,
                    cluster.hop_latency_s,
                    passes=passes,
                )
            )
    return _DpTraffic(
        total_s=total,
        window_micro_batches=1 if zero <= 1 else m,
        backward_fraction=1.0 if zero == 3 else comm.DEFAULT_BACKWARD_FRACTION,
    )


def _pp_p2p_s(
    spec: TransformerSpec, layout: ParallelLayout, links: ClusterShape, seq_len: int
) -> float:
    """The pipeline's blocking sends of one step (``pp`` > 1; the module docstring)."""
    m, p, v = layout.micro_batches, layout.pp, layout.virtual_stages
    message = ACTIVATION_BYTES * layout.micro_batch_size * seq_len / layout.cp
    message *= spec.hidden / layout.tp  # Megatron sends 1/t per TP rank
    stride = layout.tp * layout.cp * layout.dp
    gpn = links.gpus_per_node
    if stride >= gpn:
        send = _link_s(message, links.node_network_gbps / gpn, links.hop_latency_s)
    else:
        send = _link_s(message, links.group_gbps(2), links.nvlink_hop_latency_s)
    return 2.0 * (v * m + p - 1) * send


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
    1`` (they shard nothing otherwise).
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


#: How far below a layout's floor (:func:`_step_time_floor`) its computed step time may fall
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


def _step_time_floor(
    spec: TransformerSpec,
    gpu: GpuSpec,
    layout: ParallelLayout,
    seq_len: int,
    links: ClusterShape,
    flop_s: float,
    efficiency: RooflineEfficiency,
    assumptions: ParallelAssumptions,
    memo: SearchMemo,
) -> float:
    """A lower bound on :func:`predict_training_step`'s step time of ``layout``, from its
    FLOPs, the host's pace, its pipeline sends and its first stage's data-parallel traffic
    (no stage time, no roofline but its compute term).

    The step adds terms that are never negative (the roofline's three -- efficiencies and
    GPU factors are > 0, bytes and kernels >= 0 --, TP traffic times ``1 - tp_overlap`` >=
    0, the exposed parts of CP, expert and data-parallel traffic, the optimizer, the
    sends). Let ``M`` be the slowest stage's micro-batch (its roofline plus its TP, CP and
    expert traffic), ``H`` the host's time for one, ``X = max(M, H)``, ``A = m + (p - 1) /
    v``. The micro-batch terms add to ``m X`` (``host_wait`` is ``m max(0, H - M)``) and the
    bubble is ``(p - 1) / v X``: ``A X`` together. ``M`` is at least any stage's roofline,
    so at least its ``compute`` term: the FLOPs :func:`_stage_flops` gives the stage times
    ``flop_s`` (:func:`_flop_s`; equal up to rounding, which :data:`_FLOOR_MARGIN` covers).
    So ``X >= X0 = max(compute of the first stage (the most layers), compute of the last
    (the head), H)``. The data-parallel term is at least
    the first stage's exposed traffic (:func:`_dp_comm_s`), ``max((1 - f) T, T - b w M0)``
    (``T`` its collectives, ``f`` the overlap fraction, ``b`` the backward share, ``w`` the
    micro-batches of the window, ``M0 <= M`` the stage's micro-batch). So the step is at
    least ``A X + max((1 - f) T, T - c X)`` with ``c = b w <= A`` (b <= 1 and w is 1 or
    ``m``), which over ``X >= X0`` is least at ``X0``: ``max(A X0 + (1 - f) T, (A - c) X0 +
    T)``, plus the sends, which it computes as the step does.
    """
    shapes = _shapes_of(memo, spec, layout)
    layers = _stage_layers(spec, layout.pp)
    slowest = 0.0
    for n, last in {(layers[0], layout.pp == 1), (layers[-1], True)}:
        flops = _stage_flops(spec, gpu, layout, shapes, seq_len, n, last, efficiency, assumptions)
        slowest = max(slowest, flops.priced * flop_s)
    full = layout.recompute == "full"
    host_mb = assumptions.host_layer_s * max(layers) * (1.0 + HOST_FORWARD_SHARE * full)
    m, p, v = layout.micro_batches, layout.pp, layout.virtual_stages
    paced = m + (p - 1) / v
    x0 = max(slowest, host_mb)
    floor = paced * x0
    if layout.dp * layout.cp > 1:
        # what _dp_traffic reads of the layout (not its recompute, micro-batch size, ...)
        key = (
            layout.dp, layout.tp, layout.pp, layout.cp, layout.ep, layout.micro_batches,
            layout.zero_stage, layout.lora_rank, layout.lora_targets,
        )  # fmt: skip
        if key not in memo.dp_traffic:
            memo.dp_traffic[key] = _dp_traffic(layout, shapes, 0, links, layers[0])
        dp = memo.dp_traffic[key]
        c = dp.backward_fraction * dp.window_micro_batches
        floor += (1.0 - assumptions.dp_overlap_fraction) * dp.total_s
        if c <= paced:  # always (the docstring); the sharper bound needs it
            floor = max(floor, (paced - c) * x0 + dp.total_s)
    if p > 1:
        floor += _pp_p2p_s(spec, layout, links, seq_len)
    return floor


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
    seq_len: int,
    links: ClusterShape,
    efficiency: RooflineEfficiency | None,
    opts: ParallelAssumptions,
    memo: SearchMemo,
) -> ParallelStepPrediction:
    """The prediction of the fastest of ``layouts`` (the first of equals in their order, as
    ``min`` and :func:`rank_layouts`' sort take it), by branch and bound: layouts are timed
    in the order of their floor (:func:`_step_time_floor`), and the search stops at the
    first whose floor exceeds the best time found -- it and every later one are slower."""
    eff = efficiency or RooflineEfficiency()
    rates: dict[str, float] = {}  # the roofline's seconds per FLOP, by precision
    floors = []
    for layout in layouts:
        if layout.precision not in rates:
            rates[layout.precision] = _flop_s(gpu, layout.precision, eff)
        rate = rates[layout.precision]
        floors.append(_step_time_floor(spec, gpu, layout, seq_len, links, rate, eff, opts, memo))
    best: ParallelStepPrediction | None = None
    best_index = 0
    for i in sorted(range(len(layouts)), key=floors.__getitem__):
        if best is not None and floors[i] * (1.0 - _FLOOR_MARGIN) > best.step_time_s:
            break
        found = predict_training_step(
            spec, gpu, layouts[i], seq_len=seq_len, cluster=links, efficiency=efficiency,
            assumptions=opts, memo=memo,
        )  # fmt: skip
        if best is None or (found.step_time_s, i) < (best.step_time_s, best_index):
            best, best_index = found, i
    assert best is not None  # layouts is not empty
    return best


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

    Only layouts whose memory fits are timed (memory is the cheaper half of a prediction),
    and of those only the ones whose floor on the step time (:func:`_step_time_floor`) does
    not exceed the best step found (:func:`_fastest`): the same pick as the head of
    :func:`rank_layouts`, for a fraction of the work (``plan llm-train`` calls this for
    every GPU type and count).
    ``memo``: one from an earlier search with every argument the same but the host's pace
    (``assumptions.host_layer_s``), whose layouts, memory and stage times are reused, or
    one whose layouts and peak memory (only) come from a search on another GPU
    (:class:`SearchMemo`)."""
    links = cluster or cluster_shape(gpu)
    opts = assumptions or ParallelAssumptions()
    memo = memo if memo is not None else SearchMemo()
    if memo.layouts is None:
        memo.layouts = _search(spec, gpus, global_batch, seq_len, links, space, opts)
    layouts = memo.layouts if only is None else tuple(x for x in memo.layouts if only(x))
    peaks = []
    for layout in layouts:
        if layout not in memo.peak_bytes:
            shapes = _shapes_of(memo, spec, layout)
            stages = _all_stage_memory(spec, gpu, layout, seq_len, opts, shapes)
            memo.peak_bytes[layout] = max(mem.total_bytes for mem in stages)
        peaks.append(memo.peak_bytes[layout])
    usable = usable_bytes(
        gpu, reserved_gib=opts.reserved_gib, reserved_fraction=opts.reserved_fraction
    )
    # ParallelMemory.fits: the peak stage's total within the usable bytes
    fitting = [layout for layout, peak in zip(layouts, peaks, strict=True) if peak <= usable]
    if fitting:
        return _fastest(spec, gpu, fitting, seq_len, links, efficiency, opts, memo)
    if not layouts:
        raise NoFeasiblePlanError(
            f"no valid layout of {gpus} GPUs runs {spec.name} with a global batch of "
            f"{global_batch} sequences of {seq_len} tokens",
            fix="the global batch must be divisible by dp; tp must divide the heads and fit "
            "in a node, pp the layers -- try a GPU count and batch with more divisors",
        )
    index = min(range(len(layouts)), key=peaks.__getitem__)
    smallest = layouts[index]
    mem = training_memory(spec, gpu, smallest, seq_len=seq_len, assumptions=opts)
    raise NoFeasiblePlanError(
        f"{spec.name} does not fit on {gpus} x {gpu.name} even with "
        f"{_describe(smallest)} (micro-batch {smallest.micro_batch_size}): "
        f"needs {mem.total_bytes / GIB:.1f} GiB per GPU of {mem.usable_bytes / GIB:.1f} GiB "
        "usable",
        fix="use more GPUs or GPUs with more memory, train LoRA adapters (lora_rank), or "
        "allow ZeRO-3 and full recompute in the search space",
    )


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
