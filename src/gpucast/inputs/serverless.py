"""Inputs of the serverless simulator (issue #19): invocation traces and the GPU functions.

- :func:`trace_from_dir`: a folder of the Azure Functions 2019 trace (``invocations_per_
  function_md.anon.dNN.csv`` and ``function_durations_percentiles.anon.dNN.csv`` of one day,
  as ``../shared/data/azure_functions_2019`` documents; a missing one is one error naming
  it), with each function's app and, when the folder has it, the apps' memory
  (``app_memory_percentiles.anon.dNN.csv``: optional, the dataset has none for days 13-14);
  :mod:`gpucast.inputs.serverless_apps` groups the functions into their apps.
- :func:`synthetic_trace`: N functions with the published characteristics
  (:mod:`gpucast.simulate.faas_workload`).
- :func:`gpu_function`: what a function serving a workload costs on a GPU: its memory held
  warm (the profile's inference peak: weights, inputs, the largest operator), its forward time
  (the serving engine's batch-1 latency, :func:`gpucast.inputs.serving.forward_pass_s`, as
  simulate serve) and its cold start (:func:`gpu_cold_start`; with a stored
  ``measure coldstart`` run, its measured phases in place of the predicted ones:
  :mod:`gpucast.inputs.coldstart`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.domain.units import count_of, format_duration, format_ms, format_seconds, format_span
from gpucast.inputs.instance_ebs import EBS_LINK, instance_links

if TYPE_CHECKING:
    from gpucast.domain.catalog import GpuSpec
    from gpucast.domain.llm import TransformerSpec
    from gpucast.domain.profile import WorkloadProfile
    from gpucast.domain.provenance import Sourced
    from gpucast.domain.serverless import ColdStartPrediction
    from gpucast.inputs.coldstart import StoredColdStart
    from gpucast.store.datasets.azure_functions import AppMemory


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerlessTrace:
    """Per-minute invocation counts of functions and their execution times (NaN: unknown)."""

    counts: npt.NDArray[np.int64] | npt.NDArray[np.int32]
    names: tuple[str, ...]
    duration_s: npt.NDArray[np.float64]
    source: str
    arrival_process: str
    warnings: tuple[str, ...] = field(default=())
    #: per function, the bin, prompt and output tokens of each request (an LLM trace), else
    #: empty
    tokens: tuple[
        tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]], ...
    ] = field(default=())
    #: per function, its application (``owner/app``: the Azure Functions 2019 trace), else
    #: empty (the trace has no applications)
    apps: tuple[str, ...] = field(default=())
    #: the applications' allocated memory (``app_memory_percentiles.anon.dNN.csv``), None
    #: when the folder has no such file (:attr:`memory_file` names the one looked for)
    memory: AppMemory | None = None
    memory_file: str = ""
    #: per function of an LLM trace, its file and when its first request came after the
    #: trace's first (seconds; the files are aligned on the earliest), else empty
    paths: tuple[Path, ...] = field(default=())
    offsets_s: tuple[float, ...] = field(default=())


def _trace_days(folder: Path) -> list[int]:
    """The days whose invocation-count file ``folder`` holds, in order."""
    found = (
        re.fullmatch(r"invocations_per_function_md\.anon\.d(\d\d)\.csv", p.name)
        for p in folder.iterdir()
    )
    return sorted(int(m[1]) for m in found if m)


def trace_from_dir(folder: Path, day: int = 1) -> ServerlessTrace:
    """One day of the Azure Functions 2019 trace from ``folder`` (module docstring)."""
    from gpucast.inputs.serving import skipped_rows_warning
    from gpucast.store.datasets.azure_functions import (
        DURATIONS_FILE,
        INVOCATIONS_FILE,
        MEMORY_FILE,
        read_app_memory,
        read_function_durations,
        read_invocation_counts,
    )

    folder = Path(folder)
    if not folder.is_dir():
        raise InvalidInputError(
            f"--trace {folder}: not a folder",
            fix="give the folder holding the Azure Functions 2019 trace files",
        )
    paths = {
        "invocations": folder / INVOCATIONS_FILE.format(day=day),
        "durations": folder / DURATIONS_FILE.format(day=day),
    }
    for path in paths.values():
        if not path.is_file():
            days = _trace_days(folder)
            raise InvalidInputError(
                f"--trace {folder}: missing {path.name}",
                fix=f"the folder has {'days' if len(days) > 1 else 'day'} "
                f"{', '.join(map(str, days))}: give --day {days[0]}"
                if days and day not in days
                else "the folder needs the invocation counts and the duration percentiles of "
                f"day {day} (see ../shared/data/azure_functions_2019), or use --synthetic N",
            )
    counts = read_invocation_counts(paths["invocations"])
    durations, skipped = read_function_durations(paths["durations"])
    memory_path = folder / MEMORY_FILE.format(day=day)
    memory = read_app_memory(memory_path) if memory_path.is_file() else None
    apps = counts.functions["owner"] + "/" + counts.functions["app"]
    keys = apps + "/" + counts.functions["function"]
    dkeys = durations["owner"] + "/" + durations["app"] + "/" + durations["function"]
    average = dict(zip(dkeys, durations["average_ms"], strict=True))
    duration_s = np.array([average.get(k, np.nan) for k in keys], dtype=np.float64) / 1e3
    warnings = []
    if counts.skipped:
        warnings.append(skipped_rows_warning(paths["invocations"], counts.skipped))
    if skipped:
        warnings.append(skipped_rows_warning(paths["durations"], skipped))
    if memory is not None and memory.skipped:
        warnings.append(skipped_rows_warning(memory_path, memory.skipped))
    repeated = keys[keys.duplicated()]
    if len(repeated):  # the dataset documents the three hashes as a function's unique id
        warnings.append(
            f"{count_of(len(repeated), 'row')} of {paths['invocations'].name} "
            f"{'repeats' if len(repeated) == 1 else 'repeat'} a "
            f"function of an earlier row (first: {repeated.iloc[0]}): each row is replayed as "
            "a function of its own"
        )
    missing = np.isnan(duration_s)
    if missing.any():
        warnings.append(
            f"{int(missing.sum())} of {duration_s.size} functions have no duration row in "
            f"{paths['durations'].name} (first: {keys[missing].iloc[0]}): they run one forward "
            "pass of their model"
        )
    span_s = counts.minutes * 60.0
    long_run = _longer_than_trace(tuple(keys), duration_s, span_s, paths["durations"].name)
    warnings += [long_run] if long_run else []
    return ServerlessTrace(
        counts=counts.counts,
        names=tuple(keys),
        duration_s=duration_s,
        source=f"Azure Functions 2019 trace day {day} in {folder} ({len(keys)} functions of "
        f"{apps.nunique()} apps, {counts.minutes} minutes)",
        arrival_process=f"replayed: the Azure Functions 2019 trace's per-minute invocation "
        f"counts of day {day}",
        warnings=tuple(warnings),
        apps=tuple(apps),
        memory=memory,
        memory_file=memory_path.name,
    )


def _longer_than_trace(
    names: tuple[str, ...], duration_s: npt.NDArray[np.float64], span_s: float, file_name: str
) -> str | None:
    """A warning naming the functions whose average duration is longer than the whole trace
    (1e9 ms is 11.6 days): not refused -- such a run is recorded, whole, on the day it ends --
    but every latency and GPU-hour figure of theirs follows from it."""
    long_run = np.flatnonzero(duration_s > span_s)  # NaN (no row) compares false
    if not long_run.size:
        return None
    shown = ", ".join(f"{names[i]} ({format_duration(duration_s[i])})" for i in long_run[:3])
    more = f" and {long_run.size - 3} more" if long_run.size > 3 else ""
    return (
        f"{count_of(int(long_run.size), 'function')} of {file_name} run longer "
        f"on average than the whole trace ({format_duration(span_s)}): {shown}{more}; their "
        "latency and GPU-hours follow from it -- check the file's Average column (ms)"
    )


#: the file names of the Azure LLM inference trace 2023 (one per deployment: code, conv)
LLM_TRACE_GLOB = "AzureLLMInferenceTrace_*.csv"


def trace_from_path(path: Path, day: int = 1) -> ServerlessTrace:
    """``--trace PATH``: an Azure LLM inference trace file, a folder of them
    (:data:`LLM_TRACE_GLOB`, :func:`llm_trace`), an ``arrival_s`` CSV (the serving verbs'
    arrival file: one function's invocations, :func:`llm_trace`), or a folder of the Azure
    Functions 2019 trace (:func:`trace_from_dir`)."""
    from gpucast.store.datasets.azure_functions import INVOCATIONS_FILE

    path = Path(path)
    if not path.exists():  # not "not a folder": a file is read too (QA 41 QF)
        raise InvalidInputError(
            f"--trace {path}: no such file or folder",
            fix="check the path: --trace takes a folder of the Azure Functions 2019 trace, an "
            "Azure LLM trace file or folder, or an arrival_s CSV",
        )
    if path.is_file():
        _not_an_azure_functions_file(path)
        return llm_trace([path])
    if path.is_dir() and not (path / INVOCATIONS_FILE.format(day=day)).exists():
        files = sorted(path.glob(LLM_TRACE_GLOB))
        if files:
            return llm_trace(files)
    return trace_from_dir(path, day)


#: the files of one day of the Azure Functions 2019 trace, and the day
_AZURE_FUNCTIONS_FILE = re.compile(
    r"^(?:invocations_per_function_md|function_durations_percentiles|app_memory_percentiles)"
    r"\.anon\.d(\d+)\.csv$"
)
#: the dataset's description, next to its files
_AZURE_FUNCTIONS_README = "AzureFunctionsDataset2019.md"


def _not_an_azure_functions_file(path: Path) -> None:
    """Refuse a file of the Azure Functions 2019 trace (by its name, its ``HashOwner`` header
    or the dataset's files beside it) given where its folder is wanted, saying which folder."""
    from gpucast.store.datasets.azure_functions import INVOCATIONS_FILE

    if path.match(LLM_TRACE_GLOB):
        return
    named = _AZURE_FUNCTIONS_FILE.match(path.name)
    try:
        with path.open("rb") as handle:
            head = handle.read(len(b"HashOwner"))
    except OSError:
        head = b""  # the LLM trace reader says why it cannot be read
    beside = (path.parent / _AZURE_FUNCTIONS_README).is_file() or any(
        path.parent.glob(INVOCATIONS_FILE.replace("{day:02d}", "*"))
    )
    if named is None and head != b"HashOwner" and not beside:
        return
    day = f" --day {int(named.group(1))}" if named is not None else ""
    names = (
        INVOCATIONS_FILE.replace("{day:02d}", "NN")
        + " and "
        + INVOCATIONS_FILE.replace(
            "invocations_per_function_md", "function_durations_percentiles"
        ).replace("{day:02d}", "NN")
    )
    fix = (
        f"give the folder that holds it: --trace {path.parent}{day}"
        if named is not None
        else f"give a folder holding the dataset's files under their names ({names}); "
        f"{path.name} is not one of them"
    )
    raise InvalidInputError(
        f"--trace {path}: a file, but the Azure Functions 2019 trace is read from its folder "
        "(one day's invocation counts and duration percentiles)",
        fix=fix,
    )


def llm_trace(paths: list[Path], bin_s: float = 60.0) -> ServerlessTrace:
    """Azure LLM inference trace files (``TIMESTAMP, ContextTokens, GeneratedTokens``; read
    by :func:`gpucast.store.datasets.azure_traces.read_arrival_trace`), one function per file
    (a deployment: ``code``, ``conv``), replayed at their recorded timestamps, aligned on the
    earliest and counted in bins of ``bin_s``; each request's tokens are kept for its service
    time. Requests with 0 prompt or output tokens are served as 1 token; an ``arrival_s`` CSV
    with token columns is read as one. One ``arrival_s`` CSV without them (what ``simulate
    serve --arrivals trace:FILE`` reads) is one function's invocations, counted in the same
    bins, each running the function's model (no tokens, no durations)."""
    from gpucast.inputs.serving import skipped_rows_warning
    from gpucast.store.datasets.azure_traces import (
        AZURE_LLM_FORMAT,
        FORMAT_ATTR,
        ORIGIN_ATTR,
        read_arrival_trace,
    )

    frames, warnings = [], []
    for path in paths:
        parsed = read_arrival_trace(path)
        if "context_tokens" not in parsed.frame and len(paths) == 1:
            return _arrival_trace(path, parsed.frame["arrival_s"].to_numpy(), bin_s, (
                (skipped_rows_warning(path, parsed.skipped),) if parsed.skipped else ()
            ))  # fmt: skip
        if "context_tokens" not in parsed.frame:
            raise InvalidInputError(
                f"--trace {path}: no ContextTokens/GeneratedTokens columns",
                fix="give an Azure LLM inference trace (TIMESTAMP,ContextTokens,"
                "GeneratedTokens), one arrival_s CSV or a folder of the Azure Functions 2019 "
                "trace",
            )
        if parsed.skipped:
            warnings.append(skipped_rows_warning(path, parsed.skipped))
        frames.append(parsed.frame)
    origin = min(float(f.attrs[ORIGIN_ATTR]) for f in frames)
    bins = [
        np.floor((f["arrival_s"].to_numpy() + float(f.attrs[ORIGIN_ATTR]) - origin) / bin_s).astype(
            np.int64
        )
        for f in frames
    ]
    n_bins = int(max(int(b.max()) for b in bins)) + 1
    counts = np.stack([np.bincount(b, minlength=n_bins) for b in bins]).astype(np.int64)
    tokens = []
    for path, f, b in zip(paths, frames, bins, strict=True):
        inp = f["context_tokens"].to_numpy(dtype=np.int64)
        out = f["generated_tokens"].to_numpy(dtype=np.int64)
        zero = int(((inp < 1) | (out < 1)).sum())
        if zero:
            warnings.append(
                f"{zero} request(s) of {path.name} with 0 prompt or output tokens are served "
                "as 1 token"
            )
        tokens.append((b, np.maximum(inp, 1), np.maximum(out, 1)))
    names = tuple(p.stem.removeprefix("AzureLLMInferenceTrace_") for p in paths)
    each = ", ".join(f"{n} {len(f):,} requests" for n, f in zip(names, frames, strict=True))
    files = ", ".join(p.name for p in paths)
    if all(f.attrs.get(FORMAT_ATTR) == AZURE_LLM_FORMAT for f in frames):
        what, stamps = "Azure LLM inference trace", "the Azure LLM trace's request timestamps"
    else:  # a CSV of one's own: arrival_s and token columns (QA 41 QF F11)
        what, stamps = "arrival_s CSV with token columns", f"{files}'s arrival_s timestamps"
    return ServerlessTrace(
        counts=counts,
        names=names,
        duration_s=np.full(len(paths), np.nan),
        source=f"{what} ({each}; {files})",
        arrival_process=f"replayed: {stamps}, one function per file, aligned on the first "
        f"request and counted in {bin_s:g} s bins ({n_bins} bins)",
        warnings=tuple(warnings),
        tokens=tuple(tokens),
        paths=tuple(paths),
        offsets_s=tuple(float(f.attrs[ORIGIN_ATTR]) - origin for f in frames),
    )


def _arrival_trace(
    path: Path, arrival_s: npt.NDArray[np.float64], bin_s: float, warnings: tuple[str, ...]
) -> ServerlessTrace:
    """An ``arrival_s`` CSV as one function (named after the file) counted in ``bin_s`` bins."""
    bins = np.floor(arrival_s / bin_s).astype(np.int64)
    n_bins = int(bins.max()) + 1 if bins.size else 1
    return ServerlessTrace(
        counts=np.bincount(bins, minlength=n_bins).astype(np.int64)[None, :],
        names=(path.stem,),
        duration_s=np.full(1, np.nan),
        source=f"arrival_s CSV {path.name} ({arrival_s.size:,} invocations of one function)",
        arrival_process=f"replayed: {path.name}'s arrival_s timestamps, one function "
        f"serving --models, counted in {bin_s:g} s bins ({n_bins} bins)",
        warnings=warnings,
        paths=(path,),
        offsets_s=(0.0,),
    )


def synthetic_trace(n_functions: int, *, minutes: int, seed: int) -> ServerlessTrace:
    """``n_functions`` generated functions (Shahrad et al. ATC'20 characteristics)."""
    from gpucast.catalog.faas import load_faas_mix
    from gpucast.simulate.faas_workload import generate_faas_workload

    work = generate_faas_workload(
        n_functions, np.random.default_rng(seed), mix=load_faas_mix(), minutes=minutes
    )
    return ServerlessTrace(
        counts=work.counts,
        names=tuple(f"f{i}" for i in range(n_functions)),
        duration_s=work.duration_s,
        source=f"synthetic: {n_functions} functions over {minutes} minutes, seed {seed} "
        "(invocation-frequency mix, triggers, inter-arrival patterns and durations of Shahrad "
        "et al. ATC'20: catalog/data/faas_workload.csv)",
        arrival_process="generated: per-minute counts of timer (scheduled), near-periodic, "
        "Poisson and bursty (gamma renewal) functions with the published invocation-frequency "
        "mix",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuFunction:
    """A workload served as a function on a GPU."""

    model: str
    memory_gib: float
    weight_bytes: int
    forward_s: float
    cold_start_s: float
    source: str
    #: the cold start phase by phase (which phases are measured, which predicted)
    cold_start: ColdStartPrediction | None = None
    #: the stored ``measure coldstart`` run whose phases it uses, if any
    coldstart_run: int | None = None
    #: that run's provenance (:meth:`~gpucast.inputs.coldstart.StoredColdStart.source`)
    coldstart_source: str | None = None
    #: the GPUs one instance holds (a language model split over several: all of them are
    #: loaded, billed and kept warm together; ``memory_gib`` is theirs together)
    gpus: int = 1
    #: what its predicted cold start assumes (phase defaults, the loader, the instance's EBS
    #: link), as predict coldstart says it; a phase a stored run measured is not assumed
    assumptions: dict[str, str] = field(default_factory=dict)

    def cold_start_dict(self) -> dict[str, object] | None:
        if self.cold_start is None:
            return None
        return {**self.cold_start.to_dict(), "run_id": self.coldstart_run}


def cold_start_text(
    cold: ColdStartPrediction, run_id: int | None, given: tuple[str, ...] = ()
) -> str:
    """``run 3 measured: CUDA context 0.412 s, ...; predicted: container 1.000 s`` (phases
    in ``given`` -- set outright by the user -- said apart from the predicted ones)."""
    from gpucast.domain.serverless import PHASE_LABELS

    def phases(names: tuple[str, ...]) -> str:
        return ", ".join(f"{PHASE_LABELS[p]} {cold.phase_s(p):.3f} s" for p in names)

    parts = [f"run {run_id} measured: {phases(cold.measured_phases)}"]
    set_by_user = tuple(p for p in cold.predicted_phases if p in given)
    predicted = tuple(p for p in cold.predicted_phases if p not in given)
    if set_by_user:
        parts.append(f"given: {phases(set_by_user)}")
    if predicted:
        parts.append(f"predicted: {phases(predicted)}")
    return "; ".join(parts)


def gpu_cold_start(
    weight_bytes: float,
    inference_flops: float,
    gpu: GpuSpec,
    *,
    links: dict[str, float | None],
    sources: dict[str, str],
    container_s: float | None = None,
    cuda_context_s: float | None = None,
    gpus: int = 1,
    precision: str = "fp32",
    forward: Sourced[float] | None = None,
) -> tuple[ColdStartPrediction, dict[str, str]]:
    """The cold start of a model of ``weight_bytes`` whose first call runs ``inference_flops``
    on ``gpu`` (weights through ``links`` and the GPUs' PCIe links -- ``gpus`` of them, each
    loading its shard at once; container, CUDA context and first call from ``coldstart.csv``
    unless given) and the assumptions it rests on. The first call's roofline is at the matrix
    peak of the model's ``precision``, its FLOPs and weight reads split over the ``gpus``;
    ``forward`` (:func:`gpucast.inputs.serving.forward_pass_s`) replaces that roofline."""
    from gpucast.catalog.coldstart import load_coldstart_facts
    from gpucast.predict.coldstart import predict_cold_start

    facts = load_coldstart_facts()
    links = dict(links)
    sources = dict(sources)
    assumptions: dict[str, str] = {}
    pcie = facts.get("link", f"pcie{gpu.pcie_generation}")
    links[f"pcie{gpu.pcie_generation}"] = pcie.value * gpus
    sources["pcie"] = pcie.source() + (f", {gpus} GPUs' links at once" if gpus > 1 else "")

    def phase(name: str, given: float | None, flag: str) -> float:
        if given is not None:
            sources[name] = f"--{flag} {given:g}"
            return given
        fact = facts.get("phase", name)
        assumptions[name] = f"{fact.value:g} s ({fact.description}); set --{flag}"
        sources[name] = fact.source()
        return fact.value

    container = phase("container-start", container_s, "container-s")
    context = phase("cuda-context", cuda_context_s, "cuda-context-s")
    first_call = facts.get("phase", "first-call")
    assumptions["first-call"] = f"{first_call.value:g} s ({first_call.description})"
    loader = single_reader_note(links, weight_bytes)
    if loader is not None:
        assumptions["loader"] = loader
    prediction = predict_cold_start(
        weight_bytes=int(weight_bytes),
        parameter_tensors=0,
        inference_flops=inference_flops,
        links_gbs=links,
        flops=gpu.matrix_tflops(precision) * 1e12 * gpus,
        memory_gbs=gpu.memory_bandwidth_gbps * gpus,
        container_s=container,
        cuda_context_s=context,
        first_call_s=first_call.value,
        sources={
            **sources,
            "forward": forward.source
            if forward is not None
            else f"roofline on {f'{gpus} x ' if gpus > 1 else ''}{gpu.name} ({precision} "
            "peak, memory bandwidth)",
        },
        first_forward_s=None if forward is None else forward.value,
    )
    return prediction, assumptions


def fitting_memory_gib(model: str, profile: WorkloadProfile, gpu: GpuSpec) -> float:
    """``model``'s inference peak at batch 1 (GiB, from its ``profile``), refused in one
    :class:`InvalidSpecError` when more than ``gpu``'s usable memory: the one rule of the
    serverless functions, simulate kaas and predict coldstart."""
    from gpucast.domain.gpu_memory import usable_gib, usable_text
    from gpucast.domain.units import GIB

    memory_gib = profile.memory.inference_peak_bytes / GIB
    if memory_gib > usable_gib(gpu.memory_gib):
        raise InvalidSpecError(
            "models",
            f"{model} needs {memory_gib:.1f} GiB at batch 1, more than a {gpu.name}'s "
            f"{usable_text(gpu.memory_gib)}",
            fix="pick a GPU with more memory (--gpu) or a smaller model",
        )
    return float(memory_gib)


def gpu_function(
    model: str,
    gpu: GpuSpec,
    *,
    storage: str,
    network_gbps: float | None,
    instance: str | None = None,
    ebs_gbps: float | None = None,
    container_s: float | None = None,
    cuda_context_s: float | None = None,
    measured: StoredColdStart | None = None,
) -> GpuFunction:
    """The memory, forward time and cold start of ``model`` on ``gpu`` (module docstring):
    the weights cross the instance's links (``instance`` / ``ebs_gbps`` / ``network_gbps``:
    :func:`~gpucast.inputs.instance_ebs.instance_links`); ``container_s`` / ``cuda_context_s``
    given outright win over the catalog's and over a measured run's; ``measured`` (a stored
    run of ``model``) gives the phases it has."""
    from gpucast.catalog.coldstart import load_coldstart_facts
    from gpucast.inputs.serving import forward_pass_s
    from gpucast.inputs.workload import check_workload_name, workload_profile
    from gpucast.predict.coldstart import with_measured

    check_workload_name(model, field="models")
    fact = load_coldstart_facts().get("storage", storage)
    more, sources, crossed = instance_links(
        storage, instance=instance, ebs_gbps=ebs_gbps, network_gbps=network_gbps
    )
    links: dict[str, float | None] = {storage: fact.value, **more}
    profile = workload_profile(model, "fp32", batch_size=1)
    memory_gib = fitting_memory_gib(model, profile, gpu)
    forward = forward_pass_s(model, gpu)
    cold, assumed = gpu_cold_start(
        profile.memory.weights_bytes,
        profile.inference_flops,
        gpu,
        links=links,
        sources={"storage": fact.source(), **sources},
        container_s=container_s,
        cuda_context_s=cuda_context_s,
        forward=forward,
    )
    given = tuple(
        phase
        for phase, value in (("container", container_s), ("cuda_context", cuda_context_s))
        if value is not None
    )
    assumed.update(crossed)
    if measured is not None:
        cold = with_measured(cold, measured.measurement, source=measured.source(), keep=given)
        for phase in cold.measured_phases:
            for key in _ASSUMED_BY_PHASE.get(phase, ()):
                assumed.pop(key, None)
    detail = (
        f"weights {format_seconds(cold.weight_load_s)} bound by {cold.bound_by}"
        if measured is None
        else cold_start_text(cold, measured.run_id, given)
    )
    return GpuFunction(
        model=model,
        memory_gib=memory_gib,
        weight_bytes=cold.weight_bytes,
        forward_s=forward.value,
        cold_start_s=cold.total_s,
        source=f"{model}: {memory_gib:.2f} GiB held warm, cold start {cold.total_s:.2f} s "
        f"({detail})",
        cold_start=cold,
        coldstart_run=None if measured is None else measured.run_id,
        coldstart_source=None if measured is None else measured.source(),
        assumptions=assumed,
    )


#: the assumptions of :func:`gpu_cold_start` a measured phase replaces
_ASSUMED_BY_PHASE = {
    "cuda_context": ("cuda-context",),
    "first_inference": ("first-call",),
    "weight_load": ("loader", EBS_LINK),
}


#: the serving engine whose model prices an LLM function's requests
LLM_ENGINE = "vllm"


def _llm_weight_bytes(spec: TransformerSpec) -> float:
    """A language model's weights at :data:`LLM_ENGINE`'s default precision."""
    from gpucast.catalog.engines import inference_engine
    from gpucast.domain.llm_infer import BYTES_PER_VALUE

    return float(
        spec.total_params * BYTES_PER_VALUE[inference_engine(LLM_ENGINE).default_precision]
    )


def single_reader_note(links: dict[str, float | None], weight_bytes: float) -> str | None:
    """Weights read from an EBS volume (a link named ``ebs-*``): what one reader got from such
    volumes in the published loader check (``coldstart_published.csv``, single-reader rows:
    concurrency 1 or a loader without one), said beside the prediction, which reads at the
    volume's provisioned rate as parallel loaders do -- a check, never a fit: the predicted
    weight load is unchanged. One reader never reads faster than the volume: where the
    published single-reader rates are above its provisioned rate, the note says one reader is
    bound by the volume too; else it gives the time at those rates (capped at the volume's).
    None off EBS or without such rows. Where the instance's EBS link (:data:`~gpucast.inputs.
    instance_ebs.EBS_LINK`) is slower than the volume, it stands for the volume here."""
    from gpucast.catalog.coldstart import load_published_coldstarts
    from gpucast.catalog.llm import llm_model
    from gpucast.inputs.instance_ebs import EBS_LINK

    volumes = [name for name in links if name.startswith("ebs-")]
    if not volumes:
        return None
    rows = [
        r
        for r in load_published_coldstarts()
        if r.measured == "weights" and r.storage.startswith("ebs-") and r.concurrency in (1, None)
    ]
    if not rows:
        return None
    rates = [_llm_weight_bytes(llm_model(r.model)) / r.published_s / 1e9 for r in rows]
    low, high = min(rates), max(rates)
    volume = volumes[0]
    volume_gbs = links[volume] or math.inf
    rate = f"{volume}'s provisioned rate"
    instance_gbs = links.get(EBS_LINK)
    if instance_gbs is not None and instance_gbs < volume_gbs:  # the instance's link binds
        volume, volume_gbs = "the instance's EBS link", instance_gbs
        rate = volume
    said = (
        f"the weights read at {rate} ({volume_gbs:.3g} GB/s), as parallel "
        "loaders reach it (Run:ai Model Streamer or Tensorizer at 8-16 streams); one reader "
        f"(torch.load, HF safetensors -- vLLM's default loader) got "
        f"{format_span(low, high, 'GB/s')} from EBS gp3 and io2 in the published check "
        f"({len(rows)} loads, benchmarks/coldstart_published.py)"
    )
    if low >= volume_gbs:
        bound = "the volume" if rate.endswith("provisioned rate") else volume
        return f"{said}, more than {volume} provides: one reader is bound by {bound} too"
    fast_s = weight_bytes / (min(high, volume_gbs) * 1e9)
    return f"{said}, which here would take {format_span(fast_s, weight_bytes / (low * 1e9), 's')}"


def llm_cold_start(
    spec: TransformerSpec,
    gpu: GpuSpec,
    *,
    links: dict[str, float | None],
    sources: dict[str, str],
    container_s: float | None = None,
    cuda_context_s: float | None = None,
    gpus: int = 1,
) -> tuple[ColdStartPrediction, dict[str, str]]:
    """The cold start of a language model of ``llm_models.csv`` (:func:`gpu_cold_start`): its
    weights at :data:`LLM_ENGINE`'s default precision (``params x bytes``), its first call one
    token through every matmul (``2 x params per token`` FLOPs)."""
    from gpucast.catalog.engines import inference_engine
    from gpucast.domain.llm_infer import BYTES_PER_VALUE

    precision = inference_engine(LLM_ENGINE).default_precision
    weight_bytes = _llm_weight_bytes(spec)
    return gpu_cold_start(
        weight_bytes,
        2.0 * spec.matmul_params_per_token,
        gpu,
        links=links,
        sources={
            "weights": f"{spec.name}: {spec.total_params:,.0f} parameters x "
            f"{BYTES_PER_VALUE[precision]:g} B ({precision}, {LLM_ENGINE}'s default)",
            **sources,
        },
        container_s=container_s,
        cuda_context_s=cuda_context_s,
        gpus=gpus,
        precision=precision,
    )


def llm_gpu_function(
    model: str,
    gpu: GpuSpec,
    *,
    storage: str,
    network_gbps: float | None,
    instance: str | None = None,
    ebs_gbps: float | None = None,
    input_tokens: npt.NDArray[np.int64],
    output_tokens: npt.NDArray[np.int64],
    container_s: float | None = None,
    cuda_context_s: float | None = None,
) -> tuple[GpuFunction, npt.NDArray[np.float64], tuple[str, ...]]:
    """A language model of ``llm_models.csv`` served as a function (vLLM, its default
    precision): the fewest GPUs of 1, 2, 4, 8 holding its weights and the longest request;
    the memory it holds warm is the engine's preallocated share of those GPUs (weights and
    KV cache, vLLM's ``gpu_memory_utilization``); each request's service time is its batch-1
    latency (:func:`gpucast.predict.llm_infer.request_latency_s`: prefill, then its decode
    steps); the cold start loads the catalog weights (:func:`gpu_cold_start`). Returns the
    function, the service time of each request (NaN for a request beyond the context window:
    rejected at arrival, :mod:`gpucast.app._context_window`) and warnings."""
    from gpucast.catalog.coldstart import load_coldstart_facts
    from gpucast.catalog.engines import inference_engine
    from gpucast.catalog.llm import llm_model
    from gpucast.domain.errors import NoFeasiblePlanError
    from gpucast.domain.units import GIB
    from gpucast.inputs.llm_serving import largest_node_gpus, node_links
    from gpucast.predict.llm_infer import (
        predict_inference,
        request_latency_s,
        smallest_fitting_tp,
    )

    spec = llm_model(model)
    engine = inference_engine(LLM_ENGINE)
    gpu, node = node_links(gpu)  # as its catalog node links it
    warnings: list[str] = []
    beyond = input_tokens + output_tokens > spec.max_context
    if beyond.all():
        raise InvalidSpecError(
            "models",
            f"every request needs more than {spec.name}'s context window of "
            f"{spec.max_context} tokens",
            fix="serve a model with a longer context (e.g. mistral-7b: 32768)",
        )
    if beyond.any():
        warnings.append(
            f"{int(beyond.sum())} of {beyond.size} requests need more than {spec.name}'s "
            f"context window of {spec.max_context} tokens; they are rejected at arrival (no "
            "invocation, no cost) and count as misses in every latency percentile and SLO share"
        )
    inp, out = input_tokens[~beyond], output_tokens[~beyond]
    longest = int(np.argmax(inp + out))
    try:
        tp = smallest_fitting_tp(
            spec, gpu, engine, input_len=int(inp[longest]), output_len=int(out[longest]),
            node=node, node_gpus=largest_node_gpus(gpu.name),
        )  # fmt: skip
    except NoFeasiblePlanError as exc:  # its fix names --precision, which these verbs lack
        raise InvalidSpecError(
            "models", exc.message.removeprefix("gpu: "),
            fix="pick a GPU with more memory (--gpu) or a smaller model",
        ) from None  # fmt: skip
    one = predict_inference(
        spec, gpu, engine, batch_size=1, input_len=int(inp[longest]),
        output_len=int(out[longest]), tp=tp, node=node,
    )  # fmt: skip
    served = request_latency_s(
        spec,
        gpu,
        engine,
        input_len=inp,
        output_len=out,
        tp=tp,
        node=node,
    )
    service = np.full(beyond.size, np.nan)
    service[~beyond] = served
    memory_gib = tp * one.memory.capacity_bytes / GIB
    fact = load_coldstart_facts().get("storage", storage)
    more, sources, crossed = instance_links(
        storage, instance=instance, ebs_gbps=ebs_gbps, network_gbps=network_gbps
    )
    links: dict[str, float | None] = {storage: fact.value, **more}
    cold, assumed = llm_cold_start(
        spec,
        gpu,
        links=links,
        sources={"storage": fact.source(), **sources},
        container_s=container_s,
        cuda_context_s=cuda_context_s,
        gpus=tp,
    )
    function = GpuFunction(
        model=spec.name,
        memory_gib=memory_gib,
        weight_bytes=cold.weight_bytes,
        forward_s=float(served.mean()),
        cold_start_s=cold.total_s,
        source=f"{spec.name} on {tp} x {gpu.name} ({engine.display_name}, {one.precision}"
        + (f"; an instance holds, and is billed for, all {tp} GPUs" if tp > 1 else "")
        + f"): {memory_gib:.1f} GiB held warm (the engine's share: weights and KV cache), "
        f"requests {float(np.median(served)):.2f} s median / {float(served.mean()):.2f} s "
        f"mean alone (prefill + decode of their tokens, {engine.provenance()}), cold start "
        f"{cold.total_s:.1f} s (weights {cold.weight_bytes / 1e9:.1f} GB in "
        f"{cold.weight_load_s:.1f} s bound by {cold.bound_by})",
        cold_start=cold,
        gpus=tp,
        assumptions={**assumed, **crossed},  # as gpu_function's (QA 39 F8 #2: dropped)
    )
    return function, service, tuple(warnings)


def kernel_sequence(model: str, gpu: GpuSpec) -> tuple[npt.NDArray[np.float64], str]:
    """The kernels of one batch-1 forward pass of ``model`` on ``gpu`` (seconds each) and
    where they come from (``174 kernels, 1.86 ms on T4 (...)``: the caller names the model):
    the profile's inference operators by class (count, FLOPs, bytes moved), each class's
    kernels equal, each class's share of the pass its roofline's (compute- or memory-bound,
    :func:`gpucast.predict.coldstart.forward_s`), the pass as long as the serving engine's
    batch-1 time on the device (:func:`gpucast.inputs.serving.forward_pass_s`, the one
    forward-pass latency of every verb), plus the engine's launch overhead spread evenly over
    the kernels (as simulate serve and simulate serverless price it); classes in profile
    order."""
    from gpucast.inputs.llm_serving import is_llm_model
    from gpucast.inputs.serving import forward_pass_s
    from gpucast.inputs.workload import check_workload_name, workload_profile
    from gpucast.predict.coldstart import forward_s

    if is_llm_model(model):  # it is known, but as a language model: no profiled kernels
        raise InvalidSpecError(
            "models", f"{model} is a language model of llm_models.csv: kernel-as-a-service "
            "splits a DNN's profiled inference kernels, which a language model has none of",
            fix="give DNN workloads, e.g. --models resnet50,bert-base",
        )  # fmt: skip
    check_workload_name(model, field="models")
    profile = workload_profile(model, "fp32", batch_size=1)
    fitting_memory_gib(model, profile, gpu)  # every pool GPU holds it (the verb's assumption)
    phase = next(p for p in profile.phases if p.phase == "inference")
    parts = []
    for c in phase.by_class:
        if c.calls <= 0:
            continue
        total = forward_s(
            c.flops + c.approx_uncounted_flops,
            c.bytes_moved,
            flops=gpu.matrix_tflops("fp32") * 1e12,
            memory_gbs=gpu.memory_bandwidth_gbps,
        )
        parts.append(np.full(c.calls, total / c.calls))
    seq = np.concatenate(parts) if parts else np.zeros(1)
    device = forward_pass_s(model, gpu, on_device=True).value
    if seq.sum() > 0:
        seq = seq * (device / seq.sum())
    # every kernel pays the engine's launch overhead, as in simulate serve and the serverless
    # verbs (QA 39 S #5: without it an MLP's pass read 0.00054 ms here, 0.0156 ms there)
    launch = max(forward_pass_s(model, gpu).value - device, 0.0)
    seq = seq + launch / seq.size
    pass_ms = format_ms(float(seq.sum()), decimals=2)
    return seq, (
        f"{count_of(seq.size, 'kernel')}, {pass_ms} ms on {gpu.name} (the serving engine's "
        f"batch-1 latency, as simulate serve and simulate serverless price one forward pass: "
        f"{format_ms(device, decimals=2)} ms on the device split over the profiled inference "
        "operators by class at each class's roofline share, plus its launch overhead, "
        f"{launch / seq.size * 1e6:.3g} us a kernel; --dispatch-us adds a "
        "dispatcher's cost beyond it)"
    )
