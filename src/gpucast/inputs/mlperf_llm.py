"""MLPerf Training v4.0's LLM systems predicted as ``predict llm-train`` predicts a run.

:func:`llm_system_predictions` prices each GPT-3 and Llama-2-70B LoRA system of
``mlperf_training_v4.0/`` (nothing fitted on these rows but the fp8 efficiency, on GPT-3's:
:func:`fit_fp8_ratio`, and the host's time per layer, on LoRA's: :func:`fit_host_layer_s`):
samples to target at its global batch
(MLCommons' convergence points, ``catalog/data/convergence.csv``) x the step of the fastest
layout that fits among those ``predict llm-train`` searches (tuned stack; fp8 where the GPU has
it), plus the evaluations the rules hold inside the timed run (``catalog/data/mlperf_eval.csv``).
Its ``log(measured / predicted)`` per system is what :func:`interval_table` turns into the
80% bands ``predict llm-train`` and ``plan llm-train`` state (``catalog/data/
llm_train_intervals.csv``), held out one submitter at a time: a submitter is one software stack
and one way of running it, the unit a new user's run is exchangeable with -- and each system is
priced by a model fitted without its submitter (:func:`submitter_held_out_predictions`).

The submissions name their stack only in the system name: NVIDIA's NeMo containers (and the
OEMs' reruns of them, ``..._pytorch_24.04``) are the ``tuned`` stack; a DeepSpeed system
(JuniperNetworks' ``..._pytorch_deepspeed``) is priced with the ``pytorch`` stack's
efficiencies, as a user running DeepSpeed would ask. Two regimes follow: :data:`TUNED` (the
tuned systems alone: what ``--software tuned`` states) and :data:`ANY_STACK` (every system:
what the other stacks state, one submitter's three DeepSpeed runs being all the data has of
them).

Only NVIDIA systems (:data:`CALIBRATION_VENDORS`) feed the fits and the bands: the fp8
efficiency is Transformer Engine's and the host's pace NeMo's. Another vendor's systems (Intel's
Gaudi 2 runs of GPT-3 and LoRA) are priced from their datasheet with those fits as priors --
the only cross-vendor evidence the data holds, kept aside to check the band a GPU type without
step-time data states (:func:`gpu_band`; ``llm_system_predictions(vendors=None)``).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from gpucast.predict.intervals import IntervalTable, calibrated_level, percentile_words

if TYPE_CHECKING:
    from gpucast.predict.parallel import SearchMemo
    from gpucast.predict.roofline import RooflineEfficiency
    from gpucast.predict.steptime import StepTimeModel

RUNS_FILE = "mlperf_training_v4.0/training_v4.0.csv"
#: MLPerf benchmark -> (catalog model, sequence length, LoRA rank) as the rules run it.
LLM_BENCHMARKS: dict[str, tuple[str, int, int]] = {
    "gpt3": ("gpt-3-175b", 2048, 0),
    "llama2_70b_lora": ("llama-2-70b", 8192, 16),
}
#: The band of a tuned-stack run nothing calibrates (no measurement of it is stored).
TUNED = "llm_train/tuned"
#: The band of any stack: every system, DeepSpeed's included.
ANY_STACK = "llm_train/any_stack"
#: Benchmarks whose submissions capture CUDA graphs (NVIDIA's v4.0 GPT-3 configs carry
#: ``_cg``; the Llama-2 LoRA ones do not): the host keeps ahead of their GPUs
CUDA_GRAPH_BENCHMARKS: tuple[str, ...] = ("gpt3",)
#: A system whose name holds one of these runs that stack (else ``tuned``).
_STACK_MARKERS: dict[str, str] = {"deepspeed": "pytorch"}


def system_stack(system: str) -> str:
    """The software stack (:data:`gpucast.domain.workload.SOFTWARE_STACKS`) an MLPerf LLM
    system's name says it ran."""
    name = system.lower()
    return next((stack for marker, stack in _STACK_MARKERS.items() if marker in name), "tuned")


def regime_for(software: str) -> str:
    """The band a prediction for ``software`` states."""
    return TUNED if software == "tuned" else ANY_STACK


