"""What the models need to know about a workload: its profile, facts and sizes.

* :func:`workload_profile` -- the profiler's static features (cached per workload, precision
  and torch version; a user model's also on a hash of its code), or a profile JSON file;
* :func:`workload_facts` -- the profile split into per-sample and fixed costs
  (:class:`gpucast.plan.inputs.WorkloadFacts`), what every step-time prediction starts from;
* :func:`workload_inputs` -- parameter bytes, tensor count and checkpoint size for the
  cluster and checkpoint models: from the profiler, or from CM-DARE's feature table for
  CM-DARE model names;
* :func:`load_stored_workload` -- ``run:ID``: a profile or training measurement in the store;
* :func:`measured_name` -- the name a configuration's runs are stored under.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucast.domain.errors import (
    DataFormatError,
    InvalidInputError,
    InvalidSpecError,
    UnknownWorkloadError,
)
from gpucast.domain.units import MIB
from gpucast.domain.workload import configured_name, split_configured_name
from gpucast.inputs.data import data_path

if TYPE_CHECKING:
    from gpucast.domain.profile import WorkloadProfile
    from gpucast.plan.inputs import WorkloadFacts

#: Per-worker batch a workload is profiled at (FLOPs and bytes are scaled from it).
PROFILE_BATCH = 16
#: TensorFlow checkpoints of CM-DARE's momentum-SGD models hold weights + one momentum slot:
#: ResNet-32's 1.86 M parameters give a 14.2 MB weight file (checkpoint/aggregated.csv).
CMDARE_CHECKPOINT_BYTES_PER_PARAMETER = 8.0
_FP32_BYTES = 4.0
#: ``--workload run:ID``: a profile or measurement saved in the store.
RUN_PREFIX = "run:"
#: Set (to anything but ``0``/``false``/``no``) to profile again instead of using a cached
#: profile, built-in or user model; the new profile replaces the cached one.
NO_PROFILE_CACHE_ENV = "GPUCAST_NO_PROFILE_CACHE"
#: How the note of a user model's profile served from the cache starts.
CACHED_PROFILE_NOTE = "profile from gpucast's cache"
#: How the note of a user model's profile that cannot be cached starts.
UNCACHED_PROFILE_NOTE = "profile not cached"
#: The code a profile is computed by (besides the user's): editing it re-profiles.
_PROFILER_CODE = ("gpucast.profile", "gpucast.workloads")


def _torch_version() -> str:
    """The installed torch's version without importing torch (a second) on a cache hit."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return "none"


def read_profile_file(path: Path) -> WorkloadProfile:
    from gpucast.domain.profile import WorkloadProfile
    from gpucast.store.files import read_input_text

    text = read_input_text(path, "profile", fix="write it with gpucast profile --json")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataFormatError(
            str(path),
            f"is not a profile (not JSON: {exc.msg})",
            line=exc.lineno,
            fix="write it with gpucast profile --json",
        ) from None
    if not isinstance(data, dict):
        raise DataFormatError(str(path), "is not a profile (not a JSON object)")
    try:
        return WorkloadProfile.from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise DataFormatError(
            str(path), f"is not a profile ({exc})", fix="write it with gpucast profile --json"
        ) from None


def workload_profile(
    workload: str,
    precision: str,
    profile_file: Path | None = None,
    *,
    batch_size: int = PROFILE_BATCH,
    options: Mapping[str, Any] | None = None,
    optimizer: str = "sgd",
) -> WorkloadProfile:
    """The workload's profile at ``batch_size`` (default :data:`PROFILE_BATCH`), built with
    the workload's ``options`` and trained with ``optimizer``: a file, the cache, or the
    profiler.

    A user model (``module:factory``) is cached on a content hash of its code besides the
    parameters (:func:`_user_profile`); ``$GPUCAST_NO_PROFILE_CACHE`` profiles again."""
    from gpucast.domain.profile import WorkloadProfile

    if profile_file is not None:
        return read_profile_file(profile_file)
    from gpucast.store.cache import cached_json

    opts = dict(options or {})

    def make() -> WorkloadProfile:
        from gpucast.domain.workload import WorkloadSpec
        from gpucast.profile import profile_workload

        spec = WorkloadSpec(name=workload, batch_size=batch_size, precision=precision)  # type: ignore[arg-type]
        return profile_workload(spec, optimizer=optimizer, **opts)

    params: dict[str, Any] = {
        "workload": workload,
        "precision": precision,
        "batch_size": batch_size,
        "torch": _torch_version(),
        **({"options": {k: str(v) for k, v in sorted(opts.items())}} if opts else {}),
        **({"optimizer": optimizer} if optimizer != "sgd" else {}),
    }
    if ":" in workload:  # module:factory
        return _user_profile(workload, make, params)
    return cached_json(
        "profile",
        make,
        dump=WorkloadProfile.to_dict,
        load=WorkloadProfile.from_dict,
        params=params,
        code=_PROFILER_CODE,
        refresh=profile_cache_bypassed(),
    )


