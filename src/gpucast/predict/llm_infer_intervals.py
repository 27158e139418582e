"""Prediction intervals of LLM inference that held-out data earned.

:class:`~gpucast.predict.llm_infer.LlmInferenceModel` is fitted on one GPU's rows
(LLM-Inference-Bench's A100-40GB). What a prediction does not know decides its band:

* ``model_unseen`` -- a model the fit never saw, on the fitted GPU with a fitted engine: each
  model's rows predicted by the engines fitted without it (groups: the models);
* ``engine_unseen`` -- an engine with no rows of its own (priors and the pooled fit): each
  framework predicted by the pooled parameters of the others (groups: the frameworks);
* ``gpu_unseen`` -- another GPU: its rows (MI250, another vendor's software) predicted by the
  full fit from its datasheet (groups: the frameworks);
* ``gpu_calibrated`` -- that GPU with its engine's latency factor (:func:`gpu_factor_rows`,
  shipped in ``catalog/data/llm_infer_gpu_factors.csv``): each model's rows there predicted
  with the factor of the *other* models' rows of the same engine and GPU (groups: the models).

Per (regime, quantity) -- ``latency`` (the batch; tokens/s is its inverse) and ``ttft`` -- the
band is the quantile pair of ``log(measured / predicted)`` at the least level whose band of the
other groups covers 80% of each held-out group (:func:`gpucast.predict.intervals.
calibrated_level`), as the step-time model's. :func:`stated_ratios` combines them for one
prediction; a GPU of the fitted GPU's vendor that has no rows has no validated band: a prior
(:data:`PRIOR_HALFWIDTH`), said so.

Pure: frames in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpucast.domain.catalog import GpuSpec
from gpucast.domain.llm import TransformerSpec
from gpucast.domain.llm_infer import EngineProfile
from gpucast.predict.intervals import IntervalTable, calibrated_level
from gpucast.predict.llm_infer import LlmInferenceModel

#: Regimes, most informed first.
REGIMES = ("model_unseen", "engine_unseen", "gpu_calibrated", "gpu_unseen")
QUANTITIES = ("latency", "ttft")
#: The band of a GPU no row validates and whose vendor's transfer was never measured:
#: +-50%, the step-time model's unvalidated prior.
PRIOR_HALFWIDTH = 0.5


def held_out_residuals(
    throughput: pd.DataFrame,
    ttft: pd.DataFrame,
    *,
    specs: Mapping[str, TransformerSpec],
    gpus: Mapping[str, GpuSpec],
    engines: Sequence[EngineProfile],
    fitted_gpu: str,
) -> pd.DataFrame:
    """One row per held-out prediction: ``regime``, ``quantity``, ``group`` (what was held
    out), ``framework``, ``gpu`` and ``residual`` = log(measured / predicted). The fitted
    GPU's rows are held out by model and by framework; every other GPU's rows are predicted
    by the fit on all the fitted GPU's rows."""
    on = throughput[throughput["gpu"] == fitted_gpu]
    on_ttft = ttft[ttft["gpu"] == fitted_gpu]

    def fit(rows: pd.DataFrame, first: pd.DataFrame) -> LlmInferenceModel:
        return LlmInferenceModel().fit(rows, specs=specs, gpus=gpus, engines=engines, ttft=first)

    def part(
        model: LlmInferenceModel, regime: str, key: str, rows: pd.DataFrame, is_ttft: bool
    ) -> pd.DataFrame:
        measured = rows["ttft_s" if is_ttft else "latency_s"].to_numpy(dtype=np.float64)
        predicted = model.predict_frame(rows, specs=specs, gpus=gpus, ttft=is_ttft)
        return pd.DataFrame(
            {
                "regime": regime,
                "quantity": "ttft" if is_ttft else "latency",
                "group": rows[key].astype(str).to_numpy(),
                "framework": rows["framework"].to_numpy(),
                "gpu": rows["gpu"].to_numpy(),
                "model": rows["model"].astype(str).to_numpy(),
                "residual": np.log(measured / predicted),
            }
        )

    out: list[pd.DataFrame] = []
    for regime, key in (("model_unseen", "model"), ("engine_unseen", "framework")):
        for value in sorted(set(on[key])):
            held, held_ttft = on[key] == value, on_ttft[key] == value
            model = fit(on[~held], on_ttft[~held_ttft])
            out.append(part(model, regime, key, on[held], False))
            if held_ttft.any():
                out.append(part(model, regime, key, on_ttft[held_ttft], True))
    others = throughput[throughput["gpu"] != fitted_gpu]
    others_ttft = ttft[ttft["gpu"] != fitted_gpu]
    if len(others) or len(others_ttft):
        full = fit(on, on_ttft)
        if len(others):
            out.append(part(full, "gpu_unseen", "framework", others, False))
        if len(others_ttft):
            out.append(part(full, "gpu_unseen", "framework", others_ttft, True))
    frame = pd.concat(out, ignore_index=True)
    return pd.concat([frame, _calibrated(frame)], ignore_index=True)


def _calibrated(residuals: pd.DataFrame) -> pd.DataFrame:
    """``gpu_calibrated`` rows: each ``gpu_unseen`` residual less the mean latency residual of
    the other models of its engine on its GPU (the factor it would have been priced with);
    none where the engine has no other model there."""
    unseen = residuals[residuals["regime"] == "gpu_unseen"]
    latency = unseen[unseen["quantity"] == "latency"]
    parts = []
    for (framework, gpu, model), rows in unseen.groupby(["framework", "gpu", "model"]):
        same = (latency["framework"] == framework) & (latency["gpu"] == gpu)
        others = latency[same & (latency["model"] != model)]
        if not len(others):
            continue
        shift = float(others["residual"].mean())
        parts.append(
            rows.assign(
                regime="gpu_calibrated", group=rows["model"], residual=rows["residual"] - shift
            )
        )
    if not parts:
        return residuals.iloc[0:0]
    return pd.concat(parts, ignore_index=True)


