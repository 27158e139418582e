"""MLPerf reference convergence points (RCPs) and samples to target at a global batch.

MLCommons publishes, per benchmark and global batch size, how far the reference
implementation trained over many seeds before it reached the quality target
(``mlcommons/logging``, ``mlperf_logging/rcp_checker/training_X.Y.0/rcps_<benchmark>.json``).
Those files count in *epochs*, *samples* or (GPT-3) *tokens*, whatever their key says;
:class:`ConvergencePoint` keeps the raw per-seed values in that unit and converts to samples.

:func:`samples_to_target` turns the points into the samples a run at another global batch needs,
the way the MLPerf RCP checker (``rcp_checker.py``) builds its reference for a submission:

- at a reference batch, that point;
- between two reference batches, the linear interpolation (``numpy.interp``) of the mean and
  the standard deviation of the nearest lower and nearest higher point;
- below the smallest reference batch, the smallest-batch point unchanged. The checker does the
  same (it accepts a smaller-batch submission that converges no faster than the smallest RCP):
  samples to target are roughly flat at small batches, so this is a mild over-estimate;
- above the largest reference batch, an error. The checker fails such a submission ("Missing
  RCP, please submit RCP with BS = ..."): samples to target grow quickly past the critical batch,
  and no extrapolation is safe.

The checker interpolates over every point ("full" RCPs); its optional pruning keeps only the
fastest-converging envelope, a lower bound for admission, not an expected value, and is not done
here. Its "RCP mean" is the olympic mean (the fastest and slowest run dropped; four of each for
unet3d), exposed as ``rcp_mean``; ``mean`` and ``std`` (sample standard deviation) use every run.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from typing import Any, Literal, get_args

from gpucast.domain.errors import InvalidSpecError, UnknownNameError, close_matches
from gpucast.domain.options import option
from gpucast.domain.units import format_sig

ConvergenceUnit = Literal["epochs", "samples", "tokens"]
CONVERGENCE_UNITS: tuple[str, ...] = get_args(ConvergenceUnit)

# Names the MLPerf rules use for the same benchmark in other rounds.
BENCHMARK_ALIASES = {"retinanet": "ssd", "rgat": "gnn"}

#: Learning-rate rules a plan can apply at batches other than the tuned one
#: (:mod:`gpucast.predict.lr_scaling`; ``auto`` lets the planner choose).
LR_RULES: tuple[str, ...] = ("tuned", "adascale", "linear", "sqrt", "fixed")


def critical_batch_option(use: str) -> Any:
    """``--critical-batch``: B_noise of the gradient-noise-scale law (checked by
    :func:`check_critical_batch`); ``use`` says what it scales."""
    return option(
        None,
        help=f"Critical batch B_noise (samples) of the gradient-noise-scale law {use} "
        "[default: the noise scale `gpucast measure train --noise-scale` stored for the "
        "workload, else the workload family's prior].",
        example="8192",
    )


def noise_batch_text(value: float) -> str:
    """B_noise (samples) as the verbs print it: whole samples from 1 on (``8,192``), three
    significant figures below (``0.00100``: ``,.0f`` read ``0``, QA 39 Y #12)."""
    return f"{value:,.0f}" if value >= 1 else format_sig(value, 3)


#: the smallest --critical-batch (samples): the law's arithmetic holds down to it
MIN_CRITICAL_BATCH = 1e-9
#: said beside a B_noise below one sample (given or measured): the law holds, it is saturated
BELOW_ONE_SAMPLE = (
    "below one sample, so every batch is past it: each doubling of the batch doubles the "
    "samples to target, as at any B_noise much smaller than the batch (the law's limit)"
)


def check_critical_batch(value: float | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidSpecError("critical-batch", "must be a number", got=value)
    # one below a sample is kept (a measured noise scale can be), and said where it is used
    # (:data:`BELOW_ONE_SAMPLE`): the law saturates there, it does not break; below
    # MIN_CRITICAL_BATCH its arithmetic underflows (1e-320 gave "convergence.min_samples: must
    # be > 0") while the efficiency it gives is the same as at 0.001
    if not (math.isfinite(value) and value >= MIN_CRITICAL_BATCH):
        raise InvalidSpecError(
            "critical-batch", f"must be a finite number >= {MIN_CRITICAL_BATCH:g} (samples; "
            "every B_noise far below the batch gives the same efficiency)", got=value,
            fix="e.g. --critical-batch 8192",
        )  # fmt: skip


def lr_rule_option(where: str = "batches other than the tuned one") -> Any:
    """``--lr-rule``: how the learning rate follows the batch (checked by :func:`check_lr_rule`)."""
    return option(
        None,
        help=f"Learning rate at {where}: auto (the optimizer's own rule while it costs < 1% "
        "more samples, else AdaScale), tuned, adascale, linear, sqrt or fixed [default: as "
        "the target's data: tuned per batch, or its own rule].",
        example="auto",
    )


def optimizer_option() -> Any:
    return option(
        None,
        help="Optimizer family for --lr-rule: sgd or adaptive (adam, adamw, lamb, adadelta) "
        "[default: the workload family's].",
        example="adam",
    )


def check_lr_rule(rule: str | None, optimizer: str | None = None) -> None:
    if rule is not None and rule not in (*LR_RULES, "auto"):
        raise InvalidSpecError("lr-rule", f"must be one of auto, {', '.join(LR_RULES)}", got=rule)
    if optimizer is not None and rule is None:
        raise InvalidSpecError(
            "optimizer", "only applies with --lr-rule", got=optimizer, fix="add --lr-rule auto"
        )


class UnknownBenchmarkError(UnknownNameError):
    kind = "MLPerf benchmark"


def olympic_trim(benchmark: str) -> int:
    """How many of the fastest and of the slowest runs the RCP checker drops (4 for unet3d)."""
    return 4 if benchmark == "unet3d" else 1


@dataclass(frozen=True, slots=True, kw_only=True)
class ConvergencePoint:
    """How far the reference trained to reach the target at one global batch, per seed.

    ``values`` are in ``unit``: epochs of ``dataset_samples`` samples, samples, or tokens of
    ``tokens_per_sample`` per sample (sequence).
    """

    benchmark: str  # MLPerf benchmark id, e.g. "resnet", "llama2_70b_lora"
    global_batch_size: int  # samples per optimizer step
    unit: ConvergenceUnit
    values: tuple[float, ...]  # one per reference run (seed)
    dataset_samples: int | None = None  # training-set size, required when unit == "epochs"
    tokens_per_sample: int | None = None  # sequence length, required when unit == "tokens"
    rcp_folder: str  # e.g. "training_4.0.0"
    source_url: str
    as_of: date
    note: str = ""

    def __post_init__(self) -> None:
        owner = f"convergence {self.benchmark}@{self.global_batch_size}"
        if not self.benchmark:
            raise InvalidSpecError(f"{owner}.benchmark", "is required")
        if self.global_batch_size < 1:
            raise InvalidSpecError(
                f"{owner}.global_batch_size", "must be >= 1", got=self.global_batch_size
            )
        if self.unit not in CONVERGENCE_UNITS:
            raise InvalidSpecError(
                f"{owner}.unit", f"must be one of {', '.join(CONVERGENCE_UNITS)}", got=self.unit
            )
        if any(not math.isfinite(v) or v <= 0 for v in self.values):
            raise InvalidSpecError(f"{owner}.values", "must all be finite numbers > 0")
        if len(self.values) <= 2 * olympic_trim(self.benchmark):
            raise InvalidSpecError(
                f"{owner}.values",
                f"needs more than {2 * olympic_trim(self.benchmark)} runs for the olympic mean",
                got=len(self.values),
            )
        for name, unit in (("dataset_samples", "epochs"), ("tokens_per_sample", "tokens")):
            value = getattr(self, name)
            if self.unit == unit and value is None:
                raise InvalidSpecError(f"{owner}.{name}", f"is required when unit is {unit}")
            if self.unit != unit and value is not None:
                raise InvalidSpecError(
                    f"{owner}.{name}", f"is only given when unit is {unit}", got=value
                )
            if value is not None and value < 1:
                raise InvalidSpecError(f"{owner}.{name}", "must be >= 1", got=value)

    # -- statistics in the file's unit ------------------------------------------------------
    @property
    def n_runs(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values)

    @property
    def std(self) -> float:
        """Sample standard deviation over the runs (n - 1 in the denominator)."""
        return statistics.stdev(self.values)

    @property
    def min(self) -> float:
        return min(self.values)

    @property
    def max(self) -> float:
        return max(self.values)

    @property
    def rcp_mean(self) -> float:
        """The RCP checker's mean: the olympic mean (fastest and slowest runs dropped)."""
        trim = olympic_trim(self.benchmark)
        kept = sorted(self.values)[trim : len(self.values) - trim]
        return statistics.fmean(kept)

    # -- conversion ---------------------------------------------------------------------------
    @property
    def samples_per_unit(self) -> float:
        if self.unit == "epochs":
            assert self.dataset_samples is not None  # checked in __post_init__
            return float(self.dataset_samples)
        if self.unit == "tokens":
            assert self.tokens_per_sample is not None  # checked in __post_init__
            return 1.0 / self.tokens_per_sample
        return 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class SamplesToTarget:
    """Samples (and steps) to the quality target at one global batch, from the RCPs."""

    benchmark: str
    global_batch_size: int
    samples_mean: float
    samples_std: float  # interpolated sample standard deviation over the reference runs
    samples_rcp_mean: float  # from the checker's olympic means
    unit: ConvergenceUnit  # the unit of the reference file
    mean_in_unit: float  # samples_mean in that unit (epochs, samples or tokens)
    lower_batch: int  # reference batch below or at global_batch_size
    upper_batch: int  # reference batch above or at global_batch_size
    method: Literal["reference", "interpolated", "smallest_reference"]
    source: str  # one line: the points used and their files

    @property
    def steps_mean(self) -> float:
        return self.samples_mean / self.global_batch_size

    @property
    def epochs_mean(self) -> float | None:
        """Epochs to target where the reference counts in epochs, else None."""
        return self.mean_in_unit if self.unit == "epochs" else None


def benchmark_points(
    points: Iterable[ConvergencePoint], benchmark: str
) -> tuple[ConvergencePoint, ...]:
    """The points of one benchmark (MLPerf id or a later round's name), by global batch."""
    pool = tuple(points)
    known = sorted({p.benchmark for p in pool})
    wanted = benchmark.strip().lower()
    wanted = BENCHMARK_ALIASES.get(wanted, wanted)
    chosen = sorted((p for p in pool if p.benchmark == wanted), key=lambda p: p.global_batch_size)
    if not chosen:
        # UnknownNameError lists every name when none is close; name them all either way.
        close = close_matches(benchmark, known)
        listing = f"known MLPerf benchmarks: {', '.join(known) or 'none (no points given)'}"
        raise UnknownBenchmarkError(benchmark, known, fix=listing if close else None)
    batches = [p.global_batch_size for p in chosen]
    if len(set(batches)) != len(batches):
        raise InvalidSpecError(
            f"convergence {wanted}", "has two points for one global batch", got=batches
        )
    if len({(p.unit, p.samples_per_unit) for p in chosen}) != 1:
        raise InvalidSpecError(
            f"convergence {wanted}", "mixes units (or dataset sizes) across its points"
        )
    return tuple(chosen)


def samples_to_target(
    points: Iterable[ConvergencePoint], benchmark: str, global_batch: int
) -> SamplesToTarget:
    """Samples to the quality target of ``benchmark`` at ``global_batch``, as the MLPerf RCP
    checker builds its reference (see the module docstring for the rules at and beyond the
    reference batches)."""
    chosen = benchmark_points(points, benchmark)
    name = chosen[0].benchmark
    if global_batch < 1:
        raise InvalidSpecError("global_batch", "must be >= 1", got=global_batch)
    smallest, largest = chosen[0], chosen[-1]
    batches = ", ".join(str(p.global_batch_size) for p in chosen)
    if global_batch > largest.global_batch_size:
        raise InvalidSpecError(
            "global_batch",
            f"{global_batch} is above the largest MLPerf reference batch of {name} "
            f"({largest.global_batch_size}; references at {batches}); samples to target grow "
            "fast past the critical batch, so they are not extrapolated",
            fix=f"use a global batch <= {largest.global_batch_size}, or give the epochs "
            "to target measured at this batch",
        )
    method: Literal["reference", "interpolated", "smallest_reference"]
    weight = 0.0
    if global_batch < smallest.global_batch_size:
        lo = hi = smallest
        method = "smallest_reference"
    else:
        lo = [p for p in chosen if p.global_batch_size <= global_batch][-1]
        hi = next(p for p in chosen if p.global_batch_size >= global_batch)
        if lo is hi:
            method = "reference"
        else:
            weight = (global_batch - lo.global_batch_size) / (
                hi.global_batch_size - lo.global_batch_size
            )
            method = "interpolated"

    def mix(a: float, b: float) -> float:
        return a + weight * (b - a)

    scale = lo.samples_per_unit
    mean_in_unit = mix(lo.mean, hi.mean)
    where = (
        f"at {lo.global_batch_size}"
        if lo is hi
        else f"between {lo.global_batch_size} and {hi.global_batch_size}"
    )
    if method == "smallest_reference":
        where = f"smallest reference batch {lo.global_batch_size} (below it: unchanged)"
    source = (
        f"MLPerf RCP {name} {where}, {lo.unit} over {lo.n_runs}"
        + ("" if lo is hi else f"/{hi.n_runs}")
        + f" seeds ({lo.rcp_folder}; {lo.source_url})"
    )
    return SamplesToTarget(
        benchmark=name,
        global_batch_size=global_batch,
        samples_mean=mean_in_unit * scale,
        samples_std=mix(lo.std, hi.std) * scale,
        samples_rcp_mean=mix(lo.rcp_mean, hi.rcp_mean) * scale,
        unit=lo.unit,
        mean_in_unit=mean_in_unit,
        lower_batch=lo.global_batch_size,
        upper_batch=hi.global_batch_size,
        method=method,
        source=source,
    )


# -- what a training job must reach -------------------------------------------------------------
TargetKind = Literal["mlperf", "zeus", "epochs", "samples"]
TARGET_HELP = (
    "The work to a quality target: mlperf:NAME (MLPerf reference convergence, e.g. "
    "mlperf:resnet), zeus:NAME (Zeus's seeds, e.g. zeus:imagenet; needs --data-dir), or "
    "Nepochs@B or Nsamples@B (e.g. 90epochs@256: 90 epochs at global batch 256), turned into "
    "samples to target at each planned global batch [default: --epochs/--steps at "
    "--reference-batch]."
)
_TARGET_FIX = "e.g. --target mlperf:resnet, zeus:imagenet, 90epochs@256 or 1.2e8samples@1024"
_AMOUNT = re.compile(
    # signs, nan and inf match, so the number's own check names what is wrong (QA 41 QT)
    r"^\s*(?P<amount>[+-]?(?:[0-9][0-9_]*(?:\.[0-9]*)?(?:e[+-]?[0-9]+)?|nan|inf))\s*"
    r"(?P<unit>epochs?|ep|samples?)\s*@\s*(?P<batch>[+-]?[0-9][0-9_]*)\s*$",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetSpec:
    """A parsed ``--target``: a named convergence table (``mlperf``/``zeus`` + ``name``) or
    ``amount`` epochs/samples at global batch ``batch``. ``text`` is what was given."""

    kind: TargetKind
    text: str
    name: str = ""
    amount: float | None = None
    batch: int | None = None

    def __post_init__(self) -> None:
        if self.kind in ("mlperf", "zeus"):
            if not self.name:
                raise InvalidSpecError("target", f"{self.kind}: needs a name", fix=_TARGET_FIX)
            return
        if self.amount is None or not (math.isfinite(self.amount) and self.amount > 0):
            raise InvalidSpecError(
                "target", "the amount must be a finite number > 0", got=self.text, fix=_TARGET_FIX
            )
        if self.batch is None or self.batch < 1:
            raise InvalidSpecError(
                "target", "the batch after @ must be an integer >= 1", got=self.text,
                fix=_TARGET_FIX,
            )  # fmt: skip

    @property
    def table(self) -> bool:
        return self.kind in ("mlperf", "zeus")


def parse_target(text: str) -> TargetSpec:
    """``mlperf:resnet``, ``zeus:imagenet``, ``90epochs@256``, ``1.2e8samples@1024``."""
    raw = str(text).strip()
    if not raw:
        raise InvalidSpecError("target", "must not be empty", fix=_TARGET_FIX)
    head, sep, tail = raw.partition(":")
    if sep:
        kind = head.strip().lower()
        if kind not in ("mlperf", "zeus"):
            raise InvalidSpecError(
                "target", f"unknown table {head!r} (mlperf or zeus)", got=raw, fix=_TARGET_FIX
            )
        name = tail.strip().lower()
        if kind == "mlperf":
            name = BENCHMARK_ALIASES.get(name, name)
        return TargetSpec(kind="mlperf" if kind == "mlperf" else "zeus", text=raw, name=name)
    match = _AMOUNT.match(raw)
    if match is None:
        raise InvalidSpecError("target", "is not a table or N epochs|samples @ B", got=raw,
                               fix=_TARGET_FIX)  # fmt: skip
    unit = match["unit"].lower()
    return TargetSpec(
        kind="samples" if unit.startswith("sample") else "epochs",
        text=raw,
        amount=float(match["amount"].replace("_", "")),
        batch=int(match["batch"].replace("_", "")),
    )