def profile_cache_bypassed() -> bool:
    """Whether ``$GPUCAST_NO_PROFILE_CACHE`` asks for fresh profiles (any value but empty,
    ``0``, ``false`` or ``no``)."""
    value = os.environ.get(NO_PROFILE_CACHE_ENV, "").strip().lower()
    return value not in ("", "0", "false", "no")


def _user_profile(
    workload: str, make: Callable[[], WorkloadProfile], params: Mapping[str, Any]
) -> WorkloadProfile:
    """A user model's profile, cached on a content hash of its code
    (:func:`gpucast.inputs.user_code.user_code`) besides the parameters; a profile served
    from the cache says so in its notes, and so does one whose code could not be hashed."""
    from gpucast.domain.profile import WorkloadProfile
    from gpucast.inputs.user_code import user_code
    from gpucast.store.cache import cached_json

    code = user_code(workload)
    if code.sha256 is None:
        return _noted(make(), f"{UNCACHED_PROFILE_NOTE}: {code.reason}; profiled on every call")
    profiled: list[bool] = []

    def make_now() -> WorkloadProfile:
        profiled.append(True)
        return make()

    prof = cached_json(
        "user-profile",
        make_now,
        dump=WorkloadProfile.to_dict,
        load=WorkloadProfile.from_dict,
        params={
            **params,
            "module_file": str(code.module_file),
            "code_root": str(code.root),
            "code_sha256": code.sha256,
        },
        code=_PROFILER_CODE,
        refresh=profile_cache_bypassed(),
    )
    if profiled:
        return prof
    return _noted(
        prof,
        f"{CACHED_PROFILE_NOTE}, keyed on the code's sha256 ({code.sha256[:12]} of "
        f"{code.n_files} .py file{'s' if code.n_files != 1 else ''} under {code.root}), the "
        f"factory, options, batch, precision, optimizer and torch {params['torch']}; files "
        f"the factory reads (weights, configs) are not: {NO_PROFILE_CACHE_ENV}=1 profiles again",
    )


def _noted(profile: WorkloadProfile, note: str) -> WorkloadProfile:
    return dataclasses.replace(profile, notes=(*profile.notes, note))


def profile_origin(profile: WorkloadProfile) -> str:
    """The note saying a user model's profile came from the cache, or could not be cached
    ("" for a profile made now, or a built-in's)."""
    return next(
        (n for n in profile.notes if n.startswith((CACHED_PROFILE_NOTE, UNCACHED_PROFILE_NOTE))),
        "",
    )


def workload_facts(profile: WorkloadProfile) -> WorkloadFacts:
    from gpucast.plan.inputs import WorkloadFacts

    return WorkloadFacts.from_profile(profile)