def gpu_factor_rows(residuals: pd.DataFrame) -> pd.DataFrame:
    """The latency factor of each (framework, GPU) off the fitted GPU: ``exp`` of the mean
    ``gpu_unseen`` latency residual (how many times slower than the fit said its batches
    ran), with its rows and models -- what ``catalog/data/llm_infer_gpu_factors.csv`` ships."""
    unseen = residuals[(residuals["regime"] == "gpu_unseen") & (residuals["quantity"] == "latency")]
    rows = []
    for (framework, gpu), part in unseen.groupby(["framework", "gpu"]):
        rows.append(
            {
                "framework": str(framework),
                "gpu": str(gpu),
                "latency_factor": float(np.exp(part["residual"].mean())),
                "rows": len(part),
                "models": ", ".join(sorted(set(part["model"]))),
            }
        )
    return pd.DataFrame(rows, columns=["framework", "gpu", "latency_factor", "rows", "models"])


def interval_table(residuals: pd.DataFrame) -> IntervalTable:
    """Rows ``"{regime}/{quantity}"`` of :func:`held_out_residuals`, each at its calibrated
    quantile level with the held-out groups as the exchangeable units."""
    values, levels = {}, {}
    for (regime, quantity), part in residuals.groupby(["regime", "quantity"]):
        name = f"{regime}/{quantity}"
        r = part["residual"].to_numpy(dtype=np.float64)
        values[name] = r
        levels[name] = calibrated_level(r, part["group"].astype(str).to_numpy())
    return IntervalTable.from_residuals(values, levels)


@dataclass(frozen=True, slots=True)
class StatedBand:
    """(lower, upper) ratios of measured / predicted latency and TTFT, the regimes they rest
    on, and a sentence saying so."""

    latency: tuple[float, float]
    ttft: tuple[float, float]
    regimes: tuple[str, ...]
    note: str


def stated_ratios(
    table: IntervalTable,
    *,
    engine_fitted: bool,
    gpu_fitted: bool,
    same_vendor: bool,
    gpu_calibrated: bool = False,
) -> StatedBand:
    """The 80% band a prediction states: its engine's regime (``model_unseen`` for a fitted
    engine, ``engine_unseen`` for one on priors) and, on a GPU without rows, the envelope with
    ``gpu_unseen`` (another vendor, as measured) or with the +-50% prior (the fitted GPU's
    vendor: no transfer measured); an engine priced with its own factor on this GPU
    (``gpu_calibrated``) states that regime's band alone. A quantity without rows of its own
    (TTFT on another GPU) takes its latency's band."""
    base = "model_unseen" if engine_fitted else "engine_unseen"
    regimes = [base]
    if gpu_calibrated and not gpu_fitted and table.resolved("gpu_calibrated/latency"):
        regimes = ["gpu_calibrated"]
    elif not gpu_fitted:
        regimes.append("gpu_unseen" if not same_vendor else "prior")
    bands: dict[str, tuple[float, float]] = {}
    for quantity in QUANTITIES:
        low, high = math.inf, -math.inf
        for regime in regimes:
            if regime == "prior":
                lo, hi = 1.0 / (1.0 + PRIOR_HALFWIDTH), 1.0 + PRIOR_HALFWIDTH
            else:
                name = f"{regime}/{quantity}"
                if table.resolved(name) is None:
                    name = f"{regime}/latency"
                lo, hi = table.ratios(name)
                if regime == "gpu_calibrated":  # its TTFT rests on 3 rows: with latency's
                    lo = min(lo, table.ratios(f"{regime}/latency")[0])
                    hi = max(hi, table.ratios(f"{regime}/latency")[1])
            low, high = min(low, lo), max(high, hi)
        bands[quantity] = (low, high)
    parts = []
    for regime in regimes:
        if regime == "prior":
            parts.append(
                f"this GPU has no LLM inference rows, and the data check a transfer only to "
                f"another vendor's GPU, never to another GPU of the fitted one's vendor: "
                f"widened to x{1.0 / (1.0 + PRIOR_HALFWIDTH):.2f}-{1.0 + PRIOR_HALFWIDTH:.2f} "
                f"(a prior, up to {1.0 + PRIOR_HALFWIDTH:g}x faster or slower, fitted on no rows; "
                "where NVIDIA "
                f"published TensorRT-LLM figures, held out, the validated line gives the error "
                f"on them)"
            )
            continue
        name = f"{regime}/latency"
        n = table.n.get(name, 0)
        mape = table.mape_pct.get(name, math.nan)
        lo, hi = table.ratios(name)
        what = {
            "model_unseen": "a model left out of the fit",
            "engine_unseen": "an engine left out (the pooled fit of the others)",
            "gpu_unseen": "a GPU of another vendor, predicted from the fitted GPU's fit",
            "gpu_calibrated": "this GPU's own rows, a model left out, its engine's factor "
            "there from the other models",
        }[regime]
        parts.append(f"{what}: latency x{lo:.2f}-{hi:.2f} over {n} predictions, MAPE {mape:.1f}%")
    note = "80% interval from held-out LLM inference rows -- " + "; ".join(parts)
    return StatedBand(
        latency=bands["latency"], ttft=bands["ttft"], regimes=tuple(regimes), note=note
    )
