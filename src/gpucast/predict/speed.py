"""Single-GPU step time of parameter-server training, fitted on CM-DARE-format rows.

The model (one worker, one CPU parameter server, asynchronous training, as in CM-DARE)::

    step_time_s = fixed_g                      # per-step costs: session run, input pipeline
                + per_tensor_g * n_tensors     # per-variable costs: small kernels, RPCs
                + compute_g * model_flops      # FLOPs over the GPU's achieved FLOP/s
                + ps * n_params                # PS exchange not hidden under compute

``fixed_g``, ``per_tensor_g`` and ``compute_g`` belong to GPU ``g`` (its achieved efficiency is
calibrated from its rows). The coefficients are fitted by non-negative least squares on
*relative* errors (each row weighted by ``1 / step_time``), so a 40 ms model counts as much as
a 1.4 s one.

The PS term ``ps`` is shared by every GPU (the parameter server and its network do not change
with the worker's GPU) but is **not fitted by default** (``fit_ps_term=False``, so it is 0):
``Model FLOPs`` is 810-920 times ``Number of Parameters`` for every CM-DARE model, so in
single-worker data the exchange with the PS cannot be told apart from compute, and a free fit
moves the whole size term onto whichever is cheaper (on P100 it gave a PS that would leave
H100 bound by a 0.4 s parameter exchange). Physics agrees that little of it is exposed: at the
PS's nominal 8 Gbit/s, pulling and pushing shakebig's 105 MB would take 0.21 s, which with
P100's peak compute (0.31 s) exceeds the 0.49 s step, so most of it overlaps the compute. The
PS limit of *several* workers, where the data does separate it, is the cluster model's job
(:mod:`gpucast.predict.cluster`).

The tensor-size columns are empty on most rows and add nothing that ``n_params / n_tensors``
does not, so they are ignored.

Cross-GPU (a GPU with no rows in the fit): every term is scaled with the GPU's peak FLOP/s at
the requested precision (``spec.matrix_tflops``), which is what leave-one-GPU-out on the
CM-DARE data supports best (K80 -> P100 and P100 -> K80 both ~10% MAPE, against ~11-15% when
the overheads scale with memory bandwidth and 40-80% when they are held fixed):

* compute: ``compute_ref * peak_ref / peak`` (geometric mean over the fitted GPUs);
* per-tensor and fixed overheads: ``h + k / peak``, with ``h`` (a host-side floor that does not
  speed up with the GPU) and ``k`` fitted across the GPUs that have data (both >= 0); with one
  fitted GPU, ``h = 0``;
* the PS term is unchanged.

Which peak. A GPU's reference peak is the ``GPU TFLOPS`` of its rows when they give one, else
its catalog FP32 peak; the same rule holds for a GPU predicted without rows (a row's figure,
else the catalog's at the requested precision). CM-DARE assigns 4.113 (K80 die) and 9.526
(P100) TFLOP/s; the datasheet figures are 4.37 and 9.3. Both are cores x 2 x a clock (the
study's K80 clock is 824 MHz against the 875 MHz boost, its P100 clock 1329 against 1303 MHz),
so those bases differ by at most 6% per GPU; the catalog's K80 peak is at its sustained
562 MHz clock (2.81). Leave-one-GPU-out favours the data's
own figures (K80 9.8% / P100 11.1% MAPE, against 16.0% / 18.6% with the boost-clock
datasheet peaks and 32.4% / 24.6% with the catalog's peaks since K80's are at its sustained
562 MHz clock (2.81 TFLOP/s): these rows hold the parameter-server exchange, which does not
speed up with the GPU, so their K80/P100 ratio, median 2.48, is nearer 9.526/4.113 = 2.32
than 9.3/2.81 = 3.31 -- the roofline's rows, less that exchange, run 3.2x apart). For a
catalog GPU such as V100 the compute term is scaled from the geometric mean of
``compute * peak`` over the fitted GPUs, at the rows' own peaks.

Accuracy (``benchmarks/speed_accuracy.py``, ``gpucast validate --what speed``): leave-one-model-
out MAPE 4.81% on K80 and 8.91% on P100 against the target of 3%. The form is kept because none of
the alternatives evaluated on the same folds does better on both GPUs: model family, activation
bytes (widths from the model names), median targets, joint fits that share terms across GPUs,
dispatch/compute overlap, power laws and robust losses (section 5 of the benchmark). The limit is
the data: fitted on *all* rows this form is already 3.4% / 6.5% off; the K80/P100 ratio jumps
between models with nearly equal features (custom1 2.25, Res15 2.61, custom9 2.76), which costs
any model with GPU-independent workload features ~4.6% per GPU; and the separate P100 Res15 run
differs from the table's by 15.5%.

Intervals are empirical: the 5th-95th percentiles of ``log(actual / predicted)`` from
leave-one-model-out cross-validation inside ``fit`` (per GPU), and, for a GPU the fit never
saw, from leave-one-GPU-out (or ``unseen_gpu_rel_error`` when the fit had one GPU), widened to
at least the leave-one-model-out interval.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Self

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from gpucast.domain.catalog import GpuSpec
from gpucast.domain.cmdare import AVG_TENSOR_COL as AVG_TENSOR_COL
from gpucast.domain.cmdare import FEATURE_COLUMNS as FEATURE_COLUMNS
from gpucast.domain.cmdare import FLOPS_COL as FLOPS_COL
from gpucast.domain.cmdare import GPU_COL as GPU_COL
from gpucast.domain.cmdare import MAX_TENSOR_COL as MAX_TENSOR_COL
from gpucast.domain.cmdare import MODEL_COL as MODEL_COL
from gpucast.domain.cmdare import MODEL_PROPERTY_COLUMNS as MODEL_PROPERTY_COLUMNS
from gpucast.domain.cmdare import PARAMS_COL as PARAMS_COL
from gpucast.domain.cmdare import STEP_TIME_COL as STEP_TIME_COL
from gpucast.domain.cmdare import TENSORS_COL as TENSORS_COL
from gpucast.domain.cmdare import TFLOPS_COL as TFLOPS_COL
from gpucast.domain.cmdare import impute_model_properties as impute_model_properties
from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.domain.prediction import Estimate
from gpucast.predict.base import Estimator, register

FloatArray = NDArray[np.float64]

# The CM-DARE column names and impute_model_properties live in gpucast.domain.cmdare (the
# importers share them); they are re-exported here for callers of this module.

#: Breakdown terms, in the order they are reported.
TERMS: tuple[str, ...] = ("compute", "ps_network", "per_tensor_overhead", "fixed")

_FIT_PRECISION = "fp32"  # CM-DARE trained in FP32 (TensorFlow 1.10)


def gpu_key(name: str) -> str:
    """Case-, space- and punctuation-insensitive GPU key (as the catalog matches names)."""
    return "".join(ch for ch in name.lower() if ch.isalnum())


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeedFeatures:
    """What the speed model needs to know about a workload (CM-DARE's feature columns).

    ``model_flops`` is in the units of the data the model was fitted on (CM-DARE: TFProf's
    count of forward + backward FLOPs for one sample); the model is linear in it.
    """

    model_flops: float
    n_params: float
    n_tensors: float

    def __post_init__(self) -> None:
        for name in ("model_flops", "n_params", "n_tensors"):
            value = float(getattr(self, name))
            if not math.isfinite(value) or value <= 0:
                raise InvalidSpecError(name, "must be a finite number > 0", got=value)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Terms:
    """Per-GPU coefficients, resolved for one prediction target."""

    fixed_s: float
    per_tensor_s: float
    compute_s_per_flop: float
    ps_s_per_param: float
    log_q_low: float
    log_q_high: float
    source: str
    notes: tuple[str, ...]
    #: a GPU without training data: the peak it was scaled by and where that came from
    #: (:data:`ROWS_PEAK` or :data:`CATALOG_PEAK`); ``None`` for a fitted GPU
    peak_tflops: float | None = None
    peak_source: str | None = None


#: where an unseen GPU's peak came from: its rows' ``GPU TFLOPS`` cells, or the catalog
ROWS_PEAK = "the rows' GPU TFLOPS"
CATALOG_PEAK = "catalog specs"


def _require_columns(rows: pd.DataFrame, columns: Iterable[str]) -> None:
    missing = [c for c in columns if c not in rows.columns]
    if missing:
        raise InvalidInputError(
            f"speed rows lack column(s) {', '.join(repr(c) for c in missing)}",
            fix="use the CM-DARE column format (see `gpucast fit speed --help`)",
        )


def _positive_column(rows: pd.DataFrame, column: str) -> FloatArray:
    values = pd.to_numeric(rows[column], errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(values) | (values <= 0)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise InvalidSpecError(
            f"{column} (row {first})",
            "must be a finite number > 0",
            got=rows[column].iloc[first],
            fix="fill the cell or drop the row",
        )
    return values


@dataclass(frozen=True, slots=True)
class _Data:
    gpu: NDArray[np.str_]  # calibrated-GPU key per row
    model: NDArray[np.str_]
    flops: FloatArray
    params: FloatArray
    tensors: FloatArray
    step_s: FloatArray


def _fit_coefficients(
    data: _Data, gpus: list[str], *, with_ps: bool
) -> tuple[dict[str, FloatArray], float]:
    """Relative-error NNLS: per GPU [fixed, per_tensor, compute] plus one shared PS term."""
    from scipy.optimize import nnls

    n_gpu = len(gpus)
    design = np.zeros((len(data.step_s), 3 * n_gpu + 1))
    for j, key in enumerate(gpus):
        mask = data.gpu == key
        design[mask, 3 * j] = 1.0
        design[mask, 3 * j + 1] = data.tensors[mask]
        design[mask, 3 * j + 2] = data.flops[mask]
    if with_ps:
        design[:, -1] = data.params
    # Scale columns to O(1) so NNLS is well conditioned, then undo the scaling.
    weights = 1.0 / data.step_s
    weighted = design * weights[:, None]
    scale = np.abs(weighted).max(axis=0)
    scale[scale == 0] = 1.0
    coef, _ = nnls(weighted / scale, np.ones_like(data.step_s), maxiter=50 * design.shape[1])
    coef = coef / scale
    per_gpu = {key: coef[3 * j : 3 * j + 3].copy() for j, key in enumerate(gpus)}
    return per_gpu, float(coef[-1])


def _scaling_fit(values: FloatArray, peaks: FloatArray) -> tuple[float, float]:
    """Fit ``value = h + k / peak`` (h, k >= 0) across the fitted GPUs."""
    from scipy.optimize import nnls

    if len(values) == 1:
        return 0.0, float(values[0] * peaks[0])
    design = np.column_stack([np.ones_like(peaks), 1.0 / peaks])
    coef, _ = nnls(design / values[:, None], np.ones_like(values))
    return float(coef[0]), float(coef[1])


def _quantiles(log_residuals: FloatArray, coverage: float, n_groups: int) -> tuple[float, float]:
    """Symmetric interval in log space from held-out residuals.

    Rows of one model (or GPU) are not independent, so the finite-sample (split-conformal)
    correction uses the number of held-out groups: the ``ceil((n + 1) * coverage) / n``
    quantile of ``|log(actual / predicted)|``.
    """
    if len(log_residuals) == 0 or n_groups < 1:
        return 0.0, 0.0
    level = min(1.0, math.ceil((n_groups + 1) * coverage) / n_groups)
    q = float(np.quantile(np.abs(log_residuals), level))
    return -q, q


@register
class SpeedModel(Estimator):
    """Single-GPU step time (s) from workload features and the GPU; see the module docstring.

    Parameters
    ----------
    coverage:
        Nominal coverage of the prediction interval (0.9: 5th-95th percentile).
    unseen_gpu_rel_error:
        Relative half-width of the interval for a GPU with no rows, used when the fit had
        only one GPU and so could not measure cross-GPU error.
    fit_ps_term:
        Fit the shared PS term too (see the module docstring for why it is off by default).
    """

    kind = "speed"
    schema_version = 1

    def __init__(
        self,
        *,
        coverage: float = 0.9,
        unseen_gpu_rel_error: float = 0.4,
        fit_ps_term: bool = False,
    ) -> None:
        if not 0.0 < coverage < 1.0:
            raise InvalidSpecError("coverage", "must be in (0, 1)", got=coverage)
        if not math.isfinite(unseen_gpu_rel_error) or unseen_gpu_rel_error <= 0:
            raise InvalidSpecError("unseen_gpu_rel_error", "must be > 0", got=unseen_gpu_rel_error)
        self.coverage = coverage
        self.unseen_gpu_rel_error = unseen_gpu_rel_error
        self.fit_ps_term = fit_ps_term
        self._gpus: dict[str, dict[str, Any]] | None = None
        self._ps_s_per_param = 0.0
        self._scaling: dict[str, list[float]] = {}
        self._unseen_log_q: tuple[float, float] | None = None
        self._models: list[str] = []

    # -- fitting ----------------------------------------------------------------------------
    @property
    def is_fitted(self) -> bool:
        return self._gpus is not None

    @staticmethod
    def _prepare(rows: pd.DataFrame, *, with_target: bool) -> tuple[pd.DataFrame, _Data]:
        needed = [GPU_COL, *FEATURE_COLUMNS] + ([STEP_TIME_COL] if with_target else [])
        _require_columns(rows, needed)
        if len(rows) == 0:
            raise InvalidInputError("speed rows are empty", fix="pass at least one data row")
        clean = impute_model_properties(rows)
        names = clean[GPU_COL].astype(str).str.strip()
        if (names == "").any() or clean[GPU_COL].isna().any():
            raise InvalidSpecError(GPU_COL, "must name a GPU on every row")
        model = (
            clean[MODEL_COL].astype(str).to_numpy(dtype=np.str_)
            if MODEL_COL in clean.columns
            else np.array([f"row{i}" for i in range(len(clean))], dtype=np.str_)
        )
        data = _Data(
            gpu=np.array([gpu_key(n) for n in names], dtype=np.str_),
            model=model,
            flops=_positive_column(clean, FLOPS_COL),
            params=_positive_column(clean, PARAMS_COL),
            tensors=_positive_column(clean, TENSORS_COL),
            step_s=(
                _positive_column(clean, STEP_TIME_COL)
                if with_target
                else np.ones(len(clean), dtype=np.float64)
            ),
        )
        return clean, data

    def fit(self, rows: pd.DataFrame, specs: Mapping[str, GpuSpec] | None = None) -> Self:
        """Fit from CM-DARE-format rows (extra columns ignored; ``rows`` is not modified).

        A GPU's reference peak for cross-GPU scaling is the median of its rows' ``GPU TFLOPS``
        when they give it, else the FP32 peak of its catalog entry in ``specs`` (a map from the
        names used in ``GPU (temp)``); see "Which peak" in the module docstring.
        """
        clean, data = self._prepare(rows, with_target=True)
        spec_by_key = {gpu_key(k): v for k, v in (specs or {}).items()}
        names = clean[GPU_COL].astype(str).str.strip().to_numpy()
        keys = sorted(set(data.gpu.tolist()))
        peaks: dict[str, float] = {}
        display: dict[str, str] = {}
        for key in keys:
            mask = data.gpu == key
            display[key] = str(names[mask][0])
            row_tflops = (
                pd.to_numeric(clean.loc[mask, TFLOPS_COL], errors="coerce")
                if TFLOPS_COL in clean.columns
                else pd.Series(dtype=np.float64)
            )
            row_tflops = row_tflops[np.isfinite(row_tflops) & (row_tflops > 0)]
            spec = spec_by_key.get(key)
            if not row_tflops.empty:  # the data's own peak wins (see the module docstring)
                peaks[key] = float(row_tflops.median())
            elif spec is not None:
                peaks[key] = spec.matrix_tflops(_FIT_PRECISION)
            else:
                raise InvalidSpecError(
                    f"{TFLOPS_COL} for GPU {display[key]!r}",
                    "is needed (the rows have none and no catalog spec was given)",
                    fix="fill the column or fit through the CLI, which uses the catalog",
                )

        per_gpu, ps = _fit_coefficients(data, keys, with_ps=self.fit_ps_term)

        # Leave-one-model-out inside the fit: the interval for fitted GPUs.
        lomo = self._lomo_log_residuals(data, keys)
        gpus: dict[str, dict[str, Any]] = {}
        for key in keys:
            fixed, per_tensor, compute = (float(v) for v in per_gpu[key])
            n_models = len(set(data.model[data.gpu == key].tolist()))
            low, high = _quantiles(lomo.get(key, np.zeros(0)), self.coverage, n_models)
            gpus[key] = {
                "name": display[key],
                "peak_tflops": peaks[key],
                "fixed_s": fixed,
                "per_tensor_s": per_tensor,
                "compute_s_per_flop": compute,
                "log_q": [low, high],
                "n_rows": int((data.gpu == key).sum()),
                "n_models": n_models,
            }
        self._gpus = gpus
        self._ps_s_per_param = ps
        self._scaling = self._scaling_from(gpus)
        self._models = sorted(set(data.model.tolist()))
        self._unseen_log_q = None
        if len(keys) >= 2:
            logo = self._logo_log_residuals(clean, data, keys, peaks)
            low, high = _quantiles(logo, self.coverage, len(keys))
            self._unseen_log_q = (low, high)
        return self

    @staticmethod
    def _scaling_from(gpus: Mapping[str, Mapping[str, Any]]) -> dict[str, list[float]]:
        peaks = np.array([g["peak_tflops"] for g in gpus.values()], dtype=np.float64)
        out: dict[str, list[float]] = {}
        for term, field in (("fixed", "fixed_s"), ("per_tensor", "per_tensor_s")):
            values = np.array([g[field] for g in gpus.values()], dtype=np.float64)
            if np.all(values <= 0):
                out[term] = [0.0, 0.0]
                continue
            values = np.maximum(values, 1e-12)
            h, k = _scaling_fit(values, peaks)
            out[term] = [h, k]
        products = np.array(
            [g["compute_s_per_flop"] * g["peak_tflops"] for g in gpus.values()], dtype=np.float64
        )
        positive = products[products > 0]
        out["compute"] = [float(np.exp(np.mean(np.log(positive)))) if positive.size else 0.0]
        return out

    def _lomo_log_residuals(self, data: _Data, keys: list[str]) -> dict[str, FloatArray]:
        models = sorted(set(data.model.tolist()))
        if len(models) < 3:
            return {}
        residuals: dict[str, list[float]] = {k: [] for k in keys}
        for held in models:
            test = data.model == held
            train = ~test
            train_keys = sorted(set(data.gpu[train].tolist()))
            sub = _Data(
                gpu=data.gpu[train],
                model=data.model[train],
                flops=data.flops[train],
                params=data.params[train],
                tensors=data.tensors[train],
                step_s=data.step_s[train],
            )
            per_gpu, ps = _fit_coefficients(sub, train_keys, with_ps=self.fit_ps_term)
            for i in np.flatnonzero(test):
                key = str(data.gpu[i])
                if key not in per_gpu:
                    continue
                fixed, per_tensor, compute = per_gpu[key]
                pred = (
                    fixed
                    + per_tensor * data.tensors[i]
                    + compute * data.flops[i]
                    + ps * data.params[i]
                )
                if pred > 0:
                    residuals[key].append(math.log(data.step_s[i] / pred))
        return {k: np.asarray(v, dtype=np.float64) for k, v in residuals.items()}

    def _logo_log_residuals(
        self, clean: pd.DataFrame, data: _Data, keys: list[str], peaks: Mapping[str, float]
    ) -> FloatArray:
        out: list[FloatArray] = []
        for held in keys:
            test = data.gpu == held
            sub = SpeedModel(
                coverage=self.coverage,
                unseen_gpu_rel_error=self.unseen_gpu_rel_error,
                fit_ps_term=self.fit_ps_term,
            )
            sub._fit_without_cv(clean.loc[~test], peaks)
            pred = sub._predict_arrays(
                gpu_label=str(clean.loc[test, GPU_COL].iloc[0]),
                peak_tflops=peaks[held],
                flops=data.flops[test],
                params=data.params[test],
                tensors=data.tensors[test],
                precision_scale=1.0,
                spec=None,
            )
            out.append(np.log(data.step_s[test] / pred["value"]))
        return np.concatenate(out) if out else np.zeros(0)

    def _fit_without_cv(self, rows: pd.DataFrame, peaks: Mapping[str, float]) -> None:
        """Coefficients only (no intervals): used for the leave-one-GPU-out folds."""
        clean, data = self._prepare(rows, with_target=True)
        names = clean[GPU_COL].astype(str).str.strip().to_numpy()
        keys = sorted(set(data.gpu.tolist()))
        per_gpu, ps = _fit_coefficients(data, keys, with_ps=self.fit_ps_term)
        self._gpus = {
            key: {
                "name": str(names[data.gpu == key][0]),
                "peak_tflops": peaks[key],
                "fixed_s": float(per_gpu[key][0]),
                "per_tensor_s": float(per_gpu[key][1]),
                "compute_s_per_flop": float(per_gpu[key][2]),
                "log_q": [0.0, 0.0],
                "n_rows": int((data.gpu == key).sum()),
                "n_models": len(set(data.model[data.gpu == key].tolist())),
            }
            for key in keys
        }
        self._ps_s_per_param = ps
        self._scaling = self._scaling_from(self._gpus)
        self._models = sorted(set(data.model.tolist()))

    # -- prediction -------------------------------------------------------------------------
    @property
    def fitted_gpus(self) -> tuple[str, ...]:
        """Names of the GPUs the fit had rows for."""
        self._require_fitted()
        assert self._gpus is not None
        return tuple(g["name"] for g in self._gpus.values())

    def _calibrated_key(self, label: str, spec: GpuSpec | None) -> str | None:
        assert self._gpus is not None
        for name in (label, *((spec.name, *spec.aliases) if spec is not None else ())):
            key = gpu_key(name)
            if key in self._gpus:
                return key
        return None

    def _terms(
        self, label: str, spec: GpuSpec | None, peak_tflops: float | None, precision: str
    ) -> tuple[_Terms, float]:
        """Coefficients for one GPU, and the factor applied to compute for ``precision``
        (refused on a GPU without its units, :meth:`GpuSpec.runs`: never scaled by the peak
        of the mode it falls back to)."""
        assert self._gpus is not None
        if spec is not None and not spec.runs(precision):
            raise InvalidSpecError(
                "precision",
                f"{precision} needs {precision} units, which the {spec.name} of the rows "
                f"({label!r}) has not",
                got=precision,
                fix=f"use --precision fp32, or leave out the {label} rows",
            )
        key = self._calibrated_key(label, spec)
        if key is not None:
            g = self._gpus[key]
            scale = 1.0
            notes: tuple[str, ...] = ()
            if precision != _FIT_PRECISION:
                if spec is None:
                    raise InvalidSpecError(
                        "precision",
                        f"{precision} on {label} needs the GPU's catalog spec",
                        fix="pass a GpuSpec or use --precision fp32",
                    )
                scale = spec.matrix_tflops(_FIT_PRECISION) / spec.matrix_tflops(precision)
                notes = (
                    f"compute scaled from fp32 to {precision} by the peak FLOP/s ratio "
                    f"({1 / scale:.2f}x); the data has fp32 only",
                )
            low, high = g["log_q"]
            terms = _Terms(
                fixed_s=g["fixed_s"],
                per_tensor_s=g["per_tensor_s"],
                compute_s_per_flop=g["compute_s_per_flop"] * scale,
                ps_s_per_param=self._ps_s_per_param,
                log_q_low=low,
                log_q_high=high,
                source="fitted",
                notes=notes,
            )
            return terms, scale
        # A GPU with no rows: scale by its peak FLOP/s -- the rows' own FP32 figure when they
        # give one (the basis the fit used), else the catalog's at ``precision``.
        given = peak_tflops is not None and math.isfinite(peak_tflops) and peak_tflops > 0
        if given and (precision == _FIT_PRECISION or spec is None):
            assert peak_tflops is not None
            peak, basis = float(peak_tflops), ROWS_PEAK
        elif spec is not None:
            peak, basis = spec.matrix_tflops(precision), CATALOG_PEAK
        else:
            raise InvalidSpecError(
                "gpu",
                f"{label!r} has no training data and no catalog spec or {TFLOPS_COL} value",
                fix="use a GPU name from `gpucast catalog gpus` or give GPU TFLOPS",
            )
        fixed_h, fixed_k = self._scaling["fixed"]
        tensor_h, tensor_k = self._scaling["per_tensor"]
        if self._unseen_log_q is not None:
            low, high = self._unseen_log_q
            how = "leave-one-GPU-out error of the fit"
        else:
            low = -math.log1p(self.unseen_gpu_rel_error)
            high = math.log1p(self.unseen_gpu_rel_error)
            how = f"default +-{self.unseen_gpu_rel_error:.0%} (the fit had one GPU)"
        lomo_low = min(g["log_q"][0] for g in self._gpus.values())
        lomo_high = max(g["log_q"][1] for g in self._gpus.values())
        fitted = ", ".join(g["name"] for g in self._gpus.values())
        terms = _Terms(
            fixed_s=fixed_h + fixed_k / peak,
            per_tensor_s=tensor_h + tensor_k / peak,
            compute_s_per_flop=self._scaling["compute"][0] / peak,
            ps_s_per_param=self._ps_s_per_param,
            log_q_low=min(low, lomo_low),
            log_q_high=max(high, lomo_high),
            source="catalog",
            notes=(
                f"{label} had no training data: scaled from {fitted} by peak "
                f"{precision} FLOP/s ({peak:g} TFLOP/s, {basis}); interval from the {how}",
            ),
            peak_tflops=peak,
            peak_source=basis,
        )
        return terms, 1.0

    def _predict_arrays(
        self,
        *,
        gpu_label: str,
        peak_tflops: float | None,
        flops: FloatArray,
        params: FloatArray,
        tensors: FloatArray,
        precision_scale: float,
        spec: GpuSpec | None,
        precision: str = _FIT_PRECISION,
    ) -> dict[str, Any]:
        terms, _ = self._terms(gpu_label, spec, peak_tflops, precision)
        parts = {
            "compute": terms.compute_s_per_flop * flops * precision_scale,
            "ps_network": terms.ps_s_per_param * params,
            "per_tensor_overhead": terms.per_tensor_s * tensors,
            "fixed": np.full_like(flops, terms.fixed_s),
        }
        value = sum(parts.values())
        stacked = np.column_stack([parts[t] for t in TERMS])
        bottleneck = np.array(TERMS, dtype=object)[np.argmax(stacked, axis=1)]
        return {
            "value": value,
            "lower": value * math.exp(terms.log_q_low),
            "upper": value * math.exp(terms.log_q_high),
            "parts": parts,
            "bottleneck": bottleneck,
            "terms": terms,
        }

    def predict(
        self,
        features: SpeedFeatures,
        gpu: GpuSpec | str,
        *,
        precision: str = _FIT_PRECISION,
        peak_tflops: float | None = None,
    ) -> Estimate:
        """Step time (s) of one worker step on ``gpu`` (a catalog spec, or a fitted GPU's name).

        A GPU the fit never saw is predicted from its peak FLOP/s (``source="catalog"``, a wider
        interval and a note saying so); a bare name then needs ``peak_tflops``.
        """
        self._require_fitted()
        spec = gpu if isinstance(gpu, GpuSpec) else None
        label = gpu.name if isinstance(gpu, GpuSpec) else str(gpu)
        out = self._predict_arrays(
            gpu_label=label,
            peak_tflops=peak_tflops,
            flops=np.array([features.model_flops], dtype=np.float64),
            params=np.array([features.n_params], dtype=np.float64),
            tensors=np.array([features.n_tensors], dtype=np.float64),
            precision_scale=1.0,
            spec=spec,
            precision=precision,
        )
        terms: _Terms = out["terms"]
        return Estimate(
            value=float(out["value"][0]),
            lower=float(out["lower"][0]),
            upper=float(out["upper"][0]),
            unit="s",
            bottleneck=str(out["bottleneck"][0]),
            source=terms.source,
            breakdown={t: float(out["parts"][t][0]) for t in TERMS},
            notes=terms.notes,
        )

    def predict_frame(
        self,
        rows: pd.DataFrame,
        gpus: Mapping[str, GpuSpec] | None = None,
        *,
        precision: str = _FIT_PRECISION,
    ) -> pd.DataFrame:
        """Vectorised prediction for CM-DARE-format rows (``rows`` is not modified).

        ``gpus`` maps the names in ``GPU (temp)`` to catalog specs (needed for GPUs the fit
        never saw, unless the rows give ``GPU TFLOPS``). Returns a frame with the same index
        and columns ``step_time_s``, ``lower_s``, ``upper_s``, ``bottleneck``, ``source``,
        one ``<term>_s`` column per breakdown term, ``note``, and for GPUs without training
        data ``peak_tflops`` and ``peak_source`` (:data:`ROWS_PEAK` or :data:`CATALOG_PEAK`;
        NaN and ``None`` for fitted GPUs).
        """
        self._require_fitted()
        clean, data = self._prepare(rows, with_target=False)
        spec_by_key = {gpu_key(k): v for k, v in (gpus or {}).items()}
        labels = clean[GPU_COL].astype(str).str.strip().to_numpy()
        row_tflops = (
            pd.to_numeric(clean[TFLOPS_COL], errors="coerce").to_numpy(dtype=np.float64)
            if TFLOPS_COL in clean.columns
            else np.full(len(clean), np.nan)
        )
        n = len(clean)
        result: dict[str, Any] = {
            "step_time_s": np.zeros(n),
            "lower_s": np.zeros(n),
            "upper_s": np.zeros(n),
            "bottleneck": np.empty(n, dtype=object),
            "source": np.empty(n, dtype=object),
            "note": np.empty(n, dtype=object),
            "peak_tflops": np.full(n, np.nan),
            "peak_source": np.full(n, None, dtype=object),
        }
        for term in TERMS:
            result[f"{term}_s"] = np.zeros(n)
        for key in sorted(set(data.gpu.tolist())):
            idx = np.flatnonzero(data.gpu == key)
            label = str(labels[idx[0]])
            finite = row_tflops[idx][np.isfinite(row_tflops[idx]) & (row_tflops[idx] > 0)]
            out = self._predict_arrays(
                gpu_label=label,
                peak_tflops=float(np.median(finite)) if finite.size else None,
                flops=data.flops[idx],
                params=data.params[idx],
                tensors=data.tensors[idx],
                precision_scale=1.0,
                spec=spec_by_key.get(key),
                precision=precision,
            )
            terms: _Terms = out["terms"]
            result["step_time_s"][idx] = out["value"]
            result["lower_s"][idx] = out["lower"]
            result["upper_s"][idx] = out["upper"]
            result["bottleneck"][idx] = out["bottleneck"]
            result["source"][idx] = terms.source
            result["note"][idx] = "; ".join(terms.notes)
            if terms.peak_tflops is not None:
                result["peak_tflops"][idx] = terms.peak_tflops
            result["peak_source"][idx] = terms.peak_source
            for term in TERMS:
                result[f"{term}_s"][idx] = out["parts"][term]
        return pd.DataFrame(result, index=rows.index)

    def achieved_efficiency(
        self, batch_size: int, peak_tflops: Mapping[str, float] | None = None
    ) -> dict[str, float]:
        """Achieved fraction of peak FP32 FLOP/s of each fitted GPU's *marginal* compute cost
        (the compute term, without fixed and per-tensor costs), if ``Model FLOPs`` counts one
        sample and one step is ``batch_size`` samples (CM-DARE: 128).

        The fraction is of each GPU's reference peak, or of ``peak_tflops[name]`` where given
        (e.g. the catalog's datasheet figure). It is the basis of the roofline's default FP32
        compute efficiency (:mod:`gpucast.predict.roofline`); not a model input.
        """
        self._require_fitted()
        assert self._gpus is not None
        if batch_size < 1:
            raise InvalidSpecError("batch_size", "must be >= 1", got=batch_size)
        given = {gpu_key(k): float(v) for k, v in (peak_tflops or {}).items()}
        out: dict[str, float] = {}
        for key, g in self._gpus.items():
            c = g["compute_s_per_flop"]
            peak = given.get(key, g["peak_tflops"])
            out[g["name"]] = batch_size / (c * peak * 1e12) if c > 0 else float("nan")
        return out

    # -- persistence ------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        assert self._gpus is not None
        return {
            "coverage": self.coverage,
            "unseen_gpu_rel_error": self.unseen_gpu_rel_error,
            "fit_ps_term": self.fit_ps_term,
            "gpus": {k: dict(v) for k, v in self._gpus.items()},
            "ps_s_per_param": self._ps_s_per_param,
            "scaling": {k: list(v) for k, v in self._scaling.items()},
            "unseen_log_q": list(self._unseen_log_q) if self._unseen_log_q else None,
            "models": list(self._models),
        }

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> Self:
        try:
            model = cls(
                coverage=float(state["coverage"]),
                unseen_gpu_rel_error=float(state["unseen_gpu_rel_error"]),
                fit_ps_term=bool(state.get("fit_ps_term", False)),
            )
            gpus = {
                str(k): {
                    "name": str(v["name"]),
                    "peak_tflops": float(v["peak_tflops"]),
                    "fixed_s": float(v["fixed_s"]),
                    "per_tensor_s": float(v["per_tensor_s"]),
                    "compute_s_per_flop": float(v["compute_s_per_flop"]),
                    "log_q": [float(v["log_q"][0]), float(v["log_q"][1])],
                    "n_rows": int(v["n_rows"]),
                    "n_models": int(v["n_models"]),
                }
                for k, v in state["gpus"].items()
            }
            if not gpus:
                raise ValueError("no GPUs")
            model._gpus = gpus
            model._ps_s_per_param = float(state["ps_s_per_param"])
            model._scaling = {str(k): [float(x) for x in v] for k, v in state["scaling"].items()}
            q = state.get("unseen_log_q")
            model._unseen_log_q = None if q is None else (float(q[0]), float(q[1]))
            model._models = [str(m) for m in state.get("models", [])]
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise InvalidInputError(
                f"speed model state is malformed ({exc})", fix="refit it with `gpucast fit speed`"
            ) from exc
        return model
