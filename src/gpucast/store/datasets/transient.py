"""Importers for ``../shared/data/transient/`` (and the CM-DARE overhead files the simulator uses).

* :func:`parse_lifetime_csv` / :func:`read_lifetimes`: the multi-section ``lifetime.csv`` of
  preemptible GCE VM lifetimes. Valid rows become :class:`LifetimeRecord`; every row that is
  not is reported in :attr:`LifetimeParse.skipped` with its line and reason — never a crash.
* :func:`lifetimes_frame`: the records as the frame :class:`~gpucast.predict.revocation.
  RevocationModel` fits (``gpu, region, duration_s, observed``), censored at the 24 h cap.
* :func:`read_training_experiments`: the end-to-end ResNet-32 runs on K80 spot / on-demand
  clusters (duration, cost, revoked workers per run).
* :func:`read_price_table`: a ``server,market,usd_per_hour`` CSV as a
  :class:`~gpucast.domain.simulation.PriceTable`.
* :func:`read_chief_rejoining`, :func:`read_startup_times`: CM-DARE's restart and VM start-up
  measurements, in the shapes :mod:`gpucast.predict.revocation` and the simulator take.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.domain.simulation import PriceTable, normalise_market
from gpucast.domain.spot import (
    DEFAULT_CAP_TOLERANCE_S,
    GCP_PREEMPTIBLE_CAP_S,
    EvalSeries,
    censor_observed,
    zone_to_region,
)
from gpucast.store.files import read_csv_input

# -- lifetime.csv ----------------------------------------------------------------------------

STUDY_2019 = "2019-02"
STUDY_2018 = "previous"
#: Per the dataset's README: the 2018 "test" VMs ran in us-east1-b on n1-standard-4 (no GPU).
PREVIOUS_TEST_ZONE = "us-east1-b"
CPU = "cpu"


@dataclass(frozen=True, slots=True, kw_only=True)
class LifetimeRecord:
    """One preemptible VM: its name, GPU (``cpu`` for none), zone and lifetime in seconds."""

    line: int
    vm_name: str
    gpu: str
    zone: str
    loaded: bool  # False for the "less" (no load) VMs
    study: str  # STUDY_2019 or STUDY_2018
    duration_s: float

    @property
    def region(self) -> str:
        return zone_to_region(self.zone)


@dataclass(frozen=True, slots=True, kw_only=True)
class SkippedRow:
    line: int
    text: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LifetimeParse:
    path: str
    records: tuple[LifetimeRecord, ...]
    skipped: tuple[SkippedRow, ...]

    def report(self) -> str:
        lines = [f"{self.path}: {len(self.records)} lifetimes, {len(self.skipped)} rows skipped"]
        lines += [f"  line {s.line}: {s.reason}: {s.text!r}" for s in self.skipped]
        return "\n".join(lines)


_GPU_SECTIONS = {"K80", "P100", "V100"}
_NAME_2019 = re.compile(
    r"^a-(?:(?P<gpu>p100|v100|k80)-)?(?P<zone>[a-z]+-[a-z]+\d+-[a-z])-(?P<i>\d+)(?P<less>less)?$"
)
_NAME_PREV = re.compile(r"^(?P<kind>test|gpu)(?P<i>\d+)(?P<less>less)?(?P<night>night)?$")
_DAY_BLOCK = re.compile(r"^\d{1,2}-[A-Z][a-z]{2}$")
_ZONE_HEADER = re.compile(r"^[a-z]+-[a-z]+\d+-[a-z]$")
_CLOCK = re.compile(r"^(\d+):(\d{2}):(\d{2})$")


def _parse_2019_time(text: str) -> datetime | None:
    try:
        return datetime.strptime(text.strip(), "%m/%d/%y %H:%M")
    except ValueError:
        return None


def _clock_s(text: str) -> tuple[float, bool] | None:
    """Seconds of ``H:MM:SS``; flag whether the hour is a time of day (< 24).

    The exported spreadsheet shows some cells as elapsed hours since its epoch
    (``1046389:24:27``): still a valid clock, just not wrapped at 24 h.
    """
    m = _CLOCK.match(text.strip())
    if m is None:
        return None
    h, mi, s = (int(g) for g in m.groups())
    if mi >= 60 or s >= 60:
        return None
    return h * 3600.0 + mi * 60.0 + s, h < 24


def parse_lifetime_csv(text: str, path: str = "lifetime.csv") -> LifetimeParse:
    """Parse the sectioned lifetime spreadsheet export (see ``../shared/data/README.md``)."""
    records: list[LifetimeRecord] = []
    skipped: list[SkippedRow] = []
    section: str | None = None  # a GPU name, "previous", or None before any header
    prev_zone: str | None = None  # zone sub-header inside a day block of the 2018 section

    def skip(line: int, cells: list[str], reason: str) -> None:
        skipped.append(SkippedRow(line=line, text=",".join(cells), reason=reason))

    for line_no, raw in enumerate(text.splitlines(), start=1):
        cells = next(csv.reader([raw])) if raw.strip() else []
        cells = [c.strip() for c in cells]
        while cells and cells[-1] == "":
            cells.pop()
        if not cells:
            continue
        head = cells[0]
        if len(cells) == 1 and head in _GPU_SECTIONS:
            section, prev_zone = head, None
            continue
        if len(cells) == 1 and head.lower() == "previous experiments":
            section, prev_zone = STUDY_2018, None
            continue
        if head == "VM name":
            continue
        if section == STUDY_2018 and _DAY_BLOCK.match(head):
            prev_zone = None
            continue
        if section == STUDY_2018 and len(cells) == 1 and _ZONE_HEADER.match(head):
            prev_zone = head
            continue
        if section is None:
            skip(line_no, cells, "row before any section header")
            continue
        if len(cells) != 3:
            skip(line_no, cells, f"expected 3 cells (name, start, end), got {len(cells)}")
            continue
        name, start_text, end_text = cells
        if section in _GPU_SECTIONS:
            m = _NAME_2019.match(name)
            if m is None:
                skip(line_no, cells, "VM name is not a-[gpu-]<zone>-<i>[less]")
                continue
            if m.group("gpu") and m.group("gpu").upper() != section:
                skip(line_no, cells, f"{m.group('gpu').upper()} VM inside the {section} section")
                continue
            start, end = _parse_2019_time(start_text), _parse_2019_time(end_text)
            if start is None or end is None:
                skip(line_no, cells, "start/terminate is not M/D/YY H:MM")
                continue
            duration = (end - start).total_seconds()
            if duration < 0:
                skip(line_no, cells, "terminates before it starts")
                continue
            records.append(
                LifetimeRecord(
                    line=line_no,
                    vm_name=name,
                    gpu=section,
                    zone=m.group("zone"),
                    loaded=m.group("less") is None,
                    study=STUDY_2019,
                    duration_s=duration,
                )
            )
            continue
        # the 2018 section
        m = _NAME_PREV.match(name)
        if m is None:
            skip(line_no, cells, "VM name is not testN[less][night] or gpuN")
            continue
        a, b = _clock_s(start_text), _clock_s(end_text)
        if a is None or b is None:
            skip(line_no, cells, "created/terminated is not a H:MM:SS time")
            continue
        (start_s, start_tod), (end_s, end_tod) = a, b
        if start_tod and end_tod:
            duration = end_s - start_s
            if duration < 0:  # terminated earlier in the day than created: the next day
                duration += 86400.0
        elif not start_tod and not end_tod:
            duration = end_s - start_s  # both elapsed-hour stamps: a plain difference
            if duration < 0:
                skip(line_no, cells, "elapsed-hour stamps terminate before they start")
                continue
        else:
            skip(line_no, cells, "mixes a time of day with an elapsed-hour stamp")
            continue
        if m.group("kind") == "gpu":
            if prev_zone is None:
                skip(line_no, cells, "GPU VM outside a zone sub-header")
                continue
            gpu, zone = "K80", prev_zone
        else:
            gpu, zone = CPU, PREVIOUS_TEST_ZONE
        records.append(
            LifetimeRecord(
                line=line_no,
                vm_name=name,
                gpu=gpu,
                zone=zone,
                loaded=m.group("less") is None,
                study=STUDY_2018,
                duration_s=duration,
            )
        )
    return LifetimeParse(path=path, records=tuple(records), skipped=tuple(skipped))


def read_lifetimes(path: Path) -> LifetimeParse:
    """Read and parse ``lifetime.csv``; a missing or unreadable file is bad input."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise DataFormatError(
            str(path),
            f"cannot read: {exc.strerror or exc}",
            fix="pass the path of transient/lifetime/lifetime.csv",
        ) from None
    return parse_lifetime_csv(text, str(path))


