"""The one exception family of gpucast.

Every error a user can cause is an :class:`InvalidInputError` (exit code 2); failures of the
run itself (a crashed measurement, a store that cannot be written) are :class:`GpucastError`
(exit code 1). Messages name the field, the constraint and a fix, in one line.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class GpucastError(Exception):
    """Base of all gpucast errors: a runtime failure (exit code 1)."""

    exit_code: int = 1

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        self.message = message
        self.fix = fix
        super().__init__(message if fix is None else f"{message}; {fix}")

    def __reduce__(self) -> tuple[object, ...]:
        # rebuilt as it stands, not through __init__ (whose arguments a subclass names its
        # own way): an error raised in a worker process reaches the caller whole
        return _rebuilt, (type(self), self.args, self.__dict__)


def _rebuilt(
    cls: type[GpucastError], args: tuple[object, ...], state: dict[str, object]
) -> GpucastError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class InvalidInputError(GpucastError):
    """Bad input from the user: a spec, a flag, a file (exit code 2)."""

    exit_code = 2


def as_typed(value: object) -> str:
    """``value`` quoted as an error shows it: a string as the user typed it (``'x=\\d+'``,
    not repr's doubled backslash, QA 39 O #19), in double quotes where it holds a single
    quote only; repr for other values and for strings with unprintable characters (a tab, a
    newline), which repr's escapes make visible."""
    if not isinstance(value, str) or not value.isprintable():
        return repr(value)
    if "'" in value and '"' not in value:
        return f'"{value}"'
    if "'" in value:
        return repr(value)
    return f"'{value}'"


class InvalidSpecError(InvalidInputError):
    """A field of a spec violates its constraint."""

    def __init__(self, field: str, constraint: str, *, got: object = None, fix: str | None = None):
        got_text = "" if got is None else f" (got {as_typed(got)})"
        super().__init__(f"{field}: {constraint}{got_text}", fix=fix)
        self.field = field
        #: the message without the field, for a caller that names the field its own way
        #: (a file's line and key)
        self.detail = f"{constraint}{got_text}"


class OptionTextError(InvalidSpecError):
    """A workload option (``-o``) that is not ``KEY=VALUE``; ``example`` is one that is (the
    app layer, which knows the workload, gives one of its own options)."""

    def __init__(self, text: object, *, example: str = "name=value") -> None:
        super().__init__("option", "must be KEY=VALUE", got=text, fix=f"e.g. -o {example}")
        self.text = text


class DataFormatError(InvalidInputError):
    """A malformed row or cell in an input file; names file, line and column."""

    def __init__(
        self,
        path: str,
        problem: str,
        *,
        line: int | None = None,
        column: str | None = None,
        fix: str | None = None,
        key: str | None = None,
    ) -> None:
        where = path
        if line is not None:
            where += f", line {line}"
        if column is not None:
            where += f", column {as_typed(column)}"
        if key is not None:  # (a YAML/TOML file's key, where a CSV has a column)
            where += f", key {as_typed(key)}"
        super().__init__(f"{where}: {problem}", fix=fix)
        self.path = path
        self.line = line
        self.column = column
        self.key = key


#: How alike (difflib's ratio, case ignored) a known name must be to a typed one to be
#: offered as "did you mean": difflib's own default. At 0.4 'nope' suggested unet3d (0.4);
#: a typo keeps most of the name ('resnet-50' / resnet50: 0.94, 'H1000' / H100: 0.89).
SUGGEST_CUTOFF = 0.6


def close_matches(name: str, choices: Iterable[str], n: int = 4) -> list[str]:
    """The known names a typed ``name`` is a likely typo of (at most ``n``, closest first):
    those at least :data:`SUGGEST_CUTOFF` alike, case ignored, else those that contain it or
    that it contains (``a100`` -> A100-40GB, A100-80GB)."""
    by_lower = {c.lower(): c for c in choices}
    lowered = name.lower()
    close = difflib.get_close_matches(lowered, list(by_lower), n=n, cutoff=SUGGEST_CUTOFF)
    if not close and lowered:
        close = [c for c in by_lower if lowered in c or (c and c in lowered)][:n]
    return [by_lower[c] for c in close]


class UnknownNameError(InvalidInputError):
    """A name (GPU, region, workload...) that is not known; lists the close matches (a name
    not close to any: the known ones). ``field`` starts the line with the flag it came from;
    ``kind`` overrides the class's word for what is unknown."""

    kind: str = "name"
    #: the flag a name of this kind comes from, when the raiser names none (QA 34 B #8: an
    #: unknown GPU read "unknown GPU 'FOO'" where every other error starts with its field)
    default_field: str | None = None

    def __init__(
        self,
        name: str,
        choices: Iterable[str],
        *,
        fix: str | None = None,
        field: str | None = None,
        kind: str | None = None,
    ) -> None:
        choices = sorted(set(choices))
        close = close_matches(name, choices)
        if close:
            hint = f"did you mean {', '.join(close)}?"
        elif choices:
            hint = f"known: {', '.join(choices[:12])}" + (", ..." if len(choices) > 12 else "")
        else:
            hint = "none known"
        what = kind or self.kind
        field = field or self.default_field
        detail = f"unknown {what} {as_typed(name)}: {hint}"
        super().__init__(f"{field + ': ' if field else ''}{detail}", fix=fix)
        #: the flag the name came from, as :class:`InvalidSpecError` names its (QA 40 P #3)
        self.field = field
        #: the message without the field, for a caller that names the field its own way
        self.detail = detail
        self.name = name
        self.close_matches = close


class UnknownGpuError(UnknownNameError):
    kind = "GPU"
    default_field = "gpu"


class UnknownRegionError(UnknownNameError):
    kind = "region"
    default_field = "region"


class UnknownProviderError(UnknownNameError):
    kind = "provider"
    default_field = "provider"


class UnknownWorkloadError(UnknownNameError):
    kind = "workload"
    # QA 38 I #24: measure infer / infer-curve / predict train read "unknown workload ..."
    default_field = "workload"


class UnknownModelError(UnknownNameError):
    """A model not in the catalog (``llm_models.csv``, ``embedding_tables.csv``): ``--model``."""

    kind = "model"
    default_field = "model"  # QA 40 P #5: the one error line that did not start with its flag


class UnknownEngineError(UnknownNameError):
    """An LLM inference engine not in the catalog's ``inference_engines.csv``."""

    kind = "framework"


class UnknownServingEngineError(UnknownNameError):
    """A request-level inference engine not in the catalog's ``serving_engines.csv``."""

    kind = "engine"
    default_field = "engine"


class DeviceUnavailableError(InvalidInputError):
    """A device was asked for that this machine does not have (e.g. CUDA on a CPU host)."""


class NotFittedError(GpucastError):
    """A model was used for prediction before it was fitted or loaded."""


class NoFeasiblePlanError(InvalidInputError):
    """No configuration meets the constraints."""


class MeasurementError(GpucastError):
    """A measurement failed while running (crash, out of memory, timeout)."""


class StoreError(GpucastError):
    """The measurement store could not be read or written."""
