"""``gpucast predict embedding-cache``: the hit-rate curve as a table, --json, bad input."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

import gpucast
from gpucast.app.embeddings import DEFAULT_FRACTIONS
from gpucast.cli.app import app

runner = CliRunner()


def test_prints_cache_share_to_hit_rate(shared_data: Path) -> None:
    argv = ["predict", "embedding-cache", "--data-dir", str(shared_data), "--fractions",
            "0.01,0.1,0.5"]  # fmt: skip
    result = runner.invoke(app, argv)
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.startswith("LRU hit rate, dlrm_datasets 2022 window fbgemm_t788_bs131072_0")
    assert "predicted" in out and "replayed" not in out.split("validated:")[0]
    assert "1,102,592" in out  # 1% of 110,259,238 distinct rows
    assert "34.2%" in out and "87.5%" in out
    assert "validated:" in out and "assumption replay: not replayed" in out


def test_replay_adds_a_column(shared_data: Path) -> None:
    argv = ["predict", "embedding-cache", "--data-dir", str(shared_data), "--window", "2021",
            "--policy", "lfu", "--fractions", "0.01,0.2", "--replay",
            "--replay-rows", "5000"]  # fmt: skip
    result = runner.invoke(app, argv)
    assert result.exit_code == 0, result.output
    header = result.stdout.splitlines()[1]
    assert "replayed" in header and result.stdout.startswith("LFU hit rate")
    assert result.stderr.startswith("warning: --replay-rows 5,000")  # 6.0 lookups a row, not 6.9
    data = json.loads(runner.invoke(app, [*argv, "--json"]).stdout)
    assert data["replay_rows"] == 5000 and len(data["points"]) == 2
    assert all(p["replayed_hit_rate"] is not None for p in data["points"])


def test_bad_input_is_one_line_exit_2(shared_data: Path) -> None:
    for args, text in (
        (["--fractions", "0.1,2"], "fractions: each must be in (0, 1]"),
        (["--window", "2023"], "window: must be a dlrm_datasets window"),
        (["--policy", "mru"], "policy: must be lru or lfu"),
    ):
        result = runner.invoke(
            app, ["predict", "embedding-cache", "--data-dir", str(shared_data), *args]
        )
        assert result.exit_code == 2, result.output
        err = result.stderr or ""
        assert text in err and len(err.strip().splitlines()) == 1


def test_a_blank_fractions_list_is_refused_and_an_empty_api_one_is_the_default(
    shared_data: Path,
) -> None:
    """QA 37 G #17, with the house rule for a blank list on the command line (refused with a
    fix, as ``--models ''`` is: QA 35 S #17); the API's ``fractions=()`` is "not given"."""
    base = ["predict", "embedding-cache", "--data-dir", str(shared_data), "--json"]
    blank = runner.invoke(app, [*base, "--fractions", ""])
    assert blank.exit_code == 2 and "fractions: needs 1 to 64 cache sizes" in blank.stderr
    api = gpucast.predict_embedding_cache(data_dir=shared_data, fractions=())
    assert [p.fraction for p in api.points] == list(DEFAULT_FRACTIONS)


def test_a_cache_policy_is_read_in_any_case_as_precision_is(shared_data: Path) -> None:
    """QA 39 G #11: --policy LRU was refused (case-sensitive) where --precision BF16 is not."""
    argv = ["predict", "embedding-cache", "--data-dir", str(shared_data), "--fractions", "0.1"]
    lower = runner.invoke(app, [*argv, "--policy", "lfu", "--json"])
    upper = runner.invoke(app, [*argv, "--policy", "LFU", "--json"])
    assert upper.exit_code == 0, upper.output
    assert upper.stdout == lower.stdout
    plan = gpucast.plan_embeddings(model="dlrm-dcnv2", gpu="A100-80GB", cache_policy=" Lfu ")
    assert (
        plan.assumptions
        == gpucast.plan_embeddings(
            model="dlrm-dcnv2", gpu="A100-80GB", cache_policy="lfu"
        ).assumptions
    )
    bad = runner.invoke(app, [*argv, "--policy", "MRU"])
    assert bad.exit_code == 2 and "policy: must be lru or lfu (got 'mru')" in bad.stderr
