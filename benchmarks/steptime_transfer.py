"""A step time carried to a GPU the fit never saw: how good it can get, and how good it is.

Data: the step-time observations of every published source (``../shared/data``: CM-DARE,
Zeus, MLPerf v4.0; Pollux has one GPU type and no cross-GPU pair), as
``benchmarks/steptime_accuracy.py`` reads them.

1. **Floors** on the rows a leave-one-GPU-out prediction can be checked on with the same
   workload, batch and precision measured on another GPU of the source (the reference):

   * ``oracle constant``: the best single ratio per (held-out GPU, reference GPU) pair,
     chosen *knowing* the held-out rows -- what any model that moves a GPU by one number
     (a spec ratio, a fitted GPU factor) can reach at best;
   * ``datasheet envelope``: each row's best ratio within [min, max] of the compute-peak
     ratio, the bandwidth ratio and 1 (a host-bound step), over every reference -- what a
     roofline with a perfect operation mix per row could reach;
   * parameter-free rules: the reference's time x the peak ratio, x the bandwidth ratio, x
     ``sqrt(peak ratio x bandwidth ratio)``.

2. **The model**, each GPU left out of the fit, each held-out row calibrated by one
   measurement of its workload on another GPU at any batch (the product's
   ``gpu_unseen/calibrated/...`` regimes), priced three ways: the fixed part (kernel launches
   and per-step cost) the same seconds on every GPU (until session 32); carried from the
   measured GPU at the datasheet ratio (shipped: ``predict.roofline.carried_fixed_ratio``);
   and the whole calibrated step on the measured GPU moved by ``sqrt(peak x bandwidth)``
   (no roofline for the target at all). MAPE per source and batch distance.

Nothing is fitted on the held-out GPU's rows except the oracle floor, which says so.

Run: ``python benchmarks/steptime_transfer.py`` (~30 s).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from gpucast.catalog import load_catalog
from gpucast.inputs import steptime as st
from gpucast.predict.intervals import batch_regimes
from gpucast.predict.roofline import held_ratio
from gpucast.predict.steptime import TARGET, StepTimeModel

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
KEY = ["source", "workload_key", "batch", "precision"]
pd.set_option("display.width", 200)


def _ape(log_ratio: np.ndarray) -> np.ndarray:
    return np.abs(np.exp(log_ratio) - 1.0)


def reference_pairs(obs: pd.DataFrame) -> pd.DataFrame:
    """One row per (held-out row, reference row): the same source, workload, batch and
    precision on another GPU (medians over repeats)."""
    rows = obs.groupby([*KEY, "gpu"], dropna=False, as_index=False).agg(
        t=(TARGET, "median"), peak=("peak_tflops", "first"), bw=("bandwidth_gbps", "first")
    )
    pairs = rows.merge(rows, on=KEY, suffixes=("", "_ref"))
    return pairs[pairs["gpu"] != pairs["gpu_ref"]].reset_index(drop=True)


def floors(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per (source, held-out GPU): the floors and parameter-free rules of section 1 (MAPE %)."""
    pairs = pairs.copy()
    pairs["log_true"] = np.log(pairs["t"] / pairs["t_ref"])  # log(held-out / reference)
    r_peak = pairs["peak_ref"] / pairs["peak"]
    r_bw = pairs["bw_ref"] / pairs["bw"]
    # the oracle: one ratio per (held-out GPU, reference GPU), the MAPE-best on those rows
    best = {}
    for key, part in pairs.groupby(["source", "gpu", "gpu_ref"]):
        lt = part["log_true"].to_numpy()
        grid = np.linspace(lt.min(), lt.max(), 401)
        cost = [_ape(c - lt).mean() for c in grid]
        best[key] = grid[int(np.argmin(cost))]
    pairs["log_oracle"] = [
        best[k] for k in zip(pairs.source, pairs.gpu, pairs.gpu_ref, strict=True)
    ]
    lo = np.log(np.minimum(np.minimum(r_peak, r_bw), 1.0))
    hi = np.log(np.maximum(np.maximum(r_peak, r_bw), 1.0))
    pairs["lo"], pairs["hi"] = lo, hi
    rules = {
        "peak ratio": np.log(r_peak),
        "bandwidth ratio": np.log(r_bw),
        "sqrt(peak x bw)": 0.5 * np.log(r_peak * r_bw),
    }
    out = []
    for (source, gpu), part in pairs.groupby(["source", "gpu"]):
        rows = part.groupby(["workload_key", "batch"])
        truth = rows["log_true"].first() + np.log(rows["t_ref"].first())  # log t (any ref)
        row = {"source": source, "gpu": gpu, "rows": len(truth)}
        # several references: the geometric mean of their predictions
        oracle = (
            (part["log_oracle"] + np.log(part["t_ref"]))
            .groupby([part.workload_key, part.batch])
            .mean()
        )
        row["oracle constant"] = _ape(oracle - truth).mean()
        env_lo = (part["lo"] + np.log(part["t_ref"])).groupby([part.workload_key, part.batch]).min()
        env_hi = (part["hi"] + np.log(part["t_ref"])).groupby([part.workload_key, part.batch]).max()
        row["datasheet envelope"] = _ape(np.clip(truth, env_lo, env_hi) - truth).mean()
        for name, ratio in rules.items():
            pred = (
                (ratio[part.index] + np.log(part["t_ref"]))
                .groupby([part.workload_key, part.batch])
                .mean()
            )
            row[name] = _ape(pred - truth).mean()
        out.append(row)
    table = pd.DataFrame(out)
    cols = ["oracle constant", "datasheet envelope", *rules]
    table[cols] *= 100.0
    return table


