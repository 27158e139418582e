"""The one contract every registered performance model (estimator) must pass.

Each ``kind`` in :data:`gpucast.predict.base.REGISTRY` has a :class:`Case` below: how to build
it unfitted, tiny synthetic fit inputs, the prediction calls to compare, and the calls that
must refuse an unfitted model. The tests check, for every kind:

* the table covers the whole registry (a new estimator without a case fails);
* predicting, and ``to_dict`` / ``save_model``, before ``fit`` raise :class:`NotFittedError`;
* ``fit`` returns ``self`` and does not modify its inputs;
* ``to_dict`` is strict JSON and survives ``json`` + :func:`estimator_from_dict` and
  ``save_model`` / ``load_model`` with identical predictions (and an identical ``to_dict``);
* ``from_dict`` refuses another kind, another ``schema_version`` or a malformed state with
  :class:`InvalidInputError`.

Only public APIs are used. Model-specific behaviour is tested in the other files here.
"""

from __future__ import annotations

import copy
import importlib
import json
import math
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from llm_infer_factories import GPUS as LLM_GPUS
from llm_infer_factories import SPECS as LLM_SPECS
from llm_infer_factories import UNFITTED as LLM_ENGINE
from llm_infer_factories import synthetic_rows as llm_rows
from power_factories import sweep_rows
from speed_factories import NEW, synthetic_rows
from steptime_factories import synthetic_steps

import gpucast.predict
from gpucast.domain.errors import InvalidInputError, NotFittedError
from gpucast.domain.prediction import Estimate
from gpucast.domain.spot import GCP_PREEMPTIBLE_CAP_S, censor_observed
from gpucast.predict.base import REGISTRY, Estimator, estimator_from_dict
from gpucast.predict.bursty import CapacityGaps, MMPPModel, PiecewiseHazardModel
from gpucast.predict.cluster import ClusterModel
from gpucast.predict.collective import TCP_DEFAULT, CollectiveModel
from gpucast.predict.convergence import ConvergenceModel
from gpucast.predict.embedding_cache import EmbeddingLocalityModel
from gpucast.predict.kernels import KernelTimeModel
from gpucast.predict.llm_infer import LlmInferenceModel
from gpucast.predict.offload import CpuAdamModel
from gpucast.predict.overheads import CheckpointModel, FrameworkStartModel, StartupModel
from gpucast.predict.power import PowerModel
from gpucast.predict.program import CpuMachine, ProgramModel, ProgramObservation
from gpucast.predict.revocation import RevocationModel
from gpucast.predict.serving import BatchLatencyModel
from gpucast.predict.speed import MODEL_COL, TENSORS_COL, SpeedFeatures, SpeedModel
from gpucast.predict.steptime import StepTimeModel
from gpucast.store.models import load_model, save_model

# Import every module of the predict package so that every registered estimator is in
# REGISTRY, including one added after this file was written.
for _module in pkgutil.iter_modules(gpucast.predict.__path__, "gpucast.predict."):
    importlib.import_module(_module.name)

