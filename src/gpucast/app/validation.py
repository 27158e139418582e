"""``gpucast.validate``: leave-one-model-out cross-validation on the published CM-DARE data.

Reads the data with the importers in :mod:`gpucast.store.datasets`, runs
:func:`gpucast.predict.validation.leave_one_group_out` with each model's ``fit_predict`` and
returns MAPE per model and per GPU, the mean, and whether the target of each check is met.
(The module is not called ``validate``: ``from gpucast.app import validate`` is the verb.)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._request import resolve
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.options import documented, option
from gpucast.inputs.data import DATA_DIR_ENV

if TYPE_CHECKING:
    import pandas as pd

#: What ``--what`` may name: one model's check, or all of them.
CHECKS: tuple[str, ...] = ("speed", "cluster", "checkpoint")
WHATS: tuple[str, ...] = (*CHECKS, "all")
#: Target MAPE (%) per check, from issue 3 (speed: per GPU; no model worse than 8%).
TARGETS_PCT: Mapping[str, float] = {"speed": 3.0, "cluster": 5.0, "checkpoint": 5.0}
#: Speed: no model may be worse than this (%), besides the per-GPU target.
SPEED_WORST_MODEL_PCT = 8.0
UNITS: Mapping[str, str] = {
    "speed": "step time (s)",
    "cluster": "speed (steps/s)",
    "checkpoint": "duration (s)",
}


def _lower(value: Any) -> str:
    return str(value).strip().lower()


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class ValidateRequest:
    """Which models to cross-validate, on which data (``gpucast validate``)."""

    VERB: ClassVar[str] = "validate"

    data_dir: Path | None = option(
        None,
        help=f"Published data folder (holding cmdare/); default ${DATA_DIR_ENV}.",
        example="../shared/data",
    )
    what: str = option(
        "all",
        parse=_lower,
        help="Which model to cross-validate: speed, cluster, checkpoint or all.",
        example="speed",
    )

    def __post_init__(self) -> None:
        if self.what not in WHATS:
            raise InvalidSpecError(
                "what", f"must be one of {', '.join(WHATS)}", got=self.what, fix="e.g. --what speed"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckResult:
    """One model's cross-validation: the mean error, the worst model, and the tables."""

    name: str
    quantity: str
    cv: str
    rows: int
    mape_pct: float
    coverage: float | None
    target_mape_pct: float
    target_met: bool
    worst: Mapping[str, Any]
    per_gpu: tuple[Mapping[str, Any], ...]
    per_model: tuple[Mapping[str, Any], ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "quantity": self.quantity,
            "cv": self.cv,
            "rows": self.rows,
            "mape_pct": self.mape_pct,
            "coverage": self.coverage,
            "target_mape_pct": self.target_mape_pct,
            "target_met": self.target_met,
            "worst": dict(self.worst),
            "per_gpu": [dict(r) for r in self.per_gpu],
            "per_model": [dict(r) for r in self.per_model],
        }

    def to_frame(self) -> pd.DataFrame:
        """The per-model errors (one row per model, per GPU where the check has GPUs)."""
        import pandas as pd

        return pd.DataFrame([dict(r) for r in self.per_model])


@dataclass(frozen=True, slots=True, kw_only=True)
class ValidateResult:
    """The checks that ran, on the ``cmdare`` folder they read."""

    data_dir: Path
    checks: tuple[CheckResult, ...]

    def check(self, name: str) -> CheckResult:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "data_dir": str(self.data_dir),
            "checks": {c.name: c.to_dict() for c in self.checks},
        }

    def to_frame(self) -> pd.DataFrame:
        """The per-model errors of every check, with a ``check`` column."""
        import pandas as pd

        frames = [c.to_frame().assign(check=c.name) for c in self.checks]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def cmdare_dir(data_dir: Path | str | None) -> Path:
    """The ``cmdare`` folder: under ``data_dir`` or ``$GPUCAST_SHARED_DATA`` (the published
    data root), or that folder itself."""
    if data_dir is not None:
        given, how = Path(data_dir), "--data-dir"
    elif os.environ.get(DATA_DIR_ENV):
        given, how = Path(os.environ[DATA_DIR_ENV]), f"${DATA_DIR_ENV}"
    else:
        raise InvalidSpecError(
            "data-dir",
            f"is needed: neither --data-dir nor ${DATA_DIR_ENV} is set",
            fix=f"pass --data-dir ../shared/data or export {DATA_DIR_ENV}=../shared/data",
        )
    if not given.is_dir():
        raise InvalidSpecError(
            "data-dir",
            f"is not a folder (from {how})" if given.exists() else f"does not exist (from {how})",
            got=str(given),
            fix=f"point --data-dir or ${DATA_DIR_ENV} at the published data (../shared/data)",
        )
    for candidate in (given / "cmdare", given):
        if (candidate / "speed").is_dir() or (candidate / "checkpoint").is_dir():
            return candidate
    raise InvalidSpecError(
        "data-dir",
        f"has no cmdare/ folder with speed/, cluster_scaling/ or checkpoint/ (from {how})",
        got=str(given),
        fix=f"point --data-dir or ${DATA_DIR_ENV} at the published data (../shared/data)",
    )


def _require(path: Path, what: str) -> Path:
    if not path.exists():
        raise InvalidSpecError(
            "data-dir",
            f"lacks {path.name} needed by --what {what}",
            got=str(path),
            fix="point --data-dir at the published data (../shared/data)",
        )
    return path


