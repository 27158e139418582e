"""Validated errors per model and regime (``data/validation.csv``), looked up per prediction.

Each row says where a model was checked against published measurements -- which GPUs,
precisions and worker counts -- the error it reached, the data and the command that reproduces
it (the scripts in ``benchmarks/``). :func:`validation_for` returns the row that covers a
prediction's regime, or a :class:`~gpucast.domain.provenance.Validation` that says the regime
was never validated (and where the model *was*), so no figure measured on K80/P100 fp32 is
shown next to an H100 bf16 plan.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources

from gpucast.catalog._csv import read_rows
from gpucast.domain.errors import DataFormatError
from gpucast.domain.provenance import Validation

#: the "GPU" of a prediction for this machine's CPU (``predict coldstart`` without ``--gpu``)
CPU = "cpu"
_COLUMNS = ("model", "gpus", "precisions", "min_workers", "max_workers", "error", "data", "command")


@dataclass(frozen=True, slots=True, kw_only=True)
class _Row:
    model: str
    gpus: frozenset[str]  # empty: any GPU
    precisions: frozenset[str]  # empty: any precision
    min_workers: int
    max_workers: int
    error: str
    data: str
    command: str
    #: why the regime is not validated, for a row whose ``error`` is "none" (a regime known
    #: to lack held-out data, said as such rather than as "validated only for ...")
    note: str = ""

    @property
    def unvalidated(self) -> bool:
        return self.error.strip().lower() == "none"

    def covers(self, gpus: set[str], precision: str, workers: int) -> bool:
        return (
            (not self.gpus or gpus <= self.gpus)
            and (not self.precisions or precision in self.precisions)
            and self.min_workers <= workers <= self.max_workers
        )

    def regime(self) -> str:
        gpus = "/".join(sorted(self.gpus)) or "any GPU"
        prec = "/".join(sorted(self.precisions)) or "any precision"
        if self.gpus == {CPU}:
            return f"{gpus}, {prec}"
        n = (
            f"{self.min_workers} GPU"
            if self.min_workers == self.max_workers == 1
            else f"{self.min_workers}-{self.max_workers} GPUs"
        )
        return f"{gpus}, {prec}, {n}"


def _names(text: str) -> frozenset[str]:
    return frozenset() if text.strip() in ("", "*") else frozenset(text.split("|"))


@cache
def _rows() -> tuple[_Row, ...]:
    path = "gpucast/catalog/data/validation.csv"
    text = resources.files("gpucast.catalog").joinpath("data/validation.csv").read_text("utf-8")
    out = []
    for line, row in read_rows(text, path, _COLUMNS):
        try:
            lo, hi = int(row["min_workers"]), int(row["max_workers"])
        except ValueError:
            raise DataFormatError(path, "workers must be integers", line=line) from None
        out.append(
            _Row(
                model=row["model"],
                gpus=_names(row["gpus"]),
                precisions=_names(row["precisions"]),
                min_workers=lo,
                max_workers=hi,
                error=row["error"],
                # "none": a row saying a model has no measurement; not "... on none"
                data="" if row["data"].strip().lower() == "none" else row["data"],
                command=row["command"],
                note=row.get("note", ""),
            )
        )
    return tuple(out)


def validation_for(model: str, gpus: Iterable[str], precision: str, workers: int = 1) -> Validation:
    """The validated error of ``model`` for these GPUs (catalog names), precision and number
    of GPUs; unvalidated regimes say so and name the regimes that were validated -- or, where
    a row marks the regime as known to lack held-out data (``error`` "none"), why."""
    wanted = {g for g in gpus if g}
    rows = [r for r in _rows() if r.model == model]
    hits = [r for r in rows if r.covers(wanted, precision, workers)]
    n = f"{workers} GPU" + ("s" if workers != 1 else "")
    regime = f"{'/'.join(sorted(wanted)) or 'any GPU'}, {precision}"
    if wanted != {CPU}:  # a CPU prediction counts no GPUs
        regime += f", {n}"
    known = [r for r in hits if r.unvalidated]
    if known:
        return Validation(model=model, regime=f"{regime}: {known[0].note}", error=None)
    rows = [r for r in rows if not r.unvalidated]
    if hits:
        errors = "; ".join(f"{'/'.join(sorted(r.gpus)) or 'all'}: {r.error}" for r in hits)
        return Validation(
            model=model,
            regime=regime,
            error=errors,
            data=hits[0].data,
            command=hits[0].command,
        )
    if rows:
        elsewhere = "; ".join(sorted({r.regime() for r in rows}))
        regime += f" (validated only for {elsewhere})"
    return Validation(model=model, regime=regime, error=None)
