"""`gpucast plan train`: the cheapest (or fastest) cluster for a training job, explained.

A thin shell over :func:`gpucast.plan.train.plan_training`: it merges a YAML config with the
flags (flags win; an unknown YAML key is an error naming it), profiles the workload (cached
per workload/precision/version by :mod:`gpucast.store.cache`, as are the fits), finds the
published data for lifetimes / start-up / restart when it is at hand (else documented
defaults), calibrates the roofline with a stored measurement when there is one, and prints
a Rich table, JSON, an HTML report and/or a saved plan. ``app`` is the ``plan`` group;
``plan serve`` is added to it by another module.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from gpucast import __version__
from gpucast.cli._common import console, emit_json, published_data_dir, state, working
from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.domain.plan import OBJECTIVES, ModelInfo, TrainPlan, TrainRequest
from gpucast.domain.units import parse_duration_s

app = typer.Typer(no_args_is_help=True, help="Plan training (and serving) clusters.")

#: Keys a plan YAML file may hold (the flags' long names, dashes or underscores).
CONFIG_KEYS: tuple[str, ...] = (
    "workload",
    "precision",
    "epochs",
    "dataset_size",
    "steps",
    "reference_batch",
    "deadline",
    "budget",
    "provider",
    "region",
    "gpu",
    "exclude_gpu",
    "spot",
    "max_gpus",
    "min_p_meet",
    "batch_size",
    "global_batch",
    "batch_sizes",
    "allow_mixed",
    "objective",
    "critical_batch",
    "strategy",
    "max_ps_shards",
    "runs",
    "max_simulated",
    "seed",
    "interruption_band",
    "data_dir",
    "profile",
)
DEFAULT_DEADLINE = "24h"
DEFAULT_BAND = "5-10%"
#: Per-worker batch the workload is profiled at (FLOPs and bytes are scaled from it).
PROFILE_BATCH = 16


def _write_text_atomic(path: Path, text: str) -> None:
    """:func:`gpucast.store.files.write_text_atomic`, imported on use (the store is heavy)."""
    from gpucast.store.files import write_text_atomic as write

    write(path, text)


# -- config -----------------------------------------------------------------------------------
def load_config(path: Path) -> dict[str, Any]:
    """A plan YAML file as a dict with underscore keys; unknown keys are errors."""
    import yaml

    if not path.is_file():
        raise InvalidSpecError("config", "file not found", got=str(path), fix="check the path")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise DataFormatError(
            str(path),
            f"not valid YAML ({getattr(exc, 'problem', exc)})",
            line=None if mark is None else mark.line + 1,
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise DataFormatError(str(path), "must be a mapping of option: value")
    out: dict[str, Any] = {}
    for key, value in data.items():
        norm = str(key).strip().replace("-", "_")
        if norm not in CONFIG_KEYS:
            import difflib

            close = difflib.get_close_matches(norm, CONFIG_KEYS, n=1)
            raise DataFormatError(
                str(path),
                f"unknown key {key!r}",
                fix=f"did you mean {close[0]!r}?" if close else f"known: {', '.join(CONFIG_KEYS)}",
            )
        out[norm] = value
    return out


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    items = value if isinstance(value, list | tuple) else [value]
    out: list[str] = []
    for item in items:
        out += [p.strip() for p in str(item).split(",") if p.strip()]
    return out


def _merge(flags: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    merged = dict(config)
    for key, value in flags.items():
        if value is None or (isinstance(value, list) and not value):
            continue
        merged[key] = value
    return merged


def _number(opts: dict[str, Any], key: str, kind: type) -> Any:
    value = opts.get(key)
    if value is None:
        return None
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise InvalidSpecError(
            key.replace("_", "-"), f"must be a {kind.__name__}", got=value
        ) from None


def _duration(value: Any, field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip().lower()
    if text in ("none", "no", "off"):
        return None
    return parse_duration_s(text, field=field)


def build_request(opts: dict[str, Any]) -> TrainRequest:
    """The merged options as a validated :class:`TrainRequest`, with family defaults."""
    from gpucast.plan.efficiency import workload_family

    workload = opts.get("workload")
    if not workload:
        raise InvalidSpecError("workload", "is required", fix="e.g. --workload resnet50")
    fam = workload_family(str(workload))
    epochs = _number(opts, "epochs", float)
    steps = _number(opts, "steps", int)
    dataset = _number(opts, "dataset_size", int)
    if epochs is None and steps is None:
        epochs = fam.default_epochs
        if epochs is None:
            raise InvalidSpecError(
                "epochs", f"has no default for {workload}", fix="give --epochs N --dataset-size M"
            )
    if epochs is not None and dataset is None:
        dataset = fam.default_dataset_size
        if dataset is None:
            raise InvalidSpecError(
                "dataset-size", f"has no default for {workload}", fix="e.g. --dataset-size 1000000"
            )
    deadline_raw = opts.get("deadline", DEFAULT_DEADLINE)
    batch_sizes = opts.get("batch_sizes")
    spot = opts.get("spot")
    kwargs: dict[str, Any] = {
        "workload": str(workload),
        "precision": str(opts.get("precision") or "fp32"),
        "epochs": epochs,
        "dataset_size": dataset,
        "steps": steps,
        "reference_batch": _number(opts, "reference_batch", int),
        "deadline_s": _duration(deadline_raw, "deadline"),
        "budget_usd": _number(opts, "budget", float),
        "providers": tuple(_as_list(opts.get("provider"))),
        "regions": tuple(_as_list(opts.get("region"))),
        "gpus": tuple(_as_list(opts.get("gpu"))),
        "exclude_gpus": tuple(_as_list(opts.get("exclude_gpu"))),
        "allow_spot": True if spot is None else bool(spot),
        "max_gpus": _number(opts, "max_gpus", int) or 64,
        "min_p_meet": 0.9 if opts.get("min_p_meet") is None else _number(opts, "min_p_meet", float),
        "batch_size": _number(opts, "batch_size", int),
        "global_batch": _number(opts, "global_batch", int),
        "allow_mixed": bool(opts.get("allow_mixed") or False),
        "objective": str(opts.get("objective") or "cheapest"),
        "critical_batch": _number(opts, "critical_batch", float),
        "max_ps_shards": _number(opts, "max_ps_shards", int) or 4,
        "mc_runs": _number(opts, "runs", int) or 1000,
        "max_simulated": _number(opts, "max_simulated", int) or 12,
        "seed": _number(opts, "seed", int) or 0,
    }
    if batch_sizes is not None:
        kwargs["batch_sizes"] = tuple(int(b) for b in _as_list(batch_sizes))
    strategies = _as_list(opts.get("strategy"))
    if strategies:
        kwargs["strategies"] = tuple(s.lower() for s in strategies)
    return TrainRequest(**kwargs)


# -- inputs ---------------------------------------------------------------------------------
def _torch_version() -> str:
    """The installed torch's version without importing torch (a second) on a cache hit."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return "none"


