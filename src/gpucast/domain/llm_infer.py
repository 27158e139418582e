"""LLM inference as frozen values: precisions, an inference engine's profile, a prediction.

:class:`EngineProfile` is one serving engine (vLLM, TensorRT-LLM, llama.cpp, DeepSpeed-MII,
eager PyTorch) as :mod:`gpucast.predict.llm_infer` sees it: how it spreads a model over GPUs,
how many sequences it runs at once, and the efficiency parameters fitted on published
measurements (``catalog/data/inference_engines.csv``, one row per engine with its source).
:class:`InferencePrediction` is what the model returns for one batch. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from types import MappingProxyType
from typing import Any, ClassVar, Literal, get_args

from gpucast.domain.catalog import VendorBound
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.units import GIB
from gpucast.domain.workload import FP8, check_precision_units

InferPrecision = Literal["fp16", "bf16", "fp8", "int8", "int4"]
MultiGpu = Literal["tensor", "layer"]
MemoryShare = Literal["total", "free"]
INFER_PRECISIONS: tuple[str, ...] = get_args(InferPrecision)
MULTI_GPU_MODES: tuple[str, ...] = get_args(MultiGpu)
MEMORY_SHARES: tuple[str, ...] = get_args(MemoryShare)

#: Bytes per stored value. int4 carries one fp16 scale per group of 128 weights (AWQ/GPTQ's
#: usual group size): 0.5 + 2/128 bytes.
BYTES_PER_VALUE: Mapping[str, float] = MappingProxyType(
    {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5 + 2.0 / 128}
)
#: The tensor-core mode the matmuls of a weight precision run in: 8-bit and 4-bit integer
#: weights are weight-only quantisation (dequantised to fp16 in the kernel); fp8 runs on fp8
#: tensor cores where the GPU has them (``GpuSpec.peak_tflops`` falls back to fp16 otherwise).
COMPUTE_MODE: Mapping[str, str] = MappingProxyType(
    {"fp16": "fp16", "bf16": "bf16", "fp8": "fp8", "int8": "fp16", "int4": "fp16"}
)

#: The fitted parameters of an engine, in the order the fit sees them.
ENGINE_PARAMS: tuple[str, ...] = (
    "weight_bandwidth_efficiency",
    "kv_bandwidth_efficiency",
    "compute_efficiency",
    "step_overhead_s",
    "sequence_overhead_s",
    "memory_reserve_gib",
    "collective_latency_s",
)
#: Time parameters a GPU's latency factor scales (the fractions it divides); not the memory
#: reserve, which is GiB.
TIME_PARAMS: frozenset[str] = frozenset(
    {"step_overhead_s", "sequence_overhead_s", "collective_latency_s"}
)
#: Parameters that are fractions (0, 1]; the others are seconds >= 0.
FRACTION_PARAMS: frozenset[str] = frozenset(
    {
        "weight_bandwidth_efficiency",
        "kv_bandwidth_efficiency",
        "compute_efficiency",
    }
)


def check_precision(name: str, value: str) -> None:
    """One clear error for a precision that is not an inference precision."""
    if value not in INFER_PRECISIONS:
        raise InvalidSpecError(
            name,
            f"must be one of {', '.join(INFER_PRECISIONS)}",
            got=value,
            fix=f"e.g. --{name} fp16",
        )


#: Engines that serve fp8 weights weight-only on a GPU without fp8 tensor cores: vLLM's FP8
#: Marlin kernels (W8A16, compute capability 8.0 and later: an Ampere-class GPU, which has
#: bf16 units). TensorRT-LLM's fp8 needs fp8 tensor cores (Ada, Hopper and later).
WEIGHT_ONLY_FP8_ENGINES: frozenset[str] = frozenset({"vllm"})


def fp8_runs_on(gpu: Any, engine: str) -> bool:
    """Whether ``engine`` serves fp8 weights on ``gpu``: on its fp8 tensor cores, or
    weight-only (:data:`WEIGHT_ONLY_FP8_ENGINES`) on an Ampere-class GPU."""
    return bool(gpu.has_units(FP8) or (engine in WEIGHT_ONLY_FP8_ENGINES and gpu.has_units("bf16")))


def weights_run_on(gpu: Any, precision: str | None, engine: str) -> bool:
    """Whether ``engine`` serves weights at ``precision`` on ``gpu``: fp8 where
    :func:`fp8_runs_on`; any other on units for its compute mode (:data:`COMPUTE_MODE`; bf16
    needs bf16 units -- vLLM refuses bf16 below compute capability 8.0 --, int8 and int4
    weights compute in fp16); None (the engine's default) passes."""
    if precision is None:
        return True
    mode = COMPUTE_MODE.get(precision, precision)
    return fp8_runs_on(gpu, engine) if mode == FP8 else bool(gpu.runs(mode))


def check_weight_units(precision: str | None, gpu: Any, catalog: Any, engine: str) -> None:
    """Weights at a precision ``engine`` cannot serve on ``gpu`` (:func:`weights_run_on`:
    fp8 on a T4 or a V100 with any engine, on an A100 with TensorRT-LLM; bf16 on a T4 or a
    V100): the one line ``plan train`` gives a training request. Where vLLM runs fp8
    weight-only the prediction says so
    (:func:`gpucast.predict.llm_infer.fp8_hardware_note`)."""
    if precision is None or weights_run_on(gpu, precision, engine):
        return
    mode = COMPUTE_MODE.get(precision, precision)
    check_precision_units(
        mode, gpu, catalog, runs="has units for", or_else="int8" if mode != "fp16" else "",
        choices=INFER_PRECISIONS, got=precision,
    )  # fmt: skip


#: Engines that keep an fp8 KV cache on a GPU without fp8 tensor cores: vLLM converts it in
#: its attention kernels. TensorRT-LLM's support matrix lists FP8 for Ada and Hopper (and
#: later) only -- Ampere keeps FP16, BF16 or INT8 -- for its KV cache as for its weights
#: (https://nvidia.github.io/TensorRT-LLM/0.18.2/reference/support-matrix.html).
FP8_KV_ANY_GPU_ENGINES: frozenset[str] = frozenset({"vllm"})


def kv_runs_on(gpu: Any, kv_precision: str | None, engine: str) -> bool:
    """Whether ``engine`` keeps its KV cache in ``kv_precision`` on ``gpu``: an fp8 one needs
    fp8 tensor cores outside :data:`FP8_KV_ANY_GPU_ENGINES`; None and the others pass (which
    precisions an engine keeps at all: :meth:`EngineProfile.check_kv_precision`)."""
    if kv_precision is None or COMPUTE_MODE.get(kv_precision) != FP8:
        return True
    return engine in FP8_KV_ANY_GPU_ENGINES or bool(gpu.has_units(FP8))


def check_kv_units(kv_precision: str | None, gpu: Any, engine: Any, catalog: Any) -> None:
    """One line where ``engine`` (an :class:`EngineProfile`) cannot keep its KV cache in
    ``kv_precision`` on ``gpu`` (:func:`kv_runs_on`), naming GPUs that can."""
    if kv_runs_on(gpu, kv_precision, engine.name):
        return
    able = [g.name for g in catalog.gpus if g.has_units(FP8)][:6]
    raise InvalidSpecError(
        "kv-precision",
        f"{engine.display_name} keeps an fp8 KV cache on fp8 tensor cores only (Ada, Hopper "
        f"or later), which the {gpu.name} has not",
        got=kv_precision,
        fix=f"use --kv-precision int8 (or fp16), or a GPU with fp8 units ({', '.join(able)}, "
        "...), or --framework vllm",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineProfile(VendorBound):
    """An inference engine: its structure (facts from its documentation and the benchmark's
    scripts) and its efficiency parameters (fitted, or priors where there is no data).

    Structure:

    * ``multi_gpu``: ``tensor`` splits every layer over the GPUs (Megatron-style tensor
      parallelism: two all-reduces per layer); ``layer`` gives each GPU a contiguous block of
      layers (llama.cpp's default ``--split-mode layer``): one hand-off per GPU boundary per
      step, and prompt chunks pipelined through the GPUs.
    * ``max_sequences``: the most sequences the scheduler runs at once (vLLM ``max_num_seqs``).
    * ``memory_fraction`` of the GPU's memory the engine takes (``memory_share`` ``total``:
      vLLM's ``gpu_memory_utilization``) or of what the weights leave (``free``: TensorRT-LLM's
      ``kv_cache_free_gpu_memory_fraction``).
    * ``prompt_chunk_tokens``: prompt tokens per forward pass (0: the whole prompt at once;
      llama.cpp: its ``n_ubatch``).
    * ``bench_identical_prompts``: whether LLM-Inference-Bench's harness for this engine sends
      the same prompt for every sequence of a batch (decoded greedily, so a mixture-of-experts
      model routes every sequence to the same experts); used when fitting on that data only.

    Parameters (:data:`ENGINE_PARAMS`): achieved fractions of the datasheet bandwidth when
    streaming weights and when reading the KV cache, of the tensor-core peak in prefill, the
    fixed cost of one decode step, the cost per sequence per step (sampling, scheduling), the
    GiB of the engine's share that neither weights nor KV cache get (activations of the
    largest forward pass, CUDA graphs, communication buffers), and the latency of one
    collective (an all-reduce, or llama.cpp's hand-off between GPUs). ``fitted_params`` names
    the ones fitted; the others are priors, ``fitted_on`` says on what.
    """

    name: str
    display_name: str
    aliases: tuple[str, ...] = ()
    bench_framework: str = ""
    default_precision: InferPrecision = "fp16"
    #: the precisions its KV cache can be kept in, and the page that says so (empty: not
    #: stated in the catalog, so not checked)
    kv_precisions: tuple[str, ...] = ()
    kv_source_url: str = ""
    #: the precisions it serves weights in, and the page that says so (empty: not stated in
    #: the catalog, so not checked)
    weight_precisions: tuple[str, ...] = ()
    weight_source_url: str = ""
    multi_gpu: MultiGpu = "tensor"
    #: the GPU vendors it runs on (empty: any -- llama.cpp's CUDA, HIP, SYCL and Vulkan
    #: back ends, eager PyTorch)
    vendors: tuple[str, ...] = ()
    ENGINE_FLAG: ClassVar[str] = "framework"
    VENDOR_FIX: ClassVar[str] = "pick an engine that runs there, e.g. --framework vllm or llama.cpp"
    max_sequences: int = 256
    memory_fraction: float = 0.9
    memory_share: MemoryShare = "total"
    prompt_chunk_tokens: int = 0
    bench_identical_prompts: bool = False
    weight_bandwidth_efficiency: float = 0.8
    kv_bandwidth_efficiency: float = 0.6
    compute_efficiency: float = 0.6
    step_overhead_s: float = 2e-3
    sequence_overhead_s: float = 5e-5
    memory_reserve_gib: float = 1.0
    collective_latency_s: float = 1e-5
    fitted_params: tuple[str, ...] = ()
    fitted_on: str = ""
    source_url: str = ""
    as_of: date | None = None
    note: str = ""
    #: per GPU with measurements of this engine off the fitted GPU: how many times slower
    #: than the fit says its batches ran (``catalog/data/llm_infer_gpu_factors.csv``), and
    #: what each rests on
    gpu_factors: Mapping[str, float] = field(default_factory=dict, hash=False)
    gpu_factor_sources: Mapping[str, str] = field(default_factory=dict, hash=False)
    #: the fraction of the fp8 tensor-core peak an fp8 matmul reaches, relative to the 16-bit
    #: fraction the engine was fitted at (``compute_efficiency``), and what it rests on: the
    #: step-time model's fp8 ratio, fitted on MLPerf Training fp8 runs (1: not known)
    fp8_compute_ratio: float = 1.0
    fp8_source: str = ""

    def __post_init__(self) -> None:
        owner = f"engine {self.name}"
        if not (math.isfinite(self.fp8_compute_ratio) and 0 < self.fp8_compute_ratio <= 1.5):
            raise InvalidSpecError(
                f"{owner}.fp8_compute_ratio", "must be in (0, 1.5]", got=self.fp8_compute_ratio
            )
        for gpu, factor in self.gpu_factors.items():
            if not (math.isfinite(factor) and factor > 0):
                raise InvalidSpecError(f"{owner}.gpu_factors[{gpu}]", "must be > 0", got=factor)
        # copies (plain dicts: a profile is deep-copied and pickled by the estimators)
        object.__setattr__(self, "gpu_factors", dict(self.gpu_factors))
        object.__setattr__(self, "gpu_factor_sources", dict(self.gpu_factor_sources))
        if not self.name:
            raise InvalidSpecError(f"{owner}.name", "must not be empty")
        check_precision(f"{owner}.default_precision", self.default_precision)
        for kind in ("kv", "weight"):
            for value in getattr(self, f"{kind}_precisions"):
                check_precision(f"{owner}.{kind}_precisions", value)
            if getattr(self, f"{kind}_precisions") and not getattr(self, f"{kind}_source_url"):
                raise InvalidSpecError(
                    f"{owner}.{kind}_source_url",
                    f"is required with {kind}_precisions (the page that says so)",
                )
        if self.multi_gpu not in MULTI_GPU_MODES:
            raise InvalidSpecError(
                f"{owner}.multi_gpu", f"must be one of {', '.join(MULTI_GPU_MODES)}",
                got=self.multi_gpu,
            )  # fmt: skip
        if self.memory_share not in MEMORY_SHARES:
            raise InvalidSpecError(
                f"{owner}.memory_share", f"must be one of {', '.join(MEMORY_SHARES)}",
                got=self.memory_share,
            )  # fmt: skip
        for name in ("max_sequences", "prompt_chunk_tokens"):
            value = getattr(self, name)
            low = 1 if name == "max_sequences" else 0
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InvalidSpecError(f"{owner}.{name}", f"must be an integer >= {low}", got=value)
        if not (math.isfinite(self.memory_fraction) and 0.0 < self.memory_fraction <= 1.0):
            raise InvalidSpecError(
                f"{owner}.memory_fraction", "must be in (0, 1]", got=self.memory_fraction
            )
        for name in ENGINE_PARAMS:
            value = getattr(self, name)
            if name in FRACTION_PARAMS:
                if not (math.isfinite(value) and 0.0 < value <= 1.0):
                    raise InvalidSpecError(f"{owner}.{name}", "must be in (0, 1]", got=value)
            elif not (math.isfinite(value) and value >= 0.0):
                raise InvalidSpecError(f"{owner}.{name}", "must be >= 0", got=value)
        unknown = [p for p in self.fitted_params if p not in ENGINE_PARAMS]
        if unknown:
            raise InvalidSpecError(
                f"{owner}.fitted_params", f"must name parameters of {', '.join(ENGINE_PARAMS)}",
                got=unknown,
            )  # fmt: skip

    @property
    def fitted(self) -> bool:
        return bool(self.fitted_params)

    def check_kv_precision(self, kv: str) -> None:
        """One clear error where the engine cannot keep its KV cache in ``kv``
        (:attr:`kv_precisions`; not checked where the catalog states none)."""
        if not self.kv_precisions:
            return
        self._check_listed(
            "kv-precision", kv, self.kv_precisions, "keeps its KV cache in", self.kv_source_url,
            f"use --kv-precision {self.kv_precisions[-1]} (its smallest), or another --framework",
        )  # fmt: skip

    def check_weight_precision(self, weights: str) -> None:
        """One clear error where the engine cannot serve weights at ``weights``
        (:attr:`weight_precisions`; not checked where the catalog states none)."""
        if not self.weight_precisions:
            return
        self._check_listed(
            "precision", weights, self.weight_precisions, "serves weights in",
            self.weight_source_url,
            f"use --precision {self.weight_precisions[0]}, or another --framework (e.g. vllm) "
            f"for {weights} weights",
        )  # fmt: skip

    def _check_listed(
        self, field: str, value: str, listed: tuple[str, ...], does: str, url: str, fix: str
    ) -> None:
        """``value`` of ``field`` outside the catalog's ``listed`` precisions (from ``url``)
        refused in one line."""
        if value not in listed:
            *most, last = listed
            which = f"{', '.join(most)} or {last}" if most else last
            raise InvalidSpecError(
                field, f"{self.display_name} {does} {which} only ({url})", got=value, fix=fix
            )

    def with_params(
        self, params: Mapping[str, float], *, fitted_params: tuple[str, ...], fitted_on: str
    ) -> EngineProfile:
        """This engine with ``params`` (names of :data:`ENGINE_PARAMS`) and their provenance."""
        changes: dict[str, Any] = {n: float(params[n]) for n in ENGINE_PARAMS if n in params}
        return dataclasses.replace(
            self, **changes, fitted_params=fitted_params, fitted_on=fitted_on
        )

    def params(self, gpu: str | None = None) -> dict[str, float]:
        """The parameters of :data:`ENGINE_PARAMS` by name; on ``gpu``, with its latency
        factor (:attr:`gpu_factors`): every efficiency divided by it and every time
        multiplied, so each compute, memory and overhead term of a batch takes that many
        times as long (the collectives' link time is the link's)."""
        values = {name: float(getattr(self, name)) for name in ENGINE_PARAMS}
        factor = self.gpu_factors.get(gpu, 1.0) if gpu is not None else 1.0
        if factor != 1.0:
            for name in FRACTION_PARAMS:
                values[name] /= factor
            for name in TIME_PARAMS:
                values[name] *= factor
        return values

    def provenance(self) -> str:
        """One line: which parameters were fitted on what, and which are priors."""
        priors = [p for p in ENGINE_PARAMS if p not in self.fitted_params]
        if not self.fitted_params:
            return f"{self.display_name}: priors only ({self.fitted_on or 'no measurements'})"
        text = f"{self.display_name}: fitted on {self.fitted_on}"
        if priors:
            text += f"; priors for {', '.join(priors)}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "display_name": self.display_name,
            "aliases": list(self.aliases),
            "bench_framework": self.bench_framework,
            "default_precision": self.default_precision,
            "kv_precisions": list(self.kv_precisions),
            "kv_source_url": self.kv_source_url,
            "weight_precisions": list(self.weight_precisions),
            "weight_source_url": self.weight_source_url,
            "multi_gpu": self.multi_gpu,
            "vendors": list(self.vendors),
            "max_sequences": self.max_sequences,
            "memory_fraction": self.memory_fraction,
            "memory_share": self.memory_share,
            "prompt_chunk_tokens": self.prompt_chunk_tokens,
            "bench_identical_prompts": self.bench_identical_prompts,
            **self.params(),
            "fitted_params": list(self.fitted_params),
            "fitted_on": self.fitted_on,
            "source_url": self.source_url,
            "as_of": None if self.as_of is None else self.as_of.isoformat(),
            "note": self.note,
            "gpu_factors": dict(self.gpu_factors),
            "gpu_factor_sources": dict(self.gpu_factor_sources),
            "fp8_compute_ratio": self.fp8_compute_ratio,
            "fp8_source": self.fp8_source,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EngineProfile:
        as_of = data.get("as_of")
        return cls(
            name=str(data["name"]),
            display_name=str(data["display_name"]),
            aliases=tuple(str(a) for a in data.get("aliases", ())),
            bench_framework=str(data.get("bench_framework", "")),
            default_precision=data.get("default_precision", "fp16"),
            kv_precisions=tuple(str(k) for k in data.get("kv_precisions", ())),
            kv_source_url=str(data.get("kv_source_url", "")),
            weight_precisions=tuple(str(k) for k in data.get("weight_precisions", ())),
            weight_source_url=str(data.get("weight_source_url", "")),
            multi_gpu=data.get("multi_gpu", "tensor"),
            vendors=tuple(str(v) for v in data.get("vendors", ())),
            max_sequences=int(data.get("max_sequences", 256)),
            memory_fraction=float(data.get("memory_fraction", 0.9)),
            memory_share=data.get("memory_share", "total"),
            prompt_chunk_tokens=int(data.get("prompt_chunk_tokens", 0)),
            bench_identical_prompts=bool(data.get("bench_identical_prompts", False)),
            fp8_compute_ratio=float(data.get("fp8_compute_ratio", 1.0)),
            fp8_source=str(data.get("fp8_source", "")),
            **{name: float(data[name]) for name in ENGINE_PARAMS},
            fitted_params=tuple(str(p) for p in data.get("fitted_params", ())),
            fitted_on=str(data.get("fitted_on", "")),
            source_url=str(data.get("source_url", "")),
            as_of=None if not as_of else date.fromisoformat(str(as_of)),
            note=str(data.get("note", "")),
            gpu_factors={str(k): float(v) for k, v in data.get("gpu_factors", {}).items()},
            gpu_factor_sources={
                str(k): str(v) for k, v in data.get("gpu_factor_sources", {}).items()
            },
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class InferenceMemory:
    """Bytes per GPU: the weights, the KV cache of the sequences running at once, and what
    the engine gives them (``memory_fraction`` of the GPU less ``memory_reserve_gib``)."""

    weights_bytes: float
    kv_cache_bytes: float
    capacity_bytes: float
    gpu_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.weights_bytes + self.kv_cache_bytes

    def to_dict(self) -> dict[str, float]:
        return {
            "weights_gib": self.weights_bytes / GIB,
            "kv_cache_gib": self.kv_cache_bytes / GIB,
            "total_gib": self.total_bytes / GIB,
            "capacity_gib": self.capacity_bytes / GIB,
            "gpu_gib": self.gpu_bytes / GIB,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class InferencePrediction:
    """One offline batch of ``batch_size`` sequences of ``input_len`` prompt tokens, each
    generating ``output_len`` tokens, on ``tp`` GPUs.

    ``ttft_s`` is the time to the first generated token (the prefill of the sequences that
    start at once); ``latency_s`` the whole batch; ``tpot_s`` one decode step (the time per
    output token of a running sequence); ``tokens_per_s`` generated tokens per second of the
    whole batch, ``total_tokens_per_s`` prompt plus generated tokens (LLM-Inference-Bench's
    ``Throughput``). When the KV cache cannot hold every sequence at once, the engine runs
    ``concurrent_sequences`` of them at a time (``waves`` = batch / concurrent).
    ``fits``: the weights and at least one whole sequence's KV cache fit in the engine's
    share of every GPU.
    """

    model: str
    gpu: str
    engine: str
    precision: str
    kv_precision: str
    tp: int
    batch_size: int
    input_len: int
    output_len: int
    ttft_s: float
    latency_s: float
    prefill_s: float
    decode_s: float
    tpot_s: float
    tokens_per_s: float
    total_tokens_per_s: float
    concurrent_sequences: float
    waves: float
    kv_bytes_per_token: float
    weight_bytes: float
    memory: InferenceMemory
    fits: bool
    bottleneck: str
    breakdown: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "breakdown", MappingProxyType(dict(self.breakdown)))

    def precision_text(self) -> str:
        """The weights' precision, and the KV cache's where it differs (``fp16``, ``fp16
        weights, int8 KV cache``)."""
        if self.kv_precision == self.precision:
            return self.precision
        return f"{self.precision} weights, {self.kv_precision} KV cache"

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "gpu": self.gpu,
            "engine": self.engine,
            "precision": self.precision,
            "kv_precision": self.kv_precision,
            "tp": self.tp,
            "batch_size": self.batch_size,
            "input_len": self.input_len,
            "output_len": self.output_len,
            "ttft_s": self.ttft_s,
            "latency_s": self.latency_s,
            "prefill_s": self.prefill_s,
            "decode_s": self.decode_s,
            "tpot_s": self.tpot_s,
            "tokens_per_s": self.tokens_per_s,
            "total_tokens_per_s": self.total_tokens_per_s,
            "concurrent_sequences": self.concurrent_sequences,
            "waves": self.waves,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "weight_bytes": self.weight_bytes,
            "memory_gib": self.memory.total_bytes / GIB,
            "memory": self.memory.to_dict(),
            "fits": self.fits,
            "bottleneck": self.bottleneck,
            "breakdown_s": dict(self.breakdown),  # seconds of the batch's latency, by term
            "notes": list(self.notes),
        }


#: what a published LLM inference figure measured: generated tokens/s of an offline batch per
#: GPU or over all its GPUs, or the time to the first token in milliseconds
PUBLISHED_METRICS = ("out_tokens_per_s_per_gpu", "out_tokens_per_s", "ttft_ms")


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedInference:
    """One row of ``llm_infer_published.csv``: a published offline-batch figure of a catalog
    language model on a catalog GPU with an engine, to check ``predict infer`` against --
    never to fit it. ``expressible``: whether ``predict infer`` can price the row (the note
    says why not). ``batch_size`` sequences (a static batch, or every request of an offline
    run queued at once), at most ``max_num_seqs`` of them at a time."""

    source: str
    engine: str
    engine_version: str
    gpu: str
    model: str
    precision: str
    kv_precision: str
    tp: int
    batch_size: int
    max_num_seqs: int
    input_len: int
    output_len: int
    metric: str
    published: float
    expressible: bool
    source_url: str
    as_of: date
    note: str = ""

    def __post_init__(self) -> None:
        if self.metric not in PUBLISHED_METRICS:
            raise InvalidSpecError(
                "metric", f"must be one of {', '.join(PUBLISHED_METRICS)}", got=self.metric
            )
        check_precision("precision", self.precision)
        check_precision("kv_precision", self.kv_precision)
        if not (math.isfinite(self.published) and self.published > 0):
            raise InvalidSpecError("published", "must be a number > 0", got=self.published)