def measured_name(workload: str, options: Sequence[tuple[str, Any]]) -> str:
    """The name runs of ``workload`` built with ``options`` are stored under and looked up by:
    :func:`gpucast.workloads.configuration_name` (an option at its built-in value names the
    built-in workload, so ``mlp -o hidden=1024,1024`` is calibrated by runs of ``mlp``);
    without options no model code is imported, and a configuration's name is cached (keyed on
    the options as typed and the workloads' code: the registry imports torch, a second; a
    user model's on its code's sha256 too, as its parameters' types name its options)."""
    if not options:
        return configured_name(workload, ())
    from gpucast.store.cache import cached_json

    params = {"typed": configured_name(workload, tuple(options))}
    if ":" in workload:  # module:factory
        from gpucast.inputs.user_code import user_code

        code = user_code(workload)
        params["code_sha256"] = code.sha256 or ""

    def make() -> str:
        from gpucast.workloads import configuration_name

        return configuration_name(workload, tuple(options))

    if params.get("code_sha256") == "":  # its code could not be hashed: no key to cache on
        return make()

    def load(data: Any) -> str:
        if not isinstance(data, str):
            raise TypeError("expected a name")
        return data

    return cached_json(
        "configuration-name", make, dump=str, load=load, params=params,
        code=("gpucast.workloads", "gpucast.domain.workload"),
    )  # fmt: skip


def measured_name_of(text: str) -> str:
    """:func:`measured_name` of a configuration as typed (``'mlp -o hidden=1024,1024'`` is
    ``mlp``): how ``runs list --workload`` and ``report --workload`` find its runs."""
    if " -o " not in text:
        return text
    name, options = split_configured_name(text)
    return measured_name(name, options)


def builtin_workloads() -> list[str]:
    """:func:`gpucast.workloads.registry.list_workloads`, cached: the registry imports torch
    (a second), which a cached profile does not need."""
    from gpucast.store.cache import cached_json

    def names() -> list[str]:
        from gpucast.workloads.registry import list_workloads

        return list(list_workloads())

    def load(data: Any) -> list[str]:
        if not isinstance(data, list):
            raise TypeError("expected a list of names")
        return [str(n) for n in data]

    return cached_json("workload-names", names, dump=list, load=load, code=("gpucast.workloads",))


