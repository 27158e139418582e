"""Importer of CM-DARE VM start-up times: ``startup_time/{on_demand,pre}_{east,west}/*.csv``.

Store format, one row per VM launch (seconds):

==================  ==================================================
``gpu``             ``K80`` / ``P100`` (from the file name)
``market``          ``on_demand`` or ``spot`` (GCE preemptible, folder ``pre``)
``region``          ``east`` / ``west`` (presumably us-east1 / us-west1)
``provisioning_s``  time in the GCE PROVISIONING state
``staging_s``       time in STAGING
``booting_s``       time from RUNNING until the guest was ready
==================  ==================================================
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd

from gpucast.domain.errors import DataFormatError
from gpucast.store.datasets._import import ImportResult
from gpucast.store.files import read_csv_input

COLUMNS: tuple[str, ...] = ("gpu", "market", "region", "provisioning_s", "staging_s", "booting_s")
_FOLDER_RE = re.compile(r"^(?P<market>on_demand|pre)_(?P<region>[a-z]+)$")
_GPU_RE = re.compile(r"(k80|p100|v100|t4|p4|a100)", re.IGNORECASE)
_SOURCE = {"Provisioning": "provisioning_s", "Staging": "staging_s", "Booting": "booting_s"}


def read_startup_times(root: Path) -> ImportResult:
    """Read every launch under ``root`` (the ``startup_time`` folder)."""
    if not root.is_dir():
        raise DataFormatError(str(root), "is not a folder", fix="pass cmdare/startup_time")
    rows: list[dict[str, object]] = []
    skipped: list[str] = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        match = _FOLDER_RE.match(folder.name)
        if match is None:
            skipped.append(f"{folder}: folder name is not <on_demand|pre>_<region>")
            continue
        market = "spot" if match["market"] == "pre" else "on_demand"
        for path in sorted(folder.glob("*.csv")):
            gpu_match = _GPU_RE.search(path.stem)
            if gpu_match is None:
                skipped.append(f"{path}: no GPU name in the file name")
                continue
            raw = read_csv_input(path, "data-dir", dtype=str, keep_default_na=False)
            missing = [c for c in _SOURCE if c not in raw.columns]
            if missing:
                raise DataFormatError(
                    str(path), f"missing column(s) {', '.join(missing)}", column=missing[0]
                )
            for line, rec in enumerate(raw.to_dict("records"), start=2):
                out: dict[str, object] = {
                    "gpu": gpu_match[1].upper(),
                    "market": market,
                    "region": match["region"],
                }
                problem = None
                for src, dst in _SOURCE.items():
                    try:
                        value = float(str(rec[src]).strip())
                    except ValueError:
                        problem = f"column {src!r} is not a number ({rec[src]!r})"
                        break
                    if not math.isfinite(value) or value <= 0:
                        problem = f"column {src!r} must be a finite number > 0"
                        break
                    out[dst] = value
                if problem is not None:
                    skipped.append(f"{path}, line {line}: {problem}")
                    continue
                rows.append(out)
    if not rows:
        raise DataFormatError(str(root), "holds no start-up rows", fix="pass cmdare/startup_time")
    return ImportResult(frame=pd.DataFrame(rows, columns=list(COLUMNS)), skipped=tuple(skipped))
