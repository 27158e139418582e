"""Leave-one-model-out accuracy of the cluster-scaling model on CM-DARE (1 PS, 1..8 workers).

For each model (res15, shakebig, shakesmall) the model is fitted on the other models' cluster
runs only; the held-out model's 1-worker speed and static features (parameters, tensors) are
its inputs. Prints one row per GPU/model/N with the measured steady-state speed (median after
warm-up), the prediction, the naive ``N x single worker`` baseline and their errors, then
MAPE per GPU, per model and overall.

    .venv/bin/python benchmarks/cluster_accuracy.py [--data ../shared/data/cmdare/cluster_scaling]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from gpucast.predict.cluster import ClusterModel
from gpucast.store.datasets.cmdare_cluster import cluster_fit_table

DEFAULT = (
    Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "cmdare" / "cluster_scaling"
)


def leave_one_model_out(runs: pd.DataFrame) -> pd.DataFrame:
    out = []
    for held in sorted(runs["model"].unique()):
        train = runs[runs["model"] != held]
        test = runs[runs["model"] == held].copy()
        model = ClusterModel().fit(train)
        ones = test[test["workers"] == 1].set_index("gpu")["speed_steps_per_s"]
        test["single_worker_step_time_s"] = 1.0 / test["gpu"].map(ones)
        frame = pd.DataFrame(
            {
                "single_worker_step_time_s": test["single_worker_step_time_s"],
                "workers": test["workers"],
                "param_bytes": test["n_parameters"] * model.bytes_per_parameter,
                "n_tensors": test["n_tensors"],
            }
        )
        pred = model.predict_frame(frame)
        test["predicted"] = pred["speed_steps_per_s"]
        test["bottleneck"] = pred["bottleneck"]
        test["naive"] = test["workers"] / test["single_worker_step_time_s"]
        out.append(test)
    result = pd.concat(out).sort_values(["gpu", "model", "workers"])
    result["ape_pct"] = 100 * (result["predicted"] / result["speed_steps_per_s"] - 1).abs()
    result["naive_ape_pct"] = 100 * (result["naive"] / result["speed_steps_per_s"] - 1).abs()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT)
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        print(f"no data at {args.data}; pass --data cmdare/cluster_scaling", file=sys.stderr)
        return 2
    table = cluster_fit_table(args.data)
    res = leave_one_model_out(table.frame)
    pd.set_option("display.width", 200)
    cols = [
        "gpu",
        "model",
        "workers",
        "speed_steps_per_s",
        "predicted",
        "ape_pct",
        "naive",
        "naive_ape_pct",
        "bottleneck",
        "iqr_pct",
    ]
    print(res[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    multi = res[res["workers"] > 1]
    print("\nMAPE (%) leave-one-model-out, N = 1..8 (N = 2..8 in brackets):")
    for key in ("gpu", "model"):
        for name, g in res.groupby(key):
            m = multi[multi[key] == name]
            print(
                f"  {key}={name:<11} model {g['ape_pct'].mean():5.2f} [{m['ape_pct'].mean():5.2f}]"
                f"   naive {g['naive_ape_pct'].mean():5.2f} [{m['naive_ape_pct'].mean():5.2f}]"
            )
    print(
        f"  overall           model {res['ape_pct'].mean():5.2f} [{multi['ape_pct'].mean():5.2f}]"
        f"   naive {res['naive_ape_pct'].mean():5.2f} [{multi['naive_ape_pct'].mean():5.2f}]"
    )
    print(f"  median APE        model {res['ape_pct'].median():5.2f}")
    full = ClusterModel().fit(table.frame)
    print(
        f"\nfit on all models: PS network efficiency {full.network_efficiency_:.3f}, "
        f"per-tensor cost {1e3 * (full.per_tensor_cost_s_ or 0):.4f} ms, "
        f"in-sample MAPE {full.train_mape_pct_:.2f}%"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
