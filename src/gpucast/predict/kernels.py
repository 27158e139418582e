"""Per-operator / per-kernel time with a random forest, summed to the step (Braun et al.).

:class:`KernelTimeModel` learns the time of one operator call (CPU) or one kernel-launching
call (GPU) from hardware-independent features of the call and the device's specs, so that the
same model can be asked about another device:

* call features: log FLOPs, log bytes read, log bytes written, log arithmetic intensity, the
  operator class (one-hot over :data:`~gpucast.domain.kernels.KERNEL_OP_CLASSES`);
* device features: log peak FLOP/s, log memory bandwidth, log cores;
* the call's roofline time on the device, ``t_roof = max(flops / peak, bytes / bandwidth) +
  1 us`` (log).

The forest (scikit-learn's ``RandomForestRegressor``) predicts ``log(time / t_roof)`` -- how
far from its roofline the call runs -- rather than the log time itself: a tree predicts a
constant per leaf, so a call larger than any it was trained on gets the efficiency of the
largest seen, scaled by its own FLOPs and bytes, instead of the time of the largest seen.
Rows are weighted by calls per step.

The step is the sum of the predicted calls plus a per-step overhead fitted on the training
runs: ``b * calls per step``, ``b`` the median over the runs of ``(measured step - measured
operator time) / calls``. It covers what no operator times (Python between the calls, the
autograd engine, the optimizer's loop) and, when ``b < 0``, the profiler's own cost inside
the operator times. (A free intercept as well, by least squares, followed the noise of a
shared machine: one run's burst of load moved every prediction.)

Saved state: the trees' arrays (``children_left``, ``children_right``, ``feature``,
``threshold``, ``value`` of each ``sklearn.tree.Tree``) as JSON, and prediction walks them in
numpy (every row at once, one level per iteration), so a loaded model predicts exactly what
the fitted one did without scikit-learn or a refit. Refitting from stored data on load was the
alternative; it would tie a saved model to the store it came from and to scikit-learn's
version (the same seed need not give the same forest across releases). Pickle is not used.

Power (issue #20 item 4, "time and power"): where the training operators carry an energy
reading (``--kernels`` on a machine with RAPL or NVML; :mod:`gpucast.measure.kernels`
replays each call to meter it), a second forest on the same features predicts
``log(power_w)`` of a call (rows weighted by calls per step); a call's energy is its
predicted power times its predicted time, the step's the sum plus the overhead time at the
training operators' time-weighted mean power. Without energy readings the model predicts time
only (:attr:`KernelTimeModel.has_power` is false). Not validated on a GPU.

Only device features that vary in the training data can be learned: trained on one machine,
the model carries its efficiencies to another device through ``t_roof`` alone (a prior, not
validated); trained on several, the forest also learns how efficiency changes with the specs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.domain.kernels import KERNEL_OP_CLASSES, KernelTrace, OperatorRecord
from gpucast.predict.base import Estimator, register
from gpucast.predict.roofline import DeviceRoofline, RooflineWorkload, calibrate

FEATURES: tuple[str, ...] = (
    "log_flops",
    "log_bytes_read",
    "log_bytes_written",
    "log_intensity",
    *(f"class_{c}" for c in KERNEL_OP_CLASSES),
    "log_peak_flops",
    "log_bandwidth",
    "log_cores",
    "log_roofline_s",
)
#: floor of a call's roofline time: a call costs at least a dispatch
ROOFLINE_FLOOR_S = 1e-6
#: operator rows with an energy reading needed to fit the power forest
MIN_POWER_ROWS = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelDevice:
    """The specs of a device the kernel model reads."""

    name: str
    kind: str  # "cpu" | "gpu"
    peak_flops_per_s: float
    memory_bandwidth_bytes_per_s: float
    cores: int

    def __post_init__(self) -> None:
        for name in ("peak_flops_per_s", "memory_bandwidth_bytes_per_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise InvalidSpecError(name, "must be a finite number > 0", got=value)
        if isinstance(self.cores, bool) or self.cores < 1:
            raise InvalidSpecError("cores", "must be an integer >= 1", got=self.cores)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "peak_flops_per_s": self.peak_flops_per_s,
            "memory_bandwidth_bytes_per_s": self.memory_bandwidth_bytes_per_s,
            "cores": self.cores,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KernelDevice:
        return cls(
            name=str(data["name"]),
            kind=str(data["kind"]),
            peak_flops_per_s=float(data["peak_flops_per_s"]),
            memory_bandwidth_bytes_per_s=float(data["memory_bandwidth_bytes_per_s"]),
            cores=int(data["cores"]),
        )

    def roofline(self) -> DeviceRoofline:
        return DeviceRoofline(
            name=self.name,
            kind=self.kind,
            peak_tflops=self.peak_flops_per_s / 1e12,
            memory_bandwidth_gbps=self.memory_bandwidth_bytes_per_s / 1e9,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelObservation:
    """One measured run: its operator trace, the device, and the harness's step time."""

    workload: str
    device: KernelDevice
    trace: KernelTrace
    step_time_s: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.step_time_s) and self.step_time_s > 0):
            raise InvalidSpecError("step_time_s", "must be > 0", got=self.step_time_s)
        if not self.trace.operators:
            raise InvalidSpecError(
                "trace", f"run of {self.workload} has no operators", fix="re-measure --kernels"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelStepPrediction:
    """A step predicted from its operators: their sum plus the fitted overhead."""

    step_time_s: float
    operator_time_s: float
    overhead_s: float
    #: whether the fitted overhead would take more than half the operators' time off the step
    #: and ``overhead_s`` is that floor instead
    overhead_capped: bool = False
    #: op class -> predicted seconds per step (every class listed)
    by_class_s: Mapping[str, float] = field(default_factory=dict)
    #: predicted energy of the step (J) and per op class; ``None``/empty without a power model
    energy_j: float | None = None
    by_class_j: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_class_s", MappingProxyType(dict(self.by_class_s)))
        object.__setattr__(self, "by_class_j", MappingProxyType(dict(self.by_class_j)))

    @property
    def power_w(self) -> float | None:
        """Mean power over the step (W), or ``None`` without a power model."""
        if self.energy_j is None or self.step_time_s <= 0:
            return None
        return self.energy_j / self.step_time_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "step_time_s": self.step_time_s,
            "operator_time_s": self.operator_time_s,
            "overhead_s": self.overhead_s,
            "overhead_capped": self.overhead_capped,
            "by_class_s": dict(self.by_class_s),
            "energy_j": self.energy_j,
            "power_w": self.power_w,
            "by_class_j": dict(self.by_class_j),
        }