FitInputs = tuple[tuple[Any, ...], dict[str, Any]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """How to exercise one estimator kind through its public API."""

    #: A new, unfitted estimator.
    make: Callable[[], Estimator]
    #: Fresh ``(args, kwargs)`` for ``fit`` (tiny synthetic data).
    fit_inputs: Callable[[], FitInputs]
    #: Prediction outputs to compare between a model and its reloaded copy.
    predict: Callable[[Any], list[Any]]
    #: Every prediction-like call; each must raise NotFittedError on an unfitted model.
    unfitted_calls: tuple[Callable[[Any], object], ...]


# ------------------------------------------------------------------------------- speed
_SPEED_FEATURES = SpeedFeatures(model_flops=3e9, n_params=3.4e6, n_tensors=200)


def _speed_inputs() -> FitInputs:
    rows = synthetic_rows(noise=0.03)
    rows = rows[rows[MODEL_COL].isin([f"m{i}" for i in range(5)])].copy()
    rows.loc[rows.index[3], TENSORS_COL] = np.nan  # imputed from the same model, on a copy
    return (rows,), {"specs": {"NEW": NEW}}


def _speed_predict(model: SpeedModel) -> list[Any]:
    rows = synthetic_rows().head(8)
    return [
        model.predict(_SPEED_FEATURES, "SLOW"),
        model.predict(_SPEED_FEATURES, NEW),  # unseen GPU: scaled by peak
        model.predict(_SPEED_FEATURES, NEW, precision="fp16"),
        model.predict_frame(rows),
        model.achieved_efficiency(batch_size=128),
    ]


SPEED = Case(
    make=SpeedModel,
    fit_inputs=_speed_inputs,
    predict=_speed_predict,
    unfitted_calls=(
        lambda m: m.predict(_SPEED_FEATURES, "SLOW"),
        lambda m: m.predict_frame(synthetic_rows().head(2)),
        lambda m: m.achieved_efficiency(batch_size=128),
    ),
)


# ----------------------------------------------------------------------------- cluster
def _cluster_inputs() -> FitInputs:
    rows = []
    for model, params, tensors in (("a", 1e6, 50), ("b", 5e6, 200), ("c", 3e7, 200)):
        for gpu, step_s in (("slow", 0.5), ("fast", 0.12)):
            for workers in (1, 2, 4, 8):
                # Sub-linear scaling that worsens with model size (a loaded PS).
                loss = 1 + 0.02 * (workers - 1) * params / 1e6 * step_s**-0.5 / 10
                rows.append(
                    {
                        "gpu": gpu,
                        "model": model,
                        "workers": workers,
                        "speed_steps_per_s": workers / step_s / loss,
                        "n_parameters": params,
                        "n_tensors": tensors,
                    }
                )
    return (pd.DataFrame(rows),), {}


_CLUSTER_FRAME = pd.DataFrame(
    {
        "single_worker_step_time_s": [0.2, 0.2, 0.5, 0.1],
        "workers": [1, 6, 4, 8],
        "param_bytes": [4e7, 4e7, 1.2e8, 2e7],
        "n_tensors": [100, 100, 200, 50],
        "strategy": ["ps-async", "ps-async", "allreduce", "ps-sync"],
    }
)


def _cluster_predict(model: ClusterModel) -> list[Any]:
    out: list[Any] = [
        model.predict(0.2, 6, 2, strategy, param_bytes=4e7, n_tensors=100)
        for strategy in ("ps-async", "ps-sync", "allreduce", "fsdp")
    ]
    out.append(model.predict([0.2, 0.3, 0.5], param_bytes=1.2e8, n_tensors=200))
    out.append(model.predict_frame(_CLUSTER_FRAME))
    out.append(model.single_worker_step_time("slow", "a"))
    return out


CLUSTER = Case(
    make=ClusterModel,
    fit_inputs=_cluster_inputs,
    predict=_cluster_predict,
    unfitted_calls=(
        lambda m: m.predict(0.1, 4, param_bytes=1e6, n_tensors=10),
        lambda m: m.predict_frame(_CLUSTER_FRAME),
        lambda m: m.single_worker_step_time("slow", "a"),
    ),
)


# -------------------------------------------------------------------------- checkpoint
def _checkpoint_inputs() -> FitInputs:
    rng = np.random.default_rng(0)
    rows = []
    for i, size in enumerate([5.0, 10.0, 20.0, 40.0, 80.0]):
        for _ in range(3):
            local = 0.2 + 0.01 * size
            upload = (3.0 + 0.015 * size + 0.004 * size / 4) * (1 + 0.03 * rng.standard_normal())
            rows.append(
                {
                    "model": f"m{i}",
                    "checkpoint_mb": size,
                    "index_mb": size / 4,
                    "local_s": local,
                    "duration_s": local + upload,
                }
            )
    return (pd.DataFrame(rows),), {}


_CHECKPOINT_FRAME = pd.DataFrame({"checkpoint_mb": [10.0, 100.0], "index_mb": [2.5, np.nan]})


CHECKPOINT = Case(
    make=CheckpointModel,
    fit_inputs=_checkpoint_inputs,
    predict=lambda m: [
        m.predict(100.0),
        m.predict(100.0, 25.0),
        m.predict_frame(_CHECKPOINT_FRAME),
    ],
    unfitted_calls=(
        lambda m: m.predict(10.0),
        lambda m: m.predict_frame(_CHECKPOINT_FRAME),
    ),
)


# ----------------------------------------------------------------------------- startup
def _startup_inputs() -> FitInputs:
    rng = np.random.default_rng(1)
    rows = []
    for market, staging in (("spot", 45.0), ("on_demand", 28.0)):  # old spelling, normalised
        for region in ("east", "west"):
            for _ in range(5):
                rows.append(
                    {
                        "gpu": "K80",
                        "market": market,
                        "region": region,
                        "provisioning_s": rng.lognormal(np.log(1.8), 0.2),
                        "staging_s": rng.lognormal(np.log(staging), 0.1),
                        "booting_s": rng.lognormal(np.log(40.0), 0.05),
                    }
                )
    return (pd.DataFrame(rows),), {}


STARTUP = Case(
    make=StartupModel,
    fit_inputs=_startup_inputs,
    predict=lambda m: [
        m.predict("K80", "spot"),
        m.predict("K80", "on-demand", region="east"),
        m.sample(np.random.default_rng(7), 50, gpu="K80", market="spot"),
    ],
    unfitted_calls=(
        lambda m: m.predict("K80", "spot"),
        lambda m: m.sample(np.random.default_rng(0), 5, gpu="K80", market="spot"),
    ),
)


# --------------------------------------------------------------------- framework start
def _framework_inputs() -> FitInputs:
    rows = pd.DataFrame(
        {"n_parameters": [1e6, 1e7, 5e7, 1e8], "step_time_s": [0.05, 0.1, 0.3, 0.5]}
    )
    rows["cold_start_s"] = 4.0 + 0.05 * rows["n_parameters"] / 1e6 + 5 * rows["step_time_s"]
    rows.loc[2, "cold_start_s"] += 0.3  # not an exact fit
    return (rows,), {}


FRAMEWORK_START = Case(
    make=FrameworkStartModel,
    fit_inputs=_framework_inputs,
    predict=lambda m: [m.predict(2e7, 0.2), m.predict(2e7, 0.2, warm=True)],
    unfitted_calls=(lambda m: m.predict(1e6, 0.1),),
)


# -------------------------------------------------------------------------- revocation
_H = 3600.0


def _revocation_inputs() -> FitInputs:
    rng = np.random.default_rng(0)
    rows: list[tuple[str, str, float]] = []
    for zone, scale_h in (("us-central1-c", 10.0), ("europe-west1-b", 40.0)):
        d = np.minimum(rng.weibull(0.7, 15) * scale_h * _H, GCP_PREEMPTIBLE_CAP_S + 300)
        rows += [("K80", zone, float(x)) for x in d]
    rows += [("K80", "us-east1-c", GCP_PREEMPTIBLE_CAP_S + 300)] * 3  # never revoked
    frame = pd.DataFrame(rows, columns=["gpu", "region", "duration_s"])
    frame["observed"] = censor_observed(frame["duration_s"])
    return (frame,), {}


_TIMES_S = np.array([0.0, 600.0, 5 * _H, 20 * _H, GCP_PREEMPTIBLE_CAP_S])


def _revocation_predict(m: RevocationModel) -> list[Any]:
    out: list[Any] = []
    for region in ("us-central1", "us-east1"):  # own fit; pooled fallback
        out.append(m.source("K80", region))
        out.append(m.survival(_TIMES_S, "K80", region))
        out.append(m.sample_lifetimes(np.random.default_rng(3), 50, "K80", region))
    out.extend([m.gpus(), m.regions("K80"), m.km_table("K80"), m.group_stats("K80")])
    return out


REVOCATION = Case(
    make=RevocationModel,
    fit_inputs=_revocation_inputs,
    predict=_revocation_predict,
    unfitted_calls=(
        lambda m: m.distribution("K80", "us-central1"),
        lambda m: m.survival(_TIMES_S, "K80", "us-central1"),
        lambda m: m.sample_lifetimes(np.random.default_rng(0), 5, "K80", "us-central1"),
        lambda m: m.source("K80", "us-central1"),
        lambda m: m.gpus(),
        lambda m: m.regions("K80"),
        lambda m: m.group_stats("K80"),
        lambda m: m.km_table("K80"),
    ),
)


# ----------------------------------------------------------------------- batch latency
def _batch_latency_inputs() -> FitInputs:
    sizes = [1, 2, 4, 8, 16]
    latency = [0.005 + 0.002 * b * (1 + 0.01 * (-1) ** b) for b in sizes]
    return (sizes, latency), {"source": "contract test"}


BATCH_LATENCY = Case(
    make=BatchLatencyModel,
    fit_inputs=_batch_latency_inputs,
    predict=lambda m: [m.predict(3), m.predict(64), m.coefficients, m.curve(32)],
    unfitted_calls=(
        lambda m: m.predict(1),
        lambda m: m.coefficients,
        lambda m: m.curve(8),
    ),
)


# -------------------------------------------------------------------------------- mmpp
def _mmpp_inputs() -> FitInputs:
    """Two weeks of 5-minute ticks of 8 nodes: quiet, then a storm that takes 6 of them."""
    rng = np.random.default_rng(0)
    counts = np.full(4032, 8)
    for start in (500, 1800, 3000):
        counts[start : start + 40] = 8 - rng.integers(2, 7)
    counts[2500] = 7  # a lone revocation in calm
    return ([int(c) for c in counts],), {"gap_s": 300.0}


_MMPP_COUNTS = [8, 8, 8, 5, 3, 3, 8, 8, 7, 8]


def _mmpp_predict(m: MMPPModel) -> list[Any]:
    life = m.distribution()
    rng = np.random.default_rng(5)
    env = life.environment(rng, 4, 48 * _H)
    return [
        m.source,
        m.log_likelihood,
        life.survival(_TIMES_S),
        life.sample(np.random.default_rng(3), 20),
        life.sample_at(rng, np.linspace(0, 50 * _H, 8), np.arange(8) % 4, env),
        m.storm_probability(_MMPP_COUNTS, 300.0),
    ]


MMPP = Case(
    make=lambda: MMPPModel(restarts=3, cap_s=GCP_PREEMPTIBLE_CAP_S),
    fit_inputs=_mmpp_inputs,
    predict=_mmpp_predict,
    unfitted_calls=(
        lambda m: m.distribution(),
        lambda m: m.result,
        lambda m: m.source,
        lambda m: m.log_likelihood,
        lambda m: m.storm_probability(_MMPP_COUNTS, 300.0),
    ),
)


# ----------------------------------------------------------------------- capacity gaps
def _capacity_gap_inputs() -> FitInputs:
    gaps = [300.0, 600.0, 600.0, 1200.0, 3600.0, 7200.0, 900.0]
    return (gaps,), {"observed": [True, True, True, False, True, False, True]}


CAPACITY_GAPS = Case(
    make=CapacityGaps,
    fit_inputs=_capacity_gap_inputs,
    predict=lambda m: [
        m.source,
        m.sample(np.random.default_rng(2), 30),
        m.survival([0.0, 600.0, 5000.0, 1e5]),
        m.median_s(),
    ],
    unfitted_calls=(
        lambda m: m.sample(np.random.default_rng(0), 3),
        lambda m: m.survival(60.0),
        lambda m: m.source,
        lambda m: m.median_s(),
    ),
)


# -------------------------------------------------------------------- piecewise hazard
def _piecewise_inputs() -> FitInputs:
    d = np.random.default_rng(4).exponential(6 * _H, 60)
    return ([float(x) for x in np.minimum(d, 20 * _H)],), {
        "observed": [bool(x < 20 * _H) for x in d]
    }


PIECEWISE_HAZARD = Case(
    make=lambda: PiecewiseHazardModel(breaks_h=(0.0, 1.0, 6.0), cap_s=GCP_PREEMPTIBLE_CAP_S),
    fit_inputs=_piecewise_inputs,
    predict=lambda m: [
        m.spec(),
        m.distribution().survival(_TIMES_S),
        m.distribution().sample(np.random.default_rng(1), 20),
    ],
    unfitted_calls=(lambda m: m.spec(), lambda m: m.distribution()),
)


# ---------------------------------------------------------------------------- steptime
def _steptime_inputs() -> FitInputs:
    return (synthetic_steps(noise=0.05),), {"fitted_on": "synthetic"}


_STEPTIME_ROWS = synthetic_steps().iloc[::7].reset_index(drop=True)

STEPTIME = Case(
    make=lambda: StepTimeModel(gpu_prior_sd=0.3),
    fit_inputs=_steptime_inputs,
    predict=lambda m: [
        m.predict(_STEPTIME_ROWS),
        m.predict(_STEPTIME_ROWS, use_workload_factor=True),
        m.terms(_STEPTIME_ROWS),
        m.efficiency("pytorch").compute_efficiency("bf16"),
        m.efficiency("tuned").kernel_overhead_s,
    ],
    unfitted_calls=(
        lambda m: m.predict(_STEPTIME_ROWS),
        lambda m: m.terms(_STEPTIME_ROWS),
        lambda m: m.efficiency(),
        lambda m: m.with_intervals(m.intervals_),
    ),
)


# -------------------------------------------------------------------------- collective
def _collective_rows(noise: float = 0.0) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    gpus = np.array([2, 4, 8, 2, 4, 8, 16, 4] * 3, dtype=np.float64)
    frame = pd.DataFrame(
        {
            "gradient_bytes": np.repeat([4e7, 4.4e8, 6e6], 8),
            "gpus": gpus,
            "gpus_per_node": np.minimum(gpus, [1, 1, 1, 2, 4, 4, 4, 4] * 3),
            "intra_node_gbps": 128.0,
            "network_gbps": 50.0,
            "compute_s": np.repeat([0.05, 0.4, 0.007], 8),
        }
    )
    step = (
        TCP_DEFAULT.total_s(frame.gradient_bytes, frame.gpus, frame.gpus_per_node, 128.0, 50.0)
        + frame.compute_s
    )
    frame["step_time_s"] = step * np.exp(rng.normal(0, noise, len(frame)))
    return frame


COLLECTIVE = Case(
    make=CollectiveModel,
    fit_inputs=lambda: ((_collective_rows(0.02),), {"fitted_on": "synthetic"}),
    predict=lambda m: [m.predict(_collective_rows()), m.constants.to_dict()],
    unfitted_calls=(lambda m: m.predict(_collective_rows()), lambda m: m.constants),
)


# --------------------------------------------------------------------------- llm-infer
def _llm_inputs() -> FitInputs:
    rows, ttft = llm_rows(noise=0.02)
    kwargs = {"specs": LLM_SPECS, "gpus": LLM_GPUS, "engines": [LLM_ENGINE], "ttft": ttft}
    return (rows,), kwargs


_LLM_ROWS = llm_rows()[0].iloc[::5].reset_index(drop=True)

LLM_INFER = Case(
    make=LlmInferenceModel,
    fit_inputs=_llm_inputs,
    predict=lambda m: [
        m.predict_frame(_LLM_ROWS, specs=LLM_SPECS, gpus=LLM_GPUS),
        m.predict(
            LLM_SPECS["big"],
            LLM_GPUS["G"],
            "eng",
            batch_size=16,
            input_len=1024,
            output_len=256,
            tp=2,
        ).to_dict(),
        m.profile("eng").to_dict(),
    ],
    unfitted_calls=(
        lambda m: m.profile("eng"),
        lambda m: m.predict_frame(_LLM_ROWS, specs=LLM_SPECS, gpus=LLM_GPUS),
        lambda m: m.predict(
            LLM_SPECS["big"], LLM_GPUS["G"], "eng", batch_size=1, input_len=8, output_len=8
        ),
    ),
)


# --------------------------------------------------------------------------- power
_POWER_ROWS = sweep_rows(noise=0.02).assign(reference_step_time_s=0.4)

POWER = Case(
    make=PowerModel,
    fit_inputs=lambda: ((sweep_rows(noise=0.02, seed=3),), {}),
    predict=lambda m: [m.predict(_POWER_ROWS)[k] for k in ("step_time_s", "avg_power_w")],
    unfitted_calls=(lambda m: m.predict(_POWER_ROWS), lambda m: m.constants),
)


# --------------------------------------------------------------------------- convergence
def _convergence_runs() -> FitInputs:
    batch = np.repeat([64.0, 128.0, 256.0, 512.0, 1024.0], 4)
    jitter = np.tile([0.97, 1.0, 1.02, 1.05], 5)
    value = 20.0 * (1.0 + batch / 400.0) * jitter
    value[-1] = np.nan  # one seed that never reached the target
    return (batch, value), {}


CONVERGENCE = Case(
    make=ConvergenceModel,
    fit_inputs=_convergence_runs,
    predict=lambda m: [
        m.predict([32.0, 100.0, 4096.0]),
        *m.predict_interval([32.0, 100.0, 4096.0]),
        m.estimate(300.0),
    ],
    unfitted_calls=(
        lambda m: m.predict([64.0]),
        lambda m: m.predict_interval([64.0]),
        lambda m: m.estimate(64.0),
        lambda m: m.curve,
    ),
)


# --------------------------------------------------------------------------- program
def _program_machine(cores: float, clock: float = 2.5) -> CpuMachine:
    return CpuMachine(
        name=f"m{cores}", cores=cores, clock_ghz=clock, memory_bandwidth_gbs=100.0,
        disk_mb_per_s=200.0,
    )  # fmt: skip


def _program_inputs() -> FitInputs:
    shares = {"cpu": 0.7, "memory": 0.1, "io": 0.1, "gpu": 0.0, "idle": 0.1}
    return (
        [
            ProgramObservation(
                machine=_program_machine(1), wall_s=10.0, shares=shares, thread_demand=2.0
            ),
            ProgramObservation(
                machine=_program_machine(2), wall_s=6.0, shares=shares, thread_demand=2.0
            ),
        ],
    ), {}


_PROGRAM_TARGETS = [_program_machine(4, 3.0), _program_machine(1, 2.0)]

PROGRAM = Case(
    make=ProgramModel,
    fit_inputs=_program_inputs,
    predict=lambda m: [m.predict(_PROGRAM_TARGETS), m.demand],
    unfitted_calls=(lambda m: m.predict(_PROGRAM_TARGETS), lambda m: m.demand),
)


# ---------------------------------------------------------------------- embedding cache
def _locality_inputs() -> FitInputs:
    hist = pd.DataFrame(
        {
            "reuse_min": [0, 1, 2, 4],
            "reuse_max": [1.0, 2.0, 4.0, math.inf],
            "rows_share": [0.5, 0.25, 0.15, 0.10],
            "lookups_share": [0.16, 0.16, 0.16, 0.52],
        }
    )
    return (hist,), {"lookups": 3100, "unique_rows": 1000}


EMBEDDING_LOCALITY = Case(
    make=EmbeddingLocalityModel,
    fit_inputs=_locality_inputs,
    predict=lambda m: [
        m.hit_rate([0.01, 0.1, 0.5]),
        m.hit_rate([0.01, 0.1, 0.5], policy="lfu"),
        m.sample_row_counts(500),
        m.mean_reuse(),
    ],
    unfitted_calls=(
        lambda m: m.hit_rate([0.1]),
        lambda m: m.sample_row_counts(100),
        lambda m: m.mean_reuse(),
        lambda m: m.count_distribution(),
    ),
)


# --------------------------------------------------------------------------- cpu adam
def _cpu_adam_inputs() -> FitInputs:
    params = [5e6, 1e7, 2e7, 2e7, 5e7]
    tensors = [3.0, 50.0, 10.0, 200.0, 25.0]
    step = [1e-3 + 5e-6 * t + 28 * n / 15e9 for n, t in zip(params, tensors, strict=True)]
    return (params, tensors, step), {}


CPU_ADAM = Case(
    make=CpuAdamModel,
    fit_inputs=_cpu_adam_inputs,
    predict=lambda m: [m.predict_s([1e8, 5e8], [50, 250]), m.bandwidth_gbps],
    unfitted_calls=(lambda m: m.predict_s(1e8, 50), lambda m: m.bandwidth_gbps),
)


# ------------------------------------------------------------------------- kernel forest
def _kernel_inputs() -> FitInputs:
    from kernel_factories import synthetic_observations

    return (synthetic_observations(),), {}


def _kernel_predict(model: KernelTimeModel) -> list[Any]:
    from kernel_factories import CPU, synthetic_trace

    trace = synthetic_trace("held-out", scale=1.5)
    return [
        model.predict_call_s(trace.operators, CPU),
        model.predict_step(trace, CPU).to_dict(),
        model.training,
    ]


def _kernel_unfitted_trace() -> Any:
    from kernel_factories import synthetic_trace

    return synthetic_trace("x")


KERNEL_FOREST = Case(
    make=lambda: KernelTimeModel(n_estimators=8),
    fit_inputs=_kernel_inputs,
    predict=_kernel_predict,
    unfitted_calls=(
        lambda m: m.predict_step(_kernel_unfitted_trace(), _kernel_cpu()),
        lambda m: m.predict_call_s(_kernel_unfitted_trace().operators, _kernel_cpu()),
        lambda m: m.training,
    ),
)


def _kernel_cpu() -> Any:
    from kernel_factories import CPU

    return CPU


CASES: dict[str, Case] = {
    "kernel-forest": KERNEL_FOREST,
    "cpu_adam": CPU_ADAM,
    "program": PROGRAM,
    "embedding_locality": EMBEDDING_LOCALITY,
    "convergence": CONVERGENCE,
    "collective": COLLECTIVE,
    "power": POWER,
    "llm-infer": LLM_INFER,
    "steptime": STEPTIME,
    "speed": SPEED,
    "cluster": CLUSTER,
    "checkpoint": CHECKPOINT,
    "startup": STARTUP,
    "framework_start": FRAMEWORK_START,
    "revocation": REVOCATION,
    "batch-latency": BATCH_LATENCY,
    "mmpp": MMPP,
    "capacity-gaps": CAPACITY_GAPS,
    "piecewise-hazard": PIECEWISE_HAZARD,
}

#: Known contract failures: kind -> {test name: reason}. Marked ``xfail(strict=True)`` so a
#: fix makes the test fail until the entry is removed.
KNOWN_FAILURES: dict[str, dict[str, str]] = {}


def _kinds(test: str) -> list[Any]:
    params = []
    for kind in sorted(CASES):
        reason = KNOWN_FAILURES.get(kind, {}).get(test)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        params.append(pytest.param(kind, id=kind, marks=marks))
    return params


# ----------------------------------------------------------------------------- helpers
def _assert_same(a: Any, b: Any, where: str = "output") -> None:
    """Exact equality of prediction outputs (Estimates, frames, arrays, containers)."""
    if isinstance(a, Estimate) or isinstance(b, Estimate):
        assert isinstance(a, Estimate) and isinstance(b, Estimate), where
        assert a.to_dict() == b.to_dict(), where
    elif isinstance(a, pd.DataFrame):
        assert isinstance(b, pd.DataFrame), where
        pd.testing.assert_frame_equal(a, b, check_exact=True, obj=where)
    elif isinstance(a, pd.Series):
        assert isinstance(b, pd.Series), where
        pd.testing.assert_series_equal(a, b, check_exact=True, obj=where)
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype, where
        np.testing.assert_array_equal(a, b, err_msg=where, strict=True)
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for key in a:
            _assert_same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b), where
    else:
        assert a == b, where