def lifetimes_frame(
    records: Iterable[LifetimeRecord],
    *,
    studies: Iterable[str] | None = (STUDY_2019,),
    cap_s: float = GCP_PREEMPTIBLE_CAP_S,
    cap_tolerance_s: float = DEFAULT_CAP_TOLERANCE_S,
) -> pd.DataFrame:
    """The records as ``gpu, region, zone, duration_s, observed, loaded, study, vm_name``.

    ``observed`` is False (right-censored) for lifetimes that reached the 24 h cap.
    ``studies``: which sections to keep (default: the February 2019 study, contemporaneous
    with the published training runs); ``None`` keeps all.
    """
    keep = None if studies is None else set(studies)
    rows = [r for r in records if keep is None or r.study in keep]
    frame = pd.DataFrame(
        {
            "gpu": [r.gpu for r in rows],
            "region": [r.region for r in rows],
            "zone": [r.zone for r in rows],
            "duration_s": np.array([r.duration_s for r in rows], dtype=np.float64),
            "loaded": [r.loaded for r in rows],
            "study": [r.study for r in rows],
            "vm_name": [r.vm_name for r in rows],
        }
    )
    frame["observed"] = censor_observed(
        frame["duration_s"].to_numpy(np.float64), cap_s=cap_s, tolerance_s=cap_tolerance_s
    )
    return frame


