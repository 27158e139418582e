"""Accuracy of the single-GPU step-time model on CM-DARE ``speed/single_gpu_speed.csv``.

1. Leave-one-model-out (LOMO): each of the 14 models' rows, on both GPUs, are predicted by a
   fit that never saw that model. One row per GPU/model with measured and predicted step time,
   MAPE over the 13 samples and interval coverage; then MAPE per GPU and the worst model.
   Target (issue 3): <= 3% per GPU, no model worse than 8%.
2. Baseline: a CM-DARE-style linear regression (scikit-learn ``LinearRegression`` on GPU
   TFLOPS, Model FLOPs, parameters, tensors), same LOMO folds.
3. Leave-one-GPU-out (LOGO): fit on K80, predict P100 from its peak FLOP/s, and vice versa;
   once with the study's TFLOPS (4.113 / 9.526) and once with the catalog's datasheet peaks.
4. Noise floor: within-run (each sample vs its run's mean) and run-to-run (the separate
   ``base_runs`` of res15 / shakesmall / shakebig vs the table's run of the same model).

    .venv/bin/python benchmarks/speed_accuracy.py [--data ../shared/data/cmdare/speed]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.linear_model import LinearRegression

from gpucast.catalog import load_catalog
from gpucast.predict.speed import (
    FLOPS_COL,
    GPU_COL,
    MODEL_COL,
    PARAMS_COL,
    STEP_TIME_COL,
    TENSORS_COL,
    TFLOPS_COL,
    SpeedModel,
    error_table,
    impute_model_properties,
    leave_one_gpu_out,
    leave_one_model_out,
)
from gpucast.store.datasets.cmdare_speed import read_speed_rows, read_step_rates

DEFAULT = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "cmdare" / "speed"


def baseline_lomo(rows: pd.DataFrame) -> pd.DataFrame:
    rows = impute_model_properties(rows)
    features = [TFLOPS_COL, FLOPS_COL, PARAMS_COL, TENSORS_COL]
    out = []
    for model in sorted(rows[MODEL_COL].unique()):
        held = rows[MODEL_COL] == model
        reg = LinearRegression().fit(rows.loc[~held, features], rows.loc[~held, STEP_TIME_COL])
        pred = reg.predict(rows.loc[held, features])
        out.append(
            pd.DataFrame(
                {
                    "gpu": rows.loc[held, GPU_COL],
                    "ape_pct": 100 * np.abs(pred / rows.loc[held, STEP_TIME_COL] - 1),
                }
            )
        )
    return pd.concat(out)


def noise_floor(rows: pd.DataFrame, root: Path) -> tuple[pd.Series, pd.DataFrame]:
    mean = rows.groupby([GPU_COL, MODEL_COL])[STEP_TIME_COL].transform("mean")
    within = (100 * (rows[STEP_TIME_COL] / mean - 1).abs()).groupby(rows[GPU_COL]).mean()
    series = read_step_rates(root).frame
    base = series[series["run"] == "base_run"]
    names = {"res15": "Res15", "shakesmall": "shakesmall", "shakebig": "shakebig"}
    records = []
    for (gpu, model), grp in base.groupby(["gpu", "model"]):
        steady = grp.sort_values("step").iloc[1:]  # drop the warm-up sample
        other = 1.0 / steady["speed_steps_per_s"].median()
        table = rows[(rows[GPU_COL] == gpu) & (rows[MODEL_COL] == names.get(model, model))]
        if table.empty:
            continue
        this = table[STEP_TIME_COL].mean()
        records.append(
            {
                "gpu": gpu,
                "model": model,
                "table_run_s": this,
                "base_run_s": other,
                "diff_pct": 100 * (other / this - 1),
            }
        )
    return within, pd.DataFrame(records)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT, help="cmdare/speed folder")
    args = parser.parse_args(argv)
    csv = args.data / "single_gpu_speed.csv"
    if not csv.is_file():
        print(f"no data at {csv}; pass --data", file=sys.stderr)
        return 2
    rows = read_speed_rows(csv, require_step_time=True)
    catalog = load_catalog()
    specs = {name: catalog.gpu(name) for name in sorted(rows[GPU_COL].unique())}
    pd.set_option("display.width", 140)

    print("== 1. leave-one-model-out (fit never sees the held-out model) ==")
    cv = leave_one_model_out(rows, specs)
    table = error_table(cv)
    print(
        table.to_string(
            index=False,
            formatters={
                "actual_s": "{:.4f}".format,
                "predicted_s": "{:.4f}".format,
                "mape_pct": "{:.1f}".format,
                "coverage": "{:.2f}".format,
            },
        )
    )
    per_gpu = cv.groupby("gpu")["ape_pct"].mean()
    worst = table.loc[table["mape_pct"].idxmax()]
    coverage = ((cv["actual_s"] >= cv["lower_s"]) & (cv["actual_s"] <= cv["upper_s"])).mean()
    for gpu, value in per_gpu.items():
        print(f"LOMO MAPE {gpu}: {value:.2f}%  (target <= 3%)")
    print(f"LOMO MAPE all: {cv['ape_pct'].mean():.2f}%")
    print(
        f"worst model: {worst['gpu']} {worst['model']} {worst['mape_pct']:.1f}% (target <= 8%); "
        f"models over 8%: {int((table['mape_pct'] > 8).sum())} of {len(table)}"
    )
    print(f"90% interval coverage (LOMO): {coverage:.0%}")
    met = bool((per_gpu <= 3).all() and table["mape_pct"].max() <= 8)
    print(f"target met: {'yes' if met else 'no'}")

    print("\n== 2. baseline: linear regression on the same features, same LOMO folds ==")
    base = baseline_lomo(rows)
    for gpu, value in base.groupby("gpu")["ape_pct"].mean().items():
        print(f"baseline LOMO MAPE {gpu}: {value:.2f}%")

    print("\n== 3. leave-one-GPU-out (the held-out GPU predicted from its peak FLOP/s) ==")
    study = leave_one_gpu_out(rows)
    datasheet = leave_one_gpu_out(rows, specs)
    for name, frame in (("study TFLOPS", study), ("catalog datasheet peaks", datasheet)):
        mape = frame.groupby("gpu")["ape_pct"].mean()
        worst_model = error_table(frame)["mape_pct"].max()
        text = ", ".join(f"{g} {v:.1f}%" for g, v in mape.items())
        print(f"LOGO MAPE with {name}: {text}; worst model {worst_model:.1f}%")

    print("\n== 4. noise floor ==")
    within, runs = noise_floor(rows, args.data)
    for gpu, value in within.items():
        print(f"within-run MAPE (sample vs its run's mean) {gpu}: {value:.2f}%")
    print("run-to-run: table run vs separate base run of the same model and GPU")
    print(runs.to_string(index=False, float_format="{:.4f}".format))

    model = SpeedModel().fit(rows, specs)
    eff = model.achieved_efficiency(batch_size=128)
    print(
        "\nfitted achieved fraction of FP32 peak (if Model FLOPs is per sample, batch 128): "
        + ", ".join(f"{g} {v:.0%}" for g, v in eff.items())
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
