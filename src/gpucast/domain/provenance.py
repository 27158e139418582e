"""Where a number came from: sourced values, assumptions a result rests on, validated errors.

* :class:`Sourced` -- a value and a one-line source ("fitted on 48 GCE V100 lifetimes, 2019",
  "roofline prior, uncalibrated"); what every function of :mod:`gpucast.inputs` returns.
* :class:`Assumption` -- a default or a derived input that changes a result, with where it
  came from and the flag that overrides it; listed under ``assumptions`` in JSON and HTML.
* :class:`Validation` -- the validated error of one model *in one regime* (GPU generation,
  precision, scale), with the data and the command that measured it; a prediction outside
  every validated regime says so instead of borrowing another regime's figure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Sourced(Generic[T]):
    """A value and where it came from."""

    value: T
    source: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Assumption:
    """One input a result rests on: ``value`` from ``source``; ``override`` is the flag (or
    keyword) that changes it ("" when nothing does)."""

    name: str
    value: str
    source: str = ""
    override: str = ""

    def text(self) -> str:
        parts = [self.value]
        if self.source:
            parts.append(f"({self.source})")
        if self.override:
            parts.append(f"[override: {self.override}]")
        return " ".join(parts)

    def to_dict(self) -> dict[str, str]:
        return {
            "name": self.name,
            "value": self.value,
            "source": self.source,
            "override": self.override,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Assumption:
        return cls(
            name=str(data["name"]),
            value=str(data.get("value", "")),
            source=str(data.get("source", "")),
            override=str(data.get("override", "")),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Validation:
    """The validated error of ``model`` in one regime (``None`` error: not validated there).

    ``regime`` says where it holds (e.g. "K80/P100, fp32, 1 GPU, TensorFlow 1.10");
    ``error`` the figure as measured (e.g. "MAPE 4.8% / 8.9% leave-one-model-out");
    ``data`` what it was measured on; ``command`` reproduces it.
    """

    model: str
    regime: str
    error: str | None
    data: str = ""
    command: str = ""

    @property
    def validated(self) -> bool:
        return self.error is not None

    def text(self) -> str:
        if self.error is None:
            return f"not validated for {self.regime}"
        # the regime is the prediction's, the data what the error was measured on (QA 41 R15:
        # "(A100-40GB, bf16, 1 GPU on cmdare/checkpoint/...)" read as if the data were A100 bf16)
        where = f"; measured on {self.data}" if self.data else ""
        return f"{self.error} (for {self.regime}{where})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "regime": self.regime,
            "error": self.error,
            "validated": self.validated,
            # null, not "", where no measurement backs the figure
            "data": self.data or None,
            "command": self.command or None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Validation:
        error = data.get("error")
        return cls(
            model=str(data.get("model", "")),
            regime=str(data.get("regime", "")),
            error=None if error is None else str(error),
            data=str(data.get("data") or ""),
            command=str(data.get("command") or ""),
        )