def check_workload_name(
    workload: str,
    *,
    profile_option: bool = False,
    language_models: bool = False,
    field: str | None = None,
) -> None:
    """An unknown built-in name fails now, with close matches (before any default derived
    from the name, or any profiling); ``module:factory`` and ``run:ID`` pass. The fix names
    ``--profile FILE`` only for a verb that has it (``profile_option``), and the language
    models of ``llm_models.csv`` (close matches among them too) for one that takes them;
    ``field`` (``model``) starts the error with the flag that gave the name."""
    import re

    if ":" in workload or re.fullmatch(r"cifar-resnet\d+", workload.strip().lower()):
        return
    names = builtin_workloads()
    if workload.strip().lower() not in names:
        fix = "or give a user model as module:factory"
        choices = list(names)
        if language_models:
            from gpucast.catalog.llm import load_llm_models

            llms = [m.name for m in load_llm_models()]
            choices += llms
            fix = (
                f"or give a language model of catalog/data/llm_models.csv (e.g. {llms[0]}) or "
                "a user model as module:factory"
            )
        raise UnknownWorkloadError(
            workload,
            choices,
            fix=fix + (", or --profile FILE" if profile_option else ""),
            field=field,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadInputs:
    """What the cluster and checkpoint models need to know about the trained model."""

    name: str
    param_bytes: float
    n_tensors: int
    max_tensor_bytes: float | None
    checkpoint_bytes: float
    source: str
    facts: Any = None  # WorkloadFacts for profiled workloads (roofline step time)
    cmdare_key: str | None = None  # CM-DARE model key for measured speeds
    options: tuple[tuple[str, Any], ...] = ()  # the built-in's ``-o`` options


def workload_inputs(
    workload: str | None,
    data_dir: Path | None,
    precision: str,
    profile_file: Path | None = None,
    *,
    options: Mapping[str, Any] | None = None,
) -> WorkloadInputs:
    """Parameter bytes and tensor count: the profiler for built-in (and ``module:factory``)
    workloads, CM-DARE's feature table for CM-DARE model names."""
    if not workload:
        raise InvalidSpecError(
            "workload",
            "is required (the cluster model needs its parameter bytes and tensor count)",
            fix="e.g. --workload cifar-resnet32 (gpucast profile --help lists them)",
        )
    builtins = builtin_workloads()
    if profile_file is not None or workload in builtins or _is_user_spec(workload):
        prof = workload_profile(workload, precision, profile_file, options=options)
        memory = prof.memory
        return WorkloadInputs(
            name=workload,
            param_bytes=float(prof.parameters_total) * _FP32_BYTES,
            n_tensors=max(1, int(prof.parameter_tensors)),
            max_tensor_bytes=float(prof.parameter_tensor_max_mib * MIB) or None,
            checkpoint_bytes=float(memory.weights_bytes + memory.optimizer_state_bytes),
            source=f"profiler: {configured_name(workload, tuple((options or {}).items()))} "
            f"({prof.parameters_total:,} parameters, "
            f"{prof.parameter_tensors} tensors)"
            + (f"; {origin}" if (origin := profile_origin(prof)) else ""),
            facts=workload_facts(prof),
            options=tuple((options or {}).items()),
        )
    from gpucast.store.datasets.cmdare_cluster import model_key, read_model_features

    path = data_path(data_dir, "cmdare", "speed", "single_gpu_speed.csv")
    features = None if path is None else read_model_features(path).frame
    key = model_key(workload)
    if features is not None:
        rows = features[features["model_key"] == key]
        if len(rows):
            row = rows.iloc[0]
            n_params = float(row["n_parameters"])
            mtb = float(row["max_tensor_bytes"])
            return WorkloadInputs(
                name=str(row["model"]),
                param_bytes=n_params * _FP32_BYTES,
                n_tensors=int(row["n_tensors"]),
                max_tensor_bytes=mtb if math.isfinite(mtb) else None,
                checkpoint_bytes=n_params * CMDARE_CHECKPOINT_BYTES_PER_PARAMETER,
                source=f"CM-DARE features {path}: {row['model']} ({n_params:,.0f} parameters, "
                f"{int(row['n_tensors'])} tensors)",
                cmdare_key=key,
            )
    names = builtins + ([] if features is None else [str(m) for m in features["model"]])
    raise UnknownWorkloadError(
        workload,
        names,
        fix="a built-in workload, module:factory, or a CM-DARE model name with --data-dir",
    )


def _is_user_spec(workload: str) -> bool:
    """``module:factory``? (imported on use: the workloads package loads torch)"""
    from gpucast.workloads.user import is_user_spec

    return is_user_spec(workload)


# -- run:ID --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class StoredWorkload:
    """What ``--workload run:ID`` names: the workload, and its stored profile or measurement."""

    run_id: int
    workload: str
    precision: str
    profile: Any = None  # WorkloadProfile when the run is a profile
    measurement_run: int | None = None  # the run id when it is a training measurement
    batch_size: int | None = None  # the run's batch (per GPU)


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


def load_stored_workload(
    db_path: Path, run_id: int, *, trust_workload: bool = False
) -> StoredWorkload:
    """Read run ``run_id`` from the store: a profile, or a training measurement.

    A store is data, not code: a measurement whose workload is a user model
    (``module:factory``) would have to be imported to be profiled, which runs whatever the
    store names -- refused unless ``trust_workload`` (the user vouches for the store).
    """
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
            run_id=run_id,
            workload=summary.workload,
            precision=summary.precision,
            profile=profile,
            batch_size=summary.batch_size,
        )
    if run.kind == "measurement" and summary.mode == "train" and summary.median_s is not None:
        if _is_user_spec(summary.workload) and not trust_workload:
            raise InvalidSpecError(
                "workload",
                f"run {run_id} names user code ({summary.workload!r}); a store is data and "
                "gpucast does not import code it names",
                got=f"run:{run_id}",
                fix="plan from a stored profile of it (gpucast profile ...), pass "
                f"--workload {summary.workload} yourself, or add --trust-workload if you "
                "trust whoever wrote the store",
            )
        return StoredWorkload(
            run_id=run_id,
            workload=summary.workload,
            precision=summary.precision,
            measurement_run=run_id,
            batch_size=summary.batch_size,
        )
    raise InvalidSpecError(
        "workload",
        f"run {run_id} is a {run.kind}"
        + (f" ({summary.mode})" if summary.mode else "")
        + ", not a profile or a training measurement",
        got=f"run:{run_id}",
        fix="pick a profile (`gpucast profile`) or a `gpucast measure train` run",
    )