def workload_profile(workload: str, precision: str, profile_file: Path | None) -> Any:
    """The workload's profile: from ``--profile FILE``, the cache, or the profiler."""
    from gpucast.domain.profile import WorkloadProfile

    if profile_file is not None:
        try:
            data = json.loads(Path(profile_file).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise DataFormatError(str(profile_file), f"cannot read a profile ({exc})") from None
        return WorkloadProfile.from_dict(data)
    from gpucast.store.cache import cached_json

    def make() -> WorkloadProfile:
        from gpucast.domain.workload import WorkloadSpec
        from gpucast.profile import profile_workload

        spec = WorkloadSpec(name=workload, batch_size=PROFILE_BATCH, precision=precision)  # type: ignore[arg-type]
        return profile_workload(spec)

    if ":" in workload:  # a user model's code is not gpucast's: profile it every time
        return make()
    return cached_json(
        "profile",
        make,
        dump=WorkloadProfile.to_dict,
        load=WorkloadProfile.from_dict,
        params={
            "workload": workload,
            "precision": precision,
            "batch_size": PROFILE_BATCH,
            "torch": _torch_version(),
        },
        code=("gpucast.profile", "gpucast.workloads"),
    )


def _data_dir(given: Path | None) -> Path | None:
    return published_data_dir(given)


class _Lifetimes:
    """Node lifetimes: fitted on the published lifetime data where it covers the GPU (fitted
    lazily, on the first spot plan), else the AWS Spot Advisor band (constant hazard)."""

    def __init__(self, data_dir: Path | None, band: str, catalog: Any) -> None:
        from gpucast.predict.revocation import hazard_from_interruption_band

        self.fallback = hazard_from_interruption_band(band)
        self.data_dir = data_dir
        self.catalog = catalog
        self.model: Any = None
        self.fitted_on = "not used"
        self._tried = False

    def _fit(self) -> None:
        self._tried = True
        path = None if self.data_dir is None else self.data_dir / "transient" / "lifetime"
        csv = None if path is None else path / "lifetime.csv"
        if csv is None or not csv.is_file():
            return
        try:
            from gpucast.cli._simulate_inputs import fitted_lifetime_model

            self.model, facts = fitted_lifetime_model(csv)
            self.fitted_on = f"{csv} ({facts['lifetimes']} lifetimes)"
        except Exception as exc:
            self.fitted_on = f"not fitted ({type(exc).__name__}: {exc})"

    def __call__(self, gpu: str, region: str, provider: str) -> Any:
        if not self._tried:
            self._fit()
        if self.model is not None:
            by_name = {self.catalog.gpu(g).name: g for g in self._known()}
            if gpu in by_name:
                return self.model.distribution(by_name[gpu], region, fallback=self.fallback)
        return self.fallback

    def _known(self) -> list[str]:
        from gpucast.domain.errors import UnknownGpuError

        out = []
        for g in self.model.gpus():
            try:
                self.catalog.gpu(g)
                out.append(g)
            except UnknownGpuError:
                continue
        return out


def _risk_inputs(data_dir: Path | None, band: str, catalog: Any) -> tuple[Any, _Lifetimes]:
    from gpucast.plan.inputs import RiskInputs

    lifetimes = _Lifetimes(data_dir, band, catalog)
    sources = {"lifetimes": f"fallback: {lifetimes.fallback.source}"}
    startup_spot: Any = 120.0
    startup_od: Any = 120.0
    startup_mean = 120.0
    sources["startup"] = "default 120 s per VM start (no cmdare/startup_time data found)"
    restart = 100.0
    sources["restart"] = "default 100 s (CM-DARE chief_rejoining median)"
    if data_dir is not None and (data_dir / "cmdare" / "startup_time").is_dir():
        from gpucast.simulate.transient import empirical_sampler
        from gpucast.store.datasets.transient import read_startup_times

        frame = read_startup_times(data_dir / "cmdare" / "startup_time")
        spot_rows = frame[frame["market"] == "spot"]["total_s"].to_numpy()
        od_rows = frame[frame["market"] == "on-demand"]["total_s"].to_numpy()
        if len(spot_rows) and len(od_rows):
            startup_spot = empirical_sampler(spot_rows)
            startup_od = empirical_sampler(od_rows)
            startup_mean = float(od_rows.mean())
            sources["startup"] = (
                f"cmdare/startup_time, all GPUs pooled ({len(spot_rows)} spot, "
                f"{len(od_rows)} on-demand launches; on-demand mean {startup_mean:.0f} s)"
            )
    if data_dir is not None and (data_dir / "cmdare" / "chief_rejoining").is_dir():
        from gpucast.predict.revocation import estimate_restart_penalty
        from gpucast.store.datasets.transient import read_chief_rejoining

        est = estimate_restart_penalty(
            read_chief_rejoining(data_dir / "cmdare" / "chief_rejoining")
        )
        restart = est.value
        sources["restart"] = f"{est.source}: median {est.value:.0f} s"
    risk = RiskInputs(
        lifetime=lifetimes,
        startup_spot_s=startup_spot,
        startup_on_demand_s=startup_od,
        startup_mean_s=startup_mean,
        restart_penalty_s=restart,
        sources=sources,
    )
    return risk, lifetimes


#: ``--workload run:ID``: a profile or measurement saved in the store.
RUN_PREFIX = "run:"


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredWorkload:
    """What ``--workload run:ID`` names: the workload, and its stored profile or measurement."""

    run_id: int
    workload: str
    precision: str
    profile: Any = None  # WorkloadProfile when the run is a profile
    measurement_run: int | None = None  # the run id when it is a training measurement


def stored_run_id(workload: str | None) -> int | None:
    """The id of ``run:ID`` (``None`` for any other workload); a bad id is an error."""
    if not workload or not str(workload).startswith(RUN_PREFIX):
        return None
    text = str(workload)[len(RUN_PREFIX) :].strip()
    if not text.isdigit() or int(text) < 1:
        raise InvalidSpecError(
            "workload",
            "run:ID needs a positive run id",
            got=workload,
            fix="see `gpucast runs list` for the ids, e.g. --workload run:12",
        )
    return int(text)


def load_stored_workload(db_path: Path, run_id: int) -> StoredWorkload:
    """Read run ``run_id`` from the store: a profile, or a training measurement."""
    from gpucast.domain.errors import InvalidInputError
    from gpucast.domain.profile import WorkloadProfile
    from gpucast.store.db import Store

    if not Path(db_path).exists():
        raise InvalidInputError(
            f"--workload run:{run_id}: no store at {db_path}",
            fix="pass --db PATH before the verb, or save a profile with `gpucast profile`",
        )
    with Store(db_path).open(create=False) as store:
        run = store.get_run(run_id)
    summary = run.summary
    if run.kind == "profile":
        try:
            profile = WorkloadProfile.from_dict(run.result)
        except (KeyError, TypeError, ValueError) as exc:
            raise DataFormatError(
                str(db_path), f"run {run_id} holds no readable profile ({exc})"
            ) from None
        return StoredWorkload(
            run_id=run_id, workload=summary.workload, precision=summary.precision, profile=profile
        )
    if run.kind == "measurement" and summary.mode == "train" and summary.median_s is not None:
        return StoredWorkload(
            run_id=run_id,
            workload=summary.workload,
            precision=summary.precision,
            measurement_run=run_id,
        )
    raise InvalidSpecError(
        "workload",
        f"run {run_id} is a {run.kind}"
        + (f" ({summary.mode})" if summary.mode else "")
        + ", not a profile or a training measurement",
        got=f"run:{run_id}",
        fix="pick a profile (`gpucast profile`) or a `gpucast measure train` run",
    )


def _store_calibration(
    db_path: Path | None,
    workload: str,
    precision: str,
    facts: Any,
    catalog: Any,
    *,
    prefer_run: int | None = None,
) -> tuple[Any, str] | None:
    """Calibrate the roofline with a stored training measurement of the workload (any
    device): run ``prefer_run`` when given, else the newest one at this precision."""
    if db_path is None or not Path(db_path).exists():
        return None
    from gpucast.domain.errors import UnknownGpuError
    from gpucast.predict.roofline import DeviceRoofline, calibrate
    from gpucast.store.db import Store

    with Store(db_path).open(create=False) as store:
        runs = store.list_runs(kind="measurement", workload=workload, limit=50)
        if prefer_run is not None:
            runs = [store.get_run(prefer_run).summary]
        for run in runs:
            if (
                run.precision != precision
                or run.median_s is None
                or run.mode not in (None, "train")
            ):
                continue
            try:
                device: Any = catalog.gpu(run.gpu_name or "")
            except UnknownGpuError:
                cores = os.cpu_count() or 1
                device = DeviceRoofline(
                    name="cpu",
                    kind="cpu",
                    peak_tflops=cores * 32 * 2.5e9 / 1e12,
                    memory_bandwidth_gbps=min(200.0, 10.0 * cores),
                )
            cal = calibrate(
                facts.roofline_workload(run.batch_size), run.median_s, device, precision
            )
            return cal, f"store run #{run.id} ({run.device}, batch {run.batch_size})"
    return None


def _models(
    calibrated: str | None, lifetimes: _Lifetimes, perf: Any, risk: Any
) -> tuple[ModelInfo, ...]:
    roofline_fit = calibrated or "catalog specs only (uncalibrated; no measurement in the store)"
    roofline_val = (
        "interval +-10% same GPU / +-25% other GPU / +-40% from CPU (calibrated priors)"
        if calibrated
        else "interval +-50% (uncalibrated prior); CM-DARE fit of the speed model reaches "
        "~10% MAPE leave-one-GPU-out (K80/P100)"
    )
    return (
        ModelInfo(
            name="roofline step time (predict.roofline)",
            version=__version__,
            fitted_on=roofline_fit,
            validation=roofline_val,
        ),
        ModelInfo(
            name="async parameter server, MVA (predict.cluster)",
            version=__version__,
            fitted_on=perf.source,
            validation=f"leave-one-model-out MAPE {perf.ps_cv_mape_pct}% "
            f"(log residual q10 {perf.ps_log_residual_q10:+.3f}, "
            f"q90 {perf.ps_log_residual_q90:+.3f})",
        ),
        ModelInfo(
            name="ring all-reduce / FSDP (predict.comm)",
            version=__version__,
            fitted_on="not fitted: physics with default link speeds and 70% overlap",
            validation="not validated on measured data; exposed communication given +-25%",
        ),
        ModelInfo(
            name="spot lifetimes (predict.revocation)",
            version=__version__,
            fitted_on=lifetimes.fitted_on,
            validation=f"fallback when a GPU has no data: {lifetimes.fallback.source}",
        ),
        ModelInfo(
            name="transient Monte Carlo (simulate.transient)",
            version=__version__,
            fitted_on=f"start-up: {risk.sources.get('startup')}; restart: "
            f"{risk.sources.get('restart')}",
            validation="see benchmarks/transient_validation.py (published spot training runs)",
        ),
    )


def _perf_params(data_dir: Path | None) -> Any:
    """PS constants fitted on the published cluster runs when at hand, else the built-ins."""
    from gpucast.plan.inputs import PerfParams

    folder = None if data_dir is None else data_dir / "cmdare" / "cluster_scaling"
    if folder is None or not folder.is_dir():
        return PerfParams()
    from gpucast.cli._simulate_inputs import fitted_cluster_model

    model, facts = fitted_cluster_model(folder)
    return PerfParams.from_cluster_model(model, fitted_on=f"{folder} ({facts['runs']} rows)")


def run_plan(opts: dict[str, Any], db_path: Path | None) -> TrainPlan:
    """Everything between merged options and a plan (used by the CLI and the tests).

    ``db_path`` is the measurement store (``--db``, else the default store when it exists):
    ``--workload run:ID`` reads a profile or a training measurement from it, and stored
    training measurements of the workload calibrate the step-time model.
    """
    from gpucast.catalog import load_catalog
    from gpucast.plan.inputs import WorkloadFacts
    from gpucast.plan.train import PlanContext, plan_training
    from gpucast.store.db import default_db_path

    db = Path(db_path) if db_path is not None else default_db_path()
    stored = None
    run_id = stored_run_id(opts.get("workload"))
    if run_id is not None:
        stored = load_stored_workload(db, run_id)
        opts = {**opts, "workload": stored.workload}
        if opts.get("precision") is None:
            opts["precision"] = stored.precision
    request = build_request(opts)
    catalog = load_catalog()
    data_dir = _data_dir(None if opts.get("data_dir") is None else Path(opts["data_dir"]))
    profile_file = None if opts.get("profile") is None else Path(opts["profile"])
    if stored is not None and stored.profile is not None and profile_file is None:
        prof = stored.profile
        if prof.precision != request.precision:
            raise InvalidSpecError(
                "precision",
                f"run {stored.run_id} was profiled at {prof.precision}",
                got=request.precision,
                fix=f"drop --precision or profile again with --precision {request.precision}",
            )
    else:
        prof = workload_profile(request.workload, request.precision, profile_file)
    facts = WorkloadFacts.from_profile(prof)
    found = _store_calibration(
        db,
        request.workload,
        request.precision,
        facts,
        catalog,
        prefer_run=None if stored is None else stored.measurement_run,
    )
    calibration, calibrated = (None, None) if found is None else found
    band = str(opts.get("interruption_band") or DEFAULT_BAND)
    risk, lifetimes = _risk_inputs(data_dir, band, catalog)
    perf = _perf_params(data_dir)
    assumptions = (
        ("catalog", f"built-in offers, snapshot {catalog.snapshot_date.isoformat()}"),
        (
            "workload profile",
            f"{prof.workload} profiled at batch {prof.batch_size}, "
            f"{prof.precision}; FLOPs, bytes and activations scaled linearly with the batch"
            + ("" if stored is None else f" (workload from store run #{stored.run_id})"),
        ),
        (
            "step-time calibration",
            calibrated
            if calibrated is not None
            else f"none: no stored training measurement of {request.workload} at "
            f"{request.precision} in {db}",
        ),
        ("start-up", str(risk.sources.get("startup"))),
        ("restart penalty", str(risk.sources.get("restart"))),
        (
            "checkpoint",
            f"{risk.checkpoint_s(facts):.1f} s per checkpoint (3 s + weights and "
            "optimizer state at 1 Gbit/s); interval by Young's formula",
        ),
        ("DDP/FSDP on spot", "losing any node rolls the job back to its last checkpoint"),
        (
            "parameter server",
            "asynchronous; PS shards are on-demand CPU servers (>= 4 vCPUs) "
            "of the same region; gradient staleness is not modelled",
        ),
        (
            "spot lifetimes",
            f"fitted where published data covers the GPU, else {band}/month "
            "(AWS Spot Advisor band) as a constant hazard",
        ),
        ("performance constants", perf.source),
    )
    ctx = PlanContext(
        catalog=catalog,
        facts=facts,
        perf=perf,
        risk=risk,
        calibration=calibration,
        assumptions=assumptions,
    )
    plan = plan_training(request, ctx)
    from dataclasses import replace

    return replace(plan, models=_models(calibrated, lifetimes, perf, risk))


def plan_json(plan: TrainPlan) -> dict[str, Any]:
    return plan.to_dict()


@app.command("train")
def train(
    ctx: typer.Context,
    workload: str | None = typer.Option(
        None,
        "--workload",
        help="Built-in name, module:factory, or run:ID (a profile or training measurement "
        "in the store).",
    ),
    epochs: float | None = typer.Option(None, "--epochs", help="Epochs at the reference batch."),
    dataset_size: int | None = typer.Option(None, "--dataset-size", help="Samples per epoch."),
    steps: int | None = typer.Option(
        None, "--steps", help="Or: global steps at the reference batch."
    ),
    deadline: str | None = typer.Option(
        None, "--deadline", help=f"e.g. 24h, 3d or 'none' (default {DEFAULT_DEADLINE})."
    ),
    budget: float | None = typer.Option(None, "--budget", help="US$ at most."),
    provider: list[str] | None = typer.Option(None, "--provider", help="aws, gcp, azure (repeat)."),
    region: list[str] | None = typer.Option(None, "--region", help="Region(s) allowed (repeat)."),
    gpu: list[str] | None = typer.Option(None, "--gpu", help="GPU type(s) allowed (repeat)."),
    exclude_gpu: list[str] | None = typer.Option(None, "--exclude-gpu", help="GPU types to skip."),
    spot: bool | None = typer.Option(None, "--spot/--no-spot", help="Allow spot (default yes)."),
    max_gpus: int | None = typer.Option(None, "--max-gpus", help="At most this many GPUs (64)."),
    min_p_meet: float | None = typer.Option(
        None, "--min-p-meet", help="Spot plans must meet the deadline with this probability (0.9)."
    ),
    batch_size: int | None = typer.Option(None, "--batch-size", help="Per-worker batch (fixed)."),
    global_batch: int | None = typer.Option(None, "--global-batch", help="Global batch (fixed)."),
    allow_mixed: bool | None = typer.Option(None, "--allow-mixed", help="Mixed GPU types."),
    objective: str | None = typer.Option(
        None, "--objective", help=f"{' | '.join(OBJECTIVES)} (default cheapest)."
    ),
    critical_batch: float | None = typer.Option(
        None, "--critical-batch", help="Critical batch B_crit of the statistical-efficiency model."
    ),
    reference_batch: int | None = typer.Option(
        None, "--reference-batch", help="Batch the epoch count was tuned for."
    ),
    strategy: list[str] | None = typer.Option(None, "--strategy", help="ddp, fsdp, ps (repeat)."),
    max_ps_shards: int | None = typer.Option(None, "--max-ps-shards", help="PS shards tried (4)."),
    precision: str | None = typer.Option(None, "--precision", help="fp32, bf16 or fp16."),
    runs: int | None = typer.Option(None, "--runs", help="Monte Carlo runs per spot plan (1000)."),
    seed: int | None = typer.Option(None, "--seed", help="Seed of the Monte Carlo."),
    interruption_band: str | None = typer.Option(
        None,
        "--interruption-band",
        help=f"Spot band where no lifetimes are fitted ({DEFAULT_BAND}).",
    ),
    data_dir: Path | None = typer.Option(
        None,
        "--data-dir",
        help="Published data folder, e.g. ../shared/data (default: $GPUCAST_SHARED_DATA).",
    ),
    profile: Path | None = typer.Option(
        None, "--profile", help="Profile JSON (gpucast profile --json)."
    ),
    config: Path | None = typer.Option(
        None, "--config", help="YAML file with any of these options."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
    report: Path | None = typer.Option(
        None, "--report", help="Write a self-contained HTML report."
    ),
    save: Path | None = typer.Option(
        None, "--save", help="Save the plan as JSON (for gpucast report)."
    ),
) -> None:
    """The cheapest cluster that meets the deadline (or the fastest within budget), explained."""
    file_opts = load_config(config) if config is not None else {}
    flags = {
        "workload": workload,
        "epochs": epochs,
        "dataset_size": dataset_size,
        "steps": steps,
        "deadline": deadline,
        "budget": budget,
        "provider": provider,
        "region": region,
        "gpu": gpu,
        "exclude_gpu": exclude_gpu,
        "spot": spot,
        "max_gpus": max_gpus,
        "min_p_meet": min_p_meet,
        "batch_size": batch_size,
        "global_batch": global_batch,
        "allow_mixed": allow_mixed,
        "objective": objective,
        "critical_batch": critical_batch,
        "reference_batch": reference_batch,
        "strategy": strategy,
        "max_ps_shards": max_ps_shards,
        "precision": precision,
        "runs": runs,
        "seed": seed,
        "interruption_band": interruption_band,
        "data_dir": data_dir,
        "profile": profile,
    }
    opts = _merge(flags, file_opts)
    with working("planning: profiling the workload, searching the catalog, simulating spot"):
        plan = run_plan(opts, state(ctx).db_path)
    if save is not None:
        _write_text_atomic(save, plan_file_text(plan))
    if report is not None:
        from gpucast.report.html import plan_html

        _write_text_atomic(report, plan_html(plan))
    if json_out:
        emit_json(plan_json(plan))
        return
    from gpucast.report.tables import print_plan

    print_plan(plan, console)
    for path, what in ((report, "report"), (save, "plan")):
        if path is not None:
            console.print(f"{what} -> {path}", highlight=False)


def _finite(value: Any) -> Any:
    """JSON has no inf/NaN: they become null (``PlanCandidate.from_dict`` reads them back)."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def plan_file_text(plan: TrainPlan) -> str:
    """A saved plan: strict JSON of :meth:`TrainPlan.to_dict`."""
    return json.dumps(_finite(plan.to_dict()), indent=2, allow_nan=False) + "\n"