# -- price tables --------------------------------------------------------------------------


def parse_price_table(text: str, path: str) -> PriceTable:
    """``server,market,usd_per_hour`` rows (``market`` spot | on-demand) as a PriceTable."""
    from gpucast.store.files import check_header

    reader = csv.reader(io.StringIO(text))
    header = [h.strip() for h in next(reader, [])]
    check_header(header, path)
    required = ("server", "market", "usd_per_hour")
    missing = [c for c in required if c not in header]
    if missing:
        raise DataFormatError(
            path,
            f"missing column(s) {', '.join(missing)}",
            line=1,
            fix="the header must be: server,market,usd_per_hour",
        )
    idx = {c: header.index(c) for c in required}
    prices: dict[tuple[str, str], float] = {}
    for cells in reader:
        line = reader.line_num
        if not cells or all(not c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            raise DataFormatError(
                path, f"expected {len(header)} cells, got {len(cells)}", line=line
            )
        server = cells[idx["server"]].strip()
        raw_market = cells[idx["market"]].strip()
        try:
            market = normalise_market(raw_market)
        except InvalidSpecError:
            raise DataFormatError(
                path,
                f"market must be spot or on-demand, got {raw_market!r}",
                line=line,
                column="market",
            ) from None
        try:
            price = float(cells[idx["usd_per_hour"]])
        except ValueError:
            price = math.nan
        if not (math.isfinite(price) and price >= 0):
            raise DataFormatError(
                path, "usd_per_hour must be a number >= 0", line=line, column="usd_per_hour"
            )
        if not server:
            raise DataFormatError(path, "server is empty", line=line, column="server")
        prices[(server, market)] = price
    return PriceTable(usd_per_hour=prices, source=path)


def read_price_table(path: Path) -> PriceTable:
    from gpucast.store.files import read_input_text

    fix = "pass a CSV with columns server,market,usd_per_hour"
    return parse_price_table(read_input_text(path, "price-table", fix=fix), str(path))


# -- end-to-end training runs ------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingExperiment:
    """One folder of ``transient/training``: N K80 workers + 1 PS, spot or on demand.

    ``runs`` columns: ``zone, run, duration_s, accuracy, cost_usd, in_agg`` (kept by the
    authors' ``agg_data.csv``) and, where ``vm_data.csv`` exists, ``revoked`` (workers with
    status Revoked) and ``manually_stopped``.
    """

    name: str
    workers: int
    spot: bool
    runs: pd.DataFrame


def _read_csv(path: Path) -> pd.DataFrame:
    return read_csv_input(path, "data-dir")


def read_training_experiment(folder: Path, *, workers: int, spot: bool) -> TrainingExperiment:
    processed = _read_csv(folder / "train_data_processed.csv")
    cost = _read_csv(folder / "cost.csv")
    if len(cost) != len(processed):
        raise DataFormatError(
            str(folder / "cost.csv"), f"{len(cost)} rows but {len(processed)} runs"
        )
    runs = pd.DataFrame(
        {
            "zone": processed["Zone"].astype(str),
            "run": processed["Run"].astype(int),
            "duration_s": processed["Duration"].astype(float),
            "accuracy": processed["Accuracy"].astype(float),
            "cost_usd": cost["Cost"].astype(float).to_numpy(),
        }
    )
    agg_path = folder / "agg_data.csv"
    if agg_path.is_file():
        agg = _read_csv(agg_path)
        kept = set(zip(agg["Zone"].astype(str), agg["Run"].astype(int), strict=True))
        runs["in_agg"] = [(z, r) in kept for z, r in zip(runs["zone"], runs["run"], strict=True)]
    else:
        runs["in_agg"] = True
    vm_path = folder / "vm_data.csv"
    if vm_path.is_file():
        vm = _read_csv(vm_path)
        if len(vm) != workers * len(runs):
            raise DataFormatError(str(vm_path), f"{len(vm)} VM rows, expected {workers} per run")
        if "Revoked" in vm.columns:
            status = vm["Revoked"].astype(str).str.lower().to_numpy().reshape(len(runs), workers)
            runs["revoked"] = (status == "revoked").sum(axis=1)
            runs["manually_stopped"] = np.char.startswith(status.astype(str), "manually").sum(1)
    return TrainingExperiment(name=folder.name, workers=workers, spot=spot, runs=runs)


def read_training_experiments(training_dir: Path) -> list[TrainingExperiment]:
    """All spot (2/4/8) and on-demand (1/2/4/8) K80 experiments under ``training_dir``."""
    out: list[TrainingExperiment] = []
    for n in (2, 4, 8):
        folder = training_dir / "k80_spot" / f"{n}-spot"
        if folder.is_dir():
            out.append(read_training_experiment(folder, workers=n, spot=True))
    for label, n in (("k80", 1), ("2", 2), ("4", 4), ("8", 8)):
        folder = training_dir / "k80_on_demand" / f"{label}-demand"
        if folder.is_dir():
            out.append(read_training_experiment(folder, workers=n, spot=False))
    return out


# -- CM-DARE overhead files used by the simulator -----------------------------------------------

_EXP = re.compile(r"^exp-(\d+)(?:-\d+)?$")


def read_chief_rejoining(folder: Path) -> list[EvalSeries]:
    """``chief_rejoining/*.csv``: ``exp-<N>[-k]`` (chief left at step N) and ``base*`` runs."""
    out: list[EvalSeries] = []
    for path in sorted(folder.glob("*.csv")):
        frame = _read_csv(path)
        m = _EXP.match(path.stem)
        out.append(
            EvalSeries(
                name=path.stem,
                steps=tuple(float(x) for x in frame["Step"]),
                wall_s=tuple(float(x) for x in frame["Wall time"]),
                chief_left_at_step=int(m.group(1)) if m else None,
            )
        )
    return out


_STARTUP_FOLDER = re.compile(r"^(on_demand|pre)_(east|west)$")
_STARTUP_GPU = re.compile(r"vm_time_measure_([a-z0-9]+)")


def read_startup_times(folder: Path) -> pd.DataFrame:
    """``startup_time/{on_demand,pre}_{east,west}/*.csv`` as one frame.

    Columns: ``gpu, market (spot|on-demand), region (us-east1|us-west1, presumed), total_s``
    plus the three phases. Spot = GCE preemptible.
    """
    frames = []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        fm = _STARTUP_FOLDER.match(sub.name)
        if fm is None:
            continue
        for path in sorted(sub.glob("*.csv")):
            gm = _STARTUP_GPU.match(path.stem)
            if gm is None:
                continue
            frame = _read_csv(path)
            phases = ["Provisioning", "Staging", "Booting"]
            if any(c not in frame.columns for c in phases):
                raise DataFormatError(str(path), f"missing one of {', '.join(phases)}")
            frame = frame[phases].astype(float)
            frame.columns = ["provisioning_s", "staging_s", "booting_s"]
            frame["total_s"] = frame.sum(axis=1)
            frame["gpu"] = gm.group(1).upper()
            frame["market"] = normalise_market(fm.group(1))
            frame["region"] = "us-east1" if fm.group(2) == "east" else "us-west1"
            frames.append(frame)
    if not frames:
        raise DataFormatError(
            str(folder), "no startup-time CSVs found", fix="pass cmdare/startup_time"
        )
    return pd.concat(frames, ignore_index=True)


# -- published speeds not in ../shared/data ---------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedSingleWorker:
    """A published single-worker speed (1 GPU worker + 1 PS, global steps/s) of a gpucast
    workload -- ``workload`` with ``options`` (as ``-o KEY=VALUE`` texts) -- on ``gpu``, and
    the setup it was measured in: per-GPU batch, precision and software stack."""

    workload: str
    options: tuple[tuple[str, str], ...]
    gpu: str
    steps_per_s: float
    batch_size: int
    precision: str
    software: str  # the ``--software`` stack it prices
    framework: str  # the code base measured, as its authors name it
    source: str

    @property
    def setup(self) -> str:
        return (
            f"1 worker + 1 PS, {self.framework} (--software {self.software}), "
            f"batch {self.batch_size}, {self.precision}"
        )


#: Single-worker speeds from CM-DARE files that the shared data subset does not include.
#: CM-DARE's "ResNet-32" is Tensor2Tensor's ``resnet_cifar_32``: ``resnet_cifar_15`` with 5
#: basic blocks per stage (32/64/128 filters, projection shortcuts; 1,857,722 parameters in 104
#: tensors, ``cmdare/checkpoint/aggregated.csv``), i.e. gpucast's ``cifar-resnet15 -o
#: blocks=5,5,5`` (1,856,026 in 104) -- not He et al.'s ``cifar-resnet32`` (464,154 parameters,
#: 16/32/64 filters, ~1/4 of the FLOPs). Median of the TensorBoard samples at steps 501..4901
#: of ``speed_and_cluster_size/k80/res32k80worker1`` (first 4 are warm-up); TensorFlow 1.10,
#: FP32, batch 128 as every CM-DARE speed.
PUBLISHED_SINGLE_WORKER: tuple[PublishedSingleWorker, ...] = (
    PublishedSingleWorker(
        workload="cifar-resnet15",
        options=(("blocks", "5,5,5"),),
        gpu="K80",
        steps_per_s=4.516,
        batch_size=128,
        precision="fp32",
        software="tf1",
        framework="TensorFlow 1.10",
        source="CM-DARE data/processed_data/speed_and_cluster_size/k80/res32k80worker1 "
        "(github.com/cake-lab/CM-DARE @ e3f2dca; T2T resnet_cifar_32), median of 45 samples",
    ),
)


def _option_text(value: object) -> str:
    """An option's value as ``-o`` writes it (``(5, 5, 5)`` and ``"5,5,5"`` alike)."""
    if isinstance(value, list | tuple):
        return ",".join(str(v).strip() for v in value)
    return ",".join(part.strip() for part in str(value).split(","))


def published_single_worker(
    workload: str, options: Iterable[tuple[str, object]], gpu: str
) -> PublishedSingleWorker | None:
    """The published single-worker speed of ``workload`` with exactly ``options`` on ``gpu``
    (a catalog GPU name), or ``None``."""
    wanted = sorted((key, _option_text(value)) for key, value in options)
    for row in PUBLISHED_SINGLE_WORKER:
        if row.workload == workload.lower() and row.gpu == gpu and sorted(row.options) == wanted:
            return row
    return None