# -- the three checks: (cross-validated rows, the grouping columns besides "model") ---------
def _speed(cmdare: Path) -> tuple[pd.DataFrame, list[str]]:
    from gpucast.catalog import load_catalog
    from gpucast.domain.cmdare import GPU_COL, MODEL_COL, STEP_TIME_COL
    from gpucast.predict.validation import leave_one_group_out, speed_fit_predict
    from gpucast.store.datasets.cmdare_speed import read_speed_rows

    csv = _require(cmdare / "speed" / "single_gpu_speed.csv", "speed")
    rows = read_speed_rows(csv, require_step_time=True)  # model properties imputed
    catalog = load_catalog()
    specs = {name: catalog.gpu(name) for name in sorted(rows[GPU_COL].unique())}
    cv = leave_one_group_out(speed_fit_predict(specs), rows, MODEL_COL, target_col=STEP_TIME_COL)
    cv = cv.rename(columns={GPU_COL: "gpu", MODEL_COL: "model"})
    return cv, ["gpu"]


def _cluster(cmdare: Path) -> tuple[pd.DataFrame, list[str]]:
    from gpucast.predict.validation import cluster_fit_predict, leave_one_group_out
    from gpucast.store.datasets.cmdare_cluster import cluster_fit_table

    root = _require(cmdare / "cluster_scaling", "cluster")
    runs = cluster_fit_table(root).frame
    cv = leave_one_group_out(cluster_fit_predict(), runs, "model", target_col="speed_steps_per_s")
    return cv, ["gpu"]


def _checkpoint(cmdare: Path) -> tuple[pd.DataFrame, list[str]]:
    from gpucast.predict.validation import checkpoint_fit_predict, leave_one_group_out
    from gpucast.store.datasets.cmdare_checkpoint import read_checkpoint_csv

    csv = _require(cmdare / "checkpoint" / "whole_data.csv", "checkpoint")
    rows = read_checkpoint_csv(csv).frame
    cv = leave_one_group_out(checkpoint_fit_predict(), rows, "model", target_col="duration_s")
    return cv, []


_RUN: Mapping[str, Callable[[Path], tuple[pd.DataFrame, list[str]]]] = {
    "speed": _speed,
    "cluster": _cluster,
    "checkpoint": _checkpoint,
}


def _float(value: Any) -> float | None:
    number = float(value)
    return None if number != number else number


def _records(frame: pd.DataFrame) -> tuple[dict[str, Any], ...]:
    out = []
    for rec in frame.to_dict(orient="records"):
        out.append(
            {
                str(k): (_float(v) if isinstance(v, float) else (int(v) if k == "rows" else v))
                for k, v in rec.items()
            }
        )
    return tuple(out)


#: What each check reads under ``cmdare/`` (the cache key's data files).
_READS: Mapping[str, str] = {
    "speed": "speed",
    "cluster": "cluster_scaling",
    "checkpoint": "checkpoint",
}


def _cross_validated(name: str, cmdare: Path) -> tuple[pd.DataFrame, list[str]]:
    """``_RUN[name]``'s held-out rows, through the cache: the same data files, catalog files
    and model code give the same rows (a checkpoint check refits 20 x 20 folds: ~20 s)."""
    from importlib import resources

    import pandas as pd

    from gpucast.store.cache import cached_json

    def make() -> dict[str, Any]:
        cv, extra = _RUN[name](cmdare)
        return {"cv": cv.to_dict(orient="split"), "extra": extra}

    def load(data: Any) -> dict[str, Any]:
        split = data["cv"]
        frame = pd.DataFrame(split["data"], index=split["index"], columns=split["columns"])
        return {"cv": frame, "extra": [str(e) for e in data["extra"]]}

    catalog = Path(str(resources.files("gpucast.catalog").joinpath("data")))
    out = cached_json(
        f"validate-{name}",
        lambda: load(make()),
        dump=lambda v: {"cv": v["cv"].to_dict(orient="split"), "extra": v["extra"]},
        load=load,
        files=[cmdare / _READS[name], catalog],
        code=("gpucast.predict", "gpucast.store.datasets", "gpucast.app.validation"),
    )
    return out["cv"], out["extra"]


def _check(name: str, cmdare: Path) -> CheckResult:
    from gpucast.predict.validation import error_summary

    cv, extra = _cross_validated(name, cmdare)
    per_model = error_summary(cv, [*extra, "model"])
    per_gpu = error_summary(cv, extra) if extra else None
    overall = error_summary(cv, [])
    target = TARGETS_PCT[name]
    worst = per_model.iloc[int(per_model["mape_pct"].to_numpy().argmax())]
    if name == "speed" and per_gpu is not None:
        met = bool(
            (per_gpu["mape_pct"] <= target).all()
            and per_model["mape_pct"].max() <= SPEED_WORST_MODEL_PCT
        )
    else:
        met = bool(overall["mape_pct"].iloc[0] <= target)
    return CheckResult(
        name=name,
        quantity=UNITS[name],
        cv="leave-one-model-out",
        rows=len(cv),
        mape_pct=float(overall["mape_pct"].iloc[0]),
        coverage=_float(overall["coverage"].iloc[0]),
        target_mape_pct=target,
        target_met=met,
        worst={
            **{k: str(worst[k]) for k in [*extra, "model"]},
            "mape_pct": float(worst["mape_pct"]),
        },
        per_gpu=_records(per_gpu) if per_gpu is not None else (),
        per_model=_records(per_model),
    )


def validate(request: ValidateRequest | None = None, /, **options: Any) -> ValidateResult:
    """Cross-validate the speed, cluster and checkpoint models (``what``) on the CM-DARE data
    under ``data_dir`` (default ``$GPUCAST_SHARED_DATA``): MAPE per model and per GPU."""
    request = resolve(ValidateRequest, request, options)
    cmdare = cmdare_dir(request.data_dir)
    names = CHECKS if request.what == "all" else (request.what,)
    return ValidateResult(data_dir=cmdare, checks=tuple(_check(name, cmdare) for name in names))
