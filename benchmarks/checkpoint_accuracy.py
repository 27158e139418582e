"""Accuracy of the checkpoint-duration model on CM-DARE ``checkpoint/``.

Leave-one-model-out over the 20 models of ``whole_data.csv`` (each model's 5 saves are
predicted by a fit on the other 19 models), with and without the ``.index`` size feature,
then the authors' train/test split (16 -> 4 models). Also prints the noise floor: the MAPE
of predicting each save by its own model's median duration.

    .venv/bin/python benchmarks/checkpoint_accuracy.py [--data ../shared/data/cmdare/checkpoint]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from gpucast.predict.overheads import CheckpointModel
from gpucast.store.datasets.cmdare_checkpoint import read_checkpoint_csv, read_checkpoint_split

DEFAULT = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "cmdare" / "checkpoint"


def leave_one_model_out(rows: pd.DataFrame, *, use_index_size: bool) -> pd.DataFrame:
    out = []
    for model in sorted(rows["model"].unique()):
        held = rows["model"] == model
        fit = CheckpointModel(use_index_size=use_index_size).fit(rows[~held])
        pred = fit.predict_frame(rows[held])["duration_s"]
        ape = 100 * (pred / rows.loc[held, "duration_s"] - 1).abs()
        out.append(
            {
                "model": model,
                "checkpoint_mb": rows.loc[held, "checkpoint_mb"].iloc[0],
                "measured_s": rows.loc[held, "duration_s"].mean(),
                "predicted_s": pred.mean(),
                "mape_pct": ape.mean(),
                "n": int(held.sum()),
            }
        )
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT)
    args = parser.parse_args(argv)
    if not (args.data / "whole_data.csv").is_file():
        print(f"no data at {args.data}; pass --data cmdare/checkpoint", file=sys.stderr)
        return 2
    rows = read_checkpoint_csv(args.data / "whole_data.csv").frame
    with_index = leave_one_model_out(rows, use_index_size=True)
    size_only = leave_one_model_out(rows, use_index_size=False)
    table = with_index.merge(
        size_only[["model", "predicted_s", "mape_pct"]], on="model", suffixes=("", "_size_only")
    )
    pd.set_option("display.width", 200)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    floor = np.mean(
        [
            np.mean(np.abs(g["duration_s"].median() / g["duration_s"] - 1))
            for _, g in rows.groupby("model")
        ]
    )
    print("\nMAPE (%) per save, leave-one-model-out over 20 models:")
    print(f"  size + index size  {with_index['mape_pct'].mean():5.2f}")
    print(f"  size only          {size_only['mape_pct'].mean():5.2f}")
    print(f"  noise floor (own model's median) {100 * floor:5.2f}")
    train, test = read_checkpoint_split(args.data)
    print("authors' split (16 train models -> 4 test models):")
    for use_index in (True, False):
        fit = CheckpointModel(use_index_size=use_index).fit(train.frame)
        pred = fit.predict_frame(test.frame)["duration_s"]
        mape = 100 * float(np.mean(np.abs(pred / test.frame["duration_s"] - 1)))
        print(f"  {'size + index size' if use_index else 'size only':<18} {mape:5.2f}")
    print("  (published SVR: 5.4%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