def one_measurement(obs: pd.DataFrame) -> pd.DataFrame:
    """Section 2: per held-out row and measured row of its workload on another GPU, the log
    residual of the three pricings."""
    parts = []
    for gpu in sorted(set(obs["gpu"])):
        train = obs[obs["gpu"] != gpu]
        test = obs[(obs["gpu"] == gpu) & obs["workload_key"].isin(set(train["workload_key"]))]
        if test.empty:
            continue
        model = StepTimeModel().fit(train)
        same = train[train["workload_key"].isin(set(test["workload_key"]))]
        i, j = np.nonzero(
            test["workload_key"].to_numpy()[:, None] == same["workload_key"].to_numpy()[None, :]
        )
        t_i = test[TARGET].to_numpy(dtype=np.float64)[i]
        t_j = same[TARGET].to_numpy(dtype=np.float64)[j]
        scale = t_j / model.predict(same)[j]
        p_i = model.predict(test)[i]
        fixed = model.terms(test)["overhead"][i]
        ref, tgt = same.iloc[j], test.iloc[i]
        datasheet = np.sqrt(
            ref["peak_tflops"].to_numpy() / tgt["peak_tflops"].to_numpy()
            * ref["bandwidth_gbps"].to_numpy() / tgt["bandwidth_gbps"].to_numpy()
        )  # fmt: skip
        carried = model.gpu_factors(ref["gpu"]) * held_ratio(datasheet)  # held-out factor 1
        moved = tgt.copy()
        for column in ("gpu", "peak_tflops", "fp32_peak_tflops", "bandwidth_gbps"):
            moved[column] = ref[column].to_numpy()
        on_ref = model.predict(moved)
        parts.append(
            pd.DataFrame(
                {
                    "source": tgt["source"].to_numpy(),
                    "gpu": gpu,
                    "regime": batch_regimes(
                        "gpu_unseen/calibrated",
                        ref["batch"].to_numpy(dtype=np.float64),
                        tgt["batch"].to_numpy(dtype=np.float64),
                    ),
                    "fixed part constant": np.log(scale * p_i / t_i),
                    "fixed part carried (shipped)": np.log(
                        scale * (p_i + fixed * (carried - 1.0)) / t_i
                    ),
                    "measured GPU x sqrt(peak x bw)": np.log(scale * on_ref * datasheet / t_i),
                }
            )
        )
    return pd.concat(parts, ignore_index=True)


def main() -> int:
    if not (DATA / "README.md").is_file():
        print(f"published data not found at {DATA.resolve()}; nothing to compare")
        return 0
    obs = st.step_time_observations(DATA, load_catalog())
    table = floors(reference_pairs(obs))
    print("1. Leave one GPU out, rows with the same workload, batch and precision measured on")
    print("   another GPU of the source: floors (oracle: fitted on the held-out rows) and")
    print("   parameter-free datasheet rules, MAPE %")
    print(table.round(1).to_string(index=False))
    cols = [c for c in table.columns if c not in ("source", "gpu", "rows")]
    pooled = table[cols].multiply(table["rows"], axis=0).sum() / table["rows"].sum()
    by_source = table.groupby("source").apply(
        lambda p: p[cols].multiply(p["rows"], axis=0).sum() / p["rows"].sum(),
        include_groups=False,
    )
    print("\n   per source (row-weighted):")
    print(by_source.round(1).to_string())
    print(f"   pooled over {int(table['rows'].sum())} rows: " + ", ".join(
        f"{c} {v:.1f}%" for c, v in pooled.items()
    ))  # fmt: skip

    pairs = one_measurement(obs)
    ways = [c for c in pairs.columns if c not in ("source", "gpu", "regime")]
    mape = pairs.groupby(["regime", "source"])[ways].agg(lambda x: 100.0 * _ape(x).mean())
    mape.insert(0, "pairs", pairs.groupby(["regime", "source"]).size())
    print("\n2. The model, one GPU left out, calibrated by one measurement on another GPU")
    print("   (MAPE % by batch distance and source):")
    print(mape.round(1).to_string())
    overall = pairs.groupby("regime")[ways].agg(lambda x: 100.0 * _ape(x).mean())
    print("\n   all sources:")
    print(overall.round(1).to_string())
    per_gpu = pairs[pairs.regime.str.endswith("batch_x2")].groupby("gpu")[ways]
    print("\n   within 2x of the batch, per held-out GPU:")
    print(per_gpu.agg(lambda x: 100.0 * _ape(x).mean()).round(1).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
