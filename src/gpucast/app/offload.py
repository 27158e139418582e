"""``gpucast.measure_optimizer``: the CPU optimizer step ZeRO-Offload runs, timed here (issue #16).

``measure optimizer`` times ``torch.optim.AdamW.step()`` on this machine's CPU for each
``--sizes`` parameter count (in ``--tensors`` tensors; :mod:`gpucast.measure.optimizer`),
stores each size (``runs list --kind optimizer``) and, from three sizes or more, fits
:class:`gpucast.predict.offload.CpuAdamModel` (streamed bytes / bandwidth + a cost per tensor
+ a fixed cost) on them. :func:`gpucast.inputs.offload.cpu_adam` fits the same model on every
stored size: what the offload model (``plan train`` when nothing fits in GPU memory) uses.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._request import resolve
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.options import documented, option

if TYPE_CHECKING:
    from gpucast.domain.offload import OptimizerStepMeasurement
    from gpucast.predict.offload import CpuAdamModel

#: the largest size one measurement may ask for (4e9 parameters = 64 GB of AdamW state)
MAX_PARAMS = 4_000_000_000
#: tensors per parameter when --tensors is not given: one per 2M parameters (a transformer's
#: weight matrices and norms average ~1-3M parameters per tensor at 100M-1B parameters)
DEFAULT_PARAMS_PER_TENSOR = 2_000_000


def _counts(value: Any) -> tuple[int, ...]:
    raw = [value] if isinstance(value, str) else list(value)
    items = [
        part for item in raw for part in (item.split(",") if isinstance(item, str) else [item])
    ]
    out: list[int] = []
    for item in items:
        text = str(item).strip()
        if not text:
            continue
        try:
            number = float(text)
        except ValueError:
            raise InvalidSpecError(
                "sizes", "must be parameter counts", got=item, fix="e.g. --sizes 1e6,1e7,5e7"
            ) from None
        if not math.isfinite(number) or number != int(number):
            raise InvalidSpecError(
                "sizes", "must be whole numbers", got=item, fix="e.g. --sizes 1e6,1e7,5e7"
            )
        out.append(int(number))
    return tuple(out)


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class MeasureOptimizerRequest:
    """CPU AdamW steps to time here (``gpucast measure optimizer``)."""

    VERB: ClassVar[str] = "measure optimizer"

    sizes: tuple[int, ...] = option(
        (1_000_000, 10_000_000, 50_000_000),
        help="Parameter counts to time, one measurement each.",
        example="1e6,1e7,5e7",
        parse=_counts,
    )
    tensors: tuple[int, ...] = option(
        (),
        help="Tensors per size (one value for all, or one per size; default one per 2M "
        "parameters).",
        example="10,100,200",
        parse=_counts,
    )
    implementation: str = option(
        "fused", help="AdamW implementation: fused, foreach or for-loop.", example="foreach"
    )
    threads: int | None = option(
        None, help="torch intra-op threads while timing (default: torch's).", example="1"
    )
    timer: str = option(
        "wall",
        help="wall (the wall clock) or cpu (this process's CPU time: leaves out other "
        "processes' turns on a shared machine; use with --threads 1).",
        example="cpu",
    )
    max_time_s: float = option(20.0, help="Time budget per size (s).", example="10")
    reserve_gib: float = option(
        6.0, help="Host memory to leave free (GiB); larger sizes are refused.", example="6"
    )
    save: bool = option(
        True, negative="no-save", help="Write the results to the store (--no-save: do not)."
    )

    def __post_init__(self) -> None:
        if not self.sizes:
            raise InvalidSpecError("sizes", "give at least one size", fix="e.g. --sizes 1e7")
        for size in self.sizes:
            if isinstance(size, bool) or not 1 <= size <= MAX_PARAMS:
                raise InvalidSpecError(
                    "sizes", f"must be in [1, {MAX_PARAMS:.0e}] parameters", got=size,
                    fix="e.g. --sizes 1e6,1e7,5e7",
                )  # fmt: skip
        if len(self.tensors) not in (0, 1, len(self.sizes)):
            raise InvalidSpecError(
                "tensors",
                "give one value or one per size",
                got=len(self.tensors),
                fix=f"e.g. --tensors {','.join('10' for _ in self.sizes)}",
            )
        if len(self.tensors) == 1 and self.tensors[0] > max(self.sizes):
            raise InvalidSpecError(
                "tensors", f"must be at most the largest size's {max(self.sizes):,} parameters "
                "(one tensor holds at least one)", got=self.tensors[0],
                fix=f"e.g. --tensors {max(1, min(self.sizes) // DEFAULT_PARAMS_PER_TENSOR)}",
            )  # fmt: skip
        for count, size in zip(self.tensors_per_size(), self.sizes, strict=True):
            if not 1 <= count <= size:
                raise InvalidSpecError(
                    "tensors", "must be in [1, the size's parameters]", got=count,
                    fix=f"e.g. --tensors {max(1, size // DEFAULT_PARAMS_PER_TENSOR)} for "
                    f"{size:,} parameters",
                )  # fmt: skip
        if self.implementation not in ("fused", "foreach", "for-loop"):
            raise InvalidSpecError(
                "implementation", "must be fused, foreach or for-loop", got=self.implementation,
                fix="e.g. --implementation foreach (AdamW's; the optimizer is always AdamW)",
            )  # fmt: skip
        if self.timer not in ("wall", "cpu"):
            raise InvalidSpecError(
                "timer", "must be wall or cpu (the optimizer step runs on the host)",
                got=self.timer, fix="e.g. --timer cpu --threads 1",
            )  # fmt: skip
        cores = os.cpu_count() or 1
        if self.threads is not None and (
            isinstance(self.threads, bool) or not 1 <= self.threads <= cores
        ):
            raise InvalidSpecError(
                "threads",
                f"must be an integer in [1, {cores}] (this machine's cores)",
                got=self.threads,
                fix="e.g. --threads 1",
            )
        if not (math.isfinite(self.max_time_s) and 0 < self.max_time_s <= 3600):
            raise InvalidSpecError(
                "max-time-s", "must be in (0, 3600] s", got=self.max_time_s,
                fix="e.g. --max-time-s 20",
            )  # fmt: skip
        if not (math.isfinite(self.reserve_gib) and 0 <= self.reserve_gib <= 1024):
            raise InvalidSpecError("reserve-gib", "must be in [0, 1024] GiB", got=self.reserve_gib)

    def tensors_per_size(self) -> tuple[int, ...]:
        if not self.tensors:
            return tuple(max(1, round(s / DEFAULT_PARAMS_PER_TENSOR)) for s in self.sizes)
        if len(self.tensors) == 1:
            return tuple(min(self.tensors[0], s) for s in self.sizes)
        return self.tensors


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasureOptimizerResult:
    measurements: tuple[OptimizerStepMeasurement, ...]
    run_ids: tuple[int, ...]
    model: CpuAdamModel | None  # fitted on these sizes (>= 3), else None
    db: Path | None
    #: the store whose missing folder this write created (its ``parent``), else ``None``
    new_store: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        model = None
        if self.model is not None:
            model = {
                **self.model.to_dict(),
                "bandwidth_bytes_per_s": self.model.bandwidth_gbps * 1e9,
                "predicted_s": [
                    float(self.model.predict_s(m.n_params, m.n_tensors)[()])
                    for m in self.measurements
                ],
            }
        return {
            "measurements": [m.to_dict() for m in self.measurements],
            "run_ids": list(self.run_ids),
            "model": model,
            "db": None if self.db is None else str(self.db),
        }


def measure_optimizer(
    request: MeasureOptimizerRequest | None = None,
    /,
    *,
    db: Path | str | None = None,
    **options: Any,
) -> MeasureOptimizerResult:
    """Time CPU AdamW steps at each size here, store them, fit the model (module docstring)."""
    from gpucast.inputs.offload import distinct_sizes, fit_cpu_adam
    from gpucast.measure.optimizer import measure_optimizer_step
    from gpucast.store import Store, default_db_path
    from gpucast.store.db import new_store
    from gpucast.store.optimizer import save_optimizer_step

    request = resolve(MeasureOptimizerRequest, request, options)
    db_path = Path(db) if db is not None else default_db_path()
    store = Store(db_path).open() if request.save else None  # a bad db fails before measuring
    measured: list[OptimizerStepMeasurement] = []
    ids: list[int] = []
    try:
        for size, count in zip(request.sizes, request.tensors_per_size(), strict=True):
            m = measure_optimizer_step(
                size,
                count,
                implementation=request.implementation,  # type: ignore[arg-type]
                max_time_s=request.max_time_s,
                reserve_gib=request.reserve_gib,
                threads=request.threads,
                timer=request.timer,  # type: ignore[arg-type]
            )
            measured.append(m)
            if store is not None:
                ids.append(save_optimizer_step(store, m))
    finally:
        if store is not None:
            store.close()
    distinct = distinct_sizes(measured)
    return MeasureOptimizerResult(
        measurements=tuple(measured),
        run_ids=tuple(ids),
        model=fit_cpu_adam(measured) if distinct >= 3 else None,
        db=None if store is None else db_path,
        new_store=new_store(store),
    )
