"""``simulate serve --cache-fraction``: a recommendation model served with its embedding rows
behind an HBM cache over host DRAM over SSD (issue #17, HugeCTR-style inference)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import gpucast
from gpucast.cli.app import app
from gpucast.domain.errors import InvalidSpecError

#: 520 lookups of 512-byte rows a request, so misses show in the latency
OPTIONS = {"lookups": 20, "embedding_dim": 128, "bottom_mlp": (512, 256, 128)}
BASE = {
    "model": "dlrm", "gpu": "A100-80GB", "rate": 2000.0, "duration_s": 5.0, "max_batch": 64,
    "max_delay_ms": 1.0, "workload_options": OPTIONS,
}  # fmt: skip


@pytest.fixture(autouse=True)
def _no_shared_data(monkeypatch: pytest.MonkeyPatch) -> None:
    # without dlrm_datasets the hit rate is the cache share (uniform access): exact shares
    monkeypatch.delenv("GPUCAST_SHARED_DATA", raising=False)


def test_misses_add_lookup_time_per_batch() -> None:
    plain = gpucast.simulate_serve(**BASE)
    dram = gpucast.simulate_serve(**BASE, cache_fraction=0.2)
    ssd = gpucast.simulate_serve(**BASE, cache_fraction=0.2, dram_fraction=0.5)
    assert "embedding cache" not in plain.sources
    assert "HBM 20.0% / DRAM 80.0% / SSD 0.0%" in dram.sources["embedding cache"]
    assert "SSD 50.0%" in ssd.sources["embedding cache"]
    assert "ssd.csv" in ssd.sources["embedding cache"]
    b = np.array(plain.latency_curve.batch_sizes)
    added = np.array(dram.latency_curve.latency_s) - np.array(plain.latency_curve.latency_s)
    assert added == pytest.approx(0.8 * b * 520 * 512 / 31.5e9)  # PCIe 4.0 x16
    p99 = [r.serving.latencies().max() for r in (plain, dram, ssd)]
    assert p99[0] <= p99[1] < p99[2]
    summary = [np.percentile(r.serving.latencies(), 50) for r in (plain, ssd)]
    assert summary[1] > summary[0]


def test_pcie_share_counts_the_misses() -> None:
    """The misses read over PCIe inside the device time: the link's share says so."""
    plain = gpucast.simulate_serve(**BASE)
    dram = gpucast.simulate_serve(**BASE, cache_fraction=0.2)
    before = plain.serving.servers[0].stages.get("pcie", 0.0)
    s = dram.serving.servers[0]
    expected = s.requests * 0.8 * 520 * 512 / (31.5e9 * dram.serving.horizon_s)
    assert s.stages["pcie"] == pytest.approx(before + expected)
    assert "embedding misses (212,992 B a request" in dram.sources["pcie"]
    assert "embedding misses" not in plain.sources["pcie"]


def test_cli_names_cache_options_that_have_no_effect() -> None:
    argv = ["simulate", "serve", "--model", "dlrm", "--gpu", "A100-80GB", "--rate", "50",
            "--duration-s", "2"]  # fmt: skip
    ignored = CliRunner().invoke(app, [*argv, "--dram-fraction", "0.1"])
    assert ignored.exit_code == 0, ignored.output
    warning = "--dram-fraction 0.1 has no effect without --cache-fraction"
    assert warning in (ignored.stderr or "")
    used = CliRunner().invoke(app, [*argv, "--dram-fraction", "0.1", "--cache-fraction", "0.5"])
    assert used.exit_code == 0 and "no effect" not in (used.stderr or "")
    assert ", pcie 0%" not in used.output  # the misses cross PCIe: "<1%" at the least


def test_a_dram_tier_smaller_than_the_hbm_cache_is_named() -> None:
    """--cache-fraction 0.1 --dram-fraction 0.05 gave DRAM 0% without a word (QA 35 R #21)."""
    small = gpucast.simulate_serve(**BASE | {"duration_s": 1.0}, cache_fraction=0.1,
                                   dram_fraction=0.05)  # fmt: skip
    assert "DRAM 0.0%" in small.sources["embedding cache"]
    assert any("--dram-fraction 0.05 is below --cache-fraction 0.1" in w for w in small.warnings)
    fine = gpucast.simulate_serve(**BASE | {"duration_s": 1.0}, cache_fraction=0.1,
                                  dram_fraction=0.5)  # fmt: skip
    assert not any("below --cache-fraction" in w for w in fine.warnings)


