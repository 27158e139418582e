"""What a workload is, as data: a name, a batch size and a precision."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from gpucast.domain.errors import InvalidSpecError, OptionTextError
from gpucast.domain.options import lower_text, option

Precision = Literal["fp32", "bf16", "fp16"]
PRECISIONS: tuple[str, ...] = get_args(Precision)
Mode = Literal["train", "infer"]
#: ``--precision auto`` (predict train): what practitioners train in on the GPU -- bf16 where
#: it has bf16 tensor cores (Ampere, Hopper, MI200 and later), fp32 elsewhere.
AUTO_PRECISION = "auto"


def practitioner_precision(has_bf16: bool) -> str:
    """The precision a practitioner trains in on a GPU (see :data:`AUTO_PRECISION`)."""
    return "bf16" if has_bf16 else "fp32"


#: The compute precision of ``fp32`` training with TF32 tensor-core matmuls (Ampere and
#: later): the workload is fp32 (its profile, memory and gradients), its matmuls run at the
#: GPU's TF32 peak.
TF32 = "tf32"


def practitioner_compute_precision(*, has_bf16: bool, has_tf32: bool) -> str:
    """The precision practitioners train in on a GPU, as the roofline computes it: ``bf16``
    (autocast mixed precision) where the GPU has bf16 tensor cores, else ``tf32`` (fp32 with
    TF32 matmuls, PyTorch's ``allow_tf32``) where it has TF32 ones, else ``fp32``."""
    if has_bf16:
        return "bf16"
    return TF32 if has_tf32 else "fp32"


#: The compute precision of fp8 training as Transformer Engine runs it: matmuls and
#: convolutions at the GPU's fp8 tensor-core peak, everything else (element-wise kernels,
#: weights, gradients, optimizer state, activations) as bf16 mixed precision -- the workload
#: is profiled at bf16. Only GPUs with fp8 units train in it (:func:`check_precision_units`).
FP8 = "fp8"

#: What every training verb's ``--precision`` accepts: a precision for every GPU, ``tf32``
#: (fp32 with TF32 matmuls where the GPU has TF32 units), ``fp8`` (GPUs with fp8 units) or
#: ``auto``.
TRAIN_PRECISION_CHOICES: tuple[str, ...] = (*PRECISIONS, TF32, FP8, AUTO_PRECISION)

#: The ``--precision`` of every training verb (predict train, predict energy, plan train,
#: simulate train) when none is given: what practitioners train in on the GPU, so that a
#: plan's step and ``predict train``'s agree; each output says what auto chose and that it
#: was the default.
TRAIN_PRECISION_DEFAULT = AUTO_PRECISION


def train_precision_option(help: str) -> Any:
    """The ``--precision`` field of a training verb: :data:`TRAIN_PRECISION_DEFAULT`, read in
    any case; ``help`` says what each choice means to the verb."""
    return option(TRAIN_PRECISION_DEFAULT, parse=lower_text, help=help, example="bf16")


#: Where a precision chosen by ``auto`` came from, as an assumption's source.
AUTO_SOURCE = "--precision auto" + (
    " (the default)" if AUTO_PRECISION == TRAIN_PRECISION_DEFAULT else ""
)


def precision_shown(
    precision: str, requested: str, *, default: str = TRAIN_PRECISION_DEFAULT
) -> str:
    """``precision`` as a verb's headline shows it: with what chose it where ``requested`` was
    ``auto`` (``bf16 by auto, the --precision default`` where ``default``, the verb's
    ``--precision`` default, is auto), else as given."""
    if requested != AUTO_PRECISION:
        return precision
    said = ", the --precision default" if default == AUTO_PRECISION else ""
    return f"{precision} by auto{said}"


def check_train_precision(value: str) -> None:
    """One clear error for a training ``--precision`` outside :data:`TRAIN_PRECISION_CHOICES`."""
    if value not in TRAIN_PRECISION_CHOICES:
        raise InvalidSpecError(
            "precision",
            f"must be one of {', '.join(TRAIN_PRECISION_CHOICES)}",
            got=value,
            fix=f"e.g. --precision bf16, or drop it for {TRAIN_PRECISION_DEFAULT} (the default)",
        )


def gpu_compute_precision(requested: str, *, has_bf16: bool, has_tf32: bool) -> str:
    """The compute precision one GPU trains in for a requested ``--precision``: ``auto`` what
    practitioners use (:func:`practitioner_compute_precision`), ``tf32`` TF32 where the GPU
    has TF32 units and fp32 elsewhere, any other as given."""
    if requested == AUTO_PRECISION:
        return practitioner_compute_precision(has_bf16=has_bf16, has_tf32=has_tf32)
    if requested == TF32:
        return TF32 if has_tf32 else "fp32"
    return requested


def profiled_precision(compute_precision: str) -> str:
    """The precision a workload is profiled at for a compute precision (TF32 is fp32, fp8
    bf16: see :data:`FP8`)."""
    return {TF32: "fp32", FP8: "bf16"}.get(compute_precision, compute_precision)


def measured_precision(compute_precision: str) -> str:
    """The precision a stored measurement must have to calibrate a step at
    ``compute_precision``: the profiled one (a tf32 step by an fp32 run), except fp8, which
    no stored run has (``measure train`` runs fp32, bf16 or fp16) and a bf16 run does not
    calibrate -- its scale carries the 16-bit efficiency an fp8 step does not have."""
    return FP8 if compute_precision == FP8 else profiled_precision(compute_precision)


def precision_label(compute_precision: str) -> str:
    """How a compute precision reads in a plan: ``tf32`` is "fp32 (TF32 matmuls)", ``fp8``
    "fp8 (matmuls; bf16 elsewhere)"."""
    labels = {TF32: "fp32 (TF32 matmuls)", FP8: "fp8 (matmuls; bf16 elsewhere)"}
    return labels.get(compute_precision, compute_precision)


#: The assumption a training prediction at fp8 states (the value; :func:`precision_assumption`).
FP8_TEXT = (
    "fp8 as Transformer Engine trains: matmuls and convolutions at the GPU's fp8 tensor-core "
    "peak times the fp8 efficiency predict llm-train uses; element-wise kernels, weights, "
    "gradients, optimizer state and activations as bf16 mixed precision (the workload "
    "profiled at bf16); Transformer Engine's fp8 covers linear layers, so a CNN whose "
    "convolutions stay bf16 runs nearer the bf16 step"
)


def check_precision_units(
    precision: str,
    gpu: Any,
    catalog: Any,
    *,
    runs: str = "trains in",
    or_else: str = "auto",
    choices: Sequence[str] = (),
    got: str | None = None,
) -> None:
    """fp16, bf16 and fp8 run only on a GPU with units of their own
    (:meth:`~gpucast.domain.catalog.GpuSpec.runs`; bf16 on a V100 or T4 would be emulated, a
    K80 has no fp16 rate, fp8 needs fp8 tensor cores): one clear error naming ``gpu`` (a
    :class:`~gpucast.domain.catalog.GpuSpec`), the precisions it has units for (``runs``
    says how) and the fix (:func:`units_fix`: a precision of ``choices``, ``or_else``, or
    GPUs of ``catalog`` with the units). ``got`` is the value asked for where it is not
    ``precision`` itself (int8 weights computing in fp16). Any other precision passes."""
    if gpu.runs(precision):
        return
    has = [p for p in _NON_FP8_PRECISIONS if p != precision and gpu.has_units(p)]
    units = "fp8 tensor cores" if precision == FP8 else f"{precision} units"
    via = f"{got} weights compute in {precision}; " if got and got != precision else ""
    raise InvalidSpecError(
        "precision",
        f"{via}{precision} needs {units}, which the {gpu.name} has not "
        f"(it {runs} {', '.join(has)})",
        got=got or precision,
        fix=units_fix([gpu], catalog, precision, or_else=or_else, choices=choices),
    )


#: The precisions a GPU without the units of another may train in, in the order one is
#: suggested instead.
_NON_FP8_PRECISIONS = ("bf16", "fp16", TF32, "fp32")


def units_fix(
    gpus: Sequence[Any],
    catalog: Any,
    precision: str = FP8,
    *,
    or_else: str = "auto",
    choices: Sequence[str] = (),
) -> str:
    """The fix of a ``precision`` request none of ``gpus`` (GPU specs without its units) runs:
    the first of bf16, fp16, tf32, fp32 (those of ``choices`` where given) that all of them
    have units for (or ``or_else``), or a GPU of ``catalog`` with the units."""
    order = [p for p in _NON_FP8_PRECISIONS if p != precision and (not choices or p in choices)]
    common = next((p for p in order if all(g.has_units(p) for g in gpus)), None)
    with_units = [g.name for g in catalog.gpus if g.has_units(precision)]
    others = ", ".join(with_units[:6]) + (", ..." if len(with_units) > 6 else "")
    use = [p for p in (common, or_else) if p]
    instead = f"--precision {' (or '.join(use)}{')' if len(use) > 1 else ''}, or " if use else ""
    return f"use {instead}a GPU with {precision} units ({others})"


def auto_precision_assumption(
    by_gpu: Mapping[str, str],
    *,
    fixed: str | None = None,
    requested: str = AUTO_PRECISION,
    units: Collection[str] = ("bf16", "fp16"),
) -> Any:
    """The assumption a plan states about ``--precision auto``: ``by_gpu`` maps each GPU it
    evaluated to its compute precision (:func:`practitioner_compute_precision`), listed
    per precision; ``fixed`` names what kept one precision instead (a stored run, a profile
    file); ``units``: the half precisions the override may offer (those the verb would run
    on these GPUs; QA 39: it offered fp16 to a K80, bf16 to a T4)."""
    from gpucast.domain.provenance import Assumption

    groups: dict[str, list[str]] = {}
    for name, prec in sorted(by_gpu.items()):
        groups.setdefault(prec, []).append(name)
    rank = {p: k for k, p in enumerate(("bf16", "fp16", TF32, "fp32"))}
    order = sorted(groups, key=lambda p: (rank.get(p, len(rank)), p))
    parts = [
        f"{precision_label(p)} on {', '.join(groups[p][:8])}"
        + (f" and {len(groups[p]) - 8} more" if len(groups[p]) > 8 else "")
        for p in order
    ]
    value = f"{requested} -- " + ("; ".join(parts) or "no GPU evaluated")
    offered = "|".join(["fp32", *(p for p in ("bf16", "fp16") if p in units)])
    if requested == FP8:
        return Assumption(name="precision", value=f"{value} ({FP8_TEXT})",
                          source="--precision fp8", override="--precision bf16|auto")  # fmt: skip
    if requested == TF32:
        value += " (fp32 with TF32 matmuls where the GPU has TF32 units, fp32 elsewhere)"
        return Assumption(name="precision", value=value, source="--precision tf32",
                          override=f"--precision {offered}|auto")  # fmt: skip
    if fixed is None:
        value += (
            " (what practitioners train in: bf16 mixed precision where the GPU has bf16 "
            "tensor cores, fp32 with TF32 matmuls where it has TF32 ones, fp32 elsewhere)"
        )
        source = AUTO_SOURCE
    else:
        value += f" ({fixed})"
        source = fixed
    return Assumption(name="precision", value=value, source=source,
                      override=f"--precision {offered}")  # fmt: skip


def precision_assumption(
    precision: str,
    gpus: Sequence[tuple[str, bool]],
    *,
    auto: bool = False,
    given: bool = False,
    fp16_units: bool = True,
) -> Any:
    """The assumption a training prediction states about its precision: ``gpus`` are
    (name, has bf16) of the GPUs it covers; ``auto``: chosen by :func:`practitioner_precision`,
    else ``precision`` for all (``given``: by the user); fp32 says what practitioners would
    use instead on the GPUs that have bf16. ``fp16_units``: whether the GPUs have fp16 units
    (a K80 has none: the override does not offer it)."""
    from gpucast.domain.provenance import Assumption

    with_bf16 = sorted({name for name, bf16 in gpus if bf16})
    if precision == FP8:
        return Assumption(name="precision", value=FP8_TEXT, source="given",
                          override="--precision bf16|auto")  # fmt: skip
    if auto:
        value = (
            f"{precision} (what practitioners train in on this GPU: bf16 where the GPU "
            "has bf16 tensor cores, fp32 elsewhere)"
        )
        others = _others(precision, gpus, with_bf16, fp16_units)
        return Assumption(name="precision", value=value, source=AUTO_SOURCE,
                          override=f"--precision {others}" if others else "")  # fmt: skip
    value = f"{precision} on every GPU"
    if precision == "fp32" and with_bf16:
        value += (
            f"; practitioners train in bf16 (TF32 matmuls at least) on {', '.join(with_bf16[:6])}"
            + (", ..." if len(with_bf16) > 6 else "")
            + " (--precision auto or bf16 predicts that)"
        )
    others = "|".join(["auto", *filter(None, [_others(precision, gpus, with_bf16, fp16_units)])])
    return Assumption(name="precision", value=value, source="given" if given else "default",
                      override=f"--precision {others}")  # fmt: skip


def _others(
    precision: str, gpus: Sequence[tuple[str, bool]], with_bf16: Sequence[str], fp16: bool
) -> str:
    """The precisions an override offers instead of ``precision``: fp32, bf16 (where every
    GPU has bf16 units) and fp16 (where ``fp16``: the GPUs have fp16 units)."""
    offered = ("fp32", "bf16", "fp16") if len(with_bf16) == len(gpus) else ("fp32", "fp16")
    return "|".join(p for p in offered if p != precision and (p != "fp16" or fp16))


#: Software stacks a training step is predicted for: eager PyTorch, TensorFlow 1.x (as the
#: 2018-19 CM-DARE runs), vendor-tuned MLPerf-class code (fused kernels, CUDA graphs).
SOFTWARE_STACKS: tuple[str, ...] = ("pytorch", "tf1", "tuned")
SOFTWARE_HELP = (
    "Software stack the step time is predicted for: pytorch (eager), tuned (MLPerf-class "
    "fused kernels) or tf1 (TensorFlow 1.x)."
)


def check_software(value: str, precision: str | None = None) -> None:
    """One clear error for an unknown software stack, or for fp8 on TensorFlow 1 (``tf1``:
    the CM-DARE stack; TensorFlow 1.x trains in no fp8 format)."""
    if value not in SOFTWARE_STACKS:
        raise InvalidSpecError(
            "software",
            f"must be one of {', '.join(SOFTWARE_STACKS)}",
            got=value,
            fix="e.g. --software tuned for MLPerf-class code",
        )
    if value == "tf1" and precision == FP8:
        raise InvalidSpecError(
            "software",
            "tf1 (TensorFlow 1.x) trains in no fp8 format",
            got=value,
            fix="use --software pytorch or tuned (Transformer Engine) with fp8, or --precision "
            "bf16 with tf1",
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadSpec:
    """A workload to profile or measure.

    ``name`` is a built-in name (``resnet50``, ``cifar-resnet32``...) or ``module:factory``;
    ``options`` its factory's ``-o KEY=VALUE`` options (``()``: the built-in configuration).
    """

    name: str
    batch_size: int
    precision: Precision = "fp32"
    options: WorkloadOptions = ()

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidSpecError("workload", "must not be empty", fix="e.g. --workload resnet50")
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int):
            raise InvalidSpecError("batch_size", "must be an integer", got=self.batch_size)
        if self.batch_size < 1:
            raise InvalidSpecError("batch_size", "must be >= 1", got=self.batch_size)
        if self.precision not in PRECISIONS:
            raise InvalidSpecError(
                "precision", f"must be one of {', '.join(PRECISIONS)}", got=self.precision
            )
        # any spelling (a mapping, KEY=VALUE texts, JSON's lists) as the hashable pairs
        object.__setattr__(self, "options", options_from_json(self.options))
        object.__setattr__(self, "name", canonical_workload_name(self.name))

    @property
    def label(self) -> str:
        """The name a run of this configuration is stored and looked up under
        (:func:`configured_name`): ``mlp``, or ``mlp -o hidden=4096``."""
        return configured_name(self.name, self.options)

    def to_dict(self) -> dict[str, Any]:
        """The spec as plain JSON (``options`` as ``[key, value]`` pairs)."""
        return {
            "name": self.name,
            "batch_size": self.batch_size,
            "precision": self.precision,
            "options": options_to_json(self.options),
        }


# -- workload options (``-o KEY=VALUE``), shared by every verb that builds a workload ---------
#: Options of a workload's factory as ordered (name, value) pairs.
WorkloadOptions = tuple[tuple[str, Any], ...]


def _option_value(raw: str) -> Any:
    """A workload option's value: an int, a float, a tuple of ints, else the text."""
    raw = raw.strip()
    for number in (int, float):
        try:
            return number(raw)
        except ValueError:
            pass
    if "," in raw:
        try:
            return tuple(int(part) for part in raw.split(",") if part.strip())
        except ValueError:
            return raw
    return raw


def _bad_option(text: object) -> OptionTextError:
    return OptionTextError(text)  # a request names one of its workload's options instead


def _option_key(key: object, text: object) -> str:
    name = str(key).strip().replace("-", "_")
    if not name.isidentifier():
        raise _bad_option(text)
    return name


def parse_workload_options(value: Any) -> WorkloadOptions:
    """Workload options from a mapping, ``(key, value)`` pairs or ``KEY=VALUE`` texts.

    Texts may be repeated or comma-separated; a piece without ``=`` continues the value
    before it, so ``hidden=16,8,seq_len=4`` is ``hidden=(16, 8)`` and ``seq_len=4``.
    """
    if isinstance(value, Mapping):
        return tuple((_option_key(k, k), v) for k, v in value.items())
    pairs: list[tuple[str, Any]] = []
    texts: list[str] = []
    for item in value if isinstance(value, list | tuple) else [value]:
        if isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[0], str):
            pairs.append((_option_key(item[0], item), item[1]))  # already parsed (to_options)
            continue
        if not isinstance(item, str):
            raise _bad_option(item)
        texts += [piece for piece in item.split(",") if piece.strip()]
    raw: list[list[str]] = []
    for piece in texts:
        if "=" in piece:
            key, _, first = piece.partition("=")
            raw.append([_option_key(key, piece), first])
        elif raw:
            raw[-1][1] += "," + piece
        else:
            raise _bad_option(piece.strip())
    options = (*pairs, *((key, _option_value(text)) for key, text in raw))
    seen: dict[str, Any] = {}
    for key, value in options:  # the last one silently won (QA 38 M F10)
        if key in seen:
            raise InvalidSpecError(
                "option",
                f"{key} is given twice ({option_text(key, seen[key])}, {option_text(key, value)})",
                fix=f"give it once, e.g. -o {option_text(key, value)}",
            )
        seen[key] = value
    return options


