"""Every CLI verb and its Python verb give the same result: ``--json`` == ``to_dict()``.

One case per verb: the command line, and the same request through ``gpucast.<verb>(...)``.
Deterministic verbs must match exactly (same seed, same data); the measuring verbs time real
steps, so for them the timings are dropped and everything else must match. A second table
checks that bad input gives the same one-line message both ways (exit code 2 / a typed
``InvalidInputError``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import gpucast
from gpucast.cli.app import app
from gpucast.domain.errors import InvalidInputError
from gpucast.domain.jsonable import jsonable

runner = CliRunner()
FIXTURES = Path(__file__).resolve().parents[1] / "catalog" / "fixtures"
QUICK = ["--device", "cpu", "--max-time-s", "1", "--min-samples", "3", "--target-ci", "0.5"]
QUICK_API = {"device": "cpu", "max_time_s": 1.0, "min_samples": 3, "target_ci": 0.5}
#: keys whose values are timings, clocks or ids that differ between two real runs
VOLATILE = {
    "created_at", "run_id", "run_ids", "step_times_s", "warmup_times_s", "mean_s", "median_s",
    "std_s", "ci_low_s", "ci_high_s", "ci_halfwidth_rel", "p5_s", "p95_s", "iqr_s",
    "samples_per_s", "n_samples", "n_warmup", "stop_reason", "warnings", "telemetry",
    "elapsed_s", "fit", "latency_curve", "points", "environment", "id", "updated_at",
}  # fmt: skip
VOLATILE |= {"runs", "profile"}  # measure cmd: each run's resource samples differ
VOLATILE |= {"contention_share"}  # measure cmd: the share of time other tasks took


def _volatile(key: str) -> bool:
    """Timings (``*_s``, ``*_rel``, ``*_per_s``), clocks and ids."""
    return key in VOLATILE or key.endswith(("_s", "_rel", "_per_s", "_w", "_mhz", "_pct"))


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not _volatile(k)}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _fitted(folder: Path, name: str) -> Path:
    """``name``.json as its fit case writes it -- fitted here when that case has not run in
    this process (pytest-xdist may schedule a predict case before its fit case)."""
    path = folder / f"{name}.json"
    if not path.exists():
        fit = {
            "speed": lambda: gpucast.fit_speed(
                data=[D / "cmdare/speed/single_gpu_speed.csv"], out=path
            ),
            "cluster": lambda: gpucast.fit_cluster(data=D / "cmdare/cluster_scaling", out=path),
            "ckpt": lambda: gpucast.fit_checkpoint(
                data=D / "cmdare/checkpoint/whole_data.csv", out=path
            ),
        }
        fit[name]()
    return path


def _fleet(folder: Path) -> Path:
    """Six GPUs' step times (a CSV for ``fit variability``)."""
    path = folder / "fleet.csv"
    path.write_text("gpu,step_time_s\n0,1.0\n1,1.01\n2,0.99\n3,1.02\n4,0.98\n5,1.3\n")
    return path


@dataclass(frozen=True)
class Case:
    verb: str
    argv: Callable[[Path], list[str]]
    call: Callable[[Path], Any]
    timed: bool = False  # a real measurement: compare everything but the timings
    shared_data: bool = False


def _sweep(tmp: Path) -> Path:
    path = tmp / "sweep.yaml"
    if not path.exists():
        path.write_text(
            "devices: [cpu]\nworkloads: [mlp]\nbatch_sizes: [2]\n"
            "settings: {max_time_s: 0.5, min_samples: 3, target_ci: 0.5}\n"
        )
    return path