def test_cache_options_are_checked() -> None:
    with pytest.raises(InvalidSpecError, match="cache-fraction: applies to a recommendation"):
        gpucast.simulate_serve(model="resnet50", gpu="T4", rate=10.0, cache_fraction=0.1)
    for bad, match in (  # each with a fix (QA 35 R #17)
        ({"cache_fraction": 0.0}, r"cache-fraction: .*; e\.g\. --cache-fraction 0\.1"),
        ({"cache_fraction": 0.1, "dram_fraction": 1.5}, r"dram-fraction: .*; e\.g\. --dram"),
        # QA 37 G #11 leftover: no fix
        (
            {"cache_fraction": 0.1, "cache_policy": "fifo"},
            r"cache-policy: must be lru or lfu "
            r"\(got 'fifo'\); e\.g\. --cache-policy lfu \(per-row counters",
        ),
    ):
        with pytest.raises(InvalidSpecError, match=match):
            gpucast.simulate_serve(**BASE, **bad)


def test_cli_bad_cache_fraction_is_one_line_exit_2(tmp_path: Path) -> None:
    argv = ["simulate", "serve", "--model", "dlrm", "--gpu", "A100-80GB", "--rate", "100",
            "--cache-fraction", "2"]  # fmt: skip
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2
    assert "cache-fraction" in result.output or "cache-fraction" in (result.stderr or "")


def test_one_table_given_as_a_number_is_one_table() -> None:
    """QA 34c: -o table_sizes=1000 (one table) with --cache-fraction raised a TypeError in
    dlrm_lookups (the workload itself takes a number as one table)."""
    from gpucast.domain.embeddings import dlrm_lookups

    assert dlrm_lookups({"table_sizes": 1000, "lookups": 2}) == dlrm_lookups(
        {"table_sizes": (1000,), "lookups": 2}
    )
    argv = ["simulate", "serve", "--model", "dlrm", "--gpu", "T4", "--rate", "10",
            "--duration-s", "2", "-o", "table_sizes=1000", "--cache-fraction", "0.5"]  # fmt: skip
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    assert "embedding cache: 1 lookups of 256 B per request" in result.output


def test_json_gives_the_tier_shares_as_numbers() -> None:
    """QA 37 G #19: the HBM/DRAM/SSD shares and miss bytes were only inside the text source."""
    ssd = gpucast.simulate_serve(**BASE | {"duration_s": 1.0}, cache_fraction=0.2,
                                 dram_fraction=0.5).to_dict()  # fmt: skip
    assert ssd["embedding_cache"] == pytest.approx({
        "lookups_per_request": 520, "row_bytes": 512.0, "lookup_share_hbm": 0.2,
        "lookup_share_dram": 0.3, "lookup_share_ssd": 0.5,
        "miss_bytes_per_request": 0.8 * 520 * 512,
    })  # fmt: skip
    assert "SSD 50.0%" in ssd["sources"]["embedding cache"]  # the text stays
    assert gpucast.simulate_serve(**BASE | {"duration_s": 1.0}).to_dict()["embedding_cache"] is None


def test_a_cache_priced_without_locality_data_is_a_warning(shared_data: Path) -> None:
    """QA 39: without dlrm_datasets the hit rate is the cache's share of the rows (uniform
    access), said only in the embedding-cache source line."""
    kw = BASE | {"duration_s": 1.0, "cache_fraction": 0.1}
    uniform = gpucast.simulate_serve(**kw)
    assert [w for w in uniform.warnings if "uniform access" in w] == [
        "--cache-fraction 0.1 is priced at uniform access (hit rate = the cache's share of the "
        "rows): no dlrm_datasets locality data; production lookups are skewed, so the misses "
        "are likely overstated; pass --data-dir ../shared/data (or set $GPUCAST_SHARED_DATA)"
    ]
    fitted = gpucast.simulate_serve(**kw, data_dir=shared_data)
    assert not any("uniform access" in w for w in fitted.warnings)
    assert "HBM 60.6%" in fitted.sources["embedding cache"]
    assert not any("uniform access" in w for w in gpucast.simulate_serve(**BASE).warnings)