def canonical_workload_name(name: str) -> str:
    """A built-in workload's name as stored and looked up: built-in names are case-insensitive
    (``measure train MLP`` measures ``mlp``, and calibrates ``predict train --workload mlp``);
    a user model ``module:factory`` (or ``run:N``) as given, spaces around it dropped."""
    text = name.strip()
    return text if ":" in text else text.lower()


def options_to_json(options: WorkloadOptions) -> list[list[Any]]:
    """Workload options as JSON: ``[key, value]`` pairs, a tuple value as a list."""
    return [[key, list(value) if isinstance(value, tuple) else value] for key, value in options]


def options_from_json(data: Any) -> WorkloadOptions:
    """Workload options from :func:`options_to_json`'s output (or any spelling
    :func:`parse_workload_options` reads): hashable ``(key, value)`` pairs."""
    if data is None or (isinstance(data, list | tuple) and not data):
        return ()
    if isinstance(data, list | tuple) and all(
        isinstance(item, list | tuple) and len(item) == 2 for item in data
    ):
        data = [(k, tuple(v) if isinstance(v, list) else v) for k, v in data]
    return parse_workload_options(data)


def configured_name(name: str, options: WorkloadOptions) -> str:
    """``name`` with its ``-o`` options as typed (``bert-base -o seq_len=512``): the
    configuration a stored measurement must have run to calibrate it. A run measured with
    ``-o`` is stored under this name (:attr:`WorkloadSpec.label`), one without under the plain
    name, so a configured workload is calibrated by runs of its own configuration only (its
    roofline is not scaled by another configuration's step: a 4x longer sequence was
    calibrated down by 4x)."""
    name = canonical_workload_name(name)
    return name + "".join(f" -o {option_text(key, value)}" for key, value in sorted(options))