def _fitted(kind: str) -> Estimator:
    case = CASES[kind]
    args, kwargs = case.fit_inputs()
    return case.make().fit(*args, **kwargs)


def _round_trip_json(model: Estimator) -> Estimator:
    return estimator_from_dict(json.loads(json.dumps(model.to_dict(), allow_nan=False)))


# ------------------------------------------------------------------------------- tests
def test_every_registered_estimator_has_a_case() -> None:
    assert set(REGISTRY) == set(CASES), (
        f"kinds without a contract case: {sorted(set(REGISTRY) - set(CASES))}; "
        f"cases for unregistered kinds: {sorted(set(CASES) - set(REGISTRY))}"
    )
    for kind, case in CASES.items():
        model = case.make()
        assert type(model) is REGISTRY[kind]
        assert model.kind == kind


@pytest.mark.parametrize("kind", _kinds("test_unfitted_model_refuses_to_predict_or_save"))
def test_unfitted_model_refuses_to_predict_or_save(kind: str, tmp_path: Path) -> None:
    case = CASES[kind]
    model = case.make()
    assert not model.is_fitted
    for i, call in enumerate(case.unfitted_calls):
        with pytest.raises(NotFittedError):
            call(model)
        assert not model.is_fitted, f"unfitted call {i} fitted the model"
    with pytest.raises(NotFittedError):
        model.to_dict()
    with pytest.raises(NotFittedError):
        save_model(model, tmp_path / "model.json")
    assert not (tmp_path / "model.json").exists()


