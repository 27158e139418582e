"""3D-parallel LLM training as frozen values: the layout, the cluster's links, the prediction.

:class:`ParallelLayout` is one way to train a :class:`~gpucast.domain.llm.TransformerSpec` on
``dp * tp * pp * cp`` GPUs, with its recipe (micro-batching, ZeRO stage, recomputation,
precision, LoRA). Its ``__post_init__`` checks what it can alone (positive sizes, known
choices); the checks that need the model (heads divisible by ``tp``, layers by ``pp``, ...)
are :func:`gpucast.predict.parallel.validate_layout`. :class:`ClusterShape` holds the links;
:class:`ParallelAssumptions` the model's documented priors; :class:`ParallelStepPrediction`
what :func:`gpucast.predict.parallel.predict_training_step` returns.

Rank order (Megatron-LM's default): ``tp`` is the fastest-varying rank, then ``cp``, then
``dp``, then ``pp``. So a TP group sits inside one node, the data-parallel group of one
(``tp``, ``pp``) position strides across nodes, and adjacent pipeline stages are on different
nodes as soon as ``tp * cp * dp`` fills a node. Expert parallelism (``ep``) is carved out of
the ``dp * cp`` ranks, next to ``tp``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, get_args

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.gpu_memory import RESERVED_FRACTION, RESERVED_GIB
from gpucast.domain.options import option
from gpucast.domain.prediction import Estimate
from gpucast.domain.systems import IntraNode, group_link_gbps
from gpucast.domain.units import GIB

#: How the note of a step time's 80% interval begins (one per prediction).
INTERVAL_NOTE = "80% interval"
Recompute = Literal["none", "selective", "full"]
TrainPrecision = Literal["bf16", "fp16", "fp8"]
RECOMPUTE: tuple[str, ...] = get_args(Recompute)
#: What ``predict llm-train`` searches when the user fixes neither: the context-parallel sizes
#: and interleaved pipeline stages that Megatron/NeMo runs use (MLPerf Training v4.0: GPT-3
#: 175B on 10,752-11,616 H100 with 8 virtual stages per GPU, Llama-2-70B LoRA with cp=2)
SEARCHED_CP_SIZES: tuple[int, ...] = (1, 2)
SEARCHED_VIRTUAL_STAGES: tuple[int, ...] = (1, 2, 4, 8)
#: The highest ZeRO stage a pipeline (pp > 1) is planned with: ZeRO-3 (FSDP full shard)
#: with pipeline stages is what DeepSpeed's pipeline engine refuses
#: (deepspeed/runtime/pipe/engine.py asserts "ZeRO-2 and ZeRO-3 are incompatible with
#: pipeline parallelism"); ZeRO-2 is kept, as torchtitan runs FSDP2 under a pipeline without
#: resharding the weights after forward. Both LLM training verbs refuse it given, and leave
#: it out of their search (:data:`PIPELINE_ZERO_NOTE`).
PIPELINE_MAX_ZERO = 2
PIPELINE_ZERO_NOTE = (
    f"ZeRO-{PIPELINE_MAX_ZERO + 1} only at pp=1: DeepSpeed's pipeline engine refuses it with "
    "pipeline stages"
)
#: Tokens per context-parallel rank above which a longer sequence is also searched at wider
#: cp (:func:`searched_cp_sizes`), and the widest searched
CP_TOKENS_PER_RANK = 8192
MAX_SEARCHED_CP = 16


def searched_cp_sizes(seq_len: int) -> tuple[int, ...]:
    """The context-parallel sizes searched for ``seq_len`` tokens: :data:`SEARCHED_CP_SIZES`,
    and for a long context the powers of two up to one :data:`CP_TOKENS_PER_RANK` chunk per
    rank (at most :data:`MAX_SEARCHED_CP`), as long-context training splits it (Llama 3's
    128K-token stage ran cp 16)."""
    sizes = list(SEARCHED_CP_SIZES)
    cp = 2 * max(sizes)
    while cp <= MAX_SEARCHED_CP and seq_len // cp >= CP_TOKENS_PER_RANK:
        sizes.append(cp)
        cp *= 2
    return tuple(sizes)


TRAIN_PRECISIONS: tuple[str, ...] = get_args(TrainPrecision)
#: Matrices LoRA adapters can be attached to: attention q, k, v, o and MLP gate, up, down.
LORA_TARGETS: tuple[str, ...] = ("q", "k", "v", "o", "gate", "up", "down")


def _int_at_least(name: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidSpecError(name, "must be an integer", got=value)
    if value < low:
        raise InvalidSpecError(name, f"must be >= {low}", got=value)
    return value


def _fraction(name: str, value: float) -> None:
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise InvalidSpecError(name, "must be in [0, 1]", got=value)


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelLayout:
    """One parallel layout and training recipe.

    * ``dp`` data-parallel replicas, ``tp`` tensor-parallel ranks (Megatron column/row split
      of every layer), ``pp`` pipeline stages (1F1B schedule; ``virtual_stages`` > 1 is the
      interleaved schedule), ``cp`` context-parallel ranks (the sequence split, ring
      attention), ``ep`` expert-parallel ranks of an MoE model (taken from ``dp * cp``);
      ``sequence_parallel`` shards the norm and dropout activations over ``tp`` (Korthikanti
      et al. 2022).
    * ``micro_batch_size`` sequences per micro-batch, ``micro_batches`` per step per replica:
      the global batch is ``dp * micro_batch_size * micro_batches`` sequences.
    * ``zero_stage`` 0-3 shards over the ``dp * cp`` ranks: 1 the optimizer state, 2 also the
      gradients, 3 also the weights (Rajbhandari et al. 2020, "ZeRO").
    * ``recompute``: ``none`` keeps every activation (attention scores materialised),
      ``selective`` recomputes the attention core (as FlashAttention does), ``full`` keeps
      only each layer's input and recomputes the layer in backward.
    * ``precision`` of the matmuls; weights and gradients are 16-bit with fp32 master weights
      and Adam moments (2 + 2 + 12 = 16 bytes per trained parameter).
    * ``lora_rank`` > 0 freezes the base model and trains rank-``r`` adapters on
      ``lora_targets`` (Hu et al. 2021, "LoRA").
    """

    dp: int = 1
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    sequence_parallel: bool = True
    micro_batch_size: int = 1
    micro_batches: int = 1
    virtual_stages: int = 1
    zero_stage: int = 0
    recompute: Recompute = "none"
    precision: TrainPrecision = "bf16"
    lora_rank: int = 0
    lora_targets: tuple[str, ...] = ("q", "k", "v", "o")

    def __post_init__(self) -> None:
        for name in ("dp", "tp", "pp", "cp", "ep", "micro_batch_size", "micro_batches"):
            _int_at_least(name, getattr(self, name), 1)
        _int_at_least("virtual_stages", self.virtual_stages, 1)
        _int_at_least("lora_rank", self.lora_rank, 0)
        zero = _int_at_least("zero_stage", self.zero_stage, 0)
        if zero > 3:
            raise InvalidSpecError("zero_stage", "must be 0, 1, 2 or 3", got=zero)
        if self.recompute not in RECOMPUTE:
            raise InvalidSpecError(
                "recompute", f"must be one of {', '.join(RECOMPUTE)}", got=self.recompute
            )
        if self.precision not in TRAIN_PRECISIONS:
            raise InvalidSpecError(
                "precision", f"must be one of {', '.join(TRAIN_PRECISIONS)}", got=self.precision
            )
        unknown = [t for t in self.lora_targets if t not in LORA_TARGETS]
        if unknown or (self.lora_rank > 0 and not self.lora_targets):
            raise InvalidSpecError(
                "lora_targets",
                f"must be a non-empty subset of {', '.join(LORA_TARGETS)}",
                got=self.lora_targets,
            )
        if self.virtual_stages > 1 and self.pp == 1:
            raise InvalidSpecError(
                "virtual_stages",
                "needs pipeline parallelism (pp > 1)",
                got=self.virtual_stages,
                fix="set virtual_stages=1 or pp > 1",
            )

    @property
    def gpus(self) -> int:
        return self.dp * self.tp * self.pp * self.cp

    @property
    def global_batch_size(self) -> int:
        """Sequences per optimizer step."""
        return self.dp * self.micro_batch_size * self.micro_batches

    @property
    def lora(self) -> bool:
        return self.lora_rank > 0

    @property
    def sp_active(self) -> bool:
        """Sequence parallelism in effect (it is a no-op without tensor parallelism)."""
        return self.sequence_parallel and self.tp > 1

    def label(self) -> str:
        """Short text such as ``dp=16 tp=8 pp=8 mb=1x144 zero=1 recompute=selective``."""
        parts = [f"dp={self.dp}", f"tp={self.tp}", f"pp={self.pp}"]
        if self.virtual_stages > 1:
            parts.append(f"vpp={self.virtual_stages}")
        if self.cp > 1:
            parts.append(f"cp={self.cp}")
        if self.ep > 1:
            parts.append(f"ep={self.ep}")
        if self.tp > 1 and not self.sequence_parallel:
            parts.append("no-sp")
        parts += [
            f"mb={self.micro_batch_size}x{self.micro_batches}",
            f"zero={self.zero_stage}",
            f"recompute={self.recompute}",
            self.precision,
        ]
        if self.lora:
            parts.append(f"lora={self.lora_rank}")
        return " ".join(parts)


#: How a collective's bytes cross the links: :func:`gpucast.predict.comm.
#: hierarchical_collective_s` (intra-node phase, then the nodes' shards over their NICs) or
#: :func:`gpucast.predict.comm.flat_ring_collective_s` (one ring through every GPU at its
#: slowest link).
COLLECTIVE_ALGORITHMS: tuple[str, ...] = ("hierarchical", "flat_ring")


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeLinks:
    """How a node joins the GPUs a tensor-parallel group takes: ``mesh_gpus`` GPUs joined
    pairwise (Gaudi 2, MI300X baseboards; 0: a switch, or not known), so a smaller group
    reaches only its members' links; or cards ``bridged`` in pairs (H100 NVL, L40S-class
    PCIe servers), so a group beyond a pair crosses PCIe. ``pcie_busbw_gbps``: for GPUs
    without NVLink, the all-reduce bus bandwidth (Gbit/s) a group of ``gpus`` reaches over
    PCIe, as ``(gpus, gbps)`` pairs ascending (``catalog/data/pcie_allreduce.csv``); empty:
    the x16 link's nominal rate."""

    mesh_gpus: int = 0
    bridged: bool = False
    pcie_busbw_gbps: tuple[tuple[int, float], ...] = ()

    def pcie_gbps(self, gpus: int) -> float | None:
        """The PCIe all-reduce bus bandwidth of a group of ``gpus`` (the pair of the largest
        count <= ``gpus``, else the smallest; None: none given)."""
        if not self.pcie_busbw_gbps:
            return None
        below = [gbps for count, gbps in self.pcie_busbw_gbps if count <= gpus]
        return below[-1] if below else self.pcie_busbw_gbps[0][1]


