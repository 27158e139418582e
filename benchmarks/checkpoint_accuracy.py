"""Accuracy of the checkpoint-duration model on CM-DARE ``checkpoint/``.

Leave-one-model-out over the 20 models of ``whole_data.csv`` (each model's 5 saves are
predicted by a fit on the other 19 models), with and without the ``.index`` size feature,
then the authors' train/test split (16 -> 4 models). Also prints the noise floor (the MAPE
of predicting each save by its own model's median duration), the earlier fit (one
least-squares fit of the whole duration) for comparison, and the evidence that the authors'
4 test models were measured under other conditions than the 16 training models.

    .venv/bin/python benchmarks/checkpoint_accuracy.py [--data ../shared/data/cmdare/checkpoint]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gpucast.predict.overheads import CheckpointModel
from gpucast.store.datasets.cmdare_checkpoint import read_checkpoint_csv, read_checkpoint_split

DEFAULT = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "cmdare" / "checkpoint"


def leave_one_model_out(rows: pd.DataFrame, *, use_index_size: bool, **params: Any) -> pd.DataFrame:
    out = []
    for model in sorted(rows["model"].unique()):
        held = rows["model"] == model
        fit = CheckpointModel(use_index_size=use_index_size, **params).fit(rows[~held])
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
    train, test = read_checkpoint_split(args.data)
    in_test = with_index["model"].isin(set(test.frame["model"]))
    earlier = leave_one_model_out(
        rows, use_index_size=True, split_local_write=False, loss="l2_relative"
    )
    print("\nMAPE (%) per save, leave-one-model-out over 20 models:")
    print(
        f"  size + index size  {with_index['mape_pct'].mean():5.2f}"
        f"   (16 training models {with_index.loc[~in_test, 'mape_pct'].mean():5.2f},"
        f" 4 test models {with_index.loc[in_test, 'mape_pct'].mean():5.2f})"
    )
    print(f"  size only          {size_only['mape_pct'].mean():5.2f}")
    print(
        "  earlier fit (whole duration, least squares, size + index) "
        f"{earlier['mape_pct'].mean():5.2f}"
    )
    print(f"  noise floor (own model's median) {100 * floor:5.2f}")
    _session_evidence(train.frame, test.frame)
    print("authors' split (16 train models -> 4 test models):")
    for use_index in (True, False):
        fit = CheckpointModel(use_index_size=use_index).fit(train.frame)
        pred = fit.predict_frame(test.frame)["duration_s"]
        mape = 100 * float(np.mean(np.abs(pred / test.frame["duration_s"] - 1)))
        print(f"  {'size + index size' if use_index else 'size only':<18} {mape:5.2f}")
    print("  (published SVR: 5.4%)")
    return 0


def _session_evidence(train: pd.DataFrame, test: pd.DataFrame) -> None:
    """Upload time (duration - local write) of the test models against a line fitted on the
    training models, and the save-to-save variation of each set."""
    upload = train["duration_s"] - train["local_s"]
    slope, intercept = np.polyfit(train["checkpoint_mb"], upload, 1)

    def per_model(rows: pd.DataFrame) -> pd.DataFrame:
        up = rows["duration_s"] - rows["local_s"]
        resid = up - (intercept + slope * rows["checkpoint_mb"])
        return (
            rows.assign(resid=resid)
            .groupby("model")
            .agg(resid=("resid", "mean"), cv=("duration_s", lambda d: d.std() / d.mean()))
        )

    tr, te = per_model(train), per_model(test)
    print("\nupload time (duration - local write) vs a line fitted on the 16 training models:")
    print(
        f"  training models: mean residual {tr['resid'].mean():+.3f} s,"
        f" sd {tr['resid'].std():.3f} s"
    )
    print("  test models:     " + ", ".join(f"{m} {r:+.3f} s" for m, r in te["resid"].items()))
    print(
        f"  save-to-save CV of the duration: training models {100 * tr['cv'].min():.1f}-"
        f"{100 * tr['cv'].max():.1f}% (median {100 * tr['cv'].median():.1f}%), test models "
        f"{100 * te['cv'].min():.1f}-{100 * te['cv'].max():.1f}%"
    )


if __name__ == "__main__":
    raise SystemExit(main())