@pytest.mark.parametrize("kind", _kinds("test_fit_returns_self_and_leaves_its_inputs_alone"))
def test_fit_returns_self_and_leaves_its_inputs_alone(kind: str) -> None:
    case = CASES[kind]
    args, kwargs = case.fit_inputs()
    before_args, before_kwargs = copy.deepcopy(args), copy.deepcopy(kwargs)
    model = case.make()
    assert model.fit(*args, **kwargs) is model
    assert model.is_fitted
    _assert_same(args, before_args, "fit args")
    _assert_same(kwargs, before_kwargs, "fit kwargs")
    # The fitted model answers every call that refused it before.
    for call in case.unfitted_calls:
        call(model)


@pytest.mark.parametrize("kind", _kinds("test_json_round_trip_gives_identical_predictions"))
def test_json_round_trip_gives_identical_predictions(kind: str) -> None:
    case = CASES[kind]
    model = _fitted(kind)
    saved = model.to_dict()
    assert saved["kind"] == kind
    assert saved["schema_version"] == REGISTRY[kind].schema_version
    text = json.dumps(saved, allow_nan=False)  # strict JSON: no NaN/inf, no numpy scalars
    again = estimator_from_dict(json.loads(text))
    assert type(again) is type(model)
    assert again.is_fitted
    _assert_same(case.predict(again), case.predict(model), f"{kind} predictions")
    # Saving the reloaded model writes the same state again.
    assert json.dumps(again.to_dict(), allow_nan=False, sort_keys=True) == json.dumps(
        saved, allow_nan=False, sort_keys=True
    )
    # The class's own from_dict reads it too.
    direct = REGISTRY[kind].from_dict(json.loads(text))
    _assert_same(case.predict(direct), case.predict(model), f"{kind} predictions (from_dict)")


