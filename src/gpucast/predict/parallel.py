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

The public names are here (``__all__``); the code lives in private parts: the figures the
parts share, the cluster a layout runs on (its links) and a layout's validation
(``_parallel_layout``), the per-GPU shapes and memory per stage (``_parallel_memory``), the
time terms of a stage's micro-batch and of the data-parallel and pipeline communication
(``_parallel_time``), what a search computes once and the step-time floors it orders layouts
by (``_parallel_memo``), one step's prediction (``_parallel_step``) and the layout search
(``_parallel_search``).
"""

from __future__ import annotations

from gpucast.predict._parallel_layout import (
    HOST_FORWARD_SHARE,
    cluster_shape,
    group_link_gbps,
    validate_layout,
    weight_bytes_per_param,
    with_pcie_figures,
)
from gpucast.predict._parallel_memo import SearchMemo
from gpucast.predict._parallel_memory import training_memory
from gpucast.predict._parallel_search import (
    LayoutConflict,
    best_layout,
    enumerate_layouts,
    fixed_layout_conflict,
    rank_layouts,
)
from gpucast.predict._parallel_step import predict_training_step

__all__ = [
    "HOST_FORWARD_SHARE",
    "LayoutConflict",
    "SearchMemo",
    "best_layout",
    "cluster_shape",
    "enumerate_layouts",
    "fixed_layout_conflict",
    "group_link_gbps",
    "predict_training_step",
    "rank_layouts",
    "training_memory",
    "validate_layout",
    "weight_bytes_per_param",
    "with_pcie_figures",
]