#: What the band rests on, in words (its notes and the shipped file's ``source``).
CITATION = "MLPerf Training v4.0 gpt3 and llama2_70b_lora time to train"
#: What systems alike in every input of a layout search share: benchmark, software stack,
#: GPU, GPUs, GPUs per node, global batch
SearchKey = tuple[str, str, str, int, int, int]
#: Micro-batch sizes the benchmark's search tries (the submissions run 1 or 2).
MICRO_BATCHES = (1, 2, 4)
#: Vendors whose systems the fits and the bands rest on (see the module docstring).
CALIBRATION_VENDORS: tuple[str, ...] = ("nvidia",)


def llm_system_predictions(
    data_dir: Path,
    *,
    model: StepTimeModel | None = None,
    fp8_ratio: float | None = None,
    benchmarks: Collection[str] | None = None,
    exclude: Collection[str] = (),
    host_layer_s: float | None = None,
    searches: dict[SearchKey, SearchMemo] | None = None,
    vendors: Collection[str] | None = CALIBRATION_VENDORS,
    warmup_s: float | None = None,
    runs: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per MLPerf LLM system of a catalog GPU: ``benchmark``, ``submitter``,
    ``system``, ``software`` (:func:`system_stack`), ``gpu``, ``vendor``, ``gpus``,
    ``measured_min``
    (MLPerf's score), ``predicted_min``, ``eval_pct`` (the evaluations' time as % of
    training), ``mfu``, ``layout`` and ``residual`` = log(measured / predicted). Systems alike
    in every input share one search. ``model``: the step-time model whose efficiencies price
    them (default: the shipped one); ``fp8_ratio``: its fp8 efficiency replaced by this times
    the 16-bit one (1: borrowed, as with no fp8 data); ``benchmarks``: only these;
    ``exclude``: submitters or ``submitter/system`` names left out; ``host_layer_s``: the
    host's seconds per layer and micro-batch for the benchmarks run without CUDA graphs
    (:data:`CUDA_GRAPH_BENCHMARKS` keep 0; default: the model's, :func:`fit_host_layer_s`);
    ``searches``: the layout searches of an earlier call with every argument the same but
    ``host_layer_s`` and ``exclude`` (the host's pace changes no search's stage times or
    memory), filled and reused; ``vendors``: only systems of these GPU vendors (None: all;
    default: :data:`CALIBRATION_VENDORS`); ``warmup_s``: a run's one-off warm-up after its
    clock starts, added to the time of the benchmarks run without CUDA graphs (default: the
    model's, fitted with the host's time by :func:`fit_host_layer_s`); ``runs``: the runs of
    another round in the same format (:func:`~gpucast.store.datasets.mlperf.read_mlperf_runs`;
    default: ``data_dir``'s v4.0 table)."""
    from dataclasses import replace

    from gpucast.catalog import load_catalog
    from gpucast.catalog.convergence import mlperf_samples_to_target
    from gpucast.catalog.llm import llm_model
    from gpucast.catalog.mlperf_eval import mlperf_eval_schedule
    from gpucast.catalog.steptime import shipped_step_time_model
    from gpucast.domain.evaluation import EVAL_FORWARD_SHARE, LORA_FORWARD_SHARE, EvaluationCost
    from gpucast.domain.parallel import (
        SEARCHED_CP_SIZES,
        SEARCHED_VIRTUAL_STAGES,
        LayoutSpace,
        ParallelAssumptions,
    )
    from gpucast.inputs.calibration import step_time_efficiency, with_sibling_factors
    from gpucast.inputs.steptime import gpu_cluster_shape
    from gpucast.predict.parallel import (
        HOST_FORWARD_SHARE,
        SearchMemo,
        best_layout,
    )
    from gpucast.store.datasets.mlperf import mlperf_systems, read_mlperf_runs

    catalog = load_catalog()
    fitted = model if model is not None else shipped_step_time_model()
    latency = fitted.eval_latency_s_ if fitted is not None else 0.0
    if host_layer_s is None:
        host_layer_s = fitted.host_layer_s_ if fitted is not None else 0.0
    if warmup_s is None:
        warmup_s = fitted.warmup_s_ if fitted is not None else 0.0

    def efficiency(software: str) -> RooflineEfficiency:
        eff = (
            with_sibling_factors(model.efficiency(software))
            if model is not None
            else step_time_efficiency(software).value
        )
        if fp8_ratio is None:
            return eff
        return replace(eff, compute_efficiency_fp8=fp8_ratio * eff.compute_efficiency("bf16"))

    wanted = list(LLM_BENCHMARKS if benchmarks is None else benchmarks)
    if runs is None:
        runs = read_mlperf_runs(Path(data_dir) / RUNS_FILE)
    systems = mlperf_systems(runs)
    systems = systems[systems.benchmark.isin(wanted) & (systems.gpu != "")]
    if vendors is not None:
        kept = [catalog.gpu(g).vendor in vendors for g in systems.gpu]
        systems = systems[np.asarray(kept, dtype=bool)]
    left_out = set(exclude)
    systems = systems[
        ~systems.submitter.isin(left_out)
        & ~(systems.submitter + "/" + systems.system).isin(left_out)
    ]
    searched: dict[SearchKey, tuple[float, float, str, float, int]]
    searched = {}
    memos = searches if searches is not None else {}
    rows = []
    for r in systems.to_dict("records"):
        spec = catalog.gpu(r["gpu"])
        name, seq, lora = LLM_BENCHMARKS[r["benchmark"]]
        batch, n = int(r["global_batch_size"]), int(r["accelerators"])
        per_node = int(r["accel_per_node"])
        software = system_stack(r["system"])
        key = (r["benchmark"], software, spec.name, n, per_node, batch)
        if key not in searched:
            links = gpu_cluster_shape(spec, per_node)
            space = LayoutSpace(
                precision="fp8" if spec.has_units("fp8") else "bf16",
                lora_rank=lora,
                micro_batch_sizes=MICRO_BATCHES,
                cp_sizes=SEARCHED_CP_SIZES,
                virtual_stages=SEARCHED_VIRTUAL_STAGES,
            )
            host = 0.0 if r["benchmark"] in CUDA_GRAPH_BENCHMARKS else host_layer_s
            model_spec = llm_model(name)
            best = best_layout(
                model_spec, spec, n, batch, seq_len=seq, cluster=links,
                efficiency=efficiency(software), space=space,
                assumptions=ParallelAssumptions(host_layer_s=host),
                memo=memos.setdefault(key, SearchMemo()),
            )  # fmt: skip
            # an evaluated batch is forwards only: the host issues their share of each layer
            layers = -(-model_spec.layers // best.layout.pp)
            host_forwards = best.layout.micro_batches * layers * HOST_FORWARD_SHARE * host
            per_round = best.layout.dp * best.layout.micro_batch_size
            searched[key] = (
                best.step_time_s, best.mfu, best.layout.label(), host_forwards, per_round
            )  # fmt: skip
        step_s, mfu, layout, host_forwards, per_round = searched[key]
        # runs that capture CUDA graphs warm up (and capture) before their clock starts:
        # NVIDIA's GPT-3 logs show under 1 s of it after run_start, LoRA's 17-19 s
        warm = 0.0 if r["benchmark"] in CUDA_GRAPH_BENCHMARKS else warmup_s
        samples = mlperf_samples_to_target(r["benchmark"], batch).samples_mean
        train_s = samples / batch * step_s
        share = LORA_FORWARD_SHARE if lora else EVAL_FORWARD_SHARE
        evaluation = float(
            EvaluationCost(
                schedule=mlperf_eval_schedule(r["benchmark"]), latency_s=latency
            ).seconds(
                samples,
                batch,
                max(step_s, host_forwards / share),
                forward_share=share,
                round_samples=per_round,
            )
        )
        measured = float(r["minutes_score"])
        predicted = (train_s + evaluation + warm) / 60.0
        rows.append(
            {
                "benchmark": r["benchmark"],
                "submitter": r["submitter"],
                "system": f"{r['submitter']}/{r['system']}",
                "software": software,
                "gpu": spec.name,
                "vendor": spec.vendor,
                "gpus": n,
                "measured_min": measured,
                "predicted_min": predicted,
                "eval_pct": 100.0 * evaluation / train_s,
                "mfu": mfu,
                "layout": layout,
                "residual": float(np.log(measured / predicted)),
            }
        )
    return pd.DataFrame(rows)


#: MLPerf benchmarks that train a whole model in fp8 at a short sequence (no LoRA, no context
#: parallelism): the fp8 efficiency is fitted on them (:func:`fit_fp8_ratio`)
FP8_FIT_BENCHMARKS: tuple[str, ...] = ("gpt3",)
#: The fitted fp8 efficiency's bounds, as a ratio to the 16-bit one
FP8_RATIO_BOUNDS: tuple[float, float] = (0.3, 1.0)


@dataclass(frozen=True, slots=True)
class Fp8Fit:
    """The fp8 tensor-core efficiency fitted on whole fp8 runs, as a ratio to the 16-bit one."""

    ratio: float
    systems: tuple[str, ...]
    #: in-sample MAPE (%) of the time to train over ``systems``
    mape_pct: float

    @property
    def source(self) -> str:
        return (
            f"MLPerf Training v4.0 {', '.join(FP8_FIT_BENCHMARKS)} time to train "
            f"({len(self.systems)} fp8 system{'' if len(self.systems) == 1 else 's'}: "
            f"{self.ratio:.2f}x the 16-bit efficiency, "
            f"MAPE {self.mape_pct:.1f}% in sample)"
        )


def fit_fp8_ratio(
    data_dir: Path, model: StepTimeModel | None = None, *, exclude: Collection[str] = ()
) -> Fp8Fit | None:
    """The fp8 efficiency (a ratio to the 16-bit one, in :data:`FP8_RATIO_BOUNDS`) that
    minimises the squared log error of :data:`FP8_FIT_BENCHMARKS`' tuned-stack systems on GPUs
    with fp8 (the others run bf16 and say nothing of it) through the 3D-parallel model (each
    trial searches their layouts again); None where no such system is left after
    ``exclude``. The step-time rows hold no fp8 run, so without it
    fp8 borrows the 16-bit efficiency -- which whole fp8 runs refute (NeMo's fp8 steps are
    not twice as fast as its bf16 ones)."""
    from scipy.optimize import minimize_scalar

    from gpucast.catalog import load_catalog

    catalog = load_catalog()

    def table(ratio: float) -> pd.DataFrame:
        rows = llm_system_predictions(
            data_dir, model=model, fp8_ratio=ratio, benchmarks=FP8_FIT_BENCHMARKS, exclude=exclude
        )
        if not len(rows):
            return rows
        fp8 = [catalog.gpu(g).has_units("fp8") for g in rows["gpu"]]
        return rows[(rows["software"] == "tuned") & np.asarray(fp8)]

    probe = table(1.0)
    if probe.empty:
        return None

    def loss(ratio: float) -> float:
        return float(np.mean(table(ratio)["residual"].to_numpy() ** 2))

    low, high = FP8_RATIO_BOUNDS
    best = minimize_scalar(loss, bounds=(low, high), method="bounded", options={"xatol": 1e-2})
    ratio = float(best.x)
    rows = table(ratio)
    ape = np.abs(np.exp(-rows["residual"].to_numpy()) - 1.0)
    return Fp8Fit(
        ratio=ratio, systems=tuple(sorted(rows["system"])), mape_pct=float(100 * np.mean(ape))
    )


#: MLPerf benchmarks run without CUDA graphs whose time to train across GPU counts fits the
#: host's time per layer (:func:`fit_host_layer_s`)
HOST_FIT_BENCHMARKS: tuple[str, ...] = ("llama2_70b_lora",)
#: The host times tried (s per layer and micro-batch): a 1 ms grid, refined to 0.25 ms around
#: its best (the loss jumps where a layout search changes its pick: no gradient to follow)
HOST_GRID_S: tuple[float, ...] = tuple(i / 1000 for i in range(21))
_HOST_REFINE_S = 0.00025
#: A run's one-off warm-up the fit may find (s), and the GPU counts it needs: with two, the
#: level and the pacing already fit them exactly
WARMUP_BOUNDS_S: tuple[float, float] = (0.0, 300.0)
WARMUP_MIN_GPU_COUNTS = 3


@dataclass(frozen=True, slots=True)
class HostFit:
    """The host's seconds per layer and micro-batch fitted on whole runs without CUDA graphs."""

    seconds: float
    systems: tuple[str, ...]
    #: a run's one-off warm-up after its clock starts (s), fitted with ``seconds``
    warmup_s: float
    #: the runs' common level (measured / predicted, geometric mean) at the fitted time: what
    #: the bands carry, not the fit
    level: float
    #: SD of the log residuals around that level without pacing and at the fitted time
    spread_before: float
    spread_after: float
    gpu_counts: tuple[int, ...]

    @property
    def source(self) -> str:
        return (
            f"MLPerf Training v4.0 {', '.join(HOST_FIT_BENCHMARKS)} time to train "
            f"({len(self.systems)} tuned-stack systems without CUDA graphs, "
            f"{min(self.gpu_counts):,}-{max(self.gpu_counts):,} GPUs: the time per layer that "
            f"best explains how their time to train scales with the GPU count, with a run's "
            f"one-off warm-up of {self.warmup_s:.1f} s; their common "
            f"level x{self.level:.2f} left to the band; log-residual SD "
            f"{self.spread_before:.3f} -> {self.spread_after:.3f})"
        )


@dataclass(slots=True)
class HostGridMemo:
    """What fits of the host's time that differ only in ``exclude`` share
    (:func:`fit_host_layer_s` ``memo``): the tables per host time (priced without a warm-up,
    which the fit adds) and the layout searches behind them, which the host's time does not
    change."""

    tables: dict[float, pd.DataFrame] = field(default_factory=dict)
    searches: dict[SearchKey, SearchMemo] = field(default_factory=dict)


def fit_host_layer_s(
    data_dir: Path,
    model: StepTimeModel | None = None,
    *,
    fp8_ratio: float | None = None,
    exclude: Collection[str] = (),
    memo: HostGridMemo | None = None,
) -> HostFit | None:
    """The host's seconds per layer and micro-batch (:data:`HOST_GRID_S`, refined to 0.25 ms)
    and a run's one-off warm-up (:data:`WARMUP_BOUNDS_S`) that minimise the spread of
    :data:`HOST_FIT_BENCHMARKS`' tuned-stack systems' log residuals around their mean -- the
    scaling with the GPU count, not the level (one level factor is profiled out: an efficiency
    gap common to every GPU count is the band's to carry). A micro-batch the host paces costs
    the same whatever the GPUs do, so it shows where the per-GPU work is small (many GPUs,
    context parallelism) and hides where it is large; a warm-up costs the same whatever the
    run's length, so it shows in the shortest runs (the most GPUs). The warm-up is profiled
    out per host time (a bounded 1-D search; 0 where it does not lower the spread or fewer
    than :data:`WARMUP_MIN_GPU_COUNTS` GPU counts cannot tell it from the pacing and the
    level). None where the rows left after ``exclude`` span fewer than two GPU counts (the
    level and the pacing cannot be told apart). ``memo``: shared by fits that differ only in
    ``exclude``; the grid's layout searches are run once either way."""
    from scipy.optimize import minimize_scalar

    cache = memo if memo is not None else HostGridMemo()
    left_out = set(exclude)

    def table(seconds: float) -> pd.DataFrame:
        key = round(seconds, 6)
        if key not in cache.tables:
            rows = llm_system_predictions(
                data_dir,
                model=model,
                fp8_ratio=fp8_ratio,
                benchmarks=HOST_FIT_BENCHMARKS,
                host_layer_s=key,
                searches=cache.searches,
                warmup_s=0.0,
            )
            cache.tables[key] = rows[rows["software"] == "tuned"] if len(rows) else rows
        rows = cache.tables[key]
        if not len(rows):
            return rows
        return rows[~rows["submitter"].isin(left_out) & ~rows["system"].isin(left_out)]

    probe = table(0.0)
    if probe.empty or probe["gpus"].nunique() < 2:
        return None
    measured_s = 60.0 * probe["measured_min"].to_numpy(dtype=np.float64)
    warmup_free = probe["gpus"].nunique() >= WARMUP_MIN_GPU_COUNTS

    def residuals(seconds: float, warmup: float) -> np.ndarray:
        predicted_s = 60.0 * table(seconds)["predicted_min"].to_numpy(dtype=np.float64)
        return np.log(measured_s / (predicted_s + warmup))

    def warmup_for(seconds: float) -> tuple[float, float]:
        """The warm-up that best explains the runs at this host time, and the spread."""
        none = float(np.std(residuals(seconds, 0.0)))
        if not warmup_free:
            return 0.0, none
        found = minimize_scalar(
            lambda w: float(np.std(residuals(seconds, w))),
            bounds=WARMUP_BOUNDS_S,
            method="bounded",
            options={"xatol": 0.05},
        )
        return (float(found.x), float(found.fun)) if found.fun < none else (0.0, none)

    def spread(seconds: float) -> float:
        return warmup_for(seconds)[1]

    coarse = min(HOST_GRID_S, key=spread)  # ties: the least pacing
    fine = [
        coarse + k * _HOST_REFINE_S
        for k in range(-3, 4)
        if 0 <= coarse + k * _HOST_REFINE_S <= HOST_GRID_S[-1]
    ]
    best = min(sorted(fine), key=spread)
    warmup, after = warmup_for(best)
    rows = table(best)
    return HostFit(
        seconds=float(best),
        systems=tuple(sorted(rows["system"])),
        warmup_s=warmup,
        level=float(np.exp(np.mean(residuals(best, warmup)))),
        spread_before=float(np.std(residuals(0.0, 0.0))),
        spread_after=after,
        gpu_counts=tuple(sorted({int(g) for g in rows["gpus"]})),
    )


def submitter_held_out_predictions(
    data_dir: Path, model: StepTimeModel | None = None
) -> pd.DataFrame:
    """:func:`llm_system_predictions` with each system's residual as a model fitted without
    its submitter would give it: the fp8 efficiency refitted without that submitter's runs
    (borrowed from the 16-bit one where no other submitter ran fp8 pre-training) and the
    host's time per layer refitted without them (0 where the others cannot fit it); every
    other figure is fitted on no LLM row. What the bands' submitter-held-out calibration
    scores."""
    from gpucast.catalog.steptime import shipped_step_time_model

    fitted = model if model is not None else shipped_step_time_model()
    # one memo per fp8 ratio: the layout searches do not change with the host's time
    memos: dict[float | None, HostGridMemo] = {None: HostGridMemo()}
    base = llm_system_predictions(data_dir, model=model, searches=memos[None].searches)
    if fitted is None:
        return base
    tuned = base["software"] == "tuned"
    fp8_subs = (
        set(base.loc[base["benchmark"].isin(FP8_FIT_BENCHMARKS) & tuned, "submitter"])
        if fitted.fp8_source_
        else set()
    )
    host_subs = (
        set(base.loc[base["benchmark"].isin(HOST_FIT_BENCHMARKS) & tuned, "submitter"])
        if fitted.host_source_
        else set()
    )
    parts = [base[~base["submitter"].isin(fp8_subs | host_subs)]]
    for submitter in sorted(fp8_subs | host_subs):
        ratio = None
        if submitter in fp8_subs:
            refit = fit_fp8_ratio(data_dir, model, exclude=(submitter,))
            ratio = refit.ratio if refit is not None else 1.0
        memo = memos.setdefault(ratio, HostGridMemo())
        host = warmup = None
        if submitter in host_subs:
            host_fit = fit_host_layer_s(
                data_dir, model, fp8_ratio=ratio, exclude=(submitter,), memo=memo
            )
            host = host_fit.seconds if host_fit is not None else 0.0
            warmup = host_fit.warmup_s if host_fit is not None else 0.0
        rows = llm_system_predictions(
            data_dir,
            model=model,
            fp8_ratio=ratio,
            host_layer_s=host,
            searches=memo.searches,
            warmup_s=warmup,
        )
        parts.append(rows[rows["submitter"] == submitter])
    return pd.concat(parts).loc[base.index]


def interval_table(predictions: pd.DataFrame) -> IntervalTable:
    """The :data:`TUNED` and :data:`ANY_STACK` bands of :func:`llm_system_predictions`'
    residuals: their quantiles at the least level whose band of the other submitters covers
    80% of each held-out submitter's systems
    (:func:`gpucast.predict.intervals.calibrated_level`)."""
    residuals, levels = {}, {}
    for name, rows in (
        (TUNED, predictions[predictions["software"] == "tuned"]),
        (ANY_STACK, predictions),
    ):
        r = rows["residual"].to_numpy(dtype=np.float64)
        residuals[name] = r
        levels[name] = calibrated_level(r, rows["submitter"].to_numpy())
    return IntervalTable.from_residuals(residuals, levels)


#: The step-time model's regime for a GPU type without runs in its data, the workload known
#: (:func:`gpu_band` widens an LLM band to it)
UNSEEN_GPU_REGIME = "gpu_unseen/calibrated"


def gpu_band(
    band: tuple[float, float, str], gpu: str, efficiency: RooflineEfficiency
) -> tuple[float, float, str]:
    """``band`` (:func:`stated_band`) for a prediction on ``gpu``. Kept where the step-time
    model has a factor for the GPU type (its own runs in the data); otherwise its datasheet
    alone prices the GPU, which no LLM system of the band tested, so the band widens to span
    the step-time model's leave-one-GPU-out band (:data:`UNSEEN_GPU_REGIME`: a GPU type held
    out of the fit, the workload measured on others) -- what the issue's "a GPU never seen
    in any data falls back to specs with a band learned from leave-one-GPU-out" asks."""
    from gpucast.predict.roofline import regime_band

    low, high, note = band
    if gpu in efficiency.gpu_factors or not efficiency.fitted:
        return band
    held_low, held_high = regime_band(efficiency, UNSEEN_GPU_REGIME, None)
    wide_low, wide_high = min(low, held_low), max(high, held_high)
    mape = efficiency.intervals.mape_pct.get(UNSEEN_GPU_REGIME, float("nan"))
    note += (
        f"; {gpu} has no run in the step-time data (its datasheet alone prices it), so the "
        f"band widens to x{wide_low:.2f}-{wide_high:.2f}, spanning the step-time model's "
        f"for a GPU type left out of its fit (x{held_low:.2f}-{held_high:.2f}, "
        f"{UNSEEN_GPU_REGIME}: MAPE {mape:.1f}%)"
    )
    return wide_low, wide_high, note


def stated_band(software: str) -> tuple[float, float, str]:
    """(lower, upper) ratios of measured / predicted and the note of the 80% interval an LLM
    training prediction for ``software`` states: the shipped ``llm_train_intervals.csv``."""
    from gpucast.catalog.llm import load_llm_train_intervals
    from gpucast.domain.parallel import INTERVAL_NOTE

    table, sources = load_llm_train_intervals()
    regime = regime_for(software)
    low, high = table.ratios(regime)
    level = table.level[regime]
    which = "tuned-stack (NeMo-class) " if regime == TUNED else ""
    percentiles = percentile_words(level, "each submitter's systems held out")
    note = (
        f"{INTERVAL_NOTE} x{low:.2f}-{high:.2f} from {table.n[regime]} {which}MLPerf LLM "
        f"systems, each predicted by a model fitted without its submitter's runs "
        f"(their {percentiles}; their MAPE {table.mape_pct[regime]:.1f}%): {sources[regime]}"
    )
    if low > 1:
        note += (
            f"; every one ran slower than predicted (x{low:.2f} at least), so the interval "
            "starts at the prediction"
        )
    return low, high, note
