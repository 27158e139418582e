"""Zeus (NSDI 2023) power and train traces: parse, unthrottled rows, epochs to target."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpucast.catalog import load_catalog
from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.domain.zeus import ZEUS_DATASET_SAMPLES, ZEUS_GPUS, ZEUS_WORKLOADS
from gpucast.store.datasets.zeus import (
    epochs_to_target,
    read_zeus_power,
    read_zeus_train,
    target_epochs,
    zeus_unthrottled,
)

POWER_HEADER = "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"
POWER_ROWS = [
    "cifar100,shufflenetv2,1024,adadelta,100,11.0,90.0",
    "cifar100,shufflenetv2,1024,adam,100,10.0,95.0",
    "cifar100,shufflenetv2,1024,adadelta,250,8.0,150.0",
    "cifar100,shufflenetv2,1024,adam,250,7.5,160.0",
    "imagenet,resnet50,256,adadelta,100,5000.0,99.0",
    "imagenet,resnet50,256,adadelta,250,3500.0,200.0",
]
TRAIN_HEADER = "dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch\n"


def _power(folder: Path, key: str = "v100", rows: list[str] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"summary_power_{key}.csv"
    path.write_text(POWER_HEADER + "\n".join(POWER_ROWS if rows is None else rows) + "\n")
    return path


def _train(tmp_path: Path, rows: list[str]) -> Path:
    path = tmp_path / "summary_train.csv"
    path.write_text(TRAIN_HEADER + "\n".join(rows) + "\n")
    return path


def test_power_trace_columns_units_and_gpu(tmp_path: Path) -> None:
    power = read_zeus_power(_power(tmp_path))
    assert list(power.columns) == [
        "dataset", "network", "batch_size", "optimizer", "power_limit_w", "time_per_epoch_s",
        "average_power_w", "energy_per_epoch_j", "gpu", "zeus_gpu",
    ]  # fmt: skip
    assert set(power.gpu) == {"V100-PCIe"} and set(power.zeus_gpu) == {"v100"}
    first = power.iloc[0]
    assert first.energy_per_epoch_j == pytest.approx(11.0 * 90.0)
    assert power.batch_size.dtype == np.int64


def test_power_folder_gpu_choice(tmp_path: Path) -> None:
    _power(tmp_path, "v100")
    _power(tmp_path, "p100", POWER_ROWS[:2])
    both = read_zeus_power(tmp_path)
    assert both.groupby("gpu").size().to_dict() == {"P100": 2, "V100-PCIe": 6}
    assert len(read_zeus_power(tmp_path, gpu="P100")) == 2  # the catalog name
    assert len(read_zeus_power(tmp_path, gpu="v100")) == 6  # the trace key
    with pytest.raises(InvalidSpecError, match="not a GPU of the Zeus power traces"):
        read_zeus_power(tmp_path, gpu="H100")


def test_power_file_named_otherwise_needs_gpu(tmp_path: Path) -> None:
    path = tmp_path / "power.csv"
    path.write_text(POWER_HEADER + POWER_ROWS[0] + "\n")
    with pytest.raises(DataFormatError, match="cannot tell the GPU"):
        read_zeus_power(path)
    assert read_zeus_power(path, gpu="rtx6000").gpu.iloc[0] == "RTX6000"
    a40 = _power(tmp_path / "a40", "a40", POWER_ROWS[:1])  # a trace GPU the table lacks
    assert read_zeus_power(a40).gpu.iloc[0] == "" and read_zeus_power(a40).zeus_gpu.iloc[0] == "a40"


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        (
            "cifar100,shufflenetv2,1024,adam,100,fast,95.0",
            r"line 2, column 'time_per_epoch'.*not a number",
        ),
        ("cifar100,shufflenetv2,1024,adam,100,10.0,-5", r"column 'average_power'.*must be > 0"),
        ("cifar100,shufflenetv2,10.5,adam,100,10.0,95.0", r"column 'batch_size'.*whole number"),
        (",shufflenetv2,1024,adam,100,10.0,95.0", r"column 'dataset'.*empty cell"),
        ("cifar100,shufflenetv2,1024,adam,100,nan,95.0", r"column 'time_per_epoch'.*missing"),
    ],
)
def test_power_bad_cells_name_file_line_column(tmp_path: Path, row: str, expected: str) -> None:
    with pytest.raises(DataFormatError, match=expected) as info:
        read_zeus_power(_power(tmp_path, rows=[row]))
    assert "summary_power_v100.csv" in str(info.value) and "as published" in str(info.value)


def test_power_bad_files(tmp_path: Path) -> None:
    with pytest.raises(InvalidSpecError, match="file not found"):
        read_zeus_power(tmp_path / "summary_power_v100.csv")
    with pytest.raises(DataFormatError, match="has no summary_power"):
        read_zeus_power(tmp_path)
    path = tmp_path / "summary_power_v100.csv"
    path.write_text("dataset,network,batch_size\ncifar100,x,1\n")
    with pytest.raises(DataFormatError, match="line 1, column 'optimizer': missing column"):
        read_zeus_power(path)
    path.write_text("")
    with pytest.raises(DataFormatError, match="is empty"):
        read_zeus_power(path)
    path.write_text(POWER_HEADER)
    with pytest.raises(DataFormatError, match="has no data rows"):
        read_zeus_power(path)
    with pytest.raises(DataFormatError, match=r"line 3: repeats the configuration of line 2"):
        read_zeus_power(_power(tmp_path, rows=[POWER_ROWS[0], POWER_ROWS[0]]))


def test_unthrottled_keeps_every_optimizer_at_the_top_limit(tmp_path: Path) -> None:
    top = zeus_unthrottled(read_zeus_power(_power(tmp_path)))
    assert set(top.power_limit_w) == {250.0}
    assert list(top.optimizer) == ["adadelta", "adam", "adadelta"]
    assert list(top.dataset) == ["cifar100", "cifar100", "imagenet"]


TRAIN_ROWS = [
    # cifar100: Zeus's target is 0.60; 0.65 is the strictest listed
    *(f"cifar100,shufflenetv2,128,adadelta,0.1,{r},0.60,{e}" for r, e in [(1, 18), (2, 20)]),
    "cifar100,shufflenetv2,128,adadelta,0.1,1,0.65,nan",
    "cifar100,shufflenetv2,128,adadelta,0.1,2,0.65,30",
    "cifar100,shufflenetv2,256,adadelta,0.1,1,0.60,",
    "cifar100,shufflenetv2,256,adadelta,0.1,1,0.65,",
    # librispeech: word error rate, lower is better
    "librispeech,deepspeech2,32,adamw,1.06e-4,1,45.0,5",
    "librispeech,deepspeech2,32,adamw,1.06e-4,1,40.0,7",
    "librispeech,deepspeech2,32,adamw,1.06e-4,1,35.0,12",
]


def test_train_trace_parses_nan_and_empty_as_not_reached(tmp_path: Path) -> None:
    train = read_zeus_train(_train(tmp_path, TRAIN_ROWS))
    assert len(train) == len(TRAIN_ROWS)
    assert train.target_epoch.isna().sum() == 3
    assert train.run.dtype == np.int64 and train.target_metric.iloc[0] == pytest.approx(0.6)


def test_epochs_to_target_at_zeus_final_and_given_targets(tmp_path: Path) -> None:
    train = read_zeus_train(_train(tmp_path, TRAIN_ROWS))
    zeus = epochs_to_target(train).set_index(["dataset", "batch_size"])
    row = zeus.loc[("cifar100", 128)]
    assert row.target_metric == pytest.approx(0.60)
    assert (row.n_runs, row.n, row.epochs_mean, row.epochs_min, row.epochs_max) == (
        2,
        2,
        19,
        18,
        20,
    )
    assert row.epochs_std == pytest.approx(np.std([18, 20], ddof=1))
    assert row.max_epochs == 100 and row.n_within_max_epochs == 2
    never = zeus.loc[("cifar100", 256)]
    assert never.n == 0 and np.isnan(never.epochs_mean)
    assert zeus.loc[("librispeech", 32)].epochs_mean == 7  # Zeus's WER target 40

    final = epochs_to_target(train, "final").set_index(["dataset", "batch_size"])
    assert final.loc[("cifar100", 128)].target_metric == pytest.approx(0.65)
    assert final.loc[("cifar100", 128)].n == 1  # one seed never got there
    assert final.loc[("librispeech", 32)].target_metric == 35.0  # lowest WER is strictest

    given = epochs_to_target(train, {"cifar100": 0.65, "librispeech": 45.0})
    assert set(given.target_metric) == {0.65, 45.0}
    per_run = target_epochs(train, {"cifar100": 0.65, "librispeech": 45.0})
    assert list(per_run.columns) == list(train.columns) and len(per_run) == 4


def test_epochs_to_target_rejects_bad_targets(tmp_path: Path) -> None:
    train = read_zeus_train(_train(tmp_path, TRAIN_ROWS))
    missing = r"has no rows at target 0\.7.*use one of 0\.6, 0\.65"
    with pytest.raises(InvalidSpecError, match=missing):
        epochs_to_target(train, {"cifar100": 0.7, "librispeech": 40.0})
    with pytest.raises(InvalidSpecError, match="no target given for librispeech"):
        epochs_to_target(train, {"cifar100": 0.6})
    with pytest.raises(InvalidSpecError, match="unknown choice"):
        epochs_to_target(train, "best")
    other = read_zeus_train(_train(tmp_path, ["mnist,lenet,32,sgd,0.1,1,0.9,3"]))
    with pytest.raises(InvalidSpecError, match="Zeus publishes no target for mnist"):
        epochs_to_target(other)
    assert epochs_to_target(other, "final").target_metric.iloc[0] == 0.9


def test_train_bad_cells(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match=r"line 2, column 'target_epoch'.*whole number"):
        read_zeus_train(_train(tmp_path, ["cifar100,shufflenetv2,128,adadelta,0.1,1,0.6,2.5"]))
    with pytest.raises(DataFormatError, match=r"column 'learning_rate'.*not a number"):
        read_zeus_train(_train(tmp_path, ["cifar100,shufflenetv2,128,adadelta,fast,1,0.6,2"]))
    rows = ["cifar100,shufflenetv2,128,adadelta,0.1,1,0.6,2"] * 2
    with pytest.raises(DataFormatError, match="line 3: repeats the configuration of line 2"):
        read_zeus_train(_train(tmp_path, rows))


def test_domain_table_is_sourced_and_names_catalog_gpus() -> None:
    assert ZEUS_DATASET_SAMPLES["cifar100"] == 50_000
    assert ZEUS_DATASET_SAMPLES["imagenet"] == 1_281_167
    assert set(ZEUS_DATASET_SAMPLES) == set(ZEUS_WORKLOADS)
    for workload in ZEUS_WORKLOADS.values():
        assert workload.samples_basis.split(":")[0] in {"artifact", "inferred", "unknown"}
        assert (workload.train_samples is None) == workload.samples_basis.startswith("unknown")
        assert workload.precision_basis.split(":")[0] in {"artifact", "inferred", "unknown"}
    assert not ZEUS_WORKLOADS["librispeech"].higher_is_better
    catalog = load_catalog()
    for gpu in ZEUS_GPUS.values():
        assert catalog.gpu(gpu.catalog_name).name == gpu.catalog_name


@pytest.mark.shared_data
def test_published_traces(shared_data: Path) -> None:
    folder = shared_data / "zeus_nsdi23"
    power = read_zeus_power(folder)
    assert power.groupby("gpu").size().to_dict() == {"P100": 270, "RTX6000": 410, "V100-PCIe": 476}
    top = zeus_unthrottled(power)
    assert top.groupby("zeus_gpu").power_limit_w.max().to_dict() == {
        "p100": 250.0, "rtx6000": 260.0, "v100": 250.0,
    }  # fmt: skip
    assert top.groupby("gpu").size().to_dict() == {"P100": 45, "RTX6000": 52, "V100-PCIe": 68}
    resnet = top.query("gpu == 'V100-PCIe' and dataset == 'imagenet' and batch_size == 256")
    assert resnet.time_per_epoch_s.iloc[0] == pytest.approx(3515.0, abs=1.0)
    # fp32 rate: 1,281,167 images in ~3,515 s
    assert ZEUS_DATASET_SAMPLES["imagenet"] / resnet.time_per_epoch_s.iloc[0] == pytest.approx(
        364.5, abs=1.0
    )

    train = read_zeus_train(folder / "summary_train.csv")
    assert len(train) == 3759 and train.target_epoch.isna().sum() == 849
    cifar = epochs_to_target(train).query("dataset == 'cifar100' and batch_size == 1024")
    assert cifar.n.iloc[0] == 10 and cifar.epochs_mean.iloc[0] == pytest.approx(78.7)