#: A node whose GPUs reach each other at their datasheet link (a switch, or not known).
SWITCHED = NodeLinks()


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterShape:
    """The links of a GPU cluster of identical nodes.

    ``intra_node_gbps`` is one GPU's NVLink/PCIe bandwidth (Gbit/s), ``node_network_gbps`` a
    node's NICs together (Gbit/s; 8 x 400 Gb/s InfiniBand on a DGX H100 is 3,200), as
    :func:`gpucast.predict.comm.hierarchical_collective_s` takes them. ``hop_latency_s`` is
    one network step of a ring or tree, ``nvlink_hop_latency_s`` one step inside a node.
    Tensor parallelism across nodes is refused unless ``allow_cross_node_tp``. ``collective``
    is how a data-parallel collective crosses the nodes (:data:`COLLECTIVE_ALGORITHMS`):
    ``hierarchical`` on RDMA fabrics, ``flat_ring`` for NCCL over TCP with one NIC per node.
    ``mesh``: the node's GPUs link pairwise (:meth:`group_gbps`). ``bridge_pcie_gbps``: they
    pair up through NVLink bridges (``intra_node_gbps`` to the partner card) and reach any
    other GPU of the node over PCIe at this rate.
    """

    gpus_per_node: int = 8
    intra_node_gbps: float
    node_network_gbps: float
    hop_latency_s: float = 25e-6
    nvlink_hop_latency_s: float = 3e-6
    allow_cross_node_tp: bool = False
    collective: str = "hierarchical"
    #: the node's GPUs are joined pairwise by direct links (``intra_node: mesh``: Gaudi's RoCE
    #: ports, AMD's Infinity Fabric), not through a switch: see :meth:`group_gbps`
    mesh: bool = False
    #: the node's GPUs are bridged in pairs (``intra_node: nvlink-bridge``: PCIe cards such as
    #: H100 PCIe / NVL, A30, A40): beyond a pair a collective runs over PCIe at this rate
    bridge_pcie_gbps: float | None = None

    def group_gbps(self, gpus: int) -> float:
        """Gbit/s each of ``gpus`` GPUs of one node reaches the others at in a collective among
        them: all of ``intra_node_gbps`` through a switch; in a mesh only its links to the
        group's other members, ``(gpus - 1) / (gpus_per_node - 1)`` of it, and a
        point-to-point send (``gpus`` = 2) one peer's link; with bridged pairs the bridge for
        a pair, PCIe (:attr:`bridge_pcie_gbps`) for a larger group, whose ring crosses it."""
        n = self.gpus_per_node
        if n <= 1:
            return self.intra_node_gbps
        kind: IntraNode = "mesh" if self.mesh else "nvswitch"
        pcie = math.inf
        if self.bridge_pcie_gbps is not None:
            kind, pcie = "nvlink-bridge", self.bridge_pcie_gbps
        return group_link_gbps(kind, self.intra_node_gbps, gpus, n, pcie)

    def subset(self, used: int) -> ClusterShape:
        """The links of ``used`` GPUs of each node (at most ``gpus_per_node``): their share of
        the node's NICs (one per GPU on rails) and, in a mesh, only the links among them."""
        _int_at_least("used", used, 1)
        if used > self.gpus_per_node:
            raise InvalidSpecError("used", f"must be <= {self.gpus_per_node}", got=used)
        own = used > 1 and self.bridge_pcie_gbps is None  # bridged pairs keep their bridge
        return replace(
            self,
            gpus_per_node=used,
            intra_node_gbps=self.group_gbps(used) if own else self.intra_node_gbps,
            node_network_gbps=self.node_network_gbps * used / self.gpus_per_node,
        )

    def __post_init__(self) -> None:
        _int_at_least("gpus_per_node", self.gpus_per_node, 1)
        for name in ("intra_node_gbps", "node_network_gbps"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise InvalidSpecError(name, "must be > 0", got=value)
        pcie = self.bridge_pcie_gbps
        if pcie is not None and not (math.isfinite(pcie) and pcie > 0):
            raise InvalidSpecError("bridge_pcie_gbps", "must be > 0", got=pcie)
        if pcie is not None and self.mesh:
            raise InvalidSpecError("bridge_pcie_gbps", "a mesh has no bridged pairs", got=pcie)
        for name in ("hop_latency_s", "nvlink_hop_latency_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise InvalidSpecError(name, "must be >= 0", got=value)
        if self.collective not in COLLECTIVE_ALGORITHMS:
            raise InvalidSpecError(
                "collective",
                f"must be one of {', '.join(COLLECTIVE_ALGORITHMS)}",
                got=self.collective,
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelAssumptions:
    """Priors of the 3D-parallel step model; each is documented where it is used.

    * ``tp_overlap_fraction`` of TP communication hidden under compute (0: Megatron's default
      without ``--tp-comm-overlap``); ``dp_overlap_fraction`` of the data-parallel
      communication that can hide under backward (:data:`gpucast.predict.comm.
      DEFAULT_OVERLAP_FRACTION`).
    * ``framework_overhead_gib`` per GPU for NCCL communicators and buffers of the TP, PP and
      DP groups, on top of ``reserved_gib`` + ``reserved_fraction`` of memory that
      :func:`gpucast.predict.memory.usable_bytes` already sets aside (CUDA context,
      workspaces, fragmentation).
    * ``kernels_per_layer_forward`` kernels one layer launches in forward (backward: twice).
    * ``causal``: attention is causal, so a fused kernel skips half the score FLOPs.
    * ``allow_uneven_pp``: accept ``pp`` that does not divide the layers (the first stages
      get one more layer; the slowest stage sets the pace), as Megatron runs Llama 3.1 405B's
      126 layers on 8 or 16 stages (its first/last-stage layer counts). On by default: the
      search finds such layouts and the step says so (``uneven pipeline`` note); False keeps
      to divisors of the layer count.
    * ``host_layer_s``: seconds the host takes to issue one layer's work for one micro-batch
      (forward and backward, as the layout runs them); a micro-batch takes at least its stage's
      layers times it. 0 (the default): the host keeps ahead of the GPUs, as with CUDA graphs.
      NVIDIA's MLPerf v4.0 Llama-2-70B LoRA logs (NeMo 24.04, no CUDA graphs) read ~8 ms.
    * ``lora_unfused``: LoRA adapters run as kernels of their own beside the frozen matrices
      (Megatron / NeMo, PEFT), moving their inputs and outputs through memory
      (:func:`gpucast.predict._parallel_memory._lora_traffic_per_layer`); False: fused into the base
      matmuls' kernels, no traffic of their own (a frozen matrix's input is moved either way).
    """

    tp_overlap_fraction: float = 0.0
    dp_overlap_fraction: float = 0.7
    framework_overhead_gib: float = 1.0
    reserved_gib: float = RESERVED_GIB
    reserved_fraction: float = RESERVED_FRACTION
    kernels_per_layer_forward: int = 12
    causal: bool = True
    allow_uneven_pp: bool = True
    host_layer_s: float = 0.0
    lora_unfused: bool = True

    def __post_init__(self) -> None:
        _fraction("tp_overlap_fraction", self.tp_overlap_fraction)
        if not (math.isfinite(self.host_layer_s) and 0 <= self.host_layer_s < 1):
            raise InvalidSpecError(
                "host_layer_s", "must be >= 0 and under a second", got=self.host_layer_s
            )
        _fraction("dp_overlap_fraction", self.dp_overlap_fraction)
        _fraction("reserved_fraction", self.reserved_fraction)
        for name in ("framework_overhead_gib", "reserved_gib"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise InvalidSpecError(name, "must be >= 0", got=value)
        _int_at_least("kernels_per_layer_forward", self.kernels_per_layer_forward, 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelMemory:
    """Bytes per GPU on the pipeline stage that needs the most (``stage``, 0-based)."""

    stage: int
    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    logits_bytes: float  # LM-head output of one micro-batch (last stage)
    gather_buffer_bytes: float  # ZeRO-3: the gathered weights of two layers (prefetch)
    framework_bytes: float
    usable_bytes: float
    in_flight_micro_batches: float  # micro-batches whose activations the stage holds

    @property
    def total_bytes(self) -> float:
        return sum(self.components().values())

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.usable_bytes

    @property
    def headroom_bytes(self) -> float:
        return self.usable_bytes - self.total_bytes

    def components(self) -> dict[str, float]:
        return {
            "weights": self.weights_bytes,
            "gradients": self.gradients_bytes,
            "optimizer": self.optimizer_bytes,
            "activations": self.activations_bytes,
            "logits": self.logits_bytes,
            "gather_buffer": self.gather_buffer_bytes,
            "framework": self.framework_bytes,
        }

    def summary(self) -> str:
        return f"{self.total_bytes / GIB:.1f} GiB per GPU of {self.usable_bytes / GIB:.1f} usable"


#: Terms of a step, in the order they are reported.
STEP_TERMS: tuple[str, ...] = (
    "compute",
    "memory_bandwidth",
    "kernel_overhead",
    "optimizer",
    "tp_comm",
    "cp_comm",
    "moe_comm",
    "pp_bubble",
    "pp_p2p",
    "dp_comm",
    "host_wait",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelStepPrediction:
    """One training step of one layout: time by term, throughput, MFU and memory.

    ``step_time.breakdown`` holds the seconds of each term of :data:`STEP_TERMS` (they add up
    to ``step_time.value``). ``model_flops_per_step`` is ``6 N tokens`` (``4 N tokens`` with
    LoRA, whose frozen base needs no weight gradients), ``N`` the matmul parameters one token
    passes through; ``hardware_flops_per_step`` adds attention and recomputation -- every
    FLOP the GPUs execute. Both are totals over all GPUs.
    """

    model: str
    gpu: str
    layout: ParallelLayout
    seq_len: int
    step_time: Estimate
    model_flops_per_step: float
    hardware_flops_per_step: float
    peak_flops_per_gpu: float
    memory: ParallelMemory
    notes: tuple[str, ...] = ()

    @property
    def step_time_s(self) -> float:
        return self.step_time.value

    @property
    def breakdown(self) -> Mapping[str, float]:
        return self.step_time.breakdown

    @property
    def bottleneck(self) -> str:
        return self.step_time.bottleneck

    @property
    def tokens_per_step(self) -> int:
        return self.layout.global_batch_size * self.seq_len

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.step_time_s

    @property
    def mfu(self) -> float:
        """Model FLOPs utilisation: model FLOPs / (step time x GPUs x peak)."""
        return self.model_flops_per_step / (
            self.step_time_s * self.layout.gpus * self.peak_flops_per_gpu
        )

    @property
    def mfu_basis(self) -> str:
        """The peak :attr:`mfu` and :attr:`hfu` divide by: the GPU's dense peak at the layout's
        precision (at fp8 the fp8 one; NVIDIA and MLPerf state MFU against the bf16 peak)."""
        return f"{self.layout.precision} dense peak"

    @property
    def hfu(self) -> float:
        """Hardware FLOPs utilisation: executed FLOPs / (step time x GPUs x peak)."""
        return self.hardware_flops_per_step / (
            self.step_time_s * self.layout.gpus * self.peak_flops_per_gpu
        )

    @property
    def fits(self) -> bool:
        return self.memory.fits

    def with_band(self, low: float, high: float, note: str) -> ParallelStepPrediction:
        """This prediction with its step time's interval set to ``low``-``high`` times the
        point value (ratios of measured / predicted that held-out runs earned) and ``note``
        in place of the interval note it had. A band that does not straddle the point (every
        held-out run slower, say) keeps the point as its near edge: an interval holds its
        prediction."""
        if not 0.0 < low <= high or not math.isfinite(high):
            raise InvalidSpecError("band", "must satisfy 0 < low <= high", got=(low, high))
        value = self.step_time.value
        kept = tuple(n for n in self.notes if not n.startswith(INTERVAL_NOTE))
        step = replace(
            self.step_time,
            lower=min(value * low, value),
            upper=max(value * high, value),
            notes=(*(n for n in self.step_time.notes if not n.startswith(INTERVAL_NOTE)), note),
        )
        return replace(self, step_time=step, notes=(*kept, note))

    def to_dict(self) -> dict[str, object]:
        return {
            "model": self.model,
            "gpu": self.gpu,
            "layout": self.layout.label(),
            "gpus": self.layout.gpus,
            "seq_len": self.seq_len,
            "global_batch_size": self.layout.global_batch_size,
            # units in the names, as predict train's JSON (session 34: was "step_time" with a
            # "unit" key and a "breakdown" without one)
            "step_time_s": {
                "value": self.step_time.value,
                "lower": self.step_time.lower,
                "upper": self.step_time.upper,
            },
            "bottleneck": self.step_time.bottleneck,
            "source": self.step_time.source,
            "breakdown_s": dict(self.step_time.breakdown),
            "step_time_notes": list(self.step_time.notes),
            "tokens_per_s": self.tokens_per_s,
            "mfu": self.mfu,
            "hfu": self.hfu,
            "mfu_basis": self.mfu_basis,
            "memory": {
                "stage": self.memory.stage,
                **{f"{k}_bytes": v for k, v in self.memory.components().items()},
                "total_bytes": self.memory.total_bytes,
                "usable_bytes": self.memory.usable_bytes,
                "fits": self.memory.fits,
            },
            "notes": list(self.notes),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class LayoutSpace:
    """The choices :func:`gpucast.predict.parallel.enumerate_layouts` combines.

    ``dp``, ``tp``, ``pp`` and the micro-batch count follow from the GPU count and the global
    batch; ``ep_sizes`` empty means every divisor of the model's experts.
    """

    micro_batch_sizes: tuple[int, ...] = (1, 2, 4, 8)
    zero_stages: tuple[int, ...] = (0, 1, 2, 3)
    recompute: tuple[Recompute, ...] = ("none", "selective", "full")
    cp_sizes: tuple[int, ...] = (1,)
    ep_sizes: tuple[int, ...] = ()
    virtual_stages: tuple[int, ...] = (1,)
    sequence_parallel: bool = True
    precision: TrainPrecision = "bf16"
    lora_rank: int = 0
    lora_targets: tuple[str, ...] = ("q", "k", "v", "o")

    def __post_init__(self) -> None:
        for name in ("micro_batch_sizes", "cp_sizes", "ep_sizes", "virtual_stages"):
            for value in getattr(self, name):
                _int_at_least(name, value, 1)
        for name in ("micro_batch_sizes", "zero_stages", "recompute", "cp_sizes", "virtual_stages"):
            if not getattr(self, name):
                raise InvalidSpecError(name, "must list at least one choice")
        for zero in self.zero_stages:
            if isinstance(zero, bool) or zero not in (0, 1, 2, 3):
                raise InvalidSpecError("zero_stages", "must be among 0, 1, 2, 3", got=zero)
        for choice in self.recompute:
            if choice not in RECOMPUTE:
                raise InvalidSpecError(
                    "recompute", f"must be among {', '.join(RECOMPUTE)}", got=choice
                )
        # the rest is checked by ParallelLayout itself
        ParallelLayout(
            precision=self.precision, lora_rank=self.lora_rank, lora_targets=self.lora_targets
        )


# -- layout choices a request fixes ------------------------------------------------------------
#: The request fields of the layout choices a user may fix, in the order they are stated, with
#: their flags (``predict llm-train`` and ``plan llm-train`` share them).
LAYOUT_FLAGS: dict[str, str] = {
    "tp": "tp",
    "pp": "pp",
    "cp": "cp",
    "vpp": "vpp",
    "micro_batch": "micro-batch",
    "zero": "zero",
    "recompute": "recompute",
}


def _default(searched: str | tuple[object, ...]) -> str:
    """A layout option's default as its help states it: ``searched, 1/2/4/8`` for the choices
    a verb tries, the one choice it uses, or the verb's own words."""
    if isinstance(searched, str):
        return searched
    if len(searched) == 1:
        return str(searched[0])
    return "searched, " + "/".join(map(str, searched))


def tp_option() -> Any:
    """The ``--tp`` field of an LLM training request: every layout's tensor-parallel size."""
    return option(
        None, help="Tensor-parallel size of every layout (default: searched).", example="8"
    )


def pp_option() -> Any:
    """The ``--pp`` field: every layout's pipeline stages."""
    return option(None, help="Pipeline stages of every layout (default: searched).", example="1")


def cp_option(searched: str | tuple[int, ...]) -> Any:
    """The ``--cp`` field; ``searched``: what the verb tries without it (:func:`_default`)."""
    return option(
        None,
        help=f"Context-parallel size of every layout (default: {_default(searched)}).",
        example="2",
    )


def vpp_option(searched: str | tuple[int, ...]) -> Any:
    """The ``--vpp`` field; ``searched``: what the verb tries without it."""
    return option(
        None,
        help="Interleaved pipeline stages per GPU of every layout (default: "
        f"{_default(searched)}; more than 1 needs pp > 1).",
        example="2",
    )


def micro_batch_option(searched: tuple[int, ...]) -> Any:
    """The ``--micro-batch`` field; ``searched``: the sizes the verb tries without it."""
    return option(
        None,
        help=f"Sequences per micro-batch (default: {_default(searched)}).",
        example="1",
    )


def zero_option(searched: tuple[int, ...]) -> Any:
    """The ``--zero`` field; ``searched``: the stages the verb tries without it."""
    return option(
        None,
        help=f"ZeRO stage 0-3 of every layout (default: {_default(searched)}).",
        example="1",
    )


def recompute_option(searched: tuple[str, ...]) -> Any:
    """The ``--recompute`` field; ``searched``: the choices the verb tries without it."""
    return option(
        None,
        help="none (every activation kept, attention scores materialised as without "
        "FlashAttention), selective (the attention core recomputed: what FlashAttention or "
        "Megatron's selective recompute keep -- pick it for a FlashAttention run without "
        f"recompute) or full (each layer recomputed) (default: {_default(searched)}).",
        example="selective",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class FixedLayout:
    """The layout choices a training request fixes (None: searched), checked as flags.

    ``tp`` and ``pp`` follow from the GPU count in the search, so :meth:`allows` filters the
    layouts on them (``best_layout(only=...)``); the others bound the :class:`LayoutSpace`
    (:meth:`space`). A ZeRO stage fixed above 0 still leaves ``dp x cp = 1`` layouts at 0:
    they have nothing to shard.
    """

    tp: int | None = None
    pp: int | None = None
    cp: int | None = None
    vpp: int | None = None
    micro_batch: int | None = None
    zero: int | None = None
    recompute: str | None = None

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "cp", "vpp", "micro_batch"):
            value = getattr(self, name)
            flag = LAYOUT_FLAGS[name]
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise InvalidSpecError(
                    flag, "must be an integer >= 1", got=value, fix=f"e.g. --{flag} 8"
                )
        if self.zero is not None and (isinstance(self.zero, bool) or self.zero not in (0, 1, 2, 3)):
            raise InvalidSpecError(
                "zero", "must be 0, 1, 2 or 3", got=self.zero,
                fix="e.g. --zero 1 (ZeRO stage 1 shards the optimizer state, 2 also the "
                "gradients, 3 also the weights; 0: none)",
            )  # fmt: skip
        if self.recompute is not None and self.recompute not in RECOMPUTE:
            raise InvalidSpecError(
                "recompute", f"must be one of {', '.join(RECOMPUTE)}", got=self.recompute
            )
        staged = f"pp={self.pp}" if (self.pp or 1) > 1 else f"vpp={self.vpp} (pp > 1)"
        if (
            self.zero is not None
            and self.zero > PIPELINE_MAX_ZERO
            and max(self.pp or 1, self.vpp or 1) > 1
        ):
            raise InvalidSpecError(
                "zero",
                f"ZeRO-{self.zero} with {staged} is not planned: DeepSpeed's pipeline engine "
                f"refuses ZeRO-{PIPELINE_MAX_ZERO + 1} with pipeline stages",
                fix="use --zero 1, or --pp 1" + (" without --vpp" if self.vpp else ""),
            )

    @classmethod
    def of(cls, request: object) -> FixedLayout:
        """The choices a request's :data:`LAYOUT_FLAGS` fields fix."""
        return cls(**{name: getattr(request, name) for name in LAYOUT_FLAGS})

    @property
    def fixed(self) -> dict[str, int | str]:
        """The fixed choices by flag, in :data:`LAYOUT_FLAGS` order."""
        values = {flag: getattr(self, name) for name, flag in LAYOUT_FLAGS.items()}
        return {flag: value for flag, value in values.items() if value is not None}

    def label(self) -> str:
        """``tp=8, pp=1`` (empty: nothing fixed)."""
        return ", ".join(f"{flag}={value}" for flag, value in self.fixed.items())

    def flags(self) -> str:
        """``--tp/--pp``: the flags that fix the choices (empty: none)."""
        return "/".join(f"--{flag}" for flag in self.fixed)

    def text(self) -> str:
        """What a plan states of them: ``tp=8 fixed (--tp); the rest searched``."""
        if not self.fixed:
            flags = ", ".join(f"--{flag}" for flag in LAYOUT_FLAGS.values())
            return f"all searched ({flags} fix them)"
        rest = "; the rest searched" if len(self.fixed) < len(LAYOUT_FLAGS) else ""
        zero = f"; {self.zero_note()}" if self.zero_note() else ""
        return f"{self.label()} fixed ({', '.join(f'--{f}' for f in self.fixed)}){rest}{zero}"

    def zero_note(self) -> str | None:
        """Why a layout of ``dp x cp = 1`` runs a fixed ZeRO stage above 0 as ZeRO-0 (the
        class docstring's rule), or None where no such stage is fixed."""
        if not self.zero:
            return None
        return (
            f"--zero {self.zero} shards over the dp x cp ranks: a layout of dp x cp = 1 has "
            "nothing to shard and runs (and is priced) as ZeRO-0"
        )

    def allows(self, layout: ParallelLayout) -> bool:
        """Whether ``layout`` has the fixed ``tp`` and ``pp`` (the space bounds the rest)."""
        return (self.tp is None or layout.tp == self.tp) and (
            self.pp is None or layout.pp == self.pp
        )

    def space(self, searched: LayoutSpace) -> LayoutSpace:
        """``searched`` with each fixed choice in place of its searched ones."""
        changes: dict[str, Any] = {}
        if self.micro_batch is not None:
            changes["micro_batch_sizes"] = (self.micro_batch,)
        if self.zero is not None:
            changes["zero_stages"] = (self.zero,)
        if self.recompute is not None:
            changes["recompute"] = (self.recompute,)
        if self.cp is not None:
            changes["cp_sizes"] = (self.cp,)
        if self.vpp is not None:
            changes["virtual_stages"] = (self.vpp,)
        return replace(searched, **changes) if changes else searched
