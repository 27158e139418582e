"""MLPerf evaluation schedules (``catalog/data/mlperf_eval.csv``)."""

from __future__ import annotations

import pytest

from gpucast.catalog.mlperf_eval import load_mlperf_eval, mlperf_eval_schedule, parse_mlperf_eval
from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.domain.published import MLPERF_HELD_OUT, MLPERF_WORKLOADS

_HEAD = (
    "name,every_samples,every_samples_per_batch,every_round,start_samples,eval_samples,"
    "skip_evaluations,skip_evaluations_per_batch,timed,source_url,as_of\n"
)


def test_every_expressed_benchmark_has_a_sourced_schedule() -> None:
    rows = load_mlperf_eval()
    assert set(MLPERF_WORKLOADS) | set(MLPERF_HELD_OUT) <= set(rows)
    for schedule in rows.values():
        assert "mlperf_eval.csv" in schedule.source and "as of 2026-" in schedule.source
    resnet = mlperf_eval_schedule("ResNet")
    assert resnet.interval_samples(3200) == 4 * 1_281_167  # every 4 epochs
    assert resnet.eval_samples == 50_000
    assert mlperf_eval_schedule("bert").interval_samples(4608) == 200_000
    assert all(mlperf_eval_schedule(b).timed for b in ("resnet", "bert", "unet3d", "ssd"))
    assert not mlperf_eval_schedule("stable_diffusion").timed  # checkpoints scored offline
    # Llama-2-70B LoRA: every 384 sequences, the first FLOOR(0.125 x batch + 2) skipped
    lora = mlperf_eval_schedule("llama2_70b_lora")
    assert lora.eval_samples == 173
    assert lora.evaluations(8 * 384, 8) == 8 - 3  # FLOOR(1 + 2) = 3 skipped
    assert lora.evaluations(30 * 384, 128) == 30 - 18  # NVIDIA's SKIP_EVALS=18 at batch 128
    assert lora.evaluations(384, 128) == 1  # at least the one that finds the target
    assert mlperf_eval_schedule("gpt3").interval_samples(2904) == 24_576
    with pytest.raises(InvalidSpecError, match="unknown benchmark 'gnn'"):
        mlperf_eval_schedule("gnn")


def test_malformed_rows_name_file_line_and_column() -> None:
    with pytest.raises(DataFormatError, match=r"line 2.*every_samples"):
        parse_mlperf_eval(_HEAD + "x,0,0,0,0,10,0,0,true,https://x,2026-12-03\n")
    with pytest.raises(DataFormatError, match=r"line 2.*start_samples"):
        parse_mlperf_eval(_HEAD + "x,1,0,0,-5,10,0,0,true,https://x,2026-12-03\n")
    with pytest.raises(DataFormatError, match=r"as_of"):
        parse_mlperf_eval(_HEAD + "x,1,0,0,0,10,0,0,true,https://x,yesterday\n")
    with pytest.raises(DataFormatError, match=r"line 2.*timed.*not a boolean"):
        parse_mlperf_eval(_HEAD + "x,1,0,0,0,10,0,0,sometimes,https://x,2026-12-03\n")
    with pytest.raises(DataFormatError, match=r"line 2.*skip_evaluations_per_batch"):
        parse_mlperf_eval(_HEAD + "x,1,0,0,0,10,0,-1,true,https://x,2026-12-03\n")
    with pytest.raises(DataFormatError, match="missing column"):
        parse_mlperf_eval("name,every_samples\nx,1\n")
