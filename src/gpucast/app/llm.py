"""``gpucast.predict_llm_train``: one training step of a published LLM on a GPU cluster.

The model comes from ``catalog/data/llm_models.csv`` (published hyper-parameters, nothing
downloaded), the step from :mod:`gpucast.predict.parallel` (3D parallelism, ZeRO,
recomputation, LoRA; memory per GPU after Korthikanti et al. 2022) with the roofline
efficiencies of the fitted step-time model (``--software``, default ``tuned``: Megatron/NeMo
class code). Give any of ``--tp --pp --cp --vpp --micro-batch --zero --recompute`` to fix them;
what is left open is searched, and the fastest layout that fits is returned with the runners-
up. Validated on MLPerf Training v4.0's GPT-3 and Llama-2-70B LoRA systems
(``benchmarks/steptime_accuracy.py`` section 4); every step states the 80% band those systems
earned held out one submitter at a time (``catalog/data/llm_train_intervals.csv``, by the
software stack: :func:`gpucast.inputs.mlperf_llm.stated_band`), widened on a GPU type the
step-time data never ran to span the leave-one-GPU-out band
(:func:`gpucast.inputs.mlperf_llm.gpu_band`). ``plan llm-train`` carries the same band on
every row of a GPU type and names the cheapest row that still meets the deadline and the
budget at its slow edge (``safe``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._request import resolve
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.options import documented, lower_text, option
from gpucast.domain.parallel import (
    INTERVAL_NOTE,
    PIPELINE_MAX_ZERO,
    PIPELINE_ZERO_NOTE,
    SEARCHED_VIRTUAL_STAGES,
    FixedLayout,
    LayoutSpace,
    cp_option,
    micro_batch_option,
    pp_option,
    recompute_option,
    tp_option,
    vpp_option,
    zero_option,
)
from gpucast.domain.systems import (
    ClusterSettings,
    check_cluster_options,
    cluster_nodes_option,
    cluster_option,
    cluster_price_option,
    cluster_set_option,
    used_gpus_text,
)
from gpucast.domain.units import usd_per_million
from gpucast.domain.workload import check_precision_units, check_software

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpucast.domain.catalog import GpuSpec
    from gpucast.domain.llm import TransformerSpec
    from gpucast.domain.parallel import ClusterShape, ParallelStepPrediction
    from gpucast.domain.provenance import Validation
    from gpucast.predict.roofline import RooflineEfficiency

#: What ``predict llm-train`` and ``plan llm-train`` search of the choices a user does not fix
#: (cp: by the sequence, :func:`searched_space`)
SEARCHED = LayoutSpace(virtual_stages=SEARCHED_VIRTUAL_STAGES)
#: ``--cp``'s default, in both LLM training verbs' help
CP_SEARCHED = (
    "searched, 1 or 2; up to 16 for sequences of 32K tokens or more, one 8K-token chunk a rank "
    "at least"
)


def searched_space(
    fixed: FixedLayout, seq_len: int, *, precision: str, lora_rank: int
) -> LayoutSpace:
    """The layouts both LLM training verbs search at ``seq_len`` tokens: :data:`SEARCHED`
    with the context-parallel sizes of :func:`~gpucast.domain.parallel.searched_cp_sizes`,
    bounded by the choices the user ``fixed``."""
    from gpucast.domain.parallel import searched_cp_sizes

    return fixed.space(
        replace(
            SEARCHED,
            cp_sizes=searched_cp_sizes(seq_len),
            precision=precision,  # type: ignore[arg-type]
            lora_rank=lora_rank,
        )
    )


#: The software stacks LLM training is predicted for: the PyTorch family's Megatron-style
#: 3D parallelism (``tuned``: Megatron/NeMo-class, MLPerf's; ``pytorch``: eager)
LLM_SOFTWARE: tuple[str, ...] = ("tuned", "pytorch")
LLM_SOFTWARE_HELP = (
    "Software stack the step time is predicted for: tuned (Megatron/NeMo-class fused kernels, "
    "as MLPerf runs) or pytorch (eager)."
)


def check_llm_software(value: str) -> None:
    """:func:`~gpucast.domain.workload.check_software`, and one line for a stack that runs no
    Megatron-style 3D-parallel LLM training (``tf1``: the CM-DARE TensorFlow 1.x stack; the
    PyTorch family trains in every precision of :data:`TRAIN_PRECISIONS`)."""
    check_software(value)
    if value not in LLM_SOFTWARE:
        raise InvalidSpecError(
            "software",
            f"LLM training (tensor, pipeline and context parallelism, ZeRO) is predicted for "
            f"the PyTorch family only: {' or '.join(LLM_SOFTWARE)}",
            got=value,
            fix="use --software tuned (Megatron/NeMo) or --software pytorch",
        )


def node_size_note(gpu: str, gpus_per_node: int | None) -> dict[str, str]:
    """A ``node size`` assumption where ``--gpus-per-node`` is more GPUs of type ``gpu`` (a
    canonical name) than any node of the catalog holds (its instances offered, ``systems.csv``):
    the node's links are priced as one such server's across all of them, which no catalog
    server has (a machine of one's own may: it is said, not refused). Empty otherwise, and for
    a GPU the catalog has no node of."""
    from gpucast.inputs.llm_serving import largest_node_gpus

    largest = largest_node_gpus(gpu)
    if gpus_per_node is None or not 0 < largest < gpus_per_node:
        return {}
    return {
        "node size": f"warning: no {gpu} node of the catalog (instances, systems.csv) holds "
        f"{gpus_per_node} GPUs, the largest has {largest}; the {gpus_per_node} are priced as "
        f"one such server's links (check --gpus-per-node, or describe your server with "
        f"--cluster FILE)"
    }


def check_lora_rank(spec: TransformerSpec, lora_rank: int) -> None:
    """Refuse a LoRA rank past ``spec``'s hidden size: its adapters would be wider than the
    matrices they adapt, adding nothing a full-rank update lacks (a typo, as 100000)."""
    if lora_rank > spec.hidden:
        raise InvalidSpecError(
            "lora-rank",
            f"must be at most {spec.name}'s hidden size of {spec.hidden}",
            got=lora_rank,
            fix="e.g. --lora-rank 16 (0: train every weight)",
        )


TRAIN_PRECISIONS = ("bf16", "fp16", "fp8")

LORA_FUSED_HELP = (
    "LoRA adapters fused into the base matmuls' kernels (no memory traffic of their own); "
    "default: unfused, as Megatron/NeMo and PEFT run them."
)
TP_OVERLAP_HELP = (
    "Share of tensor-parallel traffic hidden under compute (0: Megatron's default; "
    "NeMo/Megatron --tp-comm-overlap hides most of it)."
)


def check_tp_overlap(value: object) -> None:
    if isinstance(value, bool) or not (isinstance(value, int | float) and 0.0 <= value <= 1.0):
        raise InvalidSpecError(
            "tp-overlap", "must be a share in [0, 1]", got=value, fix="e.g. --tp-overlap 0.8"
        )


def tp_overlap_text(value: float) -> str:
    """The ``tensor-parallel overlap`` assumption both LLM training verbs state."""
    default = " (--tp-overlap; Megatron's default, without --tp-comm-overlap: 0)"
    return f"{value:.0%} of TP traffic hidden under compute" + (
        default if value == 0 else " (--tp-overlap)"
    )


HOST_HELP = (
    "Milliseconds the host takes to issue one layer's forward and backward of one micro-batch "
    "(default: fitted on MLPerf's Llama-2-70B LoRA runs, which capture no CUDA graphs; 0: the "
    "host keeps ahead of the GPUs, as with CUDA graphs)."
)


def check_host_ms(value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not (isinstance(value, int | float) and 0 <= value < 1000):
        raise InvalidSpecError(
            "host-ms-per-layer",
            "must be >= 0 and under 1000 ms",
            got=value,
            fix="e.g. --host-ms-per-layer 8",
        )


def host_seconds(value: float | None, efficiency: RooflineEfficiency) -> float:
    """The host's seconds per layer and micro-batch: given (ms), else the fitted one."""
    return efficiency.host_layer_s if value is None else float(value) / 1e3


def host_text(value: float | None, efficiency: RooflineEfficiency) -> str:
    """The ``host`` assumption both LLM training verbs state."""
    seconds = host_seconds(value, efficiency)
    if seconds == 0:
        given = " (given)" if value is not None else " (no host time fitted)"
        return f"keeps ahead of the GPUs, as with CUDA graphs{given}"
    paced = (
        f"{1e3 * seconds:.3g} ms per layer per micro-batch: a micro-batch takes at least its "
        "stage's layers times that"
    )
    if value is not None:
        return f"{paced} (--host-ms-per-layer)"
    return (
        f"{paced}, as without CUDA graphs (default, fitted: {efficiency.host_source}; "
        "--host-ms-per-layer 0 where the run captures CUDA graphs)"
    )


def warmup_seconds(value: float | None, efficiency: RooflineEfficiency) -> float:
    """A run's one-off warm-up after its clock starts: the fitted one where the host paces
    the run (no CUDA graphs), none where it keeps ahead (CUDA graphs are captured, and the
    run warmed up, before the clock starts: MLPerf's GPT-3 logs show under 1 s after it)."""
    return efficiency.warmup_s if host_seconds(value, efficiency) > 0 else 0.0


def warmup_text(value: float | None, efficiency: RooflineEfficiency) -> str:
    """The ``warm-up`` assumption ``plan llm-train`` states."""
    if warmup_seconds(value, efficiency) == 0:
        return (
            "none after the clock starts: with CUDA graphs (--host-ms-per-layer 0) the graphs "
            "are captured and the run warmed up before it (MLPerf's GPT-3 logs: under 1 s "
            "after run_start)"
        )
    return (
        f"{efficiency.warmup_s:.1f} s once per run, as without CUDA graphs: the first steps' "
        "lazy set-up after the clock starts (communicators, autotuning, allocator growth), "
        "fitted with the host's time on MLPerf's Llama-2 LoRA runs, whose logs show 17-19 s "
        "at 8 and 1,024 GPUs; --host-ms-per-layer 0 (CUDA graphs) drops it"
    )


def precision_note(precision: str, skipped: tuple[str, ...] = ()) -> dict[str, str]:
    """The ``precision`` assumption of an fp8 plan and the GPU types without the units of
    ``precision`` its search skipped (:func:`gpucast.app._units.gpus_with_units`)."""
    from gpucast.app._units import skipped_assumption

    note = {"precision": "fp8 on GPUs with fp8 tensor cores"} if precision == "fp8" else {}
    if skipped:
        said = skipped_assumption(precision, skipped, auto=False)
        note[said.name] = f"{said.value} ({said.source}; {said.override})"
    return note


def mfu_text(precision: str, gpus: Sequence[GpuSpec]) -> str:
    """The ``MFU`` assumption both LLM training verbs state: the peak their MFU divides by
    (:attr:`~gpucast.domain.parallel.ParallelStepPrediction.mfu_basis`); at fp8, what the
    same step reads against the bf16 peak NVIDIA and MLPerf state MFU against, per GPU type
    of ``gpus``."""
    text = (
        "model FLOPs (6 x the matmul parameters a token passes through x tokens, 4 x with LoRA; "
        "attention and recomputation not counted) / (step time x GPUs x each GPU's "
        f"{precision} dense peak)"
    )
    if precision != "fp8":
        return text
    ratios: dict[str, list[str]] = {}
    for g in sorted(set(gpus), key=lambda g: g.name):
        ratio = g.peak_tflops("fp8") / g.peak_tflops("bf16")
        ratios.setdefault(f"x{ratio:.2g}", []).append(g.name)
    against = ", ".join(f"{r} on {', '.join(names)}" for r, names in ratios.items())
    return (
        f"{text}; NVIDIA and MLPerf usually state MFU against the bf16 peak, on which these "
        f"read {against}"
    )


#: a typical value of each count flag, for its error's "e.g." (8 for the GPU counts)
_COUNT_EXAMPLES = {"seq-len": "4096", "global-batch": "512", "max-gpus": "256"}


def positive_or_none(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        example = _COUNT_EXAMPLES.get(name, "8")
        raise InvalidSpecError(
            name, "must be an integer >= 1", got=value, fix=f"e.g. --{name} {example}"
        )


#: The most sequences a step of either LLM training verb takes: ~50,000x Llama 3 405B's
#: 16M-token batch of 8K-token sequences (2,048); more is a typo whose step prints as noise
MAX_GLOBAL_BATCH = 10**8


def check_global_batch(value: int) -> None:
    """``--global-batch``: a whole number of sequences, 1 to :data:`MAX_GLOBAL_BATCH`."""
    positive_or_none("global-batch", value)
    if value > MAX_GLOBAL_BATCH:
        raise InvalidSpecError(
            "global-batch",
            f"must be at most {MAX_GLOBAL_BATCH:.0e} sequences a step (~50,000x Llama 3's 2,048)",
            got=value,
            fix=f"e.g. --global-batch {_COUNT_EXAMPLES['global-batch']}",
        )


#: ``predict llm-train --gpu``'s GPUs where ``--gpus`` is not given (a node's worth)
DEFAULT_GPUS = 8


#: The fastest node network a request may name (Gbit/s): 100x today's 8 x 800G nodes; a
#: larger figure is a typo that would make communication free.
MAX_GBPS = 1_000_000.0


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class PredictLlmTrainRequest:
    """An LLM, a cluster and a batch to predict one training step of
    (``gpucast predict llm-train``)."""

    VERB: ClassVar[str] = "predict llm-train"

    model: str = option(help="A model of catalog/data/llm_models.csv.", example="llama-2-70b")
    gpu: str | None = option(
        None, help="Catalog GPU name [default: the --cluster's GPU].", example="H100"
    )
    gpus: int | None = option(
        None,
        help=f"GPUs in all [default: {DEFAULT_GPUS} with --gpu; with --cluster all of its GPUs].",
        example="64",
    )
    gpus_per_node: int | None = option(
        None,
        help="GPUs per node (default: up to 8, or the catalog's meshed node of the GPU type: "
        "4 GH200, 4 MI250X).",
        example="8",
    )
    node_network_gbps: float | None = option(
        None,
        help=(
            "Gbit/s of one node's network (default by GPU type: 400 per H100/H200/B200, 800 "
            "per B300, 300 / 600 per Gaudi 2 / 3, 200 per other GPU)."
        ),
        example="3200",
    )
    seq_len: int | None = option(
        None,
        help="Tokens per sequence (default: the length the model was pre-trained at, where the "
        "catalog gives one, e.g. 8,192 for Llama 3.1; else its context).",
        example="4096",
    )
    global_batch: int = option(help="Sequences per optimizer step.", example="1024")
    precision: str = option("bf16", parse=lower_text, help="bf16, fp16 or fp8.", example="fp8")
    software: str = option("tuned", parse=lower_text, help=LLM_SOFTWARE_HELP, example="tuned")
    lora_rank: int = option(0, help="LoRA rank (0: full fine-tuning / pre-training).")
    lora_fused: bool = option(False, help=LORA_FUSED_HELP)
    tp: int | None = tp_option()
    pp: int | None = pp_option()
    cp: int | None = cp_option(CP_SEARCHED)
    vpp: int | None = vpp_option(SEARCHED.virtual_stages)
    micro_batch: int | None = micro_batch_option(SEARCHED.micro_batch_sizes)
    zero: int | None = zero_option(SEARCHED.zero_stages)
    recompute: str | None = recompute_option(SEARCHED.recompute)
    tp_overlap: float = option(0.0, help=TP_OVERLAP_HELP, example="0.8")
    host_ms_per_layer: float | None = option(None, help=HOST_HELP, example="0")
    top: int = option(5, help="Runner-up layouts to show (0: the best alone).")
    cluster: str | None = cluster_option()
    cluster_nodes: int | None = cluster_nodes_option()
    cluster_price_usd_per_gpu_hour: float | None = cluster_price_option()
    cluster_set: ClusterSettings = cluster_set_option()

    def __post_init__(self) -> None:
        check_tp_overlap(self.tp_overlap)
        check_host_ms(self.host_ms_per_layer)
        named = check_cluster_options(
            self.cluster, self.cluster_nodes, self.cluster_price_usd_per_gpu_hour, self.cluster_set
        )
        if self.gpu is None and not named:
            raise InvalidSpecError(
                "gpu", "is required (or --cluster)", fix="e.g. --gpu H100 or --cluster DGX-H100"
            )
        if named and (self.gpus_per_node is not None or self.node_network_gbps is not None):
            flag = "gpus-per-node" if self.gpus_per_node is not None else "node-network-gbps"
            raise InvalidSpecError(
                flag,
                "is the --cluster's to say",
                fix=f"drop --{flag}, or change the cluster: --cluster-set KEY=VALUE",
            )
        for name in ("gpus", "gpus_per_node", "seq_len"):
            positive_or_none(name.replace("_", "-"), getattr(self, name))
        check_global_batch(self.global_batch)
        FixedLayout.of(self)  # --tp --pp --cp --vpp --micro-batch --zero --recompute
        if isinstance(self.top, bool) or not isinstance(self.top, int) or self.top < 0:
            raise InvalidSpecError(
                "top", "must be an integer >= 0 (0: the best layout alone)", got=self.top
            )
        if self.precision not in TRAIN_PRECISIONS:
            raise InvalidSpecError(
                "precision", f"must be one of {', '.join(TRAIN_PRECISIONS)}", got=self.precision
            )
        if isinstance(self.lora_rank, bool) or self.lora_rank < 0:
            raise InvalidSpecError("lora-rank", "must be an integer >= 0", got=self.lora_rank)
        if self.node_network_gbps is not None and not 0 < self.node_network_gbps <= MAX_GBPS:
            raise InvalidSpecError(
                "node-network-gbps",
                f"must be > 0 and at most {MAX_GBPS:,.0f} Gbit/s",
                got=self.node_network_gbps,
                fix="e.g. --node-network-gbps 400 (8 x 400G NICs: 3200)",
            )
        check_llm_software(self.software)


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictLlmTrainResult:
    """The fastest layout that fits, the runners-up, and what the numbers rest on."""

    best: ParallelStepPrediction
    alternatives: tuple[ParallelStepPrediction, ...]
    layouts_tried: int
    step_time_model: str
    #: the validated error of LLM training in this regime (``validation.csv``: ``llm-train``)
    validation: Validation
    assumptions: dict[str, str] = field(default_factory=dict)
    #: the best layout's ``avg_power_w`` (one GPU over the step), ``step_energy_j`` (all its
    #: GPUs, and a partial node's idle ones at their idle draw) and ``energy_j_per_token``;
    #: empty without the GPU's power facts
    energy: dict[str, float] = field(default_factory=dict)
    #: the best layout's ``usd_per_hour`` (the GPUs it runs on, and a node's idle ones) and
    #: ``usd_per_million_tokens`` at the ``--cluster``'s price; empty without a price
    cost: dict[str, float] = field(default_factory=dict)

    @property
    def interval_note(self) -> str | None:
        """What the best layout's 80% step-time interval rests on (its regime's note)."""
        return next((n for n in self.best.step_time.notes if n.startswith(INTERVAL_NOTE)), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "best": self.best.to_dict(),
            "alternatives": [a.to_dict() for a in self.alternatives],
            "layouts_tried": self.layouts_tried,
            "step_time_model": self.step_time_model,
            "assumptions": dict(self.assumptions),
            "validation": self.validation.to_dict(),
            "energy": dict(self.energy),
            "cost": dict(self.cost),
        }


def predict_llm_train(
    request: PredictLlmTrainRequest | None = None, /, **options: Any
) -> PredictLlmTrainResult:
    """The fastest layout of ``model`` on ``gpus`` x ``gpu`` that fits (module docstring);
    where fewer GPUs run the step faster, its ``GPUs`` assumption says so
    (:func:`_fewer_gpus_faster`)."""
    request = resolve(PredictLlmTrainRequest, request, options)
    return _fewer_gpus_faster(request, _predict_llm_train(request))


#: Step terms that more GPUs can lengthen: collectives, pipeline sends and bubble, the host's
#: pace. A step bound by one of them may run faster on fewer GPUs (``compute`` and
#: ``memory_bandwidth`` shrink as GPUs are added).
GROWING_TERMS = frozenset(
    {"tp_comm", "cp_comm", "moe_comm", "pp_bubble", "pp_p2p", "dp_comm", "host_wait"}
)

#: How much faster a smaller GPU count must run the step to be named (1%: not a tie).
FEWER_GPUS_MARGIN = 0.01


def _fewer_gpus_faster(
    request: PredictLlmTrainRequest, result: PredictLlmTrainResult
) -> PredictLlmTrainResult:
    """``result`` with its ``GPUs`` assumption naming a smaller GPU count that runs the step
    faster, where one does: more GPUs are never slower without a stated reason (QA 41 L F3:
    16 H100s over 10 Gbit/s TCP took 53 s a step, 8 of them 6.3 s, and nothing said so). Only
    a step bound by a term that grows with the GPU count (:data:`GROWING_TERMS`) is checked,
    at half the GPUs and at the largest power of two below them (96 -> 48 and 64), each
    searched as the request searches; a count the request's layout or nodes cannot run is
    skipped."""
    from gpucast.domain.errors import GpucastError

    best = result.best
    gpus = best.layout.gpus
    if best.bottleneck not in GROWING_TERMS or gpus < 2:
        return result
    power = 1 << (gpus.bit_length() - 1)
    counts = sorted({gpus // 2 if gpus % 2 == 0 else 0, power if power < gpus else 0} - {0})
    faster = []
    for count in counts:
        try:
            fewer = _predict_llm_train(replace(request, gpus=count, top=0)).best
        except GpucastError:
            continue
        if fewer.step_time_s < best.step_time_s * (1.0 - FEWER_GPUS_MARGIN):
            faster.append(fewer)
    if not faster:
        return result
    fewer = min(faster, key=lambda p: (p.step_time_s, p.layout.gpus))
    note = (
        f"; {fewer.layout.gpus} of them run this step faster: {fewer.step_time_s:.3g} s "
        f"({fewer.layout.label()}) against {best.step_time_s:.3g} s, which is bound by "
        f"{best.bottleneck} (more GPUs lengthen it); --gpus {fewer.layout.gpus}, or plan "
        "llm-train to pick the count"
    )
    assumptions = dict(result.assumptions)
    assumptions["GPUs"] = assumptions.get("GPUs", f"{gpus}") + note
    return replace(result, assumptions=assumptions)


def _predict_llm_train(request: PredictLlmTrainRequest) -> PredictLlmTrainResult:
    """:func:`predict_llm_train` on exactly the request's GPUs."""
    from gpucast.catalog import load_catalog
    from gpucast.catalog.llm import llm_model
    from gpucast.catalog.systems import mesh_node_gpus
    from gpucast.catalog.validation import validation_for
    from gpucast.domain.errors import NoFeasiblePlanError
    from gpucast.domain.parallel import ParallelAssumptions
    from gpucast.inputs.calibration import step_time_efficiency
    from gpucast.inputs.clusters import (
        cluster_gpu,
        host_link_gbps,
        intra_link_gbps,
        request_cluster,
    )
    from gpucast.inputs.mlperf_llm import gpu_band, stated_band
    from gpucast.inputs.steptime import gpu_cluster_shape
    from gpucast.plan.llm import power_of_two_part
    from gpucast.predict.parallel import (
        best_layout,
        cluster_shape,
        fixed_layout_conflict,
        rank_layouts,
    )

    spec = llm_model(request.model)
    check_lora_rank(spec, request.lora_rank)
    catalog = load_catalog()
    cluster = request_cluster(request, catalog, request.gpu)
    gpu = cluster_gpu(cluster, catalog, request.gpu, request.gpus)
    # --cluster: all of its GPUs unless --gpus says fewer, as predict train runs on them
    gpus = cluster.used_gpus(request.gpus) if cluster is not None else request.gpus or DEFAULT_GPUS
    check_precision_units(request.precision, gpu, catalog, or_else="", choices=TRAIN_PRECISIONS)
    per_node = (
        min(cluster.gpus_per_node, gpus)
        if cluster is not None
        # a GPU type whose catalog servers mesh fewer (4 GH200, 4 MI250X) fills that node
        else request.gpus_per_node or min(mesh_node_gpus(gpu.name) or 8, gpus)
    )
    whole, part = per_node, power_of_two_part(per_node)
    # a node whose GPU count has an odd factor (a 72-GPU rack) runs on its largest power of
    # two (64), as plan llm-train plans it; the rest of each node idles
    if (
        cluster is not None
        and gpus % per_node
        and gpus % part == 0
        and gpus // part <= cluster.nodes
    ):
        per_node = part
    if gpus % per_node:
        raise InvalidSpecError(
            "gpus",
            f"{gpus} is not a whole number of {per_node}-GPU nodes",
            fix=f"use a multiple of {per_node}"
            + (
                f" (whole nodes) or of {part} ({part} GPUs of each node)"
                if cluster is not None and part != per_node
                else ""
                if cluster is not None
                else " or set --gpus-per-node"
            ),
        )
    # beyond the published context: a context extension, as MLPerf's Llama-2-70B LoRA trains
    # at 8,192 tokens; the result states it (sequence_text)
    seq = request.seq_len or spec.training_seq_len
    if cluster is not None:
        from gpucast.inputs.cluster import perf_params

        # the GPUs used keep their own share of the node's NICs, reached as plan llm-train
        # reaches a cluster's: RDMA at its links, TCP at the fitted share with a flat ring
        nic = host_link_gbps(cluster, gpu.pcie_generation) * per_node / whole
        tcp = perf_params(None).value.collective_tcp
        network, algorithm = tcp.node_network(nic, rdma=cluster.shape.rdma)
        links = replace(
            cluster_shape(
                gpu,
                gpus_per_node=per_node,
                node_network_gbps=network,
                collective=algorithm,
                mesh=cluster.shape.intra_node == "mesh",
            ),
            intra_node_gbps=intra_link_gbps(cluster, catalog, per_node),
        )
    else:
        links = gpu_cluster_shape(gpu, per_node, request.node_network_gbps)
        network = links.node_network_gbps
    efficiency = step_time_efficiency(request.software)
    fixed = FixedLayout.of(request)
    space = searched_space(fixed, seq, precision=request.precision, lora_rank=request.lora_rank)
    assumptions = ParallelAssumptions(
        tp_overlap_fraction=float(request.tp_overlap),
        host_layer_s=host_seconds(request.host_ms_per_layer, efficiency.value),
        lora_unfused=not request.lora_fused,
    )
    ranked = [
        p
        for p in rank_layouts(
            spec,
            gpu,
            gpus,
            request.global_batch,
            seq_len=seq,
            cluster=links,
            space=space,
            efficiency=efficiency.value,
            assumptions=assumptions,
        )
        if fixed.allows(p.layout)
    ]
    if not ranked or not ranked[0].fits:
        if not ranked:
            shown = {"tp": fixed.tp, "pp": fixed.pp, "cp": fixed.cp, "vpp": fixed.vpp,
                     "micro-batch": fixed.micro_batch}  # fmt: skip
            conflict = fixed_layout_conflict(
                spec, fixed, gpus=gpus, gpus_per_node=links.gpus_per_node,
                global_batch=request.global_batch,
                allow_cross_node_tp=links.allow_cross_node_tp,
            )  # fmt: skip
            flags = conflict.flags if conflict else tuple(k for k, v in shown.items() if v)
            dropped = "/".join(f"--{k}" for k in flags)
            at_fault = conflict.flags[0] if conflict and conflict.flags else None
            raise NoFeasiblePlanError(
                # the flag at fault first, as every input error starts (QA 34 #15); with
                # no choice fixed, the GPU count the fix names
                f"{at_fault or (flags[0] if flags else 'gpus')}: "
                + f"no layout of {gpus:,} GPUs with "
                + ", ".join(f"{k}={v or 'any'}" for k, v in shown.items())
                + f" runs {spec.name} at a global batch of {request.global_batch}"
                + (f": {conflict.detail}" if conflict else ""),
                fix=(
                    ""
                    if conflict
                    else f"tp must divide the heads and fit in a node, pp be at most the "
                    f"{spec.layers} layers (uneven stages are allowed) and, with vpp > 1, "
                    f"pp x vpp at most them, cp the {seq} tokens, and the global batch must "
                    "divide by dp; "
                )
                + (f"drop {dropped} to search them" if dropped else "try another --gpus"),
            )
        best_layout(  # raises, naming the smallest allowed layout's memory
            spec, gpu, gpus, request.global_batch, seq_len=seq, cluster=links,
            space=space, efficiency=efficiency.value, assumptions=assumptions,
            only=fixed.allows,
        )  # fmt: skip
    low, high, note = gpu_band(stated_band(request.software), gpu.name, efficiency.value)
    fitting = [p.with_band(low, high, note) for p in ranked if p.fits][: 1 + request.top]
    best = fitting[0]
    energy, energy_note = llm_energy(catalog)
    if whole != per_node:
        energy_note += "; a node's unused GPUs at idle"
    watts = energy.gpu_power_w(best)
    # a partial node's idle GPUs draw their idle power the whole step, as in plan llm-train's
    # rows and as they are paid for (``cost``)
    idle_gpus = gpus // per_node * (whole - per_node)
    step_j = (
        None
        if watts is None
        else (watts[0] * best.layout.gpus + watts[1] * idle_gpus) * best.step_time_s
    )
    return PredictLlmTrainResult(
        best=best,
        alternatives=tuple(fitting[1 : 1 + request.top]),
        layouts_tried=len(ranked),
        step_time_model=efficiency.source,
        validation=validation_for("llm-train", [gpu.name], best.layout.precision, best.layout.gpus),
        assumptions={
            "GPUs": _gpus_text(gpus, per_node, whole, cluster, gpu.name, given=request.gpus),
            **(node_size_note(gpu.name, request.gpus_per_node) if cluster is None else {}),
            "sequence length": sequence_text(spec, seq, given=request.seq_len is not None),
            "node network": f"{network:.4g} Gbit/s per {per_node}-GPU node"
            + (
                (
                    ""
                    if cluster.shape.rdma
                    else f" (TCP: {tcp.network_efficiency:.3f} of its "
                    f"{nic:g} Gbit/s NICs, {tcp.algorithm}; {tcp.source})"
                )
                + f"; inside a node {links.intra_node_gbps / 8:g} GB/s per GPU"
                if cluster is not None
                else (" (default per GPU type)" if request.node_network_gbps is None else "")
                + ", RDMA-class at its links (a TCP network: --cluster with network: ethernet)"
            ),
            **({"cluster": f"{cluster.describe()} ({cluster.source})"} if cluster else {}),
            **(
                {"intra-node mesh": _mesh_text(links, gpu.name)}
                if links.mesh and links.gpus_per_node > 1
                else {}
            ),
            **(
                {
                    "intra-node bridges": f"{gpu.name}s pair up through NVLink bridges "
                    f"({links.intra_node_gbps / 8:g} GB/s to the partner card); a group of "
                    f"more than two crosses PCIe at {links.bridge_pcie_gbps / 8:g} GB/s, "
                    f"NCCL's all-reduce over PCIe among {links.gpus_per_node} GPUs (catalog "
                    "pcie_allreduce.csv; catalog systems.csv: the type's servers bridge their "
                    "cards in pairs)"
                }
                if links.bridge_pcie_gbps is not None and links.gpus_per_node > 1
                else {}
            ),
            **(
                {
                    "intra-node PCIe": f"{gpu.name}s have no NVLink: a collective inside a "
                    f"node at {links.intra_node_gbps / 8:g} GB/s per GPU, NCCL's all-reduce over "
                    f"PCIe among {links.gpus_per_node} GPUs (catalog pcie_allreduce.csv)"
                }
                if cluster is None and gpu.interconnect_gbps is None and links.gpus_per_node > 1
                else {}
            ),
            **(
                {
                    "partial nodes": f"{per_node} GPUs of each {whole}-GPU node "
                    f"({whole - per_node} idle): --gpus {gpus} is no whole number of "
                    "nodes"
                }
                if per_node != whole
                else {}
            ),
            "software": f"{request.software} stack efficiencies",
            "MFU": mfu_text(best.layout.precision, [gpu]),
            **(
                {"ZeRO and pipelines": f"searched: {PIPELINE_ZERO_NOTE}"}
                if max(space.zero_stages) > PIPELINE_MAX_ZERO and fixed.pp is None
                else {}
            ),
            **(
                {"ZeRO": fixed.zero_note() or ""}
                if fixed.zero and best.layout.zero_stage != fixed.zero
                else {}
            ),
            "tensor-parallel overlap": tp_overlap_text(request.tp_overlap),
            "host": host_text(request.host_ms_per_layer, efficiency.value),
            "optimizer": "Adam, mixed precision: 16 B per trained parameter",
            **({"LoRA": lora_text(request.lora_fused)} if best.layout.lora else {}),
            "energy": energy_note,
        },
        energy={}
        if watts is None or step_j is None
        else {
            "avg_power_w": watts[0],
            "step_energy_j": step_j,
            "energy_j_per_token": step_j / best.tokens_per_step,
        },
        # the nodes' GPUs are paid for, idle ones too (plan llm-train's rows), at the price
        cost=_cost(cluster, gpus // per_node * whole, best.tokens_per_s),
    )


def _gpus_text(
    gpus: int, per_node: int, whole: int, cluster: Any, gpu: str, *, given: int | None
) -> str:
    """The ``GPUs`` assumption: how many, in which nodes, and whether that is the default."""
    nodes = gpus // per_node
    where = f"{nodes} node{'s' if nodes != 1 else ''} x {per_node}" + (
        f" of {whole}" if per_node != whole else ""
    )
    if cluster is not None:  # as predict train --cluster says it
        return used_gpus_text(gpus, cluster.max_gpus, where, default=given is None)
    why = f"default with --gpu: {DEFAULT_GPUS}; --gpus N" if given is None else f"--gpus {gpus}"
    return f"{gpus} {gpu} ({where}; {why})"


def _cost(cluster: Any, paid_gpus: int, tokens_per_s: float) -> dict[str, float]:
    """US$ an hour of ``paid_gpus`` of the cluster at its price and per million tokens at
    ``tokens_per_s`` (as predict train --cluster prices its step per sample); empty without
    a price (``--price-per-gpu-hour``)."""
    if cluster is None or not cluster.priced:
        return {}
    usd_per_hour = float(cluster.usd_per_hour(paid_gpus))
    return {
        "usd_per_hour": usd_per_hour,
        "usd_per_million_tokens": usd_per_million(usd_per_hour, tokens_per_s),
        "paid_gpus": float(paid_gpus),
    }


def _mesh_text(links: ClusterShape, gpu: str) -> str:
    n = links.gpus_per_node
    return (
        f"{gpu}s of a node link pairwise (no switch): {links.intra_node_gbps / 8:g} GB/s per "
        f"{gpu} to its {n - 1} peer{'s together' if n > 2 else ''}"
        + (
            f"; a group of k of them reaches only (k - 1) / {n - 1} of it, a pipeline or "
            f"context-parallel send one peer's 1 / {n - 1}"
            if n > 2
            else ""
        )
    )


#: How a LoRA run's memory is priced (:mod:`gpucast.predict.parallel`), stated with its result.
LORA_MEMORY = (
    "frozen base held once at its matmuls' precision (2 B per parameter; 1 B in fp8, as NeMo's "
    "fp8_params), no gradients or optimizer state; a frozen matrix's input is not kept for "
    "backward"
)


def lora_text(fused: bool) -> str:
    """What a LoRA prediction assumes of its memory and of its adapters' traffic."""
    adapters = (
        "adapters fused into the base matmuls' kernels: no traffic of their own (--lora-fused)"
        if fused
        else "adapters unfused, as Megatron/NeMo and PEFT run them: each reads its input, "
        "writes its output and adds it to the base output, and back (6 (d_in + d_out) "
        "elements a token; --lora-fused prices fused kernels)"
    )
    return f"{LORA_MEMORY}; {adapters}"


def sequence_text(spec: TransformerSpec, seq: int, *, given: bool) -> str:
    """The sequence length a training prediction used, and what it is to the model."""
    if seq > spec.max_context:
        how = (
            "RoPE scaling"
            if spec.position == "rope"
            else "a longer position table"
            if spec.position == "learned"
            else "the model's positions as they are"
        )
        return (
            f"{seq} tokens, beyond {spec.name}'s published context of {spec.max_context}: a "
            f"context extension ({how}), priced as the same model at the longer length"
        )
    if given:
        return f"{seq} tokens"
    if seq < spec.max_context:  # the catalog's pre-training length (QL 39)
        return (
            f"{seq} tokens (the length {spec.name} was pre-trained at; its context, "
            f"{spec.max_context:,}, came from a later long-context stage: --seq-len "
            f"{spec.max_context} prices that)"
        )
    return f"{seq} tokens (the model's context)"


def llm_energy(
    catalog: Any,
    pue: float = 1.0,
    *,
    idle: str = "communication, pipeline bubble, host",
    cluster: Any = None,
) -> tuple[Any, str]:
    """How LLM work prices power, energy and emissions (:class:`gpucast.plan.llm.LlmEnergy`),
    and what that rests on (``idle``: what a GPU waits on); a ``cluster``'s own grid figure
    (:func:`gpucast.inputs.clusters.grid_intensities`) for its region."""
    from gpucast.inputs.clusters import grid_intensities
    from gpucast.inputs.energy import power_model
    from gpucast.plan.energy import PowerSetting
    from gpucast.plan.llm import LlmEnergy
    from gpucast.predict.power import PREDICTED_POWER_ERROR, BoardPower

    model = power_model()
    boards = {g.name: BoardPower.of_gpu(g) for g in catalog.gpus if g.max_power_limit_w is not None}
    energy = LlmEnergy(
        power=PowerSetting(model=model.value, boards=boards, kernel_share=1.0),
        pue=float(pue),
        grid_gco2e_per_kwh=grid_intensities(cluster)[0],
    )
    note = (
        "each GPU at its default power limit, busy (compute, memory-bound and per-kernel time) "
        f"at the power model's draw for that mix, idle ({idle}) at its idle draw (GPU boards "
        f"only). Power model: {model.source} (predicted from the "
        f"roofline's shares: {PREDICTED_POWER_ERROR}; no LLM power measurement in the data)"
    )
    return energy, note
