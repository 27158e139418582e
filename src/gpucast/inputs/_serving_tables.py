"""Measured latency tables (``--latency-table MODEL@SERVER=CSV``): reading them
(:func:`read_latency_table`, :func:`read_latency_tables`), what they leave to extrapolation
(:func:`latency_table_warnings`), and the refusal of one that names no model on a server the
plan searches (:func:`_check_tables_used`).

Private part of :mod:`gpucast.inputs.serving`, which re-exports its public names.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.domain.serving import LatencyCurve
from gpucast.domain.serving_plan import ModelProfile, ServerOption


def read_latency_table(path: Path) -> LatencyCurve:
    """A CSV with columns ``batch_size`` and ``latency_s`` (rows in any order)."""
    from gpucast.store.files import check_header, read_input_text

    text = read_input_text(path, "latency-table", fix="write a header line 'batch_size,latency_s'")
    reader = csv.DictReader(text.splitlines())
    check_header(reader.fieldnames or (), path)
    if not reader.fieldnames or not {"batch_size", "latency_s"} <= set(reader.fieldnames):
        raise DataFormatError(
            str(path),
            "needs columns batch_size and latency_s",
            fix="write a header line 'batch_size,latency_s'",
        )
    points: dict[int, float] = {}
    for line, row in enumerate(reader, start=2):
        try:
            b, t = int(row["batch_size"]), float(row["latency_s"])
        except (TypeError, ValueError):
            raise DataFormatError(
                str(path), "batch_size must be an integer and latency_s a number", line=line
            ) from None
        if b < 1 or not math.isfinite(t) or t <= 0:
            raise DataFormatError(str(path), "needs batch_size >= 1 and latency_s > 0", line=line)
        points[b] = t
    if not points:
        raise DataFormatError(str(path), "has no rows")
    sizes = sorted(points)
    return LatencyCurve(
        batch_sizes=tuple(sizes),
        latency_s=tuple(points[b] for b in sizes),
        source=f"measured: {Path(path).name}",
    )


def latency_table_warnings(curve: LatencyCurve, largest_batch: int, flag: str) -> list[str]:
    """What a measured latency table leaves to extrapolation or says that no device does
    (QA 34 C #18: one row, or a latency that falls with the batch, were taken silently):
    batches beyond its largest, priced along its last segment (one row: in proportion), and
    a latency lower at a larger batch."""
    sizes, lat = curve.batch_sizes, curve.latency_s
    out = []
    if largest_batch > sizes[-1]:
        if len(sizes) == 1:
            how = f"in proportion to the batch from its one row (batch {sizes[0]})"
        elif lat[-1] < lat[-2]:  # QA 40 V #13: a falling last segment is not followed down
            how = (
                f"flat at its last row's {lat[-1] * 1e3:.3g} ms (batch {sizes[-1]}): its last "
                f"segment (batch {sizes[-2]} to {sizes[-1]}) falls, and is not extended"
            )
        else:
            how = f"along its last segment (batch {sizes[-2]} to {sizes[-1]})"
        out.append(
            f"{flag}: batches up to {largest_batch} are served but the table stops at "
            f"{sizes[-1]}: larger ones are priced {how}; measure them "
            "(gpucast measure infer-curve --batch-sizes ... --csv FILE)"
        )
    falls = [(sizes[k], sizes[k + 1]) for k in range(len(sizes) - 1) if lat[k + 1] < lat[k]]
    if falls:
        a, b = falls[0]
        out.append(
            f"{flag}: the latency falls from batch {a} to batch {b} "
            f"({len(falls)} such step{'s' if len(falls) > 1 else ''}): priced as given, though a "
            "device takes no less time for more work -- check the measurement"
        )
    return out


def parse_latency_table_item(item: str) -> tuple[str, str, Path]:
    """``MODEL@SERVER=CSV`` -> (model, server, path); one error naming the flag otherwise."""
    key, sep, path = item.partition("=")
    model, at, server = key.partition("@")
    if not (sep and at and model and server and path):
        raise InvalidSpecError(
            "latency-table", "must be MODEL@SERVER=CSV", got=item,
            fix="e.g. --latency-table resnet50@T4=t4.csv",
        )  # fmt: skip
    return model, server, Path(path)


def read_latency_tables(items: Iterable[str]) -> dict[tuple[str, str], LatencyCurve]:
    """Measured curves keyed by (model, server option) from ``MODEL@SERVER=CSV`` items."""
    out: dict[tuple[str, str], LatencyCurve] = {}
    for item in items:
        model, server, path = parse_latency_table_item(item)
        out[(model, server)] = read_latency_table(path)
    return out


def _check_tables_used(
    measured: Mapping[tuple[str, str], LatencyCurve],
    profiles: Mapping[tuple[str, str], ModelProfile],
    models: Sequence[str],
    options: Sequence[ServerOption],
) -> None:
    """A ``--latency-table MODEL@SERVER`` that names no planned model on a searched server
    would be dropped without a word while the output said it was used: one error instead."""
    unused = [f"{m}@{s}" for m, s in measured if (m, s) not in profiles]
    if not unused:
        return
    servers = [o.name for o in options]
    shown = ", ".join(servers[:8]) + (f", ... ({len(servers)})" if len(servers) > 8 else "")
    raise InvalidSpecError(
        "latency-table",
        f"{unused[0]} names no model on a server this plan searches (models: "
        f"{', '.join(models)}; servers: {shown})",
        fix=f"spell both as listed, e.g. --latency-table {models[0]}@{servers[0]}=FILE, or "
        "add the server with --gpu",
    )
