""":class:`StepTimeModel`, the fitted roofline of :mod:`gpucast.predict.steptime`: its fit,
the figures fitted apart (collectives, fp8, the host), prediction and its JSON state.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar, Self

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.predict._steptime_columns import (
    BORROW,
    PRECISION_CLASS,
    REFERENCE_STACK,
    STACK_BORROW,
    STACKS,
    TARGET,
    FloatArray,
    _check_frame,
    _conv_flops,
    _evaluation_s,
    _extra,
    _fp32_flops_per_s,
    _single_batch_stacks,
    _workload_names,
    source_weights,
)
from gpucast.predict._steptime_design import _Arrays, _Layout
from gpucast.predict.base import Estimator, register
from gpucast.predict.collective import NETWORK_KINDS, RDMA, TCP_DEFAULT, CollectiveConstants
from gpucast.predict.intervals import IntervalTable
from gpucast.predict.roofline import RooflineEfficiency, conv_weighted_flops, matrix_seconds

if TYPE_CHECKING:  # pandas loads where a frame is built (fits), not to predict
    import pandas as pd


@register
class StepTimeModel(Estimator):
    """The fitted roofline of the module docstring (an estimator like scikit-learn's)."""

    kind: ClassVar[str] = "steptime"
    schema_version: ClassVar[int] = 1

    def __init__(
        self,
        *,
        gpu_prior_sd: float = 0.25,
        workload_prior_sd: float = 0.5,
        kernel_prior_sd: float = 1.0,
        step_prior_sd: float = 0.5,
    ) -> None:
        self.gpu_prior_sd = gpu_prior_sd
        self.workload_prior_sd = workload_prior_sd
        #: sd (log space) of the prior drawing each software stack's per-kernel cost toward
        #: the reference stack's: the same GPUs launch and drain the kernels whatever the
        #: stack, and where a stack's data cannot tell a per-kernel from a per-step cost (the
        #: tuned MLPerf rows: each workload's kernel count is fixed) the prior decides, not a
        #: bound (``math.inf``: no prior, as before session 9)
        self.kernel_prior_sd = kernel_prior_sd
        #: sd (log space) of the prior drawing each stack's per-step cost toward the
        #: reference stack's, where a stack's data (one batch per workload) cannot tell a
        #: per-step cost from per-sample work (``math.inf``: no prior)
        self.step_prior_sd = step_prior_sd
        self.eta_compute_: dict[str, float] | None = None
        self.eta_memory_: float | None = None
        #: tensor-core convolutions' efficiency relative to matmuls (1: no data to fit it)
        self.conv_ratio_: float = 1.0
        self.overhead_s_: dict[str, float] = {}
        self.step_s_: dict[str, float] = {}
        self.traffic_: dict[str, float] = {}
        self.gpu_factor_: dict[str, float] = {}
        self.workload_factor_: dict[str, float] = {}
        #: the workloads (built-in names, ``workload`` column) the fit has rows of
        self.workloads_: frozenset[str] = frozenset()
        self.borrowed_: dict[str, str] = {}
        #: fixed seconds of one evaluation inside a timed run (0: no row had evaluations)
        self.eval_latency_s_: float = 0.0
        self.intervals_: IntervalTable = IntervalTable()
        #: collective constants per network kind fitted with the step times (see
        #: :mod:`gpucast.predict.collective`); kinds without a fit use its defaults
        self.collective_: dict[str, CollectiveConstants] = {}
        #: where the fp8 efficiency comes from when it is fitted apart (:meth:`with_fp8`);
        #: empty: fitted with the rest, or borrowed
        self.fp8_source_: str = ""
        #: seconds the host takes to issue one layer's forward and backward of one micro-batch
        #: without CUDA graphs, fitted apart on whole LLM runs (:meth:`with_host`; 0: none)
        self.host_layer_s_: float = 0.0
        self.host_source_: str = ""
        #: a run's one-off warm-up after its clock starts (the first steps' lazy set-up),
        #: fitted with the host's time on the same runs (:meth:`with_host`; 0: none)
        self.warmup_s_: float = 0.0
        self.fitted_on_: str = ""
        self.n_rows_: int = 0

    # -- estimator protocol ---------------------------------------------------------------
    @property
    def is_fitted(self) -> bool:
        return self.eta_compute_ is not None

    def fit(
        self, frame: pd.DataFrame, *, weights: npt.ArrayLike | None = None, fitted_on: str = ""
    ) -> Self:
        """Fit on observed step times (columns :data:`FEATURES` + ``step_time_s``, optional
        ``extra_s``). ``weights`` default to :func:`source_weights` of a ``source`` column
        (or 1). ``frame`` is not modified."""
        from scipy.optimize import least_squares

        for sd_name in ("gpu_prior_sd", "workload_prior_sd", "kernel_prior_sd", "step_prior_sd"):
            sd = getattr(self, sd_name)
            if not (sd > 0 and (math.isfinite(sd) or sd_name.startswith(("kernel", "step")))):
                raise InvalidSpecError(sd_name, "must be > 0", got=sd)
        _check_frame(frame, need_target=True)
        if weights is None:
            w = (
                source_weights(frame["source"])
                if "source" in frame.columns
                else np.ones(len(frame))
            )
        else:
            w = np.asarray(weights, dtype=np.float64).reshape(-1)
            if w.size != len(frame) or not np.all(np.isfinite(w)) or np.any(w < 0):
                raise InvalidSpecError("weights", "must be one finite value >= 0 per row")
        layout = _Layout.of(frame)
        data = _Arrays.of(frame, layout)
        target = np.log(frame[TARGET].to_numpy(dtype=np.float64))
        extra = _extra(frame)
        sqrt_w = np.sqrt(w)
        # each stack's per-kernel cost is drawn toward the reference stack's (kernel_prior_sd)
        ref = layout.overhead_index.get(REFERENCE_STACK)
        others = [i for k, i in layout.overhead_index.items() if k != REFERENCE_STACK]
        kernel_others = np.array(others if ref is not None else [], dtype=np.int64)
        kernel_ref = ref if ref is not None else 0
        # a stack measured at one batch per workload cannot tell a per-step cost from
        # per-sample work: its per-step cost is drawn toward the reference stack's
        step_ref = layout.step_index.get(REFERENCE_STACK)
        single = _single_batch_stacks(frame)
        step_others = np.array(
            [i for k, i in layout.step_index.items() if k != REFERENCE_STACK and k in single]
            if step_ref is not None
            else [],
            dtype=np.int64,
        )

        def residuals(theta: FloatArray) -> FloatArray:
            pred = data.predict(theta, layout, extra)
            fit_r = sqrt_w * (np.log(np.maximum(pred, 1e-30)) - target)
            prior_g = theta[layout.gpu_slice] / self.gpu_prior_sd
            prior_w = theta[layout.work_slice] / self.workload_prior_sd
            prior_k = (theta[kernel_others] - theta[kernel_ref]) / self.kernel_prior_sd
            prior_s = (theta[step_others] - theta[step_ref or 0]) / self.step_prior_sd
            return np.concatenate([fit_r, prior_g, prior_w, prior_k, prior_s])

        # the priors are linear in theta: their rows of the Jacobian are constant
        def prior_rows(index: Iterable[int], sd: float, minus: int | None = None) -> FloatArray:
            out = np.zeros((len(list(index)), layout.size))
            for r, i in enumerate(index):
                out[r, i] += 1.0 / sd
                if minus is not None:
                    out[r, minus] -= 1.0 / sd
            return out

        priors = np.vstack(
            [
                prior_rows(range(layout.size)[layout.gpu_slice], self.gpu_prior_sd),
                prior_rows(range(layout.size)[layout.work_slice], self.workload_prior_sd),
                prior_rows(kernel_others.tolist(), self.kernel_prior_sd, kernel_ref),
                prior_rows(step_others.tolist(), self.step_prior_sd, step_ref or 0),
            ]
        )

        def jacobian(theta: FloatArray) -> FloatArray:
            pred = data.predict(theta, layout, extra)
            d_pred = data.jacobian(theta, layout, extra)
            d_log = np.where(pred > 1e-30, 1.0 / np.maximum(pred, 1e-30), 0.0)
            return np.vstack([(sqrt_w * d_log)[:, None] * d_pred, priors])

        x0, lower, upper = layout.start_and_bounds()
        solution = least_squares(
            residuals, x0, jac=jacobian, bounds=(lower, upper), method="trf", x_scale=1.0
        )
        theta = solution.x
        self.eta_compute_ = {c: math.exp(theta[i]) for c, i in layout.eta_index.items()}
        self.eta_memory_ = math.exp(theta[layout.eta_memory_index])
        self.conv_ratio_ = (
            math.exp(theta[layout.conv_index]) if layout.conv_index is not None else 1.0
        )
        self.eval_latency_s_ = (
            math.exp(theta[layout.eval_index]) if layout.eval_index is not None else 0.0
        )
        self.overhead_s_ = {s: math.exp(theta[i]) for s, i in layout.overhead_index.items()}
        self.step_s_ = {s: math.exp(theta[i]) for s, i in layout.step_index.items()}
        self.traffic_ = {REFERENCE_STACK: 1.0} | {
            s: math.exp(theta[i]) for s, i in layout.traffic_index.items()
        }
        self.gpu_factor_ = {g: math.exp(theta[i]) for g, i in layout.gpu_index.items()}
        self.workload_factor_ = {k: math.exp(theta[i]) for k, i in layout.work_index.items()}
        self.workloads_ = _workload_names(frame)
        self.borrowed_ = {}
        for cls_ in PRECISION_CLASS.values():
            if cls_ not in self.eta_compute_:
                donor = next((d for d in BORROW[cls_] if d in self.eta_compute_), None)
                if donor is not None:
                    self.eta_compute_[cls_] = self.eta_compute_[donor]
                    self.borrowed_[f"eta_compute:{cls_}"] = donor
        for stack in STACKS:
            if stack not in self.overhead_s_:
                donor = next((d for d in STACK_BORROW[stack] if d in self.overhead_s_), None)
                if donor is not None:
                    self.overhead_s_[stack] = self.overhead_s_[donor]
                    self.step_s_[stack] = self.step_s_[donor]
                    self.traffic_[stack] = self.traffic_.get(donor, 1.0)
                    self.borrowed_[f"stack:{stack}"] = donor
        self.fitted_on_ = fitted_on
        self.n_rows_ = len(frame)
        return self

    @property
    def fp32_path(self) -> bool:
        """Whether reduced-precision matrix work may run on the FP32 units where those are
        faster (:func:`~gpucast.predict.roofline.matrix_seconds`): only with an FP32
        efficiency fitted on data (a borrowed one would price that path from another's)."""
        return self.eta_compute_ is not None and "eta_compute:fp32" not in self.borrowed_

    def with_collective(self, kind: str, constants: CollectiveConstants) -> Self:
        """This fitted model with the collective constants of one network kind."""
        self._require_fitted()
        if kind not in NETWORK_KINDS:
            raise InvalidSpecError("network kind", f"must be one of {', '.join(NETWORK_KINDS)}")
        self.collective_[kind] = constants
        return self

    def with_fp8(self, ratio: float, source: str) -> Self:
        """This fitted model with its fp8 tensor-core efficiency at ``ratio`` times the
        16-bit one, fitted apart on whole fp8 runs (the step-time rows hold none) and said to
        come from ``source``; it is no longer borrowed."""
        self._require_fitted()
        assert self.eta_compute_ is not None
        if not (math.isfinite(ratio) and 0 < ratio <= 1):
            raise InvalidSpecError("fp8 ratio", "must be in (0, 1]", got=ratio)
        self.eta_compute_["fp8"] = ratio * self.eta_compute_["tensor16"]
        self.borrowed_.pop("eta_compute:fp8", None)
        self.fp8_source_ = source
        return self

    def with_host(self, seconds: float, source: str, *, warmup_s: float = 0.0) -> Self:
        """This fitted model with the host's ``seconds`` per layer and micro-batch (runs
        without CUDA graphs) and a run's one-off ``warmup_s``, fitted apart on whole LLM runs
        and said to come from ``source``."""
        self._require_fitted()
        if not (math.isfinite(seconds) and 0 <= seconds < 1):
            raise InvalidSpecError("host seconds per layer", "must be in [0, 1)", got=seconds)
        if not (math.isfinite(warmup_s) and 0 <= warmup_s < 3600):
            raise InvalidSpecError("warm-up seconds", "must be in [0, 3600)", got=warmup_s)
        self.host_layer_s_ = float(seconds)
        self.warmup_s_ = float(warmup_s)
        self.host_source_ = source
        return self

    def collective(self, kind: str) -> CollectiveConstants:
        """The collective constants of ``kind`` (fitted, else the module defaults)."""
        return self.collective_.get(kind, RDMA if kind == "rdma" else TCP_DEFAULT)

    def with_intervals(self, intervals: IntervalTable) -> Self:
        """This fitted model with its interval table (from cross-validation)."""
        self._require_fitted()
        self.intervals_ = intervals
        return self

    def efficiency(self, stack: str = REFERENCE_STACK) -> RooflineEfficiency:
        """The fitted figures for one software stack, as the roofline takes them (with the
        GPU factors, the interval table and where they came from)."""
        self._require_fitted()
        assert self.eta_compute_ is not None and self.eta_memory_ is not None
        if stack not in self.overhead_s_:
            raise InvalidSpecError(
                "software", f"must be one of {', '.join(sorted(self.overhead_s_))}", got=stack
            )
        eta = self.eta_compute_
        return RooflineEfficiency(
            compute_efficiency_fp32=eta["fp32"],
            compute_efficiency_tensor_core=eta["tensor16"],
            compute_efficiency_tf32=eta["tf32"],
            compute_efficiency_fp8=eta["fp8"],
            tensor_core_conv_ratio=self.conv_ratio_,
            bandwidth_efficiency=min(1.0, self.eta_memory_ / self.traffic_[stack]),
            kernel_overhead_s=self.overhead_s_[stack],
            step_overhead_s=self.step_s_[stack],
            gpu_factors=dict(self.gpu_factor_),
            measured_workloads=self.workloads_,
            intervals=self.intervals_,
            stack=stack,
            source=f"step-time model fitted on {self.fitted_on_ or 'published data'}"
            f" ({self.n_rows_} step times; {stack} stack)"
            + (f"; fp8 efficiency from {self.fp8_source_}" if self.fp8_source_ else ""),
            host_layer_s=self.host_layer_s_,
            host_source=self.host_source_,
            warmup_s=self.warmup_s_,
            fp8_source=self.fp8_source_,
        )

    # -- prediction ----------------------------------------------------------------------
    def terms(
        self, frame: pd.DataFrame, *, use_workload_factor: bool = False
    ) -> dict[str, FloatArray]:
        """Per row: the ``compute``, ``memory_bandwidth`` and ``overhead`` terms (s) with the
        GPU factor (and the workload factor where asked and known) applied, plus
        ``extra`` (``extra_s``, 0 without the column)."""
        self._require_fitted()
        _check_frame(frame, need_target=False)
        assert self.eta_compute_ is not None and self.eta_memory_ is not None
        cls_ = frame["precision"].map(PRECISION_CLASS)
        eta_c = cls_.map(self.eta_compute_).to_numpy(dtype=np.float64)
        if np.any(~np.isfinite(eta_c)):
            raise InvalidSpecError("precision", "has no fitted or borrowed efficiency")
        overhead = frame["stack"].map(self.overhead_s_).to_numpy(dtype=np.float64)
        step = frame["stack"].map(self.step_s_).to_numpy(dtype=np.float64)
        traffic = frame["stack"].map(self.traffic_).to_numpy(dtype=np.float64)
        if np.any(~np.isfinite(overhead)) or np.any(~np.isfinite(traffic)):
            raise InvalidSpecError("stack", "has no fitted or borrowed constants")
        scale = self.gpu_factors(frame["gpu"])
        if use_workload_factor:
            scale = scale * self.workload_factors(frame["workload_key"])
        f = frame["matmul_flops"].to_numpy(dtype=np.float64)
        ratio = np.where(cls_.to_numpy() == "fp32", 1.0, self.conv_ratio_)
        weighted = conv_weighted_flops(f, _conv_flops(frame), ratio)
        m = frame["memory_bytes"].to_numpy(dtype=np.float64)
        k = frame["n_kernels"].to_numpy(dtype=np.float64)
        peak = frame["peak_tflops"].to_numpy(dtype=np.float64) * 1e12
        bw = frame["bandwidth_gbps"].to_numpy(dtype=np.float64) * 1e9
        fp32 = _fp32_flops_per_s(frame, self.eta_compute_["fp32"]) if self.fp32_path else math.inf
        compute = scale * matrix_seconds(weighted / (eta_c * peak), f, fp32)
        memory = scale * traffic * m / (self.eta_memory_ * bw)
        return {
            "compute": compute,
            "memory_bandwidth": memory,
            "overhead": scale * (k * overhead + step),
            "evaluation": _evaluation_s(frame, compute + memory, self.eval_latency_s_),
            "extra": _extra(frame),
        }

    def predict(self, frame: pd.DataFrame, *, use_workload_factor: bool = False) -> FloatArray:
        """Predicted step time (s) per row."""
        terms = self.terms(frame, use_workload_factor=use_workload_factor)
        return np.asarray(sum(terms.values()), dtype=np.float64)

    def gpu_factors(self, gpus: Iterable[str]) -> FloatArray:
        return np.array([self.gpu_factor_.get(g, 1.0) for g in gpus], dtype=np.float64)

    def workload_factors(self, keys: Iterable[str]) -> FloatArray:
        return np.array([self.workload_factor_.get(k, 1.0) for k in keys], dtype=np.float64)

    # -- JSON ----------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        return {
            "gpu_prior_sd": self.gpu_prior_sd,
            "workload_prior_sd": self.workload_prior_sd,
            "kernel_prior_sd": self.kernel_prior_sd,
            "step_prior_sd": self.step_prior_sd,
            "eta_compute": dict(self.eta_compute_ or {}),
            "eta_memory": self.eta_memory_,
            "conv_ratio": self.conv_ratio_,
            "overhead_s": dict(self.overhead_s_),
            "step_s": dict(self.step_s_),
            "traffic": dict(self.traffic_),
            "gpu_factor": dict(self.gpu_factor_),
            "workload_factor": dict(self.workload_factor_),
            "workloads": sorted(self.workloads_),
            "borrowed": dict(self.borrowed_),
            "eval_latency_s": self.eval_latency_s_,
            "intervals": self.intervals_.to_dict(),
            "collective": {k: c.to_dict() for k, c in self.collective_.items()},
            "fp8_source": self.fp8_source_,
            "host_layer_s": self.host_layer_s_,
            "host_source": self.host_source_,
            "warmup_s": self.warmup_s_,
            "fitted_on": self.fitted_on_,
            "n_rows": self.n_rows_,
        }

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> Self:
        try:
            model = cls(
                gpu_prior_sd=float(state["gpu_prior_sd"]),
                workload_prior_sd=float(state["workload_prior_sd"]),
                kernel_prior_sd=float(state.get("kernel_prior_sd", math.inf)),
                step_prior_sd=float(state.get("step_prior_sd", math.inf)),
            )
            model.eta_compute_ = {str(k): float(v) for k, v in state["eta_compute"].items()}
            model.eta_memory_ = float(state["eta_memory"])
            model.conv_ratio_ = float(state.get("conv_ratio", 1.0))
            model.overhead_s_ = {str(k): float(v) for k, v in state["overhead_s"].items()}
            model.step_s_ = {str(k): float(v) for k, v in state["step_s"].items()}
            model.traffic_ = {str(k): float(v) for k, v in state["traffic"].items()}
            model.gpu_factor_ = {str(k): float(v) for k, v in state["gpu_factor"].items()}
            model.workload_factor_ = {str(k): float(v) for k, v in state["workload_factor"].items()}
            model.workloads_ = frozenset(str(w) for w in state.get("workloads", ()))
            model.borrowed_ = {str(k): str(v) for k, v in state.get("borrowed", {}).items()}
            model.eval_latency_s_ = float(state.get("eval_latency_s", 0.0))
            model.intervals_ = IntervalTable.from_dict(state.get("intervals", {}))
            model.collective_ = {
                str(k): CollectiveConstants(**dict(v))
                for k, v in dict(state.get("collective", {})).items()
            }
            model.fp8_source_ = str(state.get("fp8_source", ""))
            model.host_layer_s_ = float(state.get("host_layer_s", 0.0))
            model.host_source_ = str(state.get("host_source", ""))
            model.warmup_s_ = float(state.get("warmup_s", 0.0))
            model.fitted_on_ = str(state.get("fitted_on", ""))
            model.n_rows_ = int(state.get("n_rows", 0))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InvalidInputError(
                f"steptime model state is malformed ({exc})",
                fix="refit it with `gpucast fit steptime`",
            ) from None
        values = [
            *model.eta_compute_.values(),
            model.eta_memory_,
            model.conv_ratio_,
            *model.overhead_s_.values(),
        ]
        if not all(math.isfinite(v) and v > 0 for v in values) or not all(
            math.isfinite(v) and v >= 0
            for v in (model.eval_latency_s_, model.host_layer_s_, model.warmup_s_)
        ):
            raise InvalidInputError(
                "steptime model holds a non-positive or non-finite constant",
                fix="refit it with `gpucast fit steptime`",
            )
        return model
