"""Campaigns as frozen values: a sweep, the points it expands to, and each point's state.

A :class:`Sweep` is the cartesian product of its axes (workloads x batch sizes x precisions x
devices x strategies x process counts x PS shards x PS modes) times ``repeats``;
:meth:`Sweep.points` expands it in a fixed order. A point's :attr:`CampaignPoint.key` names
it uniquely and stably, so a resumed campaign recognises the points it has done. Parsing the
YAML file (with line numbers for errors) lives in :mod:`gpucast.measure.campaign`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal, get_args

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.limits import MAX_SAMPLES, MAX_SWEEP_POINTS
from gpucast.domain.workload import PRECISIONS

PointStrategy = Literal["single", "ddp", "fsdp", "ps"]
POINT_STRATEGIES: tuple[str, ...] = get_args(PointStrategy)


class PointStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


def _setting_example(name: str) -> str:
    """The fix of a bad ``settings.NAME``: the key at its default (``MeasureSettings``)."""
    default = MeasureSettings.__dataclass_fields__[name].default
    return f"e.g. settings: {{{name}: {default:g}}}"


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasureSettings:
    """How each point is measured.

    Single-process points use the adaptive harness (``target_ci``, ``max_time_s``,
    ``min_samples``); distributed points run ``warmup_steps`` then ``steps`` fixed steps.
    ``timeout_s`` bounds one point; ``gpus_per_point`` is what the Ray backend requests
    (default: 1 per process on a CUDA device, 0 on the CPU).
    """

    target_ci: float = 0.02
    max_time_s: float = 60.0
    min_samples: int = 10
    steps: int = 20
    warmup_steps: int = 5
    timeout_s: float = 1800.0
    optimizer: str = "sgd"
    gpus_per_point: float | None = None

    def __post_init__(self) -> None:
        for name in ("target_ci", "max_time_s", "timeout_s"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not (math.isfinite(value) and value > 0)
            ):  # a YAML `nan` (a string) as `.nan`: not finite, rather than "not a number"
                raise InvalidSpecError(
                    f"settings.{name}", "must be a finite number > 0", got=value,
                    fix=_setting_example(name),
                )  # fmt: skip
        if self.target_ci > 1:  # the stopping rule's range: caught here, not at each point
            raise InvalidSpecError(
                "settings.target_ci", "must be in (0, 1]", got=self.target_ci,
                fix=_setting_example("target_ci"),
            )  # fmt: skip
        for name, low in (("min_samples", 2), ("steps", 2), ("warmup_steps", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InvalidSpecError(
                    f"settings.{name}", f"must be an integer >= {low}", got=value,
                    fix=_setting_example(name),
                )  # fmt: skip
        if self.min_samples > MAX_SAMPLES:
            raise InvalidSpecError(
                "settings.min_samples",
                f"must be <= {MAX_SAMPLES:,} (the most steps one run times)",
                got=self.min_samples,
                fix=_setting_example("min_samples"),
            )
        if self.optimizer not in ("sgd", "adam"):
            raise InvalidSpecError(
                "settings.optimizer", "must be sgd or adam", got=self.optimizer,
                fix="e.g. settings: {optimizer: adam}",
            )  # fmt: skip
        if self.gpus_per_point is not None and (
            isinstance(self.gpus_per_point, bool)
            or not isinstance(self.gpus_per_point, int | float)
            or self.gpus_per_point < 0
        ):
            raise InvalidSpecError(
                "settings.gpus_per_point", "must be a number >= 0", got=self.gpus_per_point,
                fix="e.g. settings: {gpus_per_point: 1}",
            )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {
            "target_ci": self.target_ci,
            "max_time_s": self.max_time_s,
            "min_samples": self.min_samples,
            "steps": self.steps,
            "warmup_steps": self.warmup_steps,
            "timeout_s": self.timeout_s,
            "optimizer": self.optimizer,
            "gpus_per_point": self.gpus_per_point,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class CampaignPoint:
    """One measurement of a campaign. ``nproc`` is 1 for a ``single`` point; ``ps_shards`` and
    ``sync`` only matter for ``ps``; ``repeat`` counts from 0."""

    workload: str
    batch_size: int
    precision: str
    device: str
    strategy: PointStrategy
    nproc: int = 1
    ps_shards: int = 1
    sync: bool = True
    repeat: int = 0

    @property
    def key(self) -> str:
        parts = [
            self.workload,
            f"bs{self.batch_size}",
            self.precision,
            self.device,
            self.strategy,
        ]
        if self.strategy != "single":
            parts.append(f"n{self.nproc}")
        if self.strategy == "ps":
            parts += [f"shards{self.ps_shards}", "sync" if self.sync else "async"]
        parts.append(f"r{self.repeat}")
        return "/".join(parts)

    @property
    def processes(self) -> int:
        return self.nproc

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "batch_size": self.batch_size,
            "precision": self.precision,
            "device": self.device,
            "strategy": self.strategy,
            "nproc": self.nproc,
            "ps_shards": self.ps_shards,
            "sync": self.sync,
            "repeat": self.repeat,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CampaignPoint:
        return cls(
            workload=str(data["workload"]),
            batch_size=int(data["batch_size"]),
            precision=str(data["precision"]),
            device=str(data["device"]),
            strategy=data["strategy"],
            nproc=int(data.get("nproc", 1)),
            ps_shards=int(data.get("ps_shards", 1)),
            sync=bool(data.get("sync", True)),
            repeat=int(data.get("repeat", 0)),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Sweep:
    """The axes of a campaign (each non-empty) and how each point is measured."""

    name: str
    workloads: tuple[str, ...]
    batch_sizes: tuple[int, ...]
    precisions: tuple[str, ...] = ("fp32",)
    devices: tuple[str, ...] = ("auto",)
    strategies: tuple[str, ...] = ("single",)
    nprocs: tuple[int, ...] = (2,)
    ps_shards: tuple[int, ...] = (1,)
    ps_sync: tuple[bool, ...] = (True,)
    repeats: int = 1
    settings: MeasureSettings = field(default_factory=MeasureSettings)

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidSpecError("name", "must not be empty")
        for axis in (
            "workloads",
            "batch_sizes",
            "precisions",
            "devices",
            "strategies",
            "nprocs",
            "ps_shards",
            "ps_sync",
        ):
            if not getattr(self, axis):
                raise InvalidSpecError(axis, "must list at least one value")
        for axis in ("batch_sizes", "nprocs", "ps_shards"):
            for b in getattr(self, axis):
                if isinstance(b, bool) or not isinstance(b, int) or b < 1:
                    raise InvalidSpecError(
                        axis, "must be integers >= 1", got=b, fix=f"e.g. {axis}: [1, 2]"
                    )
        self._check_distributed()
        for p in self.precisions:
            if p not in PRECISIONS:
                raise InvalidSpecError("precisions", f"must be in {', '.join(PRECISIONS)}", got=p)
        for s in self.strategies:
            if s not in POINT_STRATEGIES:
                raise InvalidSpecError(
                    "strategies", f"must be in {', '.join(POINT_STRATEGIES)}", got=s
                )
        if isinstance(self.repeats, bool) or not isinstance(self.repeats, int) or self.repeats < 1:
            raise InvalidSpecError("repeats", "must be an integer >= 1", got=self.repeats)
        axes = (self.workloads, self.batch_sizes, self.precisions, self.devices,
                self.strategies, self.nprocs, self.ps_shards, self.ps_sync)  # fmt: skip
        size = self.repeats * math.prod(len(a) for a in axes)
        if size > MAX_SWEEP_POINTS:  # checked before points() expands anything
            raise InvalidSpecError(
                "repeats" if self.repeats > MAX_SWEEP_POINTS else "sweep",
                f"expands to up to {size:,} points (the axes x repeats), more than the "
                f"{MAX_SWEEP_POINTS:,} a campaign runs (each point is a real measurement)",
                got=self.repeats if self.repeats > MAX_SWEEP_POINTS else None,
                fix="lower repeats or shorten the axes; split a bigger study into campaigns",
            )

    def _check_distributed(self) -> None:
        """What ``measure train --distributed`` refuses, refused at load (QA 40 C7): a ddp or
        fsdp point of one process (``--nproc 1``: exit 2 there), and no GPU for a point on
        a CUDA device (Ray would not reserve one; points would share it and time each other).
        A ps point of too few processes is skipped, as :meth:`points` says."""
        collective = [s for s in self.strategies if s in ("ddp", "fsdp")]
        if collective and min(self.nprocs) < 2:
            raise InvalidSpecError(
                "nprocs",
                f"{collective[0]} needs at least 2 processes (as measure train --nproc)",
                got=min(self.nprocs),
                fix="e.g. nprocs: [2, 4] (strategies: [single] measures one process)",
            )
        cuda = [d for d in self.devices if d.strip().lower().startswith("cuda")]
        if cuda and self.settings.gpus_per_point == 0:
            raise InvalidSpecError(
                "settings.gpus_per_point",
                f"must be > 0 with device {cuda[0]}: a Ray task of no GPU runs a CUDA point on "
                "a GPU it did not reserve (points share it and time each other)",
                got=0,
                fix="drop it (default: 1 per process on a CUDA device, 0 on the CPU)",
            )

    def points(self) -> list[CampaignPoint]:
        """Every point, in a fixed order, without duplicates (a ``single`` point ignores the
        process and PS axes; a ``ps`` point needs more processes than shards)."""
        seen: set[str] = set()
        out: list[CampaignPoint] = []
        for repeat, w, b, p, d, s, n, k, sync in itertools.product(
            range(self.repeats),
            self.workloads,
            self.batch_sizes,
            self.precisions,
            self.devices,
            self.strategies,
            self.nprocs,
            self.ps_shards,
            self.ps_sync,
        ):
            single = s == "single"
            if s == "ps" and n <= k:
                continue
            point = CampaignPoint(
                workload=w,
                batch_size=b,
                precision=p,
                device=d,
                strategy=s,  # type: ignore[arg-type]
                nproc=1 if single else n,
                ps_shards=k if s == "ps" else 1,
                sync=sync if s == "ps" else True,
                repeat=repeat,
            )
            if point.key not in seen:
                seen.add(point.key)
                out.append(point)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "workloads": list(self.workloads),
            "batch_sizes": list(self.batch_sizes),
            "precisions": list(self.precisions),
            "devices": list(self.devices),
            "strategies": list(self.strategies),
            "nprocs": list(self.nprocs),
            "ps_shards": list(self.ps_shards),
            "ps_sync": list(self.ps_sync),
            "repeats": self.repeats,
            "settings": self.settings.to_dict(),
        }

    @property
    def fingerprint(self) -> str:
        """A short hash of the sweep (axes and settings)."""
        text = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:10]


@dataclass(frozen=True, slots=True, kw_only=True)
class PointState:
    """Where one point of a campaign stands in the store."""

    key: str
    position: int
    status: PointStatus
    error: str | None = None
    run_id: int | None = None
    attempts: int = 0
    started_at: datetime | None = None
    finished_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "status": str(self.status),
            "error": self.error,
            "run_id": self.run_id,
            "attempts": self.attempts,
            "started_at": None if self.started_at is None else self.started_at.isoformat(),
            "finished_at": None if self.finished_at is None else self.finished_at.isoformat(),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class CampaignProgress:
    """Counts for progress displays: ``done + failed + pending + running == total``."""

    total: int
    done: int
    failed: int
    running: int
    pending: int
    current: str | None = None  # the key of the point now running
    last_error: str | None = None