def option_text(key: str, value: Any) -> str:
    """One workload option as typed after ``-o``: ``hidden=16,8``, ``tied=false``."""
    if isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, tuple | list):
        text = ",".join(map(str, value))
    else:
        text = str(value)
    return f"{key}={text}"


def split_configured_name(text: str) -> tuple[str, WorkloadOptions]:
    """:func:`configured_name`'s text back to the name and its options
    (``bert-base -o seq_len=512`` -> ``("bert-base", (("seq_len", 512),))``): how a campaign
    sweep lists a configuration among its ``workloads``."""
    name, *options = text.split(" -o ")
    return name.strip(), parse_workload_options([o.strip() for o in options])


def workload_options_field() -> Any:
    """The ``-o/--option KEY=VALUE`` request field (one definition for every verb)."""
    return option(
        (),
        flag="option",
        short="-o",
        kind="list",
        parse=parse_workload_options,
        metavar="KEY=VALUE",
        help="Workload option KEY=VALUE, e.g. seq_len=128 (a value may hold commas: hidden=16,8).",
        example="seq_len=128",
    )


@contextlib.contextmanager
def current_folder_importable() -> Iterator[None]:
    """``module:factory`` resolves from the current folder, as ``python -c "import module"``
    does (an installed console script does not put the current folder on ``sys.path``): the
    loader (``workloads.user``) and the code hash (``inputs.user_code``) resolve alike. It is
    here, not in ``workloads``, because the hash must not import torch (``gpucast.workloads``
    does); it changes ``sys.path`` for the block and touches no file."""
    here = os.getcwd()
    added = here not in sys.path and "" not in sys.path
    if added:
        sys.path.insert(0, here)
    try:
        yield
    finally:
        if added:
            with contextlib.suppress(ValueError):
                sys.path.remove(here)
