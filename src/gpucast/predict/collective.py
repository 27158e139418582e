"""Gradient all-reduce as measured networks run it: achieved bandwidth, a fixed cost, overlap.

:func:`gpucast.predict.comm.hierarchical_collective_s` prices a collective at the links'
nominal bandwidths (NVLink/PCIe inside a node, then a ring or tree over the node NICs). What a
job sees differs by network:

* **RDMA** fabrics (InfiniBand, RoCE, AWS EFA, the NVSwitch/NVLink of DGX-class nodes): NCCL
  reaches close to nominal bandwidth. The defaults (:data:`RDMA`: nominal bandwidth, 25 us per
  hop, 70% of the collective hidden under backward) are what the MLPerf Training v4.0
  scaling check validates (``benchmarks/steptime_accuracy.py`` section 3: ResNet-50 from 4 to
  3,584 H100s without a trend in the error); nothing is fitted on them.
* **TCP** networks (cloud Ethernet without RDMA: a few TCP flows per peer, each capped by the
  provider; PCIe GPUs without peer-to-peer copying through host memory): fitted by
  :class:`CollectiveModel` on the Pollux traces (16 g4dn.12xlarge, 4 T4 each, 50 Gbit/s;
  every multi-GPU placement of four jobs) -- the achieved share of the NIC and of the
  intra-node bandwidth, a fixed cost per step, and the share that overlaps backward.

A collective of ``passes`` over ``bytes`` with ``k`` GPUs per node and ``m`` nodes costs
``hierarchical(bytes, intra * intra_efficiency, nic * network_efficiency) + latency_s`` (the
latency only when there is more than one GPU), and ``min(overlap * it, backward)`` of it hides.

Pure: numbers in, numbers out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Self

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.domain.parallel import COLLECTIVE_ALGORITHMS
from gpucast.predict import comm
from gpucast.predict.base import Estimator, register

if TYPE_CHECKING:  # frames only in fits and predict_frame callers
    import pandas as pd

FloatArray = npt.NDArray[np.float64]

#: Network kinds a collective is priced for.
NETWORK_KINDS: tuple[str, ...] = ("rdma", "tcp")
#: How the bytes cross the links (the domain's list: one for both models).
ALGORITHMS: tuple[str, ...] = COLLECTIVE_ALGORITHMS


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveConstants:
    """How one kind of network runs an all-reduce (see the module docstring)."""

    network_efficiency: float = 1.0
    intra_efficiency: float = 1.0
    latency_s: float = 0.0
    overlap_fraction: float = comm.DEFAULT_OVERLAP_FRACTION
    hop_latency_s: float = comm.DEFAULT_HOP_LATENCY_S
    algorithm: str = "hierarchical"
    source: str = "nominal bandwidths (validated on MLPerf v4.0 scaling, not fitted)"

    def __post_init__(self) -> None:
        for name in ("network_efficiency", "intra_efficiency"):
            v = getattr(self, name)
            if not (math.isfinite(v) and 0 < v <= 1):
                raise InvalidSpecError(name, "must be in (0, 1]", got=v)
        if not (math.isfinite(self.overlap_fraction) and 0 <= self.overlap_fraction <= 1):
            raise InvalidSpecError(
                "overlap_fraction", "must be in [0, 1]", got=self.overlap_fraction
            )
        for name in ("latency_s", "hop_latency_s"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise InvalidSpecError(name, "must be >= 0", got=v)
        if self.algorithm not in ALGORITHMS:
            raise InvalidSpecError(
                "algorithm", f"must be one of {', '.join(ALGORITHMS)}", got=self.algorithm
            )

    def node_network(self, nic_gbps: float, *, rdma: bool) -> tuple[float, str]:
        """The node network a 3D-parallel step reaches over ``nic_gbps`` of NICs, and the
        collective's algorithm, where ``self`` are the TCP constants: an RDMA fabric
        (InfiniBand, RoCE, EFA, Slingshot) at its nominal links, reduced hierarchically; TCP at
        this share of the NIC with this algorithm. One rule for ``plan llm-train``'s offers and
        clusters and ``predict llm-train --cluster``."""
        if rdma:
            return nic_gbps, "hierarchical"
        return nic_gbps * self.network_efficiency, self.algorithm

    def total_s(
        self,
        data_bytes: npt.ArrayLike,
        workers: npt.ArrayLike,
        gpus_per_node: npt.ArrayLike,
        intra_node_gbps: npt.ArrayLike,
        node_network_gbps: npt.ArrayLike,
        *,
        passes: npt.ArrayLike = 2.0,
    ) -> FloatArray:
        """Seconds of the whole collective (vectorised)."""
        base = comm.collective_function(self.algorithm)(
            data_bytes,
            workers,
            gpus_per_node,
            np.asarray(intra_node_gbps, dtype=np.float64) * self.intra_efficiency,
            np.asarray(node_network_gbps, dtype=np.float64) * self.network_efficiency,
            self.hop_latency_s,
            passes=passes,
        )
        many = np.asarray(workers, dtype=np.float64) > 1
        return np.asarray(base + np.where(many, self.latency_s, 0.0), dtype=np.float64)

    def exposed_s(self, total_s: npt.ArrayLike, compute_s: npt.ArrayLike) -> FloatArray:
        """The part of a collective left on the critical path (vectorised)."""
        total = np.asarray(total_s, dtype=np.float64)
        hidden = np.minimum(
            self.overlap_fraction * total,
            comm.DEFAULT_BACKWARD_FRACTION * np.asarray(compute_s, dtype=np.float64),
        )
        return np.asarray(total - hidden, dtype=np.float64)

    def to_dict(self) -> dict[str, Any]:
        return {
            "network_efficiency": self.network_efficiency,
            "intra_efficiency": self.intra_efficiency,
            "latency_s": self.latency_s,
            "overlap_fraction": self.overlap_fraction,
            "hop_latency_s": self.hop_latency_s,
            "algorithm": self.algorithm,
            "source": self.source,
        }


#: RDMA-class networks: nominal bandwidth (module docstring).
RDMA = CollectiveConstants()
#: TCP networks as the shipped fit on the Pollux traces found them (``gpucast fit steptime``
#: refits them; see :class:`CollectiveModel`). Used where no fitted model is at hand.
TCP_DEFAULT = CollectiveConstants(
    network_efficiency=0.143,
    intra_efficiency=1.0,
    latency_s=4.8e-3,
    overlap_fraction=0.0,
    algorithm="flat_ring",
    source="fitted on the Pollux traces (16 x g4dn.12xlarge, T4, 50 Gbit/s TCP; leave one "
    "placement out 9.7%)",
)

#: Columns :meth:`CollectiveModel.fit` reads (one row per multi-GPU step).
COLUMNS: tuple[str, ...] = (
    "gradient_bytes", "gpus", "gpus_per_node", "intra_node_gbps", "network_gbps",
    "compute_s", "step_time_s",
)  # fmt: skip


def _check(frame: pd.DataFrame, *, target: bool) -> None:
    need = COLUMNS if target else COLUMNS[:-1]
    missing = [c for c in need if c not in frame.columns]
    if missing:
        raise InvalidInputError(
            f"collective frame lacks column(s) {', '.join(missing)}",
            fix="give gradient bytes, GPUs, GPUs per node, bandwidths and compute per row",
        )
    if not len(frame):
        raise InvalidInputError("collective frame has no rows", fix="give multi-GPU steps")
    for c in need:
        v = frame[c].to_numpy(dtype=np.float64)
        if not np.all(np.isfinite(v)) or np.any(v < 0):
            raise InvalidSpecError(c, "must be finite and >= 0 in every row")


@register
class CollectiveModel(Estimator):
    """Fits :class:`CollectiveConstants` to measured multi-GPU steps: ``step = compute +
    exposed collective``, least squares on log step time."""

    kind: ClassVar[str] = "collective"
    schema_version: ClassVar[int] = 1

    def __init__(
        self, *, hop_latency_s: float = comm.DEFAULT_HOP_LATENCY_S, algorithm: str = "flat_ring"
    ) -> None:
        self.hop_latency_s = hop_latency_s
        self.algorithm = algorithm
        self.constants_: CollectiveConstants | None = None
        self.train_mape_pct_: float | None = None

    @property
    def is_fitted(self) -> bool:
        return self.constants_ is not None

    def fit(self, frame: pd.DataFrame, *, fitted_on: str = "") -> Self:
        from scipy.optimize import least_squares

        _check(frame, target=True)
        target = np.log(frame["step_time_s"].to_numpy(dtype=np.float64))

        def constants(theta: FloatArray) -> CollectiveConstants:
            ne, ie, lat, ov = np.exp(theta)
            return CollectiveConstants(
                network_efficiency=float(min(ne, 1.0)),
                intra_efficiency=float(min(ie, 1.0)),
                latency_s=float(lat),
                overlap_fraction=float(min(ov, 1.0)),
                hop_latency_s=self.hop_latency_s,
                algorithm=self.algorithm,
                source=fitted_on,
            )

        def residuals(theta: FloatArray) -> FloatArray:
            return np.asarray(np.log(_predict(constants(theta), frame)) - target)

        lo = np.log([1e-3, 1e-3, 1e-7, 1e-3])
        hi = np.log([1.0, 1.0, 1.0, 1.0])
        x0 = np.log([0.5, 0.5, 1e-3, 0.5])
        solution = least_squares(residuals, x0, bounds=(lo, hi))
        self.constants_ = constants(solution.x)
        predicted = _predict(self.constants_, frame)
        actual = frame["step_time_s"].to_numpy(dtype=np.float64)
        self.train_mape_pct_ = float(100.0 * np.mean(np.abs(predicted / actual - 1.0)))
        return self

    def predict(self, frame: pd.DataFrame) -> FloatArray:
        """Step time (s) per row: compute plus the exposed collective."""
        self._require_fitted()
        assert self.constants_ is not None
        _check(frame, target=False)
        return _predict(self.constants_, frame)

    @property
    def constants(self) -> CollectiveConstants:
        self._require_fitted()
        assert self.constants_ is not None
        return self.constants_

    def _state(self) -> dict[str, Any]:
        return {
            "hop_latency_s": self.hop_latency_s,
            "algorithm": self.algorithm,
            "constants": self.constants.to_dict(),
            "train_mape_pct": self.train_mape_pct_,
        }

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> Self:
        try:
            c = dict(state["constants"])
            # states written before the flat ring were fitted with the hierarchical one
            algorithm = str(c.get("algorithm", "hierarchical"))
            model = cls(hop_latency_s=float(state["hop_latency_s"]), algorithm=algorithm)
            model.constants_ = CollectiveConstants(
                network_efficiency=float(c["network_efficiency"]),
                intra_efficiency=float(c["intra_efficiency"]),
                latency_s=float(c["latency_s"]),
                overlap_fraction=float(c["overlap_fraction"]),
                hop_latency_s=float(c["hop_latency_s"]),
                algorithm=algorithm,
                source=str(c.get("source", "")),
            )
            mape = state.get("train_mape_pct")
            model.train_mape_pct_ = None if mape is None else float(mape)
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(
                f"collective model state is malformed ({exc})", fix="refit it"
            ) from None
        return model


def _predict(c: CollectiveConstants, frame: pd.DataFrame) -> FloatArray:
    compute = frame["compute_s"].to_numpy(dtype=np.float64)
    total = c.total_s(
        frame["gradient_bytes"].to_numpy(dtype=np.float64),
        frame["gpus"].to_numpy(dtype=np.float64),
        frame["gpus_per_node"].to_numpy(dtype=np.float64),
        frame["intra_node_gbps"].to_numpy(dtype=np.float64),
        frame["network_gbps"].to_numpy(dtype=np.float64),
    )
    return np.asarray(compute + c.exposed_s(total, compute), dtype=np.float64)
