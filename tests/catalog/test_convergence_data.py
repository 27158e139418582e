"""The MLPerf reference convergence points shipped in ``data/convergence.csv``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpucast.catalog.convergence import (
    convergence_points,
    load_convergence,
    mlperf_samples_to_target,
    parse_convergence,
)
from gpucast.domain.convergence import UnknownBenchmarkError
from gpucast.domain.errors import DataFormatError, InvalidSpecError

DATA = Path(__file__).resolve().parents[2] / "src/gpucast/catalog/data/convergence.csv"
UNITS = {
    "resnet": "epochs",
    "ssd": "epochs",
    "gnn": "epochs",
    "dlrm_dcnv2": "epochs",
    "bert": "samples",
    "unet3d": "samples",
    "stable_diffusion": "samples",
    "llama2_70b_lora": "samples",
    "gpt3": "tokens",
}
SOURCE = re.compile(
    r"^https://github\.com/mlcommons/logging/blob/[0-9a-f]{40}/mlperf_logging/rcp_checker/"
    r"(training_\d\.\d\.0)/rcps_(\w+)\.json$"
)


def test_every_mlperf_training_v4_benchmark_has_points_in_its_unit() -> None:
    points = load_convergence()
    assert {p.benchmark for p in points} == set(UNITS)
    for p in points:
        assert p.unit == UNITS[p.benchmark], p.benchmark
        assert p.n_runs >= 6


def test_rows_cite_the_rcp_file_at_its_commit() -> None:
    for p in load_convergence():
        match = SOURCE.match(p.source_url)
        assert match, p.source_url
        assert match.group(1) == p.rcp_folder and match.group(1) <= "training_4.0.0"
        assert match.group(2) == p.benchmark
        assert p.as_of.isoformat() == "2026-12-02"


def test_resnet_at_a_reference_batch() -> None:
    r = mlperf_samples_to_target("resnet", 1632)
    assert r.method == "reference" and r.epochs_mean == pytest.approx(35.0)
    assert r.samples_mean == pytest.approx(35.0 * 1_281_167)  # ImageNet-1k training set


def test_between_reference_batches_interpolates() -> None:
    lo, hi = (p for p in convergence_points("bert") if p.global_batch_size in (4096, 4608))
    r = mlperf_samples_to_target("bert", 4352)  # halfway
    assert r.samples_mean == pytest.approx((lo.mean + hi.mean) / 2)


def test_nvidia_v4_llama2_lora_scaling_matches_the_rcp() -> None:
    # NVIDIA eos_n128 llama2_70b_lora (GBS 128) got scaling.json 1.0202898550724637 =
    # RCP olympic mean / submission olympic mean: the file here is the one v4.0 used.
    (p,) = (p for p in convergence_points("llama2_70b_lora") if p.global_batch_size == 128)
    assert p.rcp_mean / 1.0202898550724637 == pytest.approx(11040.0)


def test_gpt3_tokens_are_whole_steps_of_2048_token_sequences() -> None:
    for p in convergence_points("gpt3"):
        assert p.tokens_per_sample == 2048
        for tokens in p.values:
            assert tokens % (2048 * p.global_batch_size) == 0


def test_beyond_the_largest_batch_and_unknown_names() -> None:
    with pytest.raises(InvalidSpecError) as info:
        mlperf_samples_to_target("gnn", 1_000_000)
    assert "262144" in str(info.value)
    with pytest.raises(UnknownBenchmarkError) as unknown:
        mlperf_samples_to_target("llama", 8)
    assert "llama2_70b_lora" in str(unknown.value)
    assert mlperf_samples_to_target("rgat", 4096).benchmark == "gnn"


def _edit(old: str, new: str) -> str:
    text = DATA.read_text()
    assert old in text
    return text.replace(old, new, 1)


@pytest.mark.parametrize(
    ("old", "new", "column"),
    [
        ("resnet,1632,epochs,35,", "resnet,1632,epochs,36,", "mean"),
        (
            "resnet,1632,epochs,35,1.118033989,17,",
            "resnet,1632,epochs,35,1.118033989,16,",
            "n_runs",
        ),
        ("resnet,1632,epochs,", "resnet,1632,weeks,", "unit"),
        (",17,33,37,35,34;34;", ",17,33,37,35,34;x;", "values"),
        ("resnet,3264,", "resnet,1632,", "global_batch_size"),
    ],
)
def test_malformed_rows_name_line_and_column(old: str, new: str, column: str) -> None:
    with pytest.raises(DataFormatError) as info:
        parse_convergence(_edit(old, new), "convergence.csv")
    assert info.value.column == column and info.value.line is not None


def test_epochs_row_without_dataset_size_is_rejected() -> None:
    with pytest.raises(DataFormatError) as info:
        parse_convergence(_edit(",1281167,,training_4.0.0", ",,,training_4.0.0"), "c.csv")
    assert "dataset_samples" in str(info.value)