@pytest.mark.parametrize("kind", _kinds("test_save_load_round_trip_gives_identical_predictions"))
def test_save_load_round_trip_gives_identical_predictions(kind: str, tmp_path: Path) -> None:
    case = CASES[kind]
    model = _fitted(kind)
    path = tmp_path / f"{kind}.json"
    save_model(model, path)
    again = load_model(path)
    assert type(again) is type(model)
    _assert_same(case.predict(again), case.predict(model), f"{kind} predictions")
    save_model(again, tmp_path / "again.json")
    assert (tmp_path / "again.json").read_text(encoding="utf-8") == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("kind", _kinds("test_from_dict_rejects_another_kind_or_schema"))
def test_from_dict_rejects_another_kind_or_schema(kind: str) -> None:
    cls = REGISTRY[kind]
    saved = _fitted(kind).to_dict()
    other = next(k for k in sorted(REGISTRY) if k != kind)
    for bad_kind in (other, "no-such-model", None):
        blob = copy.deepcopy(saved) | {"kind": bad_kind}
        with pytest.raises(InvalidInputError):
            cls.from_dict(blob)
    with pytest.raises(InvalidInputError):
        estimator_from_dict(copy.deepcopy(saved) | {"kind": "no-such-model"})
    without_kind = {k: v for k, v in saved.items() if k != "kind"}
    with pytest.raises(InvalidInputError):
        estimator_from_dict(without_kind)
    version = cls.schema_version
    for bad_version in (version + 1, version - 1, str(version), None):
        blob = copy.deepcopy(saved) | {"schema_version": bad_version}
        with pytest.raises(InvalidInputError):
            cls.from_dict(blob)
        with pytest.raises(InvalidInputError):
            estimator_from_dict(blob)
    without_version = {k: v for k, v in saved.items() if k != "schema_version"}
    with pytest.raises(InvalidInputError):
        cls.from_dict(without_version)


@pytest.mark.parametrize("kind", _kinds("test_from_dict_rejects_a_malformed_state"))
def test_from_dict_rejects_a_malformed_state(kind: str) -> None:
    cls = REGISTRY[kind]
    saved = _fitted(kind).to_dict()
    for bad_state in (None, [], "state", {}):
        with pytest.raises(InvalidInputError):
            cls.from_dict(copy.deepcopy(saved) | {"state": bad_state})
