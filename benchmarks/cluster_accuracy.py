"""Leave-one-model-out accuracy of the cluster-scaling model on CM-DARE (1 PS, 1..8 workers).

Each run is reduced to its steady-state speed by one rule for every run (``--steady
changepoint``, the default: median of the last regime after the warm-up in which workers
join; ``--steady fraction``: median after dropping the first 10% of samples, the earlier
estimator). For each model (res15, shakebig, shakesmall) the model is fitted on the other
models' cluster runs only; the held-out model's 1-worker speed and static features
(parameters, tensors) are its inputs. Prints one row per GPU/model/N with the measured
steady-state speed, the prediction, the naive ``N x single worker`` baseline and their errors, then
MAPE per GPU, per model and overall; then the two symptoms of issue #22 item 3 (1-worker steps
of small models, scaling past the measured plateau at 8 workers), predictions for 1, 2, 4 and 8
PS shards (not measured: CM-DARE has 1 PS) and the fitted constants.

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


def _first(test: pd.DataFrame, gpu: str) -> pd.Series:
    return test[(test["gpu"] == gpu) & (test["workers"] == 1)].iloc[0]


def one_worker_symptom(runs: pd.DataFrame) -> pd.DataFrame:
    """Symptom (a), per GPU/model, with each fold's model (fitted without the model): the PS
    time inside the measured 1-worker step (one pull + one push) and its share; the speed if
    that step is taken as bare compute and the PS is added again (what a step time fitted
    on 1 worker + 1 PS runs and then fed to the planner's PS path does); 1-worker speed with
    2 / 4 / 8 shards (the worker fetches from all shards at once)."""
    rows = []
    for held in sorted(runs["model"].unique()):
        model = ClusterModel().fit(runs[runs["model"] != held])
        test = runs[runs["model"] == held]
        for gpu in sorted(test["gpu"].unique()):
            r = _first(test, gpu)
            t1 = 1.0 / float(r["speed_steps_per_s"])
            kw = {
                "param_bytes": float(r["n_parameters"]) * model.bytes_per_parameter,
                "n_tensors": int(r["n_tensors"]),
                "max_tensor_bytes": float(r["max_tensor_bytes"]),
            }
            one = model.predict(t1, 1, 1, **kw)  # type: ignore[arg-type]
            bare = model.predict(t1, 1, 1, step_time_includes_ps=False, **kw)  # type: ignore[arg-type]
            shards = {k: model.predict(t1, 1, k, **kw).value for k in (2, 4, 8)}  # type: ignore[arg-type]
            latency = float(one.breakdown["ps_latency_s"])
            rows.append(
                {
                    "gpu": gpu,
                    "model": held,
                    "measured": float(r["speed_steps_per_s"]),
                    "ps_ms": 1e3 * latency,
                    "ps_share_pct": 100 * latency / t1,
                    "as_bare": bare.value,
                    "as_bare_err_pct": 100 * (bare.value * t1 - 1),
                    **{f"k{k}": v for k, v in shards.items()},
                }
            )
    return pd.DataFrame(rows)


def plateau_symptom(res: pd.DataFrame) -> pd.DataFrame:
    """Symptom (b): measured and predicted gain from 5 to 8 workers, and the 8-worker error."""
    rows = []
    for (gpu, model), g in res.groupby(["gpu", "model"]):
        g = g.set_index("workers")
        meas = float(g.loc[8, "speed_steps_per_s"] / g.loc[5, "speed_steps_per_s"])
        pred = float(g.loc[8, "predicted"] / g.loc[5, "predicted"])
        rows.append(
            {
                "gpu": gpu,
                "model": model,
                "gain_5_to_8_measured": meas,
                "gain_5_to_8_predicted": pred,
                "err_at_8_pct": float(
                    100 * (g.loc[8, "predicted"] / g.loc[8, "speed_steps_per_s"] - 1)
                ),
                "keeps_scaling": pred > meas * 1.05,
            }
        )
    return pd.DataFrame(rows)


def shard_predictions(model: ClusterModel, runs: pd.DataFrame) -> pd.DataFrame:
    """Steps/s with 1, 2, 4, 8 and 64 PS shards at 8 and 16 workers (fit on all models). Gains
    stop where the shard holding the largest tensor, or each worker's own NIC (it carries
    every shard's bytes), is the slower end."""
    rows = []
    for (gpu, name), test in runs.groupby(["gpu", "model"]):
        r = _first(test, str(gpu))
        t1 = 1.0 / float(r["speed_steps_per_s"])
        pbytes = float(r["n_parameters"]) * model.bytes_per_parameter
        largest = float(r["max_tensor_bytes"])
        kw = {"param_bytes": pbytes, "n_tensors": int(r["n_tensors"]), "max_tensor_bytes": largest}
        for n in (8, 16):
            speeds = {k: model.predict(t1, n, k, **kw) for k in (1, 2, 4, 8, 64)}  # type: ignore[arg-type]
            rows.append(
                {
                    "gpu": gpu,
                    "model": name,
                    "workers": n,
                    **{f"k{k}": e.value for k, e in speeds.items()},
                    "k8_bottleneck": speeds[8].bottleneck,
                    "largest_tensor_pct": 100 * largest / pbytes,
                    "naive": n / t1,
                }
            )
    return pd.DataFrame(rows)


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
    fmt = {"float_format": lambda v: f"{v:.3f}", "index": False}
    print(
        "\nsymptom (a), 1 worker: the measured 1-worker step is the model's input (0% above);"
        "\n  ps_ms = its pull + push (the PS time inside it), as_bare = the speed if that step is"
        "\n  taken as bare compute and the PS added again; k2..k8 = 1 worker with 2..8 PS shards:"
    )
    print(one_worker_symptom(table.frame).to_string(**fmt))
    print("\nsymptom (b), 5 -> 8 workers (gain = speed at 8 / speed at 5):")
    print(plateau_symptom(res).to_string(**fmt))
    print("\nparameters of each fold (fitted without the held-out model):")
    folds = res.groupby("model")[["fold_network_efficiency", "fold_per_tensor_cost_ms"]].first()
    for name, row in folds.iterrows():
        print(
            f"  without {name:<11} network efficiency {row['fold_network_efficiency']:.3f}, "
            f"per-tensor cost {row['fold_per_tensor_cost_ms']:.4f} ms"
        )
    full = ClusterModel().fit(table.frame)
    print(
        f"\nfit on all models: PS network efficiency {full.network_efficiency_:.3f} (achieved "
        f"share of the {full.ps_network_gbps:g} Gbit/s PS NIC, each direction), per-tensor cost "
        f"{1e3 * (full.per_tensor_cost_s_ or 0):.4f} ms (PS CPU to receive and apply one "
        f"tensor's gradient), in-sample MAPE {full.train_mape_pct_:.2f}%"
    )
    print(
        "\nPS shards (not measured: CM-DARE has 1 PS; fit on all models; worker NIC "
        f"{full.network_gbps:g} Gbit/s): steps/s with k shards; naive = n x the 1-PS"
        "\n  single-worker speed (more shards also shorten one worker's step: it fetches from"
        "\n  all of them at once, until its own NIC is the slower end)"
    )
    print(shard_predictions(full, table.frame).to_string(**fmt))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