def _log10(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    return np.asarray(np.log10(values), dtype=np.float64)


def roofline_call_s(ops: Sequence[OperatorRecord], device: KernelDevice) -> npt.NDArray[np.float64]:
    """Each call's roofline time on ``device`` (s), floored at :data:`ROOFLINE_FLOOR_S`."""
    flops = np.array([op.flops for op in ops], dtype=np.float64)
    moved = np.array([op.bytes_moved for op in ops], dtype=np.float64)
    bound = np.maximum(flops / device.peak_flops_per_s, moved / device.memory_bandwidth_bytes_per_s)
    return np.asarray(bound + ROOFLINE_FLOOR_S, dtype=np.float64)


def operator_features(
    ops: Sequence[OperatorRecord], device: KernelDevice
) -> npt.NDArray[np.float64]:
    """The feature matrix (rows: calls, columns: :data:`FEATURES`)."""
    n = len(ops)
    flops = np.array([op.flops for op in ops], dtype=np.float64)
    read = np.array([op.bytes_read for op in ops], dtype=np.float64)
    written = np.array([op.bytes_written for op in ops], dtype=np.float64)
    classes = np.array([KERNEL_OP_CLASSES.index(op.op_class) for op in ops], dtype=np.int64)
    one_hot = np.zeros((n, len(KERNEL_OP_CLASSES)))
    one_hot[np.arange(n), classes] = 1.0
    device_columns = np.broadcast_to(
        np.log10(
            [device.peak_flops_per_s, device.memory_bandwidth_bytes_per_s, float(device.cores)]
        ),
        (n, 3),
    )
    return np.column_stack(
        (
            _log10(flops + 1.0),
            _log10(read + 1.0),
            _log10(written + 1.0),
            _log10((flops + 1.0) / (read + written + 1.0)),
            one_hot,
            device_columns,
            _log10(roofline_call_s(ops, device)),
        )
    )


def roofline_step_s(trace: KernelTrace, device: KernelDevice, *, name: str = "step") -> float:
    """The roofline of :mod:`gpucast.predict.roofline` (its default efficiencies) for the
    traced step on ``device``: matmul/convolution FLOPs at peak, the other classes' bytes at
    bandwidth, a launch cost per call."""
    compute = [op for op in trace.operators if op.op_class in ("matmul", "conv")]
    memory = [op for op in trace.operators if op.op_class not in ("matmul", "conv")]
    workload = RooflineWorkload(
        name=name,
        batch_size=1,
        matmul_flops=math.fsum(op.flops * op.calls_per_step for op in compute),
        conv_flops=math.fsum(
            op.flops * op.calls_per_step for op in compute if op.op_class == "conv"
        ),
        memory_bytes=math.fsum(op.bytes_moved * op.calls_per_step for op in memory),
        n_kernels=round(trace.calls_per_step),
    )
    # calibrating to a 1 s step gives scale = 1 / roofline time
    return 1.0 / calibrate(workload, 1.0, device.roofline()).scale


def _tree_predict(
    x: npt.NDArray[np.float64], tree: Mapping[str, npt.NDArray[Any]]
) -> npt.NDArray[np.float64]:
    """Walk one tree for every row at once (scikit-learn's rule: ``x[feature] <= threshold``
    on float32 features goes left)."""
    left, right = tree["left"], tree["right"]
    feature, threshold, value = tree["feature"], tree["threshold"], tree["value"]
    rows = np.arange(x.shape[0])
    node = np.zeros(x.shape[0], dtype=np.int64)
    while True:
        inner = left[node] >= 0
        if not inner.any():
            return np.asarray(value[node], dtype=np.float64)
        column = np.where(inner, feature[node], 0)
        go_left = x[rows, column] <= threshold[node]
        node = np.where(inner, np.where(go_left, left[node], right[node]), node)


def _load_trees(raw_trees: Any) -> list[dict[str, npt.NDArray[Any]]]:
    """Saved trees back as arrays, checked so that every walk ends at a leaf."""
    trees: list[dict[str, npt.NDArray[Any]]] = []
    for raw in raw_trees:
        tree = {
            "left": np.asarray(raw["left"], dtype=np.int64),
            "right": np.asarray(raw["right"], dtype=np.int64),
            "feature": np.asarray(raw["feature"], dtype=np.int64),
            "threshold": np.asarray(raw["threshold"], dtype=np.float64),
            "value": np.asarray(raw["value"], dtype=np.float64),
        }
        sizes = {v.shape for v in tree.values()}
        n = tree["left"].size
        inner = tree["left"] >= 0
        index = np.arange(n)
        if (
            len(sizes) != 1
            or n == 0
            or tree["left"].max() >= n
            or tree["right"].max() >= n
            or (tree["feature"][inner] >= len(FEATURES)).any()
            or (tree["feature"][inner] < 0).any()
            or (tree["right"][inner] <= index[inner]).any()
            or (tree["left"][inner] <= index[inner]).any()
        ):  # children after their parent: every walk ends at a leaf
            raise ValueError("a tree's arrays are inconsistent")
        trees.append(tree)
    return trees


@register
class KernelTimeModel(Estimator):
    """Random forest of per-call time, summed to the step (see the module docstring).

    The constructor stores the forest's parameters only; :meth:`fit` takes
    :class:`KernelObservation` s and returns ``self``; predicting before fitting raises
    :class:`~gpucast.domain.errors.NotFittedError`.
    """

    kind: ClassVar[str] = "kernel-forest"
    schema_version: ClassVar[int] = 1

    def __init__(
        self,
        *,
        n_estimators: int = 64,
        min_samples_leaf: int = 2,
        max_features: float = 0.7,
        random_state: int = 0,
    ) -> None:
        self.n_estimators = n_estimators
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.random_state = random_state
        self._trees: list[dict[str, npt.NDArray[Any]]] | None = None
        self._power_trees: list[dict[str, npt.NDArray[Any]]] | None = None
        self._overhead_power_w = 0.0
        self._overhead_s = 0.0
        self._overhead_s_per_call = 0.0
        self._training: dict[str, Any] = {}

    @property
    def is_fitted(self) -> bool:
        return self._trees is not None

    def _forest(
        self, x: npt.NDArray[np.float64], target: npt.NDArray[np.float64], weight: Any
    ) -> list[dict[str, npt.NDArray[Any]]]:
        from sklearn.ensemble import RandomForestRegressor

        forest = RandomForestRegressor(
            n_estimators=self.n_estimators,
            min_samples_leaf=self.min_samples_leaf,
            max_features=self.max_features,
            random_state=self.random_state,
        ).fit(x, target, sample_weight=weight)
        return [
            {
                "left": np.asarray(t.tree_.children_left, dtype=np.int64),
                "right": np.asarray(t.tree_.children_right, dtype=np.int64),
                "feature": np.asarray(t.tree_.feature, dtype=np.int64),
                "threshold": np.asarray(t.tree_.threshold, dtype=np.float64),
                "value": np.asarray(t.tree_.value, dtype=np.float64).reshape(-1),
            }
            for t in forest.estimators_
        ]

    def fit(self, observations: Sequence[KernelObservation]) -> KernelTimeModel:
        obs = tuple(observations)
        if not obs:
            raise InvalidSpecError("observations", "needs at least one run measured with --kernels")
        if isinstance(self.n_estimators, bool) or self.n_estimators < 1:
            raise InvalidSpecError("n_estimators", "must be >= 1", got=self.n_estimators)
        x = np.vstack([operator_features(o.trace.operators, o.device) for o in obs])
        time_s = np.concatenate(
            [[op.time_s_per_call for op in o.trace.operators] for o in obs]
        ).astype(np.float64)
        roof = np.concatenate([roofline_call_s(o.trace.operators, o.device) for o in obs])
        weight = np.concatenate(
            [[op.calls_per_step for op in o.trace.operators] for o in obs]
        ).astype(np.float64)
        target = np.log(np.maximum(time_s, 1e-9) / roof)
        self._trees = self._forest(x, target, weight)
        power = np.array(
            [np.nan if op.power_w is None else op.power_w for o in obs for op in o.trace.operators],
            dtype=np.float64,
        )
        metered = np.isfinite(power) & (power > 0) & (time_s > 0)
        self._power_trees = None
        self._overhead_power_w = 0.0
        if int(metered.sum()) >= MIN_POWER_ROWS:
            self._power_trees = self._forest(x[metered], np.log(power[metered]), weight[metered])
            busy = (weight * time_s)[metered]  # seconds per step
            self._overhead_power_w = float(np.average(power[metered], weights=busy))
        residual = np.array([o.step_time_s - o.trace.operator_time_s_per_step for o in obs])
        calls = np.array([o.trace.calls_per_step for o in obs])
        self._overhead_s = 0.0
        self._overhead_s_per_call = float(np.median(residual / calls))
        self._training = {
            "workloads": sorted({o.workload for o in obs}),
            "devices": sorted({o.device.name for o in obs}),
            "runs": len(obs),
            "operators": int(x.shape[0]),
            "operators_with_power": int(metered.sum()),
        }
        return self

    @property
    def has_power(self) -> bool:
        """Whether a power forest was fitted (training operators with energy readings)."""
        self._require_fitted()
        return self._power_trees is not None

    def predict_call_power_w(
        self, ops: Sequence[OperatorRecord], device: KernelDevice
    ) -> npt.NDArray[np.float64]:
        """Predicted power while each op's call runs on ``device`` (W)."""
        self._require_fitted()
        if self._power_trees is None:
            raise InvalidSpecError(
                "power",
                "needs training runs whose operators have energy readings",
                fix="measure --kernels where RAPL (CPU) or NVML (GPU) energy is readable",
            )
        if not ops:
            return np.zeros(0)
        x = operator_features(ops, device).astype(np.float32).astype(np.float64)
        log_power = np.mean([_tree_predict(x, tree) for tree in self._power_trees], axis=0)
        return np.asarray(np.exp(log_power), dtype=np.float64)

    @property
    def training(self) -> dict[str, Any]:
        """What the model was fitted on: workloads, devices, runs, operator rows."""
        self._require_fitted()
        return dict(self._training)

    def predict_call_s(
        self, ops: Sequence[OperatorRecord], device: KernelDevice
    ) -> npt.NDArray[np.float64]:
        """Predicted time of one call of each op on ``device`` (s)."""
        self._require_fitted()
        assert self._trees is not None
        if not ops:
            return np.zeros(0)
        x = operator_features(ops, device).astype(np.float32).astype(np.float64)
        log_ratio = np.mean([_tree_predict(x, tree) for tree in self._trees], axis=0)
        return np.asarray(roofline_call_s(ops, device) * np.exp(log_ratio), dtype=np.float64)

    def predict_step(self, trace: KernelTrace, device: KernelDevice) -> KernelStepPrediction:
        """The traced step on ``device``: every call predicted, summed, plus the overhead
        (never below zero in total)."""
        per_call = self.predict_call_s(trace.operators, device)
        calls = np.array([op.calls_per_step for op in trace.operators], dtype=np.float64)
        per_op = per_call * calls
        operators_s = float(per_op.sum())
        fitted = self._overhead_s + self._overhead_s_per_call * float(calls.sum())
        overhead = max(fitted, -0.5 * operators_s)
        by_class = {c: 0.0 for c in KERNEL_OP_CLASSES}
        for op, seconds in zip(trace.operators, per_op.tolist(), strict=True):
            by_class[op.op_class] += seconds
        energy: float | None = None
        by_class_j: dict[str, float] = {}
        if self._power_trees is not None:
            joules = self.predict_call_power_w(trace.operators, device) * per_op
            by_class_j = {c: 0.0 for c in KERNEL_OP_CLASSES}
            for op, j in zip(trace.operators, joules.tolist(), strict=True):
                by_class_j[op.op_class] += j
            energy = max(0.0, float(joules.sum()) + overhead * self._overhead_power_w)
        return KernelStepPrediction(
            step_time_s=operators_s + overhead,
            operator_time_s=operators_s,
            overhead_s=overhead,
            overhead_capped=fitted < overhead,
            by_class_s=by_class,
            energy_j=energy,
            by_class_j=by_class_j,
        )

    def _state(self) -> dict[str, Any]:
        assert self._trees is not None
        return {
            "params": {
                "n_estimators": self.n_estimators,
                "min_samples_leaf": self.min_samples_leaf,
                "max_features": self.max_features,
                "random_state": self.random_state,
            },
            "features": list(FEATURES),
            "trees": [{k: v.tolist() for k, v in tree.items()} for tree in self._trees],
            "power_trees": None
            if self._power_trees is None
            else [{k: v.tolist() for k, v in tree.items()} for tree in self._power_trees],
            "overhead_power_w": self._overhead_power_w,
            "overhead_s": self._overhead_s,
            "overhead_s_per_call": self._overhead_s_per_call,
            "training": self._training,
        }

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> KernelTimeModel:
        try:
            model = cls(**{k: state["params"][k] for k in (
                "n_estimators", "min_samples_leaf", "max_features", "random_state"
            )})  # fmt: skip
            if list(state["features"]) != list(FEATURES):
                raise ValueError("its features are not this gpucast's")
            trees = _load_trees(state["trees"])
            if not trees:
                raise ValueError("no trees")
            power = state.get("power_trees")
            model._power_trees = None if power is None else _load_trees(power)
            if model._power_trees is not None and not model._power_trees:
                raise ValueError("power_trees is empty")
            model._overhead_power_w = float(state.get("overhead_power_w", 0.0))
            model._trees = trees
            model._overhead_s = float(state["overhead_s"])
            model._overhead_s_per_call = float(state["overhead_s_per_call"])
            model._training = dict(state["training"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InvalidInputError(
                f"kernel-forest model state is malformed ({type(exc).__name__}: {exc})",
                fix="refit it (gpucast predict kernels fits it from the store's --kernels runs)",
            ) from None
        return model
