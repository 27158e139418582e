"""mlperf_training_later.csv: later MLPerf Training rounds' runs (v4.1, v5.1), each sourced,
and the held-out check benchmarks/mlperf_later_rounds.py runs on them, pinned to the figures
the README states so a change to the model or the catalog cannot move them silently."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pandas as pd

from gpucast.catalog import load_catalog


def test_every_row_is_sourced_and_maps_to_the_catalog_or_says_not(
    load_benchmark: Callable[[str], ModuleType],
) -> None:
    runs = load_benchmark("mlperf_later_rounds").later_runs()
    raw = pd.read_csv(
        Path(__file__).parents[2] / "src/gpucast/catalog/data/mlperf_training_later.csv"
    )
    assert len(raw) == 86 and len(runs) == 86
    assert set(raw["round"]) == {"v4.1", "v5.1"}
    assert set(raw.benchmark) == {"llama2_70b_lora", "gnn"}
    assert raw.source_url.str.match(
        r"https://github\.com/[^/]+/training_results_v\d\.\d/blob/[0-9a-f]{40}/"
    ).all()
    assert (runs.minutes > 0).all() and (runs.global_batch_size > 0).all()
    catalog = load_catalog()
    for gpu in set(runs.gpu) - {""}:
        catalog.gpu(gpu)
    unmapped = set(runs.accelerator[runs.gpu == ""])
    assert unmapped == {"AMD Instinct MI350X", "NVIDIA Blackwell Ultra GPU (GB300)"}


def test_lora_on_later_rounds_matches_the_readme(
    load_benchmark: Callable[[str], ModuleType],
) -> None:
    bench = load_benchmark("mlperf_later_rounds")
    table = bench.lora_rows(bench.later_runs())
    stats = bench.summary(table)

    def pct(group: str, key: str = "mape") -> float:
        return round(stats[group][key] * 100, 1)

    assert stats["all"]["systems"] == 54
    # session 34's step-time refit (the CNN all-reduce inside a node at NCCL's PCIe figures;
    # the host pacing 6.5 -> 6.75 ms, which a refit of main alone also gives) moved these from
    # 14.5 / 25.1, H100 13.8, H200 11.1, B200 35.9, MI 6.5 / 7.8 / 30.7, GB200 154.8 (49.4),
    # rounds 13.2 / 32.6
    assert pct("all", "median_abs") == 13.8 and pct("all") == 25.2
    assert pct("H100-SXM") == 13.5 and pct("H200") == 10.5 and pct("B200") == 36.6
    assert pct("MI325X") == 6.8 and pct("MI355X") == 7.3 and pct("MI300X") == 31.2
    assert pct("GB200") == 158.0 and pct("GB200", "mape_no_host") == 45.5
    assert pct("round v4.1") == 12.8 and pct("round v5.1") == 33.1
    # session 33: the band x0.87-1.40 (L40S's tensor-parallel all-reduce at the PCIe figure;
    # x0.88-1.39 before) held three more systems predicted 14-16% slow (64.8% before); session
    # 34's x0.86-1.39 one more (70.4% before)
    assert pct("all", "covered") == 72.2
    # GB200 trays are priced as NVLink racks: 512 GPUs as 8 racks of 64
    racks = bench._racks(bench.later_runs())
    big = racks[(racks.gpu == "GB200") & (racks.accelerators == 512)].iloc[0]
    assert (big.accel_per_node, big.nodes) == (64, 8)


def test_rgat_on_later_rounds_matches_the_readme(
    load_benchmark: Callable[[str], ModuleType], shared_data: Path
) -> None:
    bench = load_benchmark("mlperf_later_rounds")
    table, (scale, per_step_s) = bench.gnn_rows(bench.later_runs(), shared_data)
    stats = bench.summary(table)
    assert (round(scale, 3), round(per_step_s * 1e3, 1)) == (0.506, 29.9)
    assert stats["all"]["systems"] == 27
    assert round(stats["H200"]["mape"] * 100, 1) == 4.1
    assert round(stats["B200"]["mape"] * 100, 1) == 30.3
    assert round(stats["H100-SXM"]["mape"] * 100, 1) == 14.8
    # one factor alone (before session 33), as the README's comparison states it
    assert round(stats["B200"]["mape_factor"] * 100, 1) == 45.3
    assert round(stats["H200"]["mape_factor"] * 100, 1) == 12.4
