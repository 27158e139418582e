"""Rows of the store as frozen values."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gpucast.domain.errors import InvalidInputError
from gpucast.domain.measurement import Measurement
from gpucast.domain.program import ProgramMeasurement


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSummary:
    """One run as listed: the summary columns, without the full JSON."""

    id: int
    kind: str
    workload: str
    batch_size: int
    precision: str
    mode: str | None
    device: str | None
    created_at: datetime
    median_s: float | None
    mean_s: float | None
    p5_s: float | None
    p95_s: float | None
    ci_halfwidth_rel: float | None
    samples_per_s: float | None
    n_samples: int | None
    stop_reason: str | None
    host: str | None
    gpu_name: str | None
    gpucast_version: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "workload": self.workload,
            "batch_size": self.batch_size,
            "precision": self.precision,
            "mode": self.mode,
            "device": self.device,
            "created_at": self.created_at.isoformat(),
            "median_s": self.median_s,
            "mean_s": self.mean_s,
            "p5_s": self.p5_s,
            "p95_s": self.p95_s,
            "ci_halfwidth_rel": self.ci_halfwidth_rel,
            "samples_per_s": self.samples_per_s,
            "n_samples": self.n_samples,
            "stop_reason": self.stop_reason,
            "host": self.host,
            "gpu_name": self.gpu_name,
            "gpucast_version": self.gpucast_version,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredRun:
    """One run in full: its summary, the spec and the result as stored (plain JSON types)."""

    summary: RunSummary
    spec: dict[str, Any]
    result: dict[str, Any]

    @property
    def id(self) -> int:
        return self.summary.id

    @property
    def kind(self) -> str:
        return self.summary.kind

    def measurement(self) -> Measurement:
        """The stored :class:`Measurement` (only for ``kind == "measurement"``)."""
        if self.kind != "measurement":
            raise InvalidInputError(
                f"run {self.id} is a {self.kind}, not a measurement",
                fix="pick a run listed by `gpucast runs list --kind measurement`",
            )
        return Measurement.from_dict(self.result)

    def program(self) -> ProgramMeasurement:
        """The stored :class:`ProgramMeasurement` (only for ``kind == "program"``)."""
        if self.kind != "program":
            raise InvalidInputError(
                f"run {self.id} is a {self.kind}, not a program run",
                fix="pick a run listed by `gpucast runs list --kind program`",
            )
        return ProgramMeasurement.from_dict(self.result)

    def to_dict(self) -> dict[str, Any]:
        return {**self.summary.to_dict(), "spec": self.spec, "result": self.result}
