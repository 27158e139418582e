"""``gpucast.fit_speed``, ``fit_cluster``, ``fit_checkpoint``: fit a performance model on
published (or your own) data and save it as versioned JSON.

* :func:`fit_speed` -- the single-GPU step-time model (:class:`~gpucast.predict.speed.
  SpeedModel`) on CM-DARE-format rows;
* :func:`fit_cluster` -- the distributed-scaling model (:class:`~gpucast.predict.cluster.
  ClusterModel`) on CM-DARE's ``cluster_scaling`` runs;
* :func:`fit_checkpoint` -- checkpoint duration (:class:`~gpucast.predict.overheads.
  CheckpointModel`) on CM-DARE's checkpoint saves.

Each returns the fitted estimator with a summary (``to_dict()`` is what ``--json`` prints);
the model file is written atomically (:func:`gpucast.store.models.save_model`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._request import resolve
from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.domain.options import documented, option
from gpucast.domain.units import count_of

if TYPE_CHECKING:
    import pandas as pd

    from gpucast.domain.catalog import GpuSpec
    from gpucast.predict.cluster import ClusterModel
    from gpucast.predict.overheads import CheckpointModel
    from gpucast.predict.speed import SpeedModel

#: Fewest usable checkpoint saves a checkpoint fit takes.
MIN_CHECKPOINT_ROWS = 3


# -- shared by the fit and predict verbs ----------------------------------------------------
def require_file(path: Path, field_name: str) -> Path:
    """``path`` when it is a file, else an error naming the option."""
    from gpucast.store.files import input_file

    return input_file(path, field_name, fix=f"check the --{field_name} path")


def catalog_specs(names: Iterable[str]) -> dict[str, GpuSpec]:
    """Catalog entries for the GPU names the catalog knows (others are left out: the speed
    model predicts them from their rows' ``GPU TFLOPS``, or says it cannot)."""
    from gpucast.catalog import load_catalog
    from gpucast.domain.errors import UnknownGpuError

    catalog = load_catalog()
    specs: dict[str, GpuSpec] = {}
    for name in names:
        try:
            specs[name] = catalog.gpu(name)
        except UnknownGpuError:
            continue
    return specs


# -- fit speed ------------------------------------------------------------------------------
@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class FitSpeedRequest:
    """Rows to fit the single-GPU step-time model on (``gpucast fit speed``)."""

    VERB: ClassVar[str] = "fit speed"

    data: tuple[Path, ...] = option(
        help="CSV in the CM-DARE column format (one or more files).",
        example="single_gpu_speed.csv",
    )
    out: Path = option(help="Where to write the fitted model (JSON).", example="speed.json")

    def __post_init__(self) -> None:
        if not self.data:
            raise InvalidSpecError(
                "data", "needs at least one file", fix="e.g. --data single_gpu_speed.csv"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class FitSpeedResult:
    """The fitted speed model, where it was saved, and its per-GPU coefficients."""

    model_file: Path
    rows: int
    models: int
    #: per GPU: fixed_s, per_tensor_s, compute_s_per_flop, interval_rel (log bounds)
    gpus: Mapping[str, Mapping[str, Any]]
    model: SpeedModel = field(compare=False, repr=False)
    #: what the fit cannot vouch for (too few rows or models per GPU)
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_file": str(self.model_file),
            "rows": self.rows,
            "models": self.models,
            "gpus": {name: dict(values) for name, values in self.gpus.items()},
            "warnings": list(self.warnings),
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per fitted GPU: its coefficients and relative interval."""
        import pandas as pd

        return pd.DataFrame(
            [
                {
                    "gpu": name,
                    "fixed_s": g["fixed_s"],
                    "per_tensor_s": g["per_tensor_s"],
                    "compute_s_per_flop": g["compute_s_per_flop"],
                    "interval_low_log": g["interval_rel"][0],
                    "interval_high_log": g["interval_rel"][1],
                }
                for name, g in self.gpus.items()
            ]
        )


def fit_speed(request: FitSpeedRequest | None = None, /, **options: Any) -> FitSpeedResult:
    """Fit :class:`~gpucast.predict.speed.SpeedModel` on CM-DARE-format rows and save it.

    ``data`` is one or more CSV files with ``GPU (temp)``, ``Model FLOPs``, ``Number of
    Parameters``, ``Number of Tensors`` and ``Step Time (s)``; ``out`` the model JSON.
    """
    from gpucast.domain.cmdare import GPU_COL
    from gpucast.predict.speed import SpeedModel
    from gpucast.store.datasets.cmdare_speed import read_speed_files
    from gpucast.store.models import save_model

    request = resolve(FitSpeedRequest, request, options)
    paths = [require_file(p, "data") for p in request.data]
    rows = read_speed_files(paths, require_step_time=True)
    names = sorted(set(rows[GPU_COL].astype(str)))
    model = SpeedModel().fit(rows, catalog_specs(names))
    save_model(model, request.out)
    state = model.to_dict()["state"]
    gpus = {
        str(g["name"]): {
            "fixed_s": g["fixed_s"],
            "per_tensor_s": g["per_tensor_s"],
            "compute_s_per_flop": g["compute_s_per_flop"],
            "interval_rel": [g["log_q"][0], g["log_q"][1]],
        }
        for g in state["gpus"].values()
    }
    return FitSpeedResult(
        model_file=request.out,
        rows=len(rows),
        models=len(state["models"]),
        gpus=gpus,
        model=model,
        warnings=_speed_fit_warnings(state["gpus"].values()),
    )


#: Models (workloads) per GPU below which a speed fit is not determined: three coefficients
#: per GPU (fixed, per tensor, per FLOP), and leave-one-model-out needs one more to hold out.
MIN_SPEED_MODELS = 4


def _speed_fit_warnings(gpus: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    out = []
    for g in gpus:
        n_rows, n_models = int(g.get("n_rows", 0)), int(g.get("n_models", 0))
        if n_models < MIN_SPEED_MODELS:
            out.append(
                f"{g['name']}: fitted on {count_of(n_rows, 'row')} of "
                f"{count_of(n_models, 'model')}; its three "
                "coefficients (fixed, per tensor, per FLOP) and its leave-one-model-out "
                f"interval need rows of at least {MIN_SPEED_MODELS} models: treat its "
                "predictions as unvalidated"
            )
    return tuple(out)


# -- fit cluster ----------------------------------------------------------------------------
@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class FitClusterRequest:
    """CM-DARE cluster runs to fit the distributed-scaling model on (``gpucast fit cluster``)."""

    VERB: ClassVar[str] = "fit cluster"

    data: Path = option(
        help="cluster_scaling folder: <GPU>/<model>_<N>workers.csv",
        example="../shared/data/cmdare/cluster_scaling",
    )
    out: Path = option(help="where to write the fitted model (JSON)", example="cluster.json")
    features: Path | None = option(
        None,
        help="single_gpu_speed.csv with model features (default: ../speed/ beside --data)",
        example="single_gpu_speed.csv",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class FitClusterResult:
    """The fitted cluster model, its constants and its leave-one-model-out error."""

    model_file: Path
    runs: int
    models: int
    ps_network_efficiency: float | None
    per_tensor_cost_s: float | None
    lomo_mape_pct: float | None
    skipped: tuple[str, ...]
    model: ClusterModel = field(compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_file": str(self.model_file),
            "runs": self.runs,
            "models": self.models,
            "ps_network_efficiency": self.ps_network_efficiency,
            "per_tensor_cost_s": self.per_tensor_cost_s,
            "lomo_mape_pct": self.lomo_mape_pct,
            "skipped": list(self.skipped),
        }


def fit_cluster(request: FitClusterRequest | None = None, /, **options: Any) -> FitClusterResult:
    """Fit :class:`~gpucast.predict.cluster.ClusterModel` on CM-DARE cluster runs (1 PS, N
    workers) and save it; ``features`` defaults to ``../speed/single_gpu_speed.csv``."""
    from gpucast.predict.cluster import ClusterModel
    from gpucast.store.datasets.cmdare_cluster import cluster_fit_table
    from gpucast.store.models import save_model

    request = resolve(FitClusterRequest, request, options)
    if not request.data.is_dir():
        raise InvalidSpecError(
            "data",
            "is not a folder",
            got=str(request.data),
            fix="pass the cluster_scaling folder (e.g. ../shared/data/cmdare/cluster_scaling)",
        )
    features = None if request.features is None else require_file(request.features, "features")
    table = cluster_fit_table(request.data, features)
    model = ClusterModel().fit(table.frame)
    save_model(model, request.out)
    return FitClusterResult(
        model_file=request.out,
        runs=len(table.frame),
        models=len(model.models_),
        ps_network_efficiency=model.network_efficiency_,
        per_tensor_cost_s=model.per_tensor_cost_s_,
        lomo_mape_pct=model.cv_mape_pct_,
        skipped=tuple(table.skipped),
        model=model,
    )


# -- fit checkpoint -------------------------------------------------------------------------
@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class FitCheckpointRequest:
    """CM-DARE checkpoint saves to fit checkpoint duration on (``gpucast fit checkpoint``)."""

    VERB: ClassVar[str] = "fit checkpoint"

    out: Path = option(help="where to write the fitted model (JSON)", example="checkpoint.json")
    data: Path | None = option(
        None,
        help="CM-DARE checkpoint CSV (e.g. whole_data.csv); or give --data-dir",
        example="whole_data.csv",
    )
    data_dir: Path | None = option(
        None,
        help="Published data folder: fits its cmdare/checkpoint/whole_data.csv, as `fit power` "
        "and `fit steptime` read theirs (default: $GPUCAST_SHARED_DATA)",
        example="../shared/data",
    )

    def __post_init__(self) -> None:
        if self.data is not None and self.data_dir is not None:
            raise InvalidSpecError(
                "data",
                "and --data-dir name the same input: give one",
                got=str(self.data),
                fix="drop --data to fit the published cmdare/checkpoint/whole_data.csv",
            )

    def csv_path(self) -> Path:
        """The checkpoint CSV to fit: ``data``, else the published folder's."""
        from gpucast.inputs.data import data_path, published_data_dir

        if self.data is not None:
            return require_file(self.data, "data")
        root = published_data_dir(self.data_dir, needs=("cmdare",))
        path = data_path(root, "cmdare", "checkpoint", "whole_data.csv")
        if path is None:
            raise InvalidSpecError(
                "data-dir",
                "must hold cmdare/checkpoint/whole_data.csv (CM-DARE's checkpoint saves)",
                got=None if root is None else str(root),
                fix="pass --data-dir ../shared/data, or --data FILE.csv",
            )
        return path


@dataclass(frozen=True, slots=True, kw_only=True)
class FitCheckpointResult:
    """The fitted checkpoint model and its leave-one-model-out error."""

    model_file: Path
    rows: int
    lomo_mape_pct: float | None
    skipped: tuple[str, ...]
    model: CheckpointModel = field(compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_file": str(self.model_file),
            "rows": self.rows,
            "lomo_mape_pct": self.lomo_mape_pct,
            "skipped": list(self.skipped),
        }


def fit_checkpoint(
    request: FitCheckpointRequest | None = None, /, **options: Any
) -> FitCheckpointResult:
    """Fit :class:`~gpucast.predict.overheads.CheckpointModel` (duration from checkpoint size,
    and ``.index`` size when present) and save it."""
    from gpucast.predict.overheads import CheckpointModel
    from gpucast.store.datasets.cmdare_checkpoint import read_checkpoint_csv
    from gpucast.store.models import save_model

    request = resolve(FitCheckpointRequest, request, options)
    path = request.csv_path()
    table = read_checkpoint_csv(path)
    if len(table.frame) < MIN_CHECKPOINT_ROWS:
        raise DataFormatError(
            str(path),
            f"has fewer than {MIN_CHECKPOINT_ROWS} usable rows",
            fix="check the file",
        )
    model = CheckpointModel().fit(table.frame)
    save_model(model, request.out)
    return FitCheckpointResult(
        model_file=request.out,
        rows=len(table.frame),
        lomo_mape_pct=model.cv_mape_pct_,
        skipped=tuple(table.skipped),
        model=model,
    )
