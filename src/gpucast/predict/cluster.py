"""Distributed-training speed for n workers: parameter server, ring all-reduce, FSDP.

:class:`ClusterModel` (kind ``"cluster"``) predicts cluster speed in worker steps per second
(one step = one worker's mini-batch; under asynchronous PS training this is the global
step rate that CM-DARE reports; multiply by the per-worker batch for samples/s) from the
single-worker step time and the model's parameter bytes and tensor count.

The asynchronous PS is a closed queueing network solved by exact mean value analysis
(:mod:`gpucast.predict.comm`): per shard a *push* station (the gradients arriving on the
NIC's ingress, applied by the CPU) and a *pull* station (the parameters leaving on the
egress), the two directions of a full-duplex NIC serving different workers at once; ``k``
shards are separate VMs and the busiest (it holds the largest tensor) sets a worker's wait
and the bound; a worker's own NIC, carrying every shard's bytes, adds a delay where it is
the slower end. Two PS parameters are fitted with scipy on measured cluster speeds: the
achieved fraction of the NICs' nominal bandwidth (``network_efficiency``, with a weak prior
towards 1, i.e. the nominal rate) and a CPU cost per tensor per update. The single-worker
step time ``T1`` (measured with one PS) contains one pull and one push, neither overlapping
compute, so a worker's think time is ``T1 - (push + pull)``. The prediction interval comes
from leave-one-model-out residuals of the fit; ring all-reduce and FSDP use the same
formulas' physics but were not validated on measured data, which their interval and notes
say.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, Self

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.domain.prediction import Estimate
from gpucast.predict import comm
from gpucast.predict.base import Estimator, register
from gpucast.predict.collective import CollectiveConstants

FloatArray = NDArray[np.float64]

STRATEGIES: tuple[str, ...] = ("ps-async", "ps-sync", "allreduce", "fsdp")
#: Columns :meth:`ClusterModel.fit` needs (``ps_shards`` and ``single_worker_step_time_s``
#: are optional: 1 shard, and the median speed of the 1-worker rows of the same gpu/model).
FIT_COLUMNS: tuple[str, ...] = (
    "gpu",
    "model",
    "workers",
    "speed_steps_per_s",
    "n_parameters",
    "n_tensors",
)
#: Columns :meth:`ClusterModel.predict_frame` reads (``strategy``, ``max_tensor_bytes`` and
#: ``ps_shards`` optional).
FRAME_COLUMNS: tuple[str, ...] = (
    "single_worker_step_time_s",
    "workers",
    "param_bytes",
    "n_tensors",
)

#: PS shard counts searched for the one that removes a PS bottleneck; a row no count up to it
#: helps reports this cap as its need, flagged ``ps_shards_capped`` ("more than 64")
MAX_SHARDS_SEARCHED = 64
_MAX_SHARDS_SEARCHED = MAX_SHARDS_SEARCHED
_PS_ROUND_TRIPS_PER_STEP = 2.0  # pull parameters, push gradients


def _check_positive(name: str, value: float, *, allow_zero: bool = False) -> None:
    ok = math.isfinite(value) and (value >= 0 if allow_zero else value > 0)
    if not ok:
        constraint = "must be a finite number >= 0" if allow_zero else "must be a finite number > 0"
        raise InvalidSpecError(name, constraint, got=value)


@register
class ClusterModel(Estimator):
    """Cluster speed of data-parallel training; fitted on measured PS cluster speeds.

    Constructor parameters (stored, never fitted):

    * ``ps_network_gbps`` -- nominal NIC bandwidth of one PS shard during fit and the default
      for predictions (8.0: the CM-DARE PS is a 4-vCPU GCE VM, 2 Gbit/s per vCPU);
    * ``bytes_per_parameter`` -- 4 for fp32 gradients and parameters;
    * ``bottleneck_utilization`` -- busiest-shard utilisation from which the PS is called the
      bottleneck;
    * ``efficiency_prior_weight`` -- weight of the prior pulling ``network_efficiency``
      towards 1 (the nominal rate); it matters when the fitting models cannot separate
      byte costs from per-tensor costs;
    * ``network_gbps``, ``gpus_per_node``, ``intra_node_gbps``, ``hop_latency_s`` -- defaults
      for all-reduce / FSDP predictions (10 Gbit/s between nodes, one GPU per node, PCIe 3
      x16 ~128 Gbit/s inside a node, 25 us per ring hop); ``network_gbps`` is also a PS
      worker's own NIC, which carries every shard's bytes.
    """

    kind = "cluster"
    #: 2: the PS is a push and a pull station per shard (v1: one station per shard); the
    #: fitted constants mean something else, so a v1 file must be refitted.
    schema_version = 2

    def __init__(
        self,
        *,
        ps_network_gbps: float = 8.0,
        bytes_per_parameter: int = 4,
        bottleneck_utilization: float = 0.8,
        efficiency_prior_weight: float = 0.3,
        network_gbps: float = 10.0,
        gpus_per_node: int = 1,
        intra_node_gbps: float = 128.0,
        hop_latency_s: float = 25e-6,
        overlap_fraction: float = comm.DEFAULT_OVERLAP_FRACTION,
    ) -> None:
        self.ps_network_gbps = ps_network_gbps
        self.bytes_per_parameter = bytes_per_parameter
        self.bottleneck_utilization = bottleneck_utilization
        self.efficiency_prior_weight = efficiency_prior_weight
        self.network_gbps = network_gbps
        self.gpus_per_node = gpus_per_node
        self.intra_node_gbps = intra_node_gbps
        self.hop_latency_s = hop_latency_s
        self.overlap_fraction = overlap_fraction
        self.network_efficiency_: float | None = None
        self.per_tensor_cost_s_: float | None = None
        self.log_residual_q10_: float = 0.0
        self.log_residual_q90_: float = 0.0
        self.cv_mape_pct_: float | None = None
        self.train_mape_pct_: float | None = None
        self.single_worker_step_time_s_: dict[str, float] = {}
        self.models_: list[str] = []

    # ------------------------------------------------------------------ state
    @property
    def is_fitted(self) -> bool:
        return self.network_efficiency_ is not None and self.per_tensor_cost_s_ is not None

    def _params(self) -> dict[str, Any]:
        return {
            "ps_network_gbps": self.ps_network_gbps,
            "bytes_per_parameter": self.bytes_per_parameter,
            "bottleneck_utilization": self.bottleneck_utilization,
            "efficiency_prior_weight": self.efficiency_prior_weight,
            "network_gbps": self.network_gbps,
            "gpus_per_node": self.gpus_per_node,
            "intra_node_gbps": self.intra_node_gbps,
            "hop_latency_s": self.hop_latency_s,
            "overlap_fraction": self.overlap_fraction,
        }

    def _state(self) -> dict[str, Any]:
        return {
            "params": self._params(),
            "network_efficiency": self.network_efficiency_,
            "per_tensor_cost_s": self.per_tensor_cost_s_,
            "log_residual_q10": self.log_residual_q10_,
            "log_residual_q90": self.log_residual_q90_,
            "cv_mape_pct": self.cv_mape_pct_,
            "train_mape_pct": self.train_mape_pct_,
            "single_worker_step_time_s": dict(self.single_worker_step_time_s_),
            "models": list(self.models_),
        }

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> Self:
        try:
            model = cls(**state["params"])
            model.network_efficiency_ = float(state["network_efficiency"])
            model.per_tensor_cost_s_ = float(state["per_tensor_cost_s"])
            model.log_residual_q10_ = float(state["log_residual_q10"])
            model.log_residual_q90_ = float(state["log_residual_q90"])
            cv = state.get("cv_mape_pct")
            model.cv_mape_pct_ = None if cv is None else float(cv)
            tr = state.get("train_mape_pct")
            model.train_mape_pct_ = None if tr is None else float(tr)
            model.single_worker_step_time_s_ = {
                str(k): float(v) for k, v in state["single_worker_step_time_s"].items()
            }
            model.models_ = [str(m) for m in state["models"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(
                f"cluster model state is malformed ({exc})", fix="refit it"
            ) from exc
        return model

    # ------------------------------------------------------------------ fit
    def fit(self, data: pd.DataFrame) -> Self:
        """Fit the PS parameters on measured cluster speeds (asynchronous PS).

        ``data`` has the :data:`FIT_COLUMNS` (raw samples or one row per run; rows are
        reduced to the median speed per gpu/model/workers/ps_shards). It is not modified.
        """
        runs = _summarise_for_fit(data)
        models = sorted(runs["model"].unique())
        theta = self._fit_theta(runs)
        pred = self._async_from_theta(theta, runs)
        log_res = np.log(runs["speed_steps_per_s"].to_numpy() / pred)
        self.train_mape_pct_ = float(np.mean(np.abs(pred / runs["speed_steps_per_s"] - 1)) * 100)
        if len(models) >= 2:
            cv_pred = np.empty(len(runs))
            for m in models:
                held = (runs["model"] == m).to_numpy()
                theta_m = self._fit_theta(runs.loc[~held])
                cv_pred[held] = self._async_from_theta(theta_m, runs.loc[held])
            cv_res = np.log(runs["speed_steps_per_s"].to_numpy() / cv_pred)
            self.cv_mape_pct_ = float(
                np.mean(np.abs(cv_pred / runs["speed_steps_per_s"].to_numpy() - 1)) * 100
            )
        else:
            cv_res = log_res
            self.cv_mape_pct_ = None
        self.log_residual_q10_ = float(min(np.quantile(cv_res, 0.10), 0.0))
        self.log_residual_q90_ = float(max(np.quantile(cv_res, 0.90), 0.0))
        self.network_efficiency_ = float(theta[0])
        self.per_tensor_cost_s_ = float(theta[1])
        ones = runs[(runs["workers"] == 1) & (runs["ps_shards"] == 1)]
        self.single_worker_step_time_s_ = {
            _key(str(g), str(m)): float(t)
            for g, m, t in zip(
                ones["gpu"], ones["model"], ones["single_worker_step_time_s"], strict=True
            )
        }
        self.models_ = [str(m) for m in models]
        return self

    def _fit_theta(self, runs: pd.DataFrame) -> FloatArray:
        from scipy.optimize import least_squares

        weight = self.efficiency_prior_weight
        measured = runs["speed_steps_per_s"].to_numpy()

        def residuals(theta: FloatArray) -> FloatArray:
            pred = self._async_from_theta(theta, runs)
            prior = np.array([weight * math.log(theta[0])])
            return np.concatenate([np.log(pred / measured), prior])

        result = least_squares(
            residuals,
            x0=np.array([0.8, 1e-4]),
            bounds=(np.array([0.01, 0.0]), np.array([1.0, 0.01])),
            x_scale=np.array([0.1, 1e-4]),
        )
        return np.asarray(result.x, dtype=np.float64)

    def _async_from_theta(self, theta: FloatArray, runs: pd.DataFrame) -> FloatArray:
        speed, *_ = self._ps_async(
            network_efficiency=float(theta[0]),
            per_tensor_cost_s=float(theta[1]),
            single_step_s=runs["single_worker_step_time_s"].to_numpy(dtype=np.float64),
            workers=runs["workers"].to_numpy(dtype=np.int64),
            shards=runs["ps_shards"].to_numpy(dtype=np.float64),
            param_bytes=runs["n_parameters"].to_numpy(dtype=np.float64) * self.bytes_per_parameter,
            n_tensors=runs["n_tensors"].to_numpy(dtype=np.float64),
            largest_fraction=np.zeros(len(runs)),
            ps_network_gbps=self.ps_network_gbps,
            worker_network_gbps=self.network_gbps,
            rtt_s=0.0,
            includes_ps=True,
        )
        return speed

    # ------------------------------------------------------------------ core
    @staticmethod
    def _ps_async(
        *,
        network_efficiency: float,
        per_tensor_cost_s: float,
        single_step_s: FloatArray,
        workers: NDArray[np.int64],
        shards: FloatArray,
        param_bytes: FloatArray,
        n_tensors: FloatArray,
        largest_fraction: FloatArray,
        ps_network_gbps: float,
        worker_network_gbps: float,
        rtt_s: float,
        includes_ps: bool,
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
        """(speed, busiest-station utilisation, think time, network share, cpu share) of the
        busiest shard."""
        net_s, cpu_s = comm.ps_service_demand_s(
            param_bytes,
            n_tensors,
            ps_network_gbps=ps_network_gbps,
            network_efficiency=network_efficiency,
            per_tensor_cost_s=per_tensor_cost_s,
        )
        worker_s = comm.transfer_time_s(param_bytes, worker_network_gbps * network_efficiency)
        think = (
            _think_time(single_step_s, _measured_latency_s(net_s, cpu_s, worker_s), includes_ps)
            + _PS_ROUND_TRIPS_PER_STEP * rtt_s
        )
        push, pull = comm.shard_demands_s(net_s, cpu_s, shards, largest_fraction)
        delay = comm.worker_nic_delay_s(pull, worker_s)
        speed, util = comm.ps_async_throughput(think + delay, push, pull, workers)
        return speed, util, think, pull, push - pull

    # ------------------------------------------------------------------ predict
    def predict(
        self,
        single_worker_step_time_s: float | Sequence[float],
        workers: int | None = None,
        ps_shards: int = 1,
        strategy: str = "ps-async",
        *,
        param_bytes: float,
        n_tensors: int,
        max_tensor_bytes: float | None = None,
        ps_network_gbps: float | None = None,
        network_gbps: float | None = None,
        gpus_per_node: int | None = None,
        intra_node_gbps: float | None = None,
        cross_region_rtt_s: float = 0.0,
        overlap_fraction: float | None = None,
        step_time_includes_ps: bool = True,
        collective: CollectiveConstants | None = None,
    ) -> Estimate:
        """Cluster speed (worker steps/s) of ``workers`` workers.

        ``single_worker_step_time_s`` is one worker's step time alone (a float, or one per
        worker for heterogeneous clusters; ``workers`` then defaults to their count). With
        ``step_time_includes_ps`` (CM-DARE measurements: 1 worker + 1 PS) the pull and the
        push of that one PS are taken out of it to get the compute time; pass ``False`` for a
        bare single-GPU step time. ``network_gbps`` is also each PS worker's own NIC (it
        carries every shard's bytes). ``cross_region_rtt_s`` is added per round trip (2 per PS
        step; ring hops pay half of it each).
        """
        self._require_fitted()
        assert self.network_efficiency_ is not None and self.per_tensor_cost_s_ is not None
        steps = _as_step_times(single_worker_step_time_s, workers)
        if strategy not in STRATEGIES:
            raise InvalidSpecError(
                "strategy", f"must be one of {', '.join(STRATEGIES)}", got=strategy
            )
        if isinstance(ps_shards, bool) or not isinstance(ps_shards, int) or ps_shards < 1:
            raise InvalidSpecError("ps_shards", "must be an integer >= 1", got=ps_shards)
        _check_positive("param_bytes", float(param_bytes))
        _check_positive("n_tensors", float(n_tensors))
        _check_positive("cross_region_rtt_s", cross_region_rtt_s, allow_zero=True)
        largest = 0.0
        if max_tensor_bytes is not None:
            _check_positive("max_tensor_bytes", max_tensor_bytes)
            largest = min(max_tensor_bytes / param_bytes, 1.0)
        ps_gbps = self.ps_network_gbps if ps_network_gbps is None else ps_network_gbps
        _check_positive("ps_network_gbps", ps_gbps)
        net = self.network_gbps if network_gbps is None else network_gbps
        _check_positive("network_gbps", net)
        ctx = _Ctx(
            param_bytes=float(param_bytes),
            n_tensors=float(n_tensors),
            largest=largest,
            ps_gbps=ps_gbps,
            worker_gbps=net,
            rtt_s=cross_region_rtt_s,
            includes_ps=step_time_includes_ps,
        )
        if strategy == "ps-async":
            return self._predict_ps_async(steps, ps_shards, ctx)
        if strategy == "ps-sync":
            return self._predict_ps_sync(steps, ps_shards, ctx)
        per_node = self.gpus_per_node if gpus_per_node is None else gpus_per_node
        intra = self.intra_node_gbps if intra_node_gbps is None else intra_node_gbps
        overlap = self.overlap_fraction if overlap_fraction is None else overlap_fraction
        _check_positive("intra_node_gbps", intra)
        if not 0.0 <= overlap <= 1.0:
            raise InvalidSpecError("overlap_fraction", "must be in [0, 1]", got=overlap)
        return self._predict_collective(
            steps, strategy, ctx, net, per_node, intra, overlap, collective
        )

    def _demands(self, ctx: _Ctx) -> tuple[float, float]:
        assert self.network_efficiency_ is not None and self.per_tensor_cost_s_ is not None
        net_s, cpu_s = comm.ps_service_demand_s(
            ctx.param_bytes,
            ctx.n_tensors,
            ps_network_gbps=ctx.ps_gbps,
            network_efficiency=self.network_efficiency_,
            per_tensor_cost_s=self.per_tensor_cost_s_,
        )
        return float(net_s.item()), float(cpu_s.item())

    def measured_ps_latency_s(self, param_bytes: float, n_tensors: float) -> float:
        """The PS time inside a step measured with 1 worker + 1 PS (one pull and one push on
        an idle PS): what a single-worker CM-DARE step holds beyond the worker's compute."""
        self._require_fitted()
        ctx = _Ctx(
            param_bytes=float(param_bytes),
            n_tensors=float(n_tensors),
            largest=0.0,
            ps_gbps=self.ps_network_gbps,
            worker_gbps=self.network_gbps,
            rtt_s=0.0,
            includes_ps=True,
        )
        net_s, cpu_s = self._demands(ctx)
        return float(_measured_latency_s(net_s, cpu_s, self._worker_transfer_s(ctx)))

    def _worker_transfer_s(self, ctx: _Ctx) -> float:
        """Seconds a worker's own NIC needs for all the bytes, one direction."""
        assert self.network_efficiency_ is not None
        gbps = ctx.worker_gbps * self.network_efficiency_
        return float(comm.transfer_time_s(ctx.param_bytes, gbps).item())

    def _ps_stations(self, shards: int, ctx: _Ctx) -> tuple[float, float]:
        """(push, pull) seconds per update at the busiest of ``shards`` shards."""
        net_s, cpu_s = self._demands(ctx)
        push, pull = comm.shard_demands_s(net_s, cpu_s, float(shards), ctx.largest)
        return float(push), float(pull)

    def _ps_think(self, steps: FloatArray, ctx: _Ctx) -> FloatArray:
        """Each worker's compute (its step less the 1-PS pull and push it was measured
        with, when it was) plus its cross-region round trips."""
        net_s, cpu_s = self._demands(ctx)
        measured = _measured_latency_s(net_s, cpu_s, self._worker_transfer_s(ctx))
        return _think_time(steps, measured, ctx.includes_ps) + _PS_ROUND_TRIPS_PER_STEP * ctx.rtt_s

    def _async_speed(
        self, steps: FloatArray, shards: int, ctx: _Ctx
    ) -> tuple[float, float, FloatArray, float, float]:
        """(speed, busiest-station utilisation, think times, push, pull)."""
        think = self._ps_think(steps, ctx)
        push, pull = self._ps_stations(shards, ctx)
        delay = float(comm.worker_nic_delay_s(pull, self._worker_transfer_s(ctx)))
        z_eq = comm.equivalent_think_time_s(think + delay, push + pull)
        speed, util = comm.ps_async_throughput(
            np.array([z_eq]),
            np.array([push]),
            np.array([pull]),
            np.array([len(steps)], dtype=np.int64),
        )
        return float(speed[0]), float(util[0]), think, push, pull

    def _predict_ps_async(self, steps: FloatArray, shards: int, ctx: _Ctx) -> Estimate:
        speed, util, think, push, pull = self._async_speed(steps, shards, ctx)
        threshold = self.bottleneck_utilization
        ps_term = "ps_network" if pull >= push - pull else "ps_cpu"
        bottleneck = ps_term if util >= threshold else "compute"
        notes = [f"busiest PS shard utilisation {util:.0%}"]
        needed = shards
        found: int | None = shards  # None: no shard count up to the cap removes the bottleneck
        if bottleneck != "compute":
            more, *_ = self._async_speed(steps, shards + 1, ctx)
            notes.append(f"add 1 PS shard: {100 * (more / speed - 1):+.0f}% speed")
            found = self._shards_needed(
                lambda k: self._async_speed(steps, k, ctx)[1] < threshold, shards
            )
            notes.append(_shards_note(found, shards))
            needed = _MAX_SHARDS_SEARCHED if found is None else found
        naive = float(np.sum(1.0 / steps))
        notes.append(f"naive n x single worker would say {naive:.4g} steps/s")
        latency = float(comm.ps_step_latency_s(push, pull, self._worker_transfer_s(ctx)))
        breakdown = {
            "compute_s": float(np.mean(think)),
            "ps_network_s": pull,
            "ps_cpu_s": push - pull,
            "ps_push_s": push,
            "ps_pull_s": pull,
            "ps_latency_s": latency,
            "ps_utilization": util,
            "ps_shards_needed": float(needed),
            "ps_shards_capped": float(found is None),
        }
        return self._estimate(speed, bottleneck, breakdown, notes, validated=True)

    def _predict_ps_sync(self, steps: FloatArray, shards: int, ctx: _Ctx) -> Estimate:
        n = len(steps)
        slowest = float(np.max(self._ps_think(steps, ctx)))
        worker_s = self._worker_transfer_s(ctx)

        def ps_time(k: int) -> float:
            push, pull = self._ps_stations(k, ctx)
            return float(comm.sync_ps_step_time_s(0.0, push, pull, worker_s, float(n)))

        step = slowest + ps_time(shards)
        speed = n / step
        push, pull = self._ps_stations(shards, ctx)
        ps_term = "ps_network" if pull >= push - pull else "ps_cpu"
        bottleneck = ps_term if ps_time(shards) > slowest else "compute"
        notes = ["synchronous: every step waits for the slowest worker"]
        needed = shards
        found: int | None = shards  # None: no shard count up to the cap removes the bottleneck
        if bottleneck != "compute":
            faster = n / (slowest + ps_time(shards + 1))
            notes.append(f"add 1 PS shard: {100 * (faster / speed - 1):+.0f}% speed")
            found = self._shards_needed(lambda k: ps_time(k) <= slowest, shards)
            if found is None and 2.0 * worker_s > slowest:  # no shard count can help
                notes.append(
                    "no PS shard count removes the bottleneck: a worker's own link takes "
                    f"{2e3 * worker_s:.3g} ms to push and pull, more than its compute"
                )
            else:
                notes.append(_shards_note(found, shards))
            needed = _MAX_SHARDS_SEARCHED if found is None else found
        breakdown = {
            "compute_s": slowest,
            "ps_network_s": n * pull,
            "ps_cpu_s": n * (push - pull),
            "step_time_s": step,
            "ps_shards_needed": float(needed),
            "ps_shards_capped": float(found is None),
        }
        return self._estimate(speed, bottleneck, breakdown, notes, validated=False)

    def _predict_collective(
        self,
        steps: FloatArray,
        strategy: str,
        ctx: _Ctx,
        network_gbps: float,
        gpus_per_node: int,
        intra_node_gbps: float,
        overlap: float,
        collective: CollectiveConstants | None = None,
    ) -> Estimate:
        n = len(steps)
        net_s, cpu_s = self._demands(ctx)
        measured = _measured_latency_s(net_s, cpu_s, self._worker_transfer_s(ctx))
        compute = float(np.max(_think_time(steps, measured, ctx.includes_ps)))
        hop = self.hop_latency_s
        if ctx.rtt_s > 0:
            hop = max(hop, ctx.rtt_s / 2.0)
        term = "allreduce" if strategy == "allreduce" else "fsdp_comm"
        passes = 2.0 if strategy == "allreduce" else 3.0
        if collective is None:
            total = float(
                comm.hierarchical_collective_s(
                    ctx.param_bytes, n, gpus_per_node, intra_node_gbps, network_gbps, hop,
                    passes=passes,
                )
            )  # fmt: skip
            exposed = comm.exposed_comm_s(total, compute, overlap_fraction=overlap)
        else:  # as the planner prices this network (gpucast.predict.collective)
            if hop > collective.hop_latency_s:
                collective = dataclasses.replace(collective, hop_latency_s=hop)
            total = float(
                collective.total_s(
                    ctx.param_bytes, n, gpus_per_node, intra_node_gbps, network_gbps,
                    passes=passes,
                )[()]
            )  # fmt: skip
            exposed = float(collective.exposed_s(total, compute))
        link = comm.slowest_link_gbps(n, gpus_per_node, intra_node_gbps, network_gbps)
        step = compute + exposed
        speed = n / step
        bottleneck = term if exposed > compute else "compute"
        notes = [
            f"{strategy}: slowest link {link:g} Gbit/s, communication {total * 1e3:.3g} ms "
            f"per step of which {exposed * 1e3:.3g} ms is not hidden by backward",
        ]
        breakdown = {
            "compute_s": compute,
            f"{term}_s": total,
            "exposed_comm_s": exposed,
            "step_time_s": step,
        }
        return self._estimate(speed, bottleneck, breakdown, notes, validated=False)

    @staticmethod
    def _shards_needed(ok: Any, start: int) -> int | None:
        """The fewest shards from ``start`` that ``ok``; None: none up to the search's cap."""
        for k in range(start, _MAX_SHARDS_SEARCHED + 1):
            if ok(k):
                return k
        return None

    def _estimate(
        self,
        speed: float,
        bottleneck: str,
        breakdown: dict[str, float],
        notes: list[str],
        *,
        validated: bool,
    ) -> Estimate:
        lo_q, hi_q = self.log_residual_q10_, self.log_residual_q90_
        source = "fitted"
        if not validated:
            # No measured data behind this strategy: double the PS model's error band and
            # never claim better than +-25%.
            lo_q, hi_q = min(2 * lo_q, math.log(0.75)), max(2 * hi_q, math.log(1.25))
            source = "catalog"
            notes.append("strategy not validated on measured data; interval widened")
        if self.cv_mape_pct_ is not None:
            notes.append(f"leave-one-model-out MAPE of the fit: {self.cv_mape_pct_:.1f}%")
        return Estimate(
            value=speed,
            lower=speed * math.exp(lo_q),
            upper=speed * math.exp(hi_q),
            unit="steps/s",
            bottleneck=bottleneck,
            source=source,
            breakdown=breakdown,
            notes=tuple(notes),
        )

    # ------------------------------------------------------------------ frames
    def single_worker_step_time(self, gpu: str, model: str) -> float | None:
        """The 1-worker step time seen in fit for ``gpu``/``model``, if any."""
        self._require_fitted()
        return self.single_worker_step_time_s_.get(_key(gpu, model))

    def predict_frame(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Vectorised prediction of every row; returns a new frame with ``speed_steps_per_s``,
        ``lower``, ``upper``, ``bottleneck`` and ``ps_shards_needed``.

        Reads :data:`FRAME_COLUMNS` plus optional ``ps_shards`` (1), ``strategy``
        (ps-async), ``max_tensor_bytes`` and ``step_includes_ps`` (True: the step was measured
        with 1 worker + 1 PS, CM-DARE's setup, whose PS time comes out of it; False: a bare
        one-GPU step, as an all-reduce or FSDP job's). Asynchronous-PS rows are solved
        together; other strategies row by row.
        """
        self._require_fitted()
        assert self.network_efficiency_ is not None and self.per_tensor_cost_s_ is not None
        missing = [c for c in FRAME_COLUMNS if c not in frame.columns]
        if missing:
            raise InvalidInputError(
                f"cluster frame lacks column(s) {', '.join(missing)}",
                fix=f"provide {', '.join(FRAME_COLUMNS)}",
            )
        n_rows = len(frame)
        shards = (
            frame["ps_shards"].to_numpy(dtype=np.float64)
            if "ps_shards" in frame.columns
            else np.ones(n_rows)
        )
        strategy = (
            frame["strategy"].astype(str).to_numpy()
            if "strategy" in frame.columns
            else np.full(n_rows, "ps-async")
        )
        bad = sorted({str(s) for s in strategy} - set(STRATEGIES))
        if bad:
            raise InvalidSpecError(
                "strategy", f"must be one of {', '.join(STRATEGIES)}", got=bad[0]
            )
        param_bytes = frame["param_bytes"].to_numpy(dtype=np.float64)
        largest = (
            np.nan_to_num(frame["max_tensor_bytes"].to_numpy(dtype=np.float64) / param_bytes)
            if "max_tensor_bytes" in frame.columns
            else np.zeros(n_rows)
        )
        largest = np.clip(largest, 0.0, 1.0)
        steps = frame["single_worker_step_time_s"].to_numpy(dtype=np.float64)
        workers = frame["workers"].to_numpy(dtype=np.int64)
        tensors = frame["n_tensors"].to_numpy(dtype=np.float64)
        values = [
            steps,
            workers.astype(np.float64),
            shards,
            param_bytes,
            tensors,
        ]
        if any(not np.all(np.isfinite(v) & (v > 0)) for v in values):
            raise InvalidInputError(
                "cluster frame has a non-positive or missing number",
                fix="check single_worker_step_time_s, workers, ps_shards, param_bytes, n_tensors",
            )
        speed = np.empty(n_rows)
        lower = np.empty(n_rows)
        upper = np.empty(n_rows)
        bottleneck = np.empty(n_rows, dtype=object)
        needed = shards.copy()
        capped = np.zeros(n_rows, dtype=bool)  # no count up to the cap removes the bottleneck
        is_async = strategy == "ps-async"
        if is_async.any():
            sel = is_async
            kw = {
                "network_efficiency": self.network_efficiency_,
                "per_tensor_cost_s": self.per_tensor_cost_s_,
                "single_step_s": steps[sel],
                "workers": workers[sel],
                "param_bytes": param_bytes[sel],
                "n_tensors": tensors[sel],
                "largest_fraction": largest[sel],
                "ps_network_gbps": self.ps_network_gbps,
                "worker_network_gbps": self.network_gbps,
                "rtt_s": 0.0,
                "includes_ps": True,
            }
            s, u, _, net_s, cpu_s = self._ps_async(shards=shards[sel], **kw)
            speed[sel] = s
            lower[sel] = s * math.exp(self.log_residual_q10_)
            upper[sel] = s * math.exp(self.log_residual_q90_)
            ps_bound = u >= self.bottleneck_utilization
            bottleneck[sel] = np.where(
                ps_bound, np.where(net_s >= cpu_s, "ps_network", "ps_cpu"), "compute"
            )
            need = shards[sel].copy()
            still = ps_bound.copy()
            for k in range(2, _MAX_SHARDS_SEARCHED + 1):
                trial = np.maximum(shards[sel], float(k))
                _, u_k, *_ = self._ps_async(shards=trial, **kw)
                newly = still & (trial > shards[sel]) & (u_k < self.bottleneck_utilization)
                need = np.where(newly, trial, need)
                still &= ~newly
                if not still.any():
                    break
            need = np.where(still, float(_MAX_SHARDS_SEARCHED), need)
            needed[sel] = need
            capped[sel] = still
        includes_ps = (
            frame["step_includes_ps"].to_numpy(dtype=bool)
            if "step_includes_ps" in frame.columns
            else np.ones(n_rows, dtype=bool)
        )
        for i in np.flatnonzero(~is_async):
            row = frame.iloc[i]
            mtb = row.get("max_tensor_bytes") if "max_tensor_bytes" in frame.columns else None
            est = self.predict(
                float(steps[i]),
                int(workers[i]),
                int(shards[i]),
                str(strategy[i]),
                param_bytes=float(param_bytes[i]),
                n_tensors=int(tensors[i]),
                max_tensor_bytes=None if mtb is None or pd.isna(mtb) else float(mtb),
                step_time_includes_ps=bool(includes_ps[i]),
            )
            speed[i], lower[i], upper[i] = est.value, est.lower, est.upper
            bottleneck[i] = est.bottleneck
            needed[i] = est.breakdown.get("ps_shards_needed", shards[i])
            capped[i] = bool(est.breakdown.get("ps_shards_capped", 0.0))
        return pd.DataFrame(
            {
                "speed_steps_per_s": speed,
                "lower": lower,
                "upper": upper,
                "bottleneck": bottleneck,
                "ps_shards_needed": needed.astype(np.int64),
                "ps_shards_capped": capped,
            },
            index=frame.index,
        )


class _Ctx:
    """Per-call inputs shared by the strategy helpers (internal)."""

    __slots__ = (
        "includes_ps",
        "largest",
        "n_tensors",
        "param_bytes",
        "ps_gbps",
        "rtt_s",
        "worker_gbps",
    )

    def __init__(
        self,
        *,
        param_bytes: float,
        n_tensors: float,
        largest: float,
        ps_gbps: float,
        worker_gbps: float,
        rtt_s: float,
        includes_ps: bool,
    ) -> None:
        self.param_bytes = param_bytes
        self.n_tensors = n_tensors
        self.largest = largest
        self.ps_gbps = ps_gbps
        self.worker_gbps = worker_gbps
        self.rtt_s = rtt_s
        self.includes_ps = includes_ps


def _measured_latency_s(net_s: Any, cpu_s: Any, worker_s: Any) -> FloatArray:
    """PS time inside a step measured with 1 worker + 1 PS: one pull and one push."""
    push, pull = comm.shard_demands_s(net_s, cpu_s, 1.0, 0.0)
    return comm.ps_step_latency_s(push, pull, worker_s)


def _think_time(single_step_s: FloatArray, demand_s: Any, includes_ps: bool) -> FloatArray:
    """Compute time of a worker: its single-worker step time less its PS time (one pull and
    one push, :func:`_measured_latency_s`).

    Clamped at 5% of the step time: a PS demand larger than the measured step means the
    PS parameters do not fit this model, and the clamp keeps the queueing model defined.
    """
    if not includes_ps:
        return np.asarray(single_step_s, dtype=np.float64)
    return np.asarray(np.maximum(single_step_s - demand_s, 0.05 * single_step_s), dtype=np.float64)


def _as_step_times(single: float | Sequence[float], workers: int | None) -> FloatArray:
    if isinstance(single, (int, float)):
        if workers is None:
            raise InvalidSpecError("workers", "is required with one single-worker step time")
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise InvalidSpecError("workers", "must be an integer >= 1", got=workers)
        _check_positive("single_worker_step_time_s", float(single))
        return np.full(workers, float(single))
    steps = np.asarray(list(single), dtype=np.float64)
    if steps.size == 0:
        raise InvalidSpecError("single_worker_step_time_s", "must name at least one worker")
    if workers is not None and workers != steps.size:
        raise InvalidSpecError(
            "workers",
            f"must equal the number of per-worker step times ({steps.size})",
            got=workers,
        )
    for v in steps:
        _check_positive("single_worker_step_time_s", float(v))
    return steps


def _shards_note(needed: int | None, shards: int) -> str:
    if needed is None:
        return f"even {_MAX_SHARDS_SEARCHED} PS shards leave the PS the bottleneck"
    return f"{needed} PS shards ({needed - shards} more) remove the PS bottleneck"


def _key(gpu: str, model: str) -> str:
    return f"{gpu.strip().lower()}|{_norm(model)}"


def _norm(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def _summarise_for_fit(data: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in FIT_COLUMNS if c not in data.columns]
    if missing:
        raise InvalidInputError(
            f"cluster fit data lacks column(s) {', '.join(missing)}",
            fix=f"provide {', '.join(FIT_COLUMNS)} (see gpucast.store.datasets.cmdare_cluster)",
        )
    frame = data.copy()
    if "ps_shards" not in frame.columns:
        frame["ps_shards"] = 1
    for col in ("workers", "speed_steps_per_s", "n_parameters", "n_tensors", "ps_shards"):
        values = pd.to_numeric(frame[col], errors="coerce")
        if not (values.notna() & (values > 0)).all():
            raise InvalidInputError(
                f"cluster fit data: column {col} has a missing or non-positive value",
                fix="drop or repair those rows",
            )
        frame[col] = values
    keys = ["gpu", "model", "workers", "ps_shards"]
    agg: dict[str, Any] = {
        "speed_steps_per_s": "median",
        "n_parameters": "first",
        "n_tensors": "first",
    }
    if "single_worker_step_time_s" in frame.columns:
        agg["single_worker_step_time_s"] = "median"
    runs = frame.groupby(keys, as_index=False).agg(agg)
    if (
        "single_worker_step_time_s" not in runs.columns
        or runs["single_worker_step_time_s"].isna().any()
    ):
        ones = runs[(runs["workers"] == 1) & (runs["ps_shards"] == 1)]
        base = {
            (g, m): 1.0 / s
            for g, m, s in zip(ones["gpu"], ones["model"], ones["speed_steps_per_s"], strict=True)
        }
        derived = [
            base.get((g, m), np.nan) for g, m in zip(runs["gpu"], runs["model"], strict=True)
        ]
        if "single_worker_step_time_s" in runs.columns:
            runs["single_worker_step_time_s"] = runs["single_worker_step_time_s"].fillna(
                pd.Series(derived, index=runs.index)
            )
        else:
            runs["single_worker_step_time_s"] = derived
        lacking = runs.loc[runs["single_worker_step_time_s"].isna(), ["gpu", "model"]]
        if not lacking.empty:
            g, m = lacking.iloc[0]
            raise InvalidInputError(
                f"cluster fit data: no 1-worker run or single_worker_step_time_s for {g}/{m}",
                fix="include the 1-worker run or a single_worker_step_time_s column",
            )
    runs["workers"] = runs["workers"].astype(np.int64)
    return runs.reset_index(drop=True)