def _new_store(tmp: Path, name: str, *, filled: bool = False) -> Path:
    """A new store ``name`` (replacing one a previous call made), empty or holding the module
    store's runs (imported from its export), and that export: runs import / delete each start
    from the same state, CLI and Python alike."""
    export = tmp / "parity-runs.csv"
    gpucast.runs_export(out=export)
    path = tmp / name
    for suffix in ("", "-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    if filled:
        gpucast.runs_import(export, db=path)
    return path


def _program_run(tmp: Path) -> int:
    """A stored program run (``measure cmd``) in the module's store, measured once."""
    marker = tmp / "program-run-id"
    if not marker.exists():
        result = gpucast.measure_cmd(command=["echo", "x"], repeats=2, target_ci=1.0)
        marker.write_text(str(result.run_id))
    return int(marker.read_text())


def _kernel_run(tmp: Path) -> int:
    """A stored ``--kernels`` run of mlp, with ncf and gcn runs to fit on (measured once)."""
    marker = tmp / "kernel-run-id"
    if not marker.exists():
        ids = [
            gpucast.measure_train(name, batch_size=4, kernels=True, **QUICK_API).run_id
            for name in ("ncf", "gcn", "mlp")
        ]
        marker.write_text(str(ids[-1]))
    return int(marker.read_text())


def _rows(tmp: Path, name: str, text: str) -> Path:
    path = tmp / name
    path.write_text(text)
    return path


def _plan(tmp: Path) -> Path:
    """The plan the report case renders (saved by the plan_train case when it ran first; the
    cases may run on different xdist workers, so made here when it did not)."""
    path = tmp / "plan.json"
    if not path.exists():
        plan = gpucast.plan_train(
            workload="cifar-resnet20", epochs=10, dataset_size=50000, gpu="T4", deadline="4h"
        )
        gpucast.save_plan(plan, path)
    return path


D = Path("../shared/data")  # the tests run from the repository root (pytest's rootdir)

# fmt: off
CASES = [
    Case("catalog_gpus", lambda t: ["catalog", "gpus"], lambda t: gpucast.catalog_gpus()),
    Case(
        "catalog_offers",
        lambda t: ["catalog", "offers", "--provider", "gcp", "--gpu", "V100", "--spot"],
        lambda t: gpucast.catalog_offers(provider="gcp", gpu="V100", spot=True),
    ),
    Case(
        "catalog_systems",
        lambda t: ["catalog", "systems", "--gpu", "H100"],
        lambda t: gpucast.catalog_systems(gpu="H100"),
    ),
    Case(
        "catalog_spot",
        lambda t: ["catalog", "spot", "--provider", "aws"],
        lambda t: gpucast.catalog_spot(provider="aws"),
    ),
    Case(
        "import_skypilot",
        lambda t: [
            "catalog",
            "import-skypilot",
            str(FIXTURES / "gcp_vms.csv"),
            "--cloud",
            "gcp",
            "--out",
            str(t / "offers.csv"),
        ],
        lambda t: gpucast.import_skypilot(
            str(FIXTURES / "gcp_vms.csv"), cloud="gcp", out=t / "offers.csv"
        ),
    ),
    Case(
        "profile_workload",
        lambda t: ["profile", "mlp", "--batch-size", "4", "--no-save"],
        lambda t: gpucast.profile_workload("mlp", batch_size=4, save=False),
    ),
    Case(
        "measure_train",
        lambda t: ["measure", "train", "mlp", "--batch-size", "4", "--no-save", *QUICK],
        lambda t: gpucast.measure_train("mlp", batch_size=4, save=False, **QUICK_API),
        timed=True,
    ),
    Case(
        "measure_infer",
        lambda t: ["measure", "infer", "mlp", "--batch-size", "4", "--no-save", *QUICK],
        lambda t: gpucast.measure_infer("mlp", batch_size=4, save=False, **QUICK_API),
        timed=True,
    ),
    Case(
        "measure_infer_curve",
        lambda t: [
            "measure",
            "infer-curve",
            "mlp",
            "--batch-sizes",
            "1,2",
            "--no-save",
            "--device",
            "cpu",
            "--max-time-s",
            "0.5",
            "--min-samples",
            "3",
        ],
        lambda t: gpucast.measure_infer_curve(
            "mlp", batch_sizes=[1, 2], save=False, device="cpu", max_time_s=0.5, min_samples=3
        ),
        timed=True,
    ),
    Case(
        "measure_cmd",
        lambda t: ["measure", "cmd", "--repeats", "2", "--metric", r"x=(\d+)", "--no-save",
                   "--target-ci", "1", "echo", "x=3"],
        lambda t: gpucast.measure_cmd(
            command=["echo", "x=3"], repeats=2, metric=r"x=(\d+)", save=False, target_ci=1
        ),
        timed=True,
    ),
    Case(
        "predict_cmd",
        lambda t: ["predict", "cmd", str(_program_run(t)), "--arch", "arm64"],
        lambda t: gpucast.predict_cmd(runs=[_program_run(t)], arch="arm64"),
    ),
    Case(
        "predict_kernels",
        lambda t: ["predict", "kernels", str(_kernel_run(t))],
        lambda t: gpucast.predict_kernels(_kernel_run(t)),
    ),
    Case("runs_list", lambda t: ["runs", "list"], lambda t: gpucast.runs_list()),
    Case("runs_show", lambda t: ["runs", "show", "1"], lambda t: gpucast.runs_show(1)),
    Case(
        "runs_export",
        lambda t: ["runs", "export", "--out", str(t / "runs.csv")],
        lambda t: gpucast.runs_export(out=t / "runs.csv"),
    ),
    Case(
        "runs_import",
        lambda t: ["--db", str(_new_store(t, "import.db")), "runs", "import",
                   str(t / "parity-runs.csv")],
        lambda t: gpucast.runs_import(t / "parity-runs.csv", db=_new_store(t, "import.db")),
    ),
    Case(
        "runs_delete",
        lambda t: ["--db", str(_new_store(t, "delete.db", filled=True)), "runs", "delete", "1"],
        lambda t: gpucast.runs_delete(ids=[1], db=_new_store(t, "delete.db", filled=True)),
    ),
    Case(
        "campaign_status",
        lambda t: ["campaign", "status", str(_sweep(t))],
        lambda t: gpucast.campaign_status(_sweep(t)),
    ),
    Case(
        "campaign_run",  # the second run of a finished campaign: nothing left to do
        lambda t: ["campaign", "run", str(_sweep(t))],
        lambda t: gpucast.campaign_run(_sweep(t)),
        timed=True,
    ),
    Case(
        "fit_speed",
        lambda t: [
            "fit",
            "speed",
            "--data",
            str(D / "cmdare/speed/single_gpu_speed.csv"),
            "--out",
            str(t / "speed.json"),
        ],
        lambda t: gpucast.fit_speed(
            data=[D / "cmdare/speed/single_gpu_speed.csv"], out=t / "speed.json"
        ),
        shared_data=True,
    ),
    Case(
        "fit_cluster",
        lambda t: [
            "fit",
            "cluster",
            "--data",
            str(D / "cmdare/cluster_scaling"),
            "--out",
            str(t / "cluster.json"),
        ],
        lambda t: gpucast.fit_cluster(data=D / "cmdare/cluster_scaling", out=t / "cluster.json"),
        shared_data=True,
    ),
    Case(
        "fit_checkpoint",
        lambda t: [
            "fit",
            "checkpoint",
            "--data",
            str(D / "cmdare/checkpoint/whole_data.csv"),
            "--out",
            str(t / "ckpt.json"),
        ],
        lambda t: gpucast.fit_checkpoint(
            data=D / "cmdare/checkpoint/whole_data.csv", out=t / "ckpt.json"
        ),
        shared_data=True,
    ),
    Case(
        "fit_lifetimes",
        lambda t: ["fit", "lifetimes", "--trace", "0.1", "--name", "flat", "--no-save"],
        lambda t: gpucast.fit_lifetimes(trace="0.1", name="flat", save=False),
    ),
    Case(
        "fit_steptime",
        lambda t: ["fit", "steptime", "--data-dir", str(D), "--sources", "cmdare",
                   "--no-cross-validate", "--out", str(t / "steptime.json")],
        lambda t: gpucast.fit_steptime(
            data_dir=D, sources="cmdare", cross_validate=False, out=t / "steptime.json"
        ),
        shared_data=True,
    ),
    Case(
        "fit_power",
        lambda t: ["fit", "power", "--data-dir", str(D), "--datasets", "movielens-1m",
                   "--no-cross-validate", "--out", str(t / "power.json")],
        lambda t: gpucast.fit_power(
            data_dir=D, datasets="movielens-1m", cross_validate=False, out=t / "power.json"
        ),
        shared_data=True,
    ),
    Case(
        "fit_variability",
        lambda t: ["fit", "variability", "--name", "lab", "--factors", str(_fleet(t)),
                   "--no-save"],
        lambda t: gpucast.fit_variability(name="lab", factors=_fleet(t), save=False),
    ),
    Case(
        "predict_energy",
        lambda t: ["predict", "energy", "--workload", "mlp", "--batch-size", "32", "--gpu",
                   "A100", "--power-limit", "auto", "--eta", "0.7", "--dataset-size", "3200"],
        lambda t: gpucast.predict_energy(
            workload="mlp", batch_size=32, gpu="A100", power_limit="auto", eta=0.7,
            dataset_size=3200,
        ),
    ),
    Case(
        "predict_train",
        lambda t: ["predict", "train", "--workload", "mlp", "--batch-size", "32", "--gpu", "A100"],
        lambda t: gpucast.predict_train(workload="mlp", batch_size=32, gpu="A100"),
    ),
    Case(
        "predict_train",  # on a cluster: the data-parallel step
        lambda t: ["predict", "train", "--workload", "mlp", "--batch-size", "32", "--cluster",
                   "DGX-H100", "--nodes", "2", "--price-per-gpu-hour", "2.5", "--gpus", "16"],
        lambda t: gpucast.predict_train(
            workload="mlp", batch_size=32, cluster="DGX-H100", nodes=2, price_per_gpu_hour=2.5,
            gpus=16,
        ),
    ),
    Case(
        "predict_llm_train",
        lambda t: ["predict", "llm-train", "--model", "llama-2-7b", "--gpu", "H100",
                   "--gpus", "8", "--seq-len", "2048", "--global-batch", "16"],
        lambda t: gpucast.predict_llm_train(
            model="llama-2-7b", gpu="H100", gpus=8, seq_len=2048, global_batch=16
        ),
    ),
    Case(
        "predict_infer",
        lambda t: ["predict", "infer", "--model", "llama-2-7b", "--gpu", "A100-80GB",
                   "--batch-size", "16", "--input-len", "1024", "--output-len", "1024",
                   "--framework", "vllm", "--tp", "1", "--precision", "fp16"],
        lambda t: gpucast.predict_infer(
            model="llama-2-7b", gpu="A100-80GB", batch_size=16, input_len=1024,
            output_len=1024, framework="vllm", tp=1, precision="fp16",
        ),
    ),
    Case(
        "plan_llm_train",
        lambda t: ["plan", "llm-train", "--model", "llama-2-7b", "--tokens", "1e10",
                   "--seq-len", "2048", "--global-batch", "256", "--gpu", "H100",
                   "--max-gpus", "16"],
        lambda t: gpucast.plan_llm_train(
            model="llama-2-7b", tokens=1e10, seq_len=2048, global_batch=256, gpu=["H100"],
            max_gpus=16,
        ),
    ),
    Case(  # a fixed layout: the same rows, the same shapes left out
        "plan_llm_train",
        lambda t: ["plan", "llm-train", "--model", "llama-2-7b", "--tokens", "1e10",
                   "--seq-len", "2048", "--global-batch", "256", "--gpu", "H100", "--gpu",
                   "A10G", "--max-gpus", "16", "--tp", "2", "--pp", "1", "--zero", "1",
                   "--recompute", "full", "--micro-batch", "2"],
        lambda t: gpucast.plan_llm_train(
            model="llama-2-7b", tokens=1e10, seq_len=2048, global_batch=256,
            gpu=["H100", "A10G"], max_gpus=16, tp=2, pp=1, zero=1, recompute="full",
            micro_batch=2,
        ),
    ),
    Case(
        "predict_gnn",
        lambda t: ["predict", "gnn", "--model", "sage", "--gpu", "A100-80GB", "--nodes",
                   "1000000", "--edges", "20000000", "--batch", "1024", "--fanouts", "15,10"],
        lambda t: gpucast.predict_gnn(
            model="sage", gpu="A100-80GB", nodes=1000000, edges=20000000, batch=1024,
            fanouts=(15, 10),
        ),
    ),
    Case(
        "predict_gnn",
        lambda t: ["predict", "gnn", "--model", "rgat", "--graph", "igbh-full", "--gpu",
                   "H200", "--batch", "2048", "--fanouts", "15,10,5", "--layers", "3",
                   "--hidden", "512", "--gpus", "8", "--feature-precision", "fp8"],
        lambda t: gpucast.predict_gnn(
            model="rgat", graph="igbh-full", gpu="H200", batch=2048, fanouts=(15, 10, 5),
            layers=3, hidden=512, gpus=8, feature_precision="fp8",
        ),
    ),
    Case(
        "plan_embeddings",
        lambda t: ["plan", "embeddings", "--model", "dlrm-dcnv2", "--gpu", "A100-80GB",
                   "--gpus", "8"],
        lambda t: gpucast.plan_embeddings(model="dlrm-dcnv2", gpu="A100-80GB", gpus=8),
    ),
    Case(
        "predict_embedding_cache",
        lambda t: ["predict", "embedding-cache", "--data-dir", str(D), "--window", "2021",
                   "--policy", "lfu", "--fractions", "0.01,0.1", "--replay", "--replay-rows",
                   "2000", "--seed", "3"],
        lambda t: gpucast.predict_embedding_cache(
            data_dir=D, window="2021", policy="lfu", fractions=(0.01, 0.1), replay=True,
            replay_rows=2000, seed=3,
        ),
        shared_data=True,
    ),
    Case(
        "predict_checkpoint",
        lambda t: [
            "predict",
            "checkpoint",
            "--model",
            str(_fitted(t, "ckpt")),
            "--input",
            str(_rows(t, "ck.csv", "Checkpoint Size (MB)\n10\n200\n")),
            "--output",
            str(t / "ck-out.csv"),
        ],
        lambda t: gpucast.predict_checkpoint(
            model=_fitted(t, "ckpt"), input=t / "ck.csv", output=t / "ck-out.csv"
        ),
        shared_data=True,
    ),
    Case(
        "predict_speed",
        lambda t: [
            "predict",
            "speed",
            "--model",
            str(_fitted(t, "speed")),
            "--input",
            str(D / "cmdare/speed/single_gpu_speed.csv"),
            "--output",
            str(t / "sp.csv"),
        ],
        lambda t: gpucast.predict_speed(
            model=_fitted(t, "speed"),
            input=D / "cmdare/speed/single_gpu_speed.csv",
            output=t / "sp.csv",
        ),
        shared_data=True,
    ),
    Case(
        "predict_cluster",
        lambda t: [
            "predict",
            "cluster",
            "--model",
            str(_fitted(t, "cluster")),
            "--input",
            str(
                _rows(
                    t,
                    "cl.csv",
                    "Number of Parameters,Number of Tensors,Workers,"
                    "Parameter Servers,Step Time (s)\n1000000,50,4,1,0.2\n",
                )
            ),
            "--output",
            str(t / "cl-out.csv"),
        ],
        lambda t: gpucast.predict_cluster(
            model=_fitted(t, "cluster"), input=t / "cl.csv", output=t / "cl-out.csv"
        ),
        shared_data=True,
    ),
    Case(
        "validate",
        lambda t: ["validate", "--data-dir", str(D), "--what", "checkpoint"],
        lambda t: gpucast.validate(data_dir=D, what="checkpoint"),
        shared_data=True,
    ),
    Case(
        "simulate_train",
        lambda t: [
            "simulate",
            "train",
            "--gpu",
            "K80",
            "--workers",
            "2",
            "--spot",
            "--region",
            "us-east1",
            "--workload",
            "cifar-resnet32",
            "--steps",
            "20000",
            "--runs",
            "300",
            "--hazard-per-hour",
            "0.1",
            "--speed",
            "4.5",
            "--deadline",
            "3h",
        ],
        lambda t: gpucast.simulate_train(
            gpu="K80",
            workers=2,
            spot=True,
            region="us-east1",
            workload="cifar-resnet32",
            steps=20000,
            runs=300,
            hazard_per_hour=0.1,
            speed="4.5",
            deadline="3h",
        ),
    ),
    Case(
        "simulate_serve",
        lambda t: [
            "simulate",
            "serve",
            "--model",
            "mlp",
            "--gpu",
            "T4",
            "--rate",
            "100",
            "--duration-s",
            "5",
        ],
        lambda t: gpucast.simulate_serve(model="mlp", gpu="T4", rate=100, duration_s=5),
    ),
    Case(
        "simulate_llm_serve",
        lambda t: ["simulate", "serve", "--model", "llama-3-8b", "--gpu", "H100-SXM", "--rate",
                   "2", "--duration-s", "10", "--slo-ttft-ms", "500", "--slo-tpot-ms", "50"],
        lambda t: gpucast.simulate_llm_serve(
            model="llama-3-8b", gpu="H100-SXM", rate=2, duration_s=10, slo_ttft_ms=500,
            slo_tpot_ms=50,
        ),
    ),
    Case(
        "plan_llm_serve",
        lambda t: ["plan", "serve", "--model", "llama-3-8b", "--rate", "2", "--duration-s", "10",
                   "--gpu", "H100-SXM", "--tp", "1", "--max-replicas", "2", "--slo-ttft-ms",
                   "800", "--slo-tpot-ms", "60"],
        lambda t: gpucast.plan_llm_serve(
            model="llama-3-8b", rate=2, duration_s=10, gpu=["H100-SXM"], tp=[1], max_replicas=2,
            slo_ttft_ms=800, slo_tpot_ms=60,
        ),
    ),
    Case(
        "plan_train",
        lambda t: [
            "plan",
            "train",
            "--workload",
            "cifar-resnet20",
            "--epochs",
            "10",
            "--dataset-size",
            "50000",
            "--gpu",
            "T4",
            "--deadline",
            "4h",
            "--save",
            str(t / "plan.json"),
        ],
        lambda t: gpucast.plan_train(
            workload="cifar-resnet20", epochs=10, dataset_size=50000, gpu="T4", deadline="4h"
        ),
    ),
    Case(
        "plan_serve",
        lambda t: [
            "plan",
            "serve",
            "--model",
            "mlp:200",
            "--slo",
            "p99<50ms",
            "--gpu",
            "T4",
            "--no-mig",
            "--duration-s",
            "5",
            "--saturation-s",
            "0.2",
        ],
        lambda t: gpucast.plan_serve(
            model=["mlp:200"], slo="p99<50ms", gpu=["T4"], no_mig=True, duration_s=5,
            saturation_s=0.2,
        ),
    ),
    # issue #18: PARIS + ELSA (plan serve --mix)
    Case(
        "plan_serve",
        lambda t: ["plan", "serve", "--mix", "mlp:2000:5", "--duration-s", "2"],
        lambda t: gpucast.plan_serve(mix=["mlp:2000:5"], duration_s=2),
    ),
    Case(
        "write_report",
        lambda t: ["report", "--plan", str(_plan(t)), "--out", str(t / "report.html")],
        lambda t: gpucast.write_report(plan=_plan(t), out=t / "report.html"),
    ),
    # serverless (issue #19)
    Case(
        "simulate_serverless",
        lambda t: ["simulate", "serverless", "--synthetic", "200", "--minutes", "600",
                   "--policy", "histogram", "--gpu", "T4", "--models", "mlp,resnet18"],
        lambda t: gpucast.simulate_serverless(
            synthetic=200, minutes=600, policy="histogram", gpu="T4", models=["mlp", "resnet18"]
        ),
    ),
    # plan serverless (issue #19, items 3-5)
    Case(
        "plan_serverless",
        lambda t: ["plan", "serverless", "--synthetic", "100", "--minutes", "300",
                   "--models", "mlp", "--gpu", "T4", "--slo", "p99<1s",
                   "--policies", "fixed:10m,histogram"],
        lambda t: gpucast.plan_serverless(
            synthetic=100, minutes=300, models=["mlp"], gpu="T4", slo="p99<1s",
            policies=["fixed:10m", "histogram"],
        ),
    ),
    Case(
        "simulate_kaas",
        lambda t: ["simulate", "kaas", "--models", "mlp,resnet18", "--rate", "10",
                   "--pool-gpus", "1", "--duration-s", "2"],
        lambda t: gpucast.simulate_kaas(
            models=["mlp", "resnet18"], rate=10, pool_gpus=1, duration_s=2
        ),
    ),
    Case(
        "predict_coldstart",
        lambda t: ["predict", "coldstart", "resnet18", "--gpu", "T4", "--storage", "s3",
                   "--network-gbps", "10"],
        lambda t: gpucast.predict_coldstart(
            "resnet18", gpu="T4", storage="s3", network_gbps=10
        ),
    ),
    Case(
        "measure_coldstart",
        lambda t: ["measure", "coldstart", "mlp", "--steady-runs", "2", "--no-save"],
        lambda t: gpucast.measure_coldstart("mlp", steady_runs=2, save=False),
        timed=True,
    ),
    # sharing GPUs (#18)
    Case(
        "catalog_mig",
        lambda t: ["catalog", "mig", "--gpu", "A100-40GB", "--layout", "3g.20gb,2g.10gb,1g.5gb"],
        lambda t: gpucast.catalog_mig(gpu="A100-40GB", layout=["3g.20gb", "2g.10gb", "1g.5gb"]),
    ),
    Case(
        "plan_placement",
        lambda t: ["plan", "placement", "--topology", "dgx1-v100", "--gpus", "2", "--jobs", "20"],
        lambda t: gpucast.plan_placement(topology="dgx1-v100", gpus=2, jobs=20),
    ),
    # training beyond GPU memory (#16, offload)
    Case(
        "measure_optimizer",
        lambda t: ["measure", "optimizer", "--sizes", "2000,4000,8000", "--tensors", "1,4,2",
                   "--implementation", "foreach", "--max-time-s", "0.3", "--no-save"],
        lambda t: gpucast.measure_optimizer(
            sizes=[2000, 4000, 8000], tensors=[1, 4, 2], implementation="foreach",
            max_time_s=0.3, save=False,
        ),
        timed=True,
    ),
]
# fmt: on


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("parity")


@pytest.fixture(autouse=True)
def _one_store(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """Every case of the module shares one store (and the run's fit cache, conftest)."""
    monkeypatch.setenv("GPUCAST_DB", str(workdir / "store.db"))
    monkeypatch.chdir(request.config.rootpath)


@pytest.fixture(scope="module")
def filled_store(workdir: Path) -> Path:
    """A store holding one measurement and a finished campaign (for runs and campaign)."""
    import os

    old = os.environ.get("GPUCAST_DB")
    os.environ["GPUCAST_DB"] = str(workdir / "store.db")
    try:
        gpucast.measure_train("mlp", batch_size=4, **QUICK_API)
        gpucast.campaign_run(_sweep(workdir))
    finally:
        if old is None:
            del os.environ["GPUCAST_DB"]
        else:
            os.environ["GPUCAST_DB"] = old
    return workdir / "store.db"


def _json_of(argv: list[str]) -> Any:
    result = runner.invoke(app, [*argv, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("case", CASES, ids=[c.verb for c in CASES])
def test_cli_json_equals_the_python_result(
    case: Case, workdir: Path, request: pytest.FixtureRequest
) -> None:
    if case.shared_data:
        request.getfixturevalue("shared_data")
    if case.verb.startswith(("runs_", "campaign_")):
        request.getfixturevalue("filled_store")  # measured once per worker, only for these
    from_cli = _json_of(case.argv(workdir))
    from_api = json.loads(json.dumps(jsonable(case.call(workdir).to_dict()), default=str))
    if case.timed:
        from_cli, from_api = _strip(from_cli), _strip(from_api)
    assert from_cli == from_api


def test_every_verb_has_a_case() -> None:
    from gpucast.app import VERBS

    helpers = {  # file helpers, not CLI verbs
        "save_plan",
        "load_plan",
        "write_plan_report",
        "save_serve_plan",
        "write_serve_plan_report",
    }
    assert {c.verb for c in CASES} == set(VERBS) - helpers


# fmt: off
BAD = [
    (["plan", "train", "--workload", "mlp", "--epochs", "3", "--budget", "-5"],
     lambda: gpucast.plan_train(workload="mlp", epochs=3, budget=-5)),
    (["plan", "train", "--workload", "mlp", "--epochs", "3", "--deadline", "soon"],
     lambda: gpucast.plan_train(workload="mlp", epochs=3, deadline="soon")),
    (["simulate", "train", "--gpu", "K80", "--workers", "0", "--region", "us-east1",
      "--steps", "10"],
     lambda: gpucast.simulate_train(gpu="K80", workers=0, region="us-east1", steps=10)),
    (["simulate", "train", "--gpu", "K81", "--workers", "2", "--region", "us-east1",
      "--steps", "10"],
     lambda: gpucast.simulate_train(gpu="K81", workers=2, region="us-east1", steps=10)),
    (["simulate", "serve", "--model", "mlp", "--gpu", "T4", "--rate", "-1"],
     lambda: gpucast.simulate_serve(model="mlp", gpu="T4", rate=-1)),
    (["plan", "serve", "--model", "mlp:100", "--slo", "fast"],
     lambda: gpucast.plan_serve(model=["mlp:100"], slo="fast")),
    # issue #18: plan serve --mix
    (["plan", "serve", "--mix", "mlp:100:0.001", "--duration-s", "2"],
     lambda: gpucast.plan_serve(mix=["mlp:100:0.001"], duration_s=2)),
    (["predict", "train", "--workload", "mlp", "--batch-size", "0", "--gpu", "A100"],
     lambda: gpucast.predict_train(workload="mlp", batch_size=0, gpu="A100")),
    (["profile", "nosuchmodel"], lambda: gpucast.profile_workload("nosuchmodel")),
    (["measure", "train", "mlp", "--target-ci", "-1"],
     lambda: gpucast.measure_train("mlp", target_ci=-1)),
    (["catalog", "offers", "--gpu", "H1000"], lambda: gpucast.catalog_offers(gpu="H1000")),
    (["runs", "show", "0"], lambda: gpucast.runs_show(0)),
    (["runs", "delete", "3", "0"], lambda: gpucast.runs_delete(ids=[3, 0])),
    (["runs", "import", "no-such-runs.csv"], lambda: gpucast.runs_import("no-such-runs.csv")),
    (["fit", "lifetimes", "--trace", "0.1", "--name", "x", "--model", "tarot"],
     lambda: gpucast.fit_lifetimes(trace="0.1", name="x", model="tarot")),
    (["plan", "train", "--workload", "mlp", "--epochs", "3", "--spot-scenario", "grim"],
     lambda: gpucast.plan_train(workload="mlp", epochs=3, spot_scenario="grim")),
    (["report", "--out", "x.html"], lambda: gpucast.write_report(out="x.html")),
    (["plan", "train", "--workload", "mlp", "--epochs", "3", "--cluster", "no-such-cluster.yaml"],
     lambda: gpucast.plan_train(workload="mlp", epochs=3, cluster="no-such-cluster.yaml")),
    (["predict", "train", "--workload", "mlp", "--batch-size", "8", "--cluster", "DGX-H1000"],
     lambda: gpucast.predict_train(workload="mlp", batch_size=8, cluster="DGX-H1000")),
    (["predict", "train", "--workload", "mlp", "--batch-size", "8", "--cluster", "DGX-H100",
      "--gpus", "9"],
     lambda: gpucast.predict_train(workload="mlp", batch_size=8, cluster="DGX-H100", gpus=9)),
    (["predict", "train", "--workload", "mlp", "--batch-size", "8", "--gpu", "A100", "--gpus",
      "8"],
     lambda: gpucast.predict_train(workload="mlp", batch_size=8, gpu="A100", gpus=8)),
    (["simulate", "train", "--cluster", "tinybox_green", "--nodes", "2", "--steps", "10"],
     lambda: gpucast.simulate_train(cluster="tinybox_green", nodes=2, steps=10)),
    (["plan", "train", "--workload", "mlp", "--epochs", "3", "--exclude-slowest", "0.1"],
     lambda: gpucast.plan_train(workload="mlp", epochs=3, exclude_slowest=0.1)),
    (["plan", "train", "--workload", "mlp", "--epochs", "3", "--nvme-gbps", "-1"],
     lambda: gpucast.plan_train(workload="mlp", epochs=3, nvme_gbps=-1.0)),
    (["predict", "energy", "--workload", "mlp", "--batch-size", "8", "--gpu", "T4",
      "--power-limit", "500"],
     lambda: gpucast.predict_energy(workload="mlp", batch_size=8, gpu="T4", power_limit=500)),
    (["plan", "llm-train", "--model", "llama-3-8b", "--tokens", "1e9", "--global-batch", "8",
      "--tp", "32"],
     lambda: gpucast.plan_llm_train(model="llama-3-8b", tokens=1e9, global_batch=8, tp=32)),
    (["plan", "llm-train", "--model", "llama-3-8b", "--tokens", "1e9", "--global-batch", "8",
      "--zero", "4"],
     lambda: gpucast.plan_llm_train(model="llama-3-8b", tokens=1e9, global_batch=8, zero=4)),
    (["predict", "infer", "--model", "gpt-3-175b", "--gpu", "L4", "--input-len", "512",
      "--output-len", "128"],
     lambda: gpucast.predict_infer(model="gpt-3-175b", gpu="L4", input_len=512, output_len=128)),
    (["predict", "infer", "--model", "llama-2-7b", "--gpu", "A100", "--input-len", "5000",
      "--output-len", "8"],
     lambda: gpucast.predict_infer(model="llama-2-7b", gpu="A100", input_len=5000, output_len=8)),
    (["predict", "infer", "--model", "llama-2-7b", "--gpu", "A100", "--input-len", "512",
      "--output-len", "8", "--framework", "sglang"],
     lambda: gpucast.predict_infer(
         model="llama-2-7b", gpu="A100", input_len=512, output_len=8, framework="sglang")),
    (["simulate", "serve", "--model", "llama-2-7b", "--gpu", "A100-80GB", "--rate", "1",
      "--input-len", "5000"],
     lambda: gpucast.simulate_llm_serve(
         model="llama-2-7b", gpu="A100-80GB", rate=1, input_len=5000)),
    (["simulate", "serve", "--model", "llama-3-70b", "--gpu", "A100-80GB", "--rate", "1",
      "--tp", "1"],
     lambda: gpucast.simulate_llm_serve(model="llama-3-70b", gpu="A100-80GB", rate=1, tp=1)),
    (["plan", "serve", "--model", "gpt-3-175b", "--rate", "1", "--gpu", "L4", "--tp", "1,2",
      "--slo-ttft-ms", "500"],
     lambda: gpucast.plan_llm_serve(
         model="gpt-3-175b", rate=1, gpu=["L4"], tp=[1, 2], slo_ttft_ms=500)),
    (["plan", "serve", "--model", "llama-3-8b", "--rate", "1", "--duration-s", "10", "--gpu",
      "H100-SXM", "--slo-ttft-ms", "1"],
     lambda: gpucast.plan_llm_serve(
         model="llama-3-8b", rate=1, duration_s=10, gpu=["H100-SXM"], slo_ttft_ms=1)),
    # a language model through plan_serve / simulate_serve: the CLI's one rule
    # (app.serve.language_model_values; the API passed options on as they came)
    (["plan", "serve", "--model", "llama-3-8b:10", "--engine", "tensorrt"],
     lambda: gpucast.plan_serve(models="llama-3-8b:10", engine="tensorrt")),
    (["simulate", "serve", "--model", "llama-3-8b", "--gpu", "H100", "--rate", "2",
      "--slo-ms", "500"],
     lambda: gpucast.simulate_serve(model="llama-3-8b", gpu="H100", rate=2, slo_ms="500")),
    (["simulate", "serve", "--model", "resnet50", "--gpu", "T4", "--rate", "2",
      "--slo-tpot-ms", "5"],
     lambda: gpucast.simulate_serve(model="resnet50", gpu="T4", rate=2, slo_tpot_ms=5)),
    # serverless (issue #19)
    (["simulate", "serverless", "--synthetic", "10", "--policy", "fixed:0m"],
     lambda: gpucast.simulate_serverless(synthetic=10, policy="fixed:0m")),
    (["simulate", "serverless", "--trace", "no-such-trace-dir"],
     lambda: gpucast.simulate_serverless(trace="no-such-trace-dir")),
    # plan serverless (issue #19, items 3-5)
    (["plan", "serverless", "--synthetic", "10", "--slo", "fast"],
     lambda: gpucast.plan_serverless(synthetic=10, slo="fast")),
    (["plan", "serverless", "--synthetic", "10", "--policies", "fixed:-5m"],
     lambda: gpucast.plan_serverless(synthetic=10, policies=["fixed:-5m"])),
    (["plan", "serverless", "--synthetic", "10", "--max-utilisation", "0"],
     lambda: gpucast.plan_serverless(synthetic=10, max_utilisation=0)),
    (["simulate", "kaas", "--pool-gpus", "0"], lambda: gpucast.simulate_kaas(pool_gpus=0)),
    (["predict", "coldstart", "mlp", "--gpu", "T4", "--storage", "floppy"],
     lambda: gpucast.predict_coldstart("mlp", gpu="T4", storage="floppy")),
    (["measure", "coldstart", "mlp", "--batch-size", "0"],
     lambda: gpucast.measure_coldstart("mlp", batch_size=0)),
    # GAT / R-GAT (#17)
    (["predict", "gnn", "--model", "rgat", "--graph", "igbh-full", "--gpu", "H200", "--batch",
      "8", "--fanouts", "2,2", "--heads", "0"],
     lambda: gpucast.predict_gnn(model="rgat", graph="igbh-full", gpu="H200", batch=8,
                                 fanouts=(2, 2), heads=0)),
    (["predict", "gnn", "--model", "rgat", "--graph", "igbh-full", "--gpu", "H200", "--batch",
      "8", "--fanouts", "2,2", "--target", "venue"],
     lambda: gpucast.predict_gnn(model="rgat", graph="igbh-full", gpu="H200", batch=8,
                                 fanouts=(2, 2), target="venue")),
    # sharing GPUs (#18)
    (["catalog", "mig", "--gpu", "A100-40GB", "--layout", "4g.20gb,3g.20gb,1g.5gb"],
     lambda: gpucast.catalog_mig(gpu="A100-40GB", layout=["4g.20gb", "3g.20gb", "1g.5gb"])),
    (["plan", "placement", "--topology", "dgx1-v100", "--gpus", "9"],
     lambda: gpucast.plan_placement(topology="dgx1-v100", gpus=9)),
    (["simulate", "serve", "--model", "mlp", "--gpu", "T4", "--rate", "10", "--deadline-ms",
      "0.001"],
     lambda: gpucast.simulate_serve(model="mlp", gpu="T4", rate=10, deadline_ms=0.001)),
    # training beyond GPU memory (#16, offload)
    (["measure", "optimizer", "--sizes", "100,200", "--tensors", "1,2,3"],
     lambda: gpucast.measure_optimizer(sizes=[100, 200], tensors=[1, 2, 3])),
    (["measure", "optimizer", "--sizes", "-5"],
     lambda: gpucast.measure_optimizer(sizes=[-5])),
    # per-operator prediction (#20 item 4)
    (["predict", "kernels", "1", "--train-runs", "1"],
     lambda: gpucast.predict_kernels(1, train_runs=[1])),
    (["measure", "train", "mlp", "--kernels", "--distributed", "ddp"],
     lambda: gpucast.measure_train("mlp", kernels=True, distributed="ddp")),
    # elastic batch on spot clusters (#16, items 3/5)
    (["simulate", "train", "--gpu", "K80", "--workers", "2", "--region", "us-east1",
      "--steps", "10", "--elastic", "--strategy", "ps-async"],
     lambda: gpucast.simulate_train(gpu="K80", workers=2, region="us-east1", steps=10,
                                    elastic=True, strategy="ps-async")),
    (["simulate", "train", "--gpu", "K80", "--workers", "2", "--region", "us-east1",
      "--steps", "10", "--strategy", "allreduce", "--elastic", "--reshard-s", "-1"],
     lambda: gpucast.simulate_train(gpu="K80", workers=2, region="us-east1", steps=10,
                                    strategy="allreduce", elastic=True, reshard_s=-1)),
]
# fmt: on


@pytest.mark.parametrize("argv, call", BAD, ids=[" ".join(a[:3]) for a, _ in BAD])
def test_bad_input_is_the_same_line_both_ways(argv: list[str], call: Callable[[], Any]) -> None:
    result = runner.invoke(app, argv)
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert line.startswith("error: ") and "\n" not in line and "Traceback" not in result.output
    with pytest.raises(InvalidInputError) as caught:
        call()
    assert line == f"error: {' '.join(str(caught.value).split())}"
