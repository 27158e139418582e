"""Leave-one-model-out accuracy of the cluster-scaling model on CM-DARE (1 PS, 1..8 workers).

Each run is reduced to its steady-state speed by one rule for every run (``--steady
changepoint``, the default: median of the last regime after the warm-up in which workers
join; ``--steady fraction``: median after dropping the first 10% of samples, the earlier
estimator). For each model (res15, shakebig, shakesmall) the model is fitted on the other
models' cluster runs only; the held-out model's 1-worker speed and static features
(parameters, tensors) are its inputs. Prints one row per GPU/model/N with the measured
steady-state speed, the prediction, the naive ``N x single worker`` baseline and their errors, then
MAPE per GPU, per model and overall.

    .venv/bin/python benchmarks/cluster_accuracy.py [--data ../shared/data/cmdare/cluster_scaling]
        [--steady changepoint|fraction]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from gpucast.predict.cluster import ClusterModel
from gpucast.store.datasets.cmdare_cluster import STEADY_METHODS, cluster_fit_table

DEFAULT = (
    Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "cmdare" / "cluster_scaling"
)


def leave_one_model_out(runs: pd.DataFrame) -> pd.DataFrame:
    out = []
    for held in sorted(runs["model"].unique()):
        train = runs[runs["model"] != held]
        test = runs[runs["model"] == held].copy()
        model = ClusterModel().fit(train)
        test["fold_network_efficiency"] = model.network_efficiency_
        test["fold_per_tensor_cost_ms"] = 1e3 * (model.per_tensor_cost_s_ or 0.0)
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
    parser.add_argument("--steady", choices=STEADY_METHODS, default="changepoint")
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        print(f"no data at {args.data}; pass --data cmdare/cluster_scaling", file=sys.stderr)
        return 2
    table = cluster_fit_table(args.data, steady_method=args.steady)
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
    print("\nparameters of each fold (fitted without the held-out model):")
    folds = res.groupby("model")[["fold_network_efficiency", "fold_per_tensor_cost_ms"]].first()
    for name, row in folds.iterrows():
        print(
            f"  without {name:<11} network efficiency {row['fold_network_efficiency']:.3f}, "
            f"per-tensor cost {row['fold_per_tensor_cost_ms']:.4f} ms"
        )
    full = ClusterModel().fit(table.frame)
    print(
        f"\nfit on all models: PS network efficiency {full.network_efficiency_:.3f}, "
        f"per-tensor cost {1e3 * (full.per_tensor_cost_s_ or 0):.4f} ms, "
        f"in-sample MAPE {full.train_mape_pct_:.2f}%"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
