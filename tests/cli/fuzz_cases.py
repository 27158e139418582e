"""The fuzz table of ``tests/cli/test_fuzz.py``: every command, every kind of bad input.

A case is a command line (tokens ``@NAME`` stand for the files :func:`make_files` writes) and
what a clean answer is: exit code 2 with one line (bad input), 1 with one line (a runtime
failure), or 0 with no ``nan``/``inf`` printed as a result. The table is generated from the
request dataclasses, so a new option is fuzzed without touching this file:

* every number option gets ``inf``, ``-inf``, ``nan``, ``1e308``, ``-1``, ``0``, a count too
  big to allocate (``1e9``), an integer beyond 2**53 and text;
* every path option gets a missing file, a folder, ``/dev/zero``, an empty file, UTF-16,
  Latin-1, binary bytes, a JSON list where an object is expected, a CSV naming a column twice
  and plain prose;
* every free-text option gets an unknown name and ``""``;
* the positional workload gets user modules whose import or factory fails (syntax error,
  raising, wrong return type, missing factory);
* hand-written cases cover what the issue lists by name.

Every case stays small (tiny data, few runs), so none does unbounded work: a limit that does
not hold shows up as an error here, not as a slow test.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "catalog" / "fixtures"

#: Reason for the serving cases that are expected to fail until the serving rework lands.
SERVING_REWORK = (
    "serving rework: the serving simulator and its verbs (simulate/serving.py, app/serve.py, "
    "inputs/serving.py, cli/serve.py) are being rewritten; their input limits land with it"
)
#: Serving cases that fail today (case id -> whether running it is safe: False where it
#: hangs or allocates tens of GiB before failing). Listed, not fixed, in the report of #21.
SERVING_KNOWN_FAILURES: dict[str, bool] = {}
#: Reason for the power/energy cases that fail today (the lead is writing that code).
ENERGY_WORK = "power/energy (predict/power.py, inputs/energy.py) is being written by the lead"
#: Power/energy cases that fail today (case id -> whether running it is safe).
ENERGY_KNOWN_FAILURES: dict[str, bool] = {}

NUMBERS: tuple[str, ...] = (
    "inf",
    "-inf",
    "nan",
    "1e308",
    "-1",
    "0",
    "1000000000",
    "123456789012345678901234567890",
    "abc",
)
BAD_FILES: tuple[str, ...] = (
    "@missing",
    "@folder",
    "/dev/zero",
    "@empty",
    "@utf16",
    "@latin1",
    "@binary",
    "@json_list",
    "@dup_header",
    "@prose",
)
#: Output paths: never a device (replacing /dev/zero as root is what this guards against).
BAD_OUTPUTS: tuple[str, ...] = ("@folder", "@fifo", "@missing_folder_out", "@speed_csv_copy")
#: Root options: a store that is a folder, not SQLite, or in a folder that does not exist.
BAD_STORES: tuple[str, ...] = ("@folder", "@binary", "@utf16", "@no_dir_db")
BAD_TEXT: tuple[str, ...] = ("tarot", "")
#: Request fields that name a file the verb writes.
OUTPUT_FLAGS = ("out", "output")


@dataclass(frozen=True)
class Case:
    """One command line and the exit codes that are a clean answer to it."""

    id: str
    argv: tuple[str, ...]
    codes: frozenset[int] = frozenset({0, 1, 2})
    #: text the output (stdout + stderr) must contain, case-insensitive
    says: str | None = None
    #: a known failure of code owned by others: xfail with this reason
    xfail: str | None = None
    #: whether the known failure is safe to run (False: it hangs or exhausts memory)
    run: bool = True
    #: root options (``--db``) placed before the verb
    root: tuple[str, ...] = ()
    tags: frozenset[str] = field(default_factory=frozenset)


# -- files ----------------------------------------------------------------------------------
SPEED_HEADER = (
    "GPU (temp),Model (temp),GPU TFLOPS,Model FLOPs,Number of Parameters,Number of Tensors"
)


def _speed_rows() -> str:
    lines = [SPEED_HEADER + ",Step Time (s)"]
    for m in range(6):
        flops = 5e8 * 1.4**m
        tensors = 40 + 17 * ((m * 7) % 12)
        for gpu, peak, (fixed, per_tensor, compute) in (
            ("K80", 4.0, (0.025, 0.0009, 5.0e-11)),
            ("P100", 10.0, (0.010, 0.00036, 2.0e-11)),
        ):
            for j in range(2):
                step = (fixed + per_tensor * tensors + compute * flops) * (1 + 0.01 * j)
                lines.append(f"{gpu},m{m},{peak},{flops},{flops / 880.0},{tensors},{step}")
    return "\n".join(lines) + "\n"


def _cluster_data(root: Path) -> Path:
    speeds = {
        ("K80", "small"): [5.0, 10.0, 14.8],
        ("K80", "big"): [1.0, 1.9, 2.4],
        ("P100", "small"): [9.0, 17.5, 25.0],
        ("P100", "big"): [2.0, 2.5, 2.7],
    }
    for (gpu, model), values in speeds.items():
        for n, speed in enumerate(values, start=1):
            path = root / "cluster_scaling" / gpu / f"{model}_{n}workers.csv"
            path.parent.mkdir(parents=True, exist_ok=True)
            lines = ["Wall time,Step,Value"] + [f"{i},{100 * i},{speed}" for i in range(1, 6)]
            path.write_text("\n".join(lines) + "\n")
    (root / "speed").mkdir(exist_ok=True)
    (root / "speed" / "single_gpu_speed.csv").write_text(
        "Model (temp),Number of Parameters,Number of Tensors\nsmall,1e6,100\nbig,3e7,200\n"
    )
    return root / "cluster_scaling"


USER_MODULES = {
    "fz_syntax": "def factory(:\n    pass\n",
    "fz_raises": "raise RuntimeError('boom at import')\n",
    "fz_factory_raises": "def factory(**kw):\n    raise ValueError('factory failed')\n",
    "fz_wrong_return": "def factory(**kw):\n    return 42\n",
    "fz_wrong_model": "import torch\ndef factory(**kw):\n    return 'model', torch.zeros(2, 3)\n",
    "fz_no_factory": "x = 1\n",
    "fz_ok": (
        "import torch\ndef factory(**kw):\n    return torch.nn.Linear(4, 2), torch.zeros(2, 4)\n"
    ),
}


def _runs_export(result_json: str) -> str:
    """A one-run ``gpucast runs export`` CSV whose result cell is ``result_json``."""
    import csv
    import io

    row = {
        "id": 7, "kind": "measurement", "workload": "mlp", "batch_size": 4, "precision": "fp32",
        "mode": "train", "device": "cpu", "created_at": "2025-06-01T00:00:00+00:00",
        "spec_json": '{"name": "mlp"}', "result_json": result_json, "median_s": 0.01,
        "mean_s": 0.01, "p5_s": 0.01, "p95_s": 0.01, "ci_halfwidth_rel": 0.01,
        "samples_per_s": 400.0, "n_samples": 10, "stop_reason": "ci_reached", "host": "fz",
        "gpu_name": "", "gpucast_version": "0",
    }  # fmt: skip
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(row))
    writer.writeheader()
    writer.writerow(row)
    return out.getvalue()


def make_files(root: Path, *, fitted: dict[str, Path] | None = None) -> dict[str, Path]:
    """Write every file a case names (valid ones and bad ones) under ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {}

    def put(name: str, data: str | bytes, suffix: str = ".csv") -> Path:
        path = root / f"{name}{suffix}"
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data, encoding="utf-8")
        files[name] = path
        return path

    # bad files
    files["missing"] = root / "no-such-file.csv"
    (root / "folder").mkdir(exist_ok=True)
    files["folder"] = root / "folder"
    put("empty", b"")
    put("utf16", "batch_size,latency_s\n1,0.01\n".encode("utf-16"))
    put("latin1", "model,caf\xe9\n1,2\n".encode("latin-1"))
    put("binary", bytes(range(256)) * 4)
    put("json_list", "[1, 2, 3]\n", ".json")
    put("dup_header", "a,b,a\n1,2,3\n")
    put("prose", "This is not the file you are looking for.\nAt all.\n")

    # valid files
    put("speed_csv", _speed_rows())
    put("speed_in", SPEED_HEADER + "\nP100,a,,2e9,2.2e6,120\nV100,a,,2e9,2.2e6,120\n")
    files["cluster_dir"] = _cluster_data(root / "cmdare")
    put(
        "cluster_in",
        "GPU (temp),Model (temp),Number of Parameters,Number of Tensors,Workers,"
        "Parameter Servers,Strategy\nP100,big,3e7,200,4,1,\n",
    )
    ckpt = ["Model,Local duration,Duration,Checkpoint Size (MB),Index File Size"]
    for i, size in enumerate([5, 10, 20, 40, 80]):
        ckpt += [f"m{i},0.1,{3 + 0.02 * size + 0.01 * j},{size},{size / 4}" for j in range(2)]
    put("ckpt_csv", "\n".join(ckpt) + "\n")
    put("ckpt_in", "Checkpoint Size (MB)\n100\n50\n")
    put(
        "prices",
        "server,market,usd_per_hour\nK80,spot,0.2556\nK80,on-demand,0.72\ncpu-ps,on-demand,0.14\n",
    )
    put("latency", "batch_size,latency_s\n1,0.010\n4,0.016\n8,0.024\n")
    put("factors", "step_time_s\n1.0\n1.1\n0.95\n1.02\n0.99\n1.05\n")
    put("trace", "arrival_s\n" + "\n".join(f"{i * 0.01:.3f}" for i in range(200)) + "\n")
    put("trace_two", "arrival_s\n0.0\n0.5\n")
    lifetimes = ["start,end,reason,gpu"]
    lifetimes += [f"{i * 3600},{i * 3600 + 1800 + 600 * (i % 5)},preempted,K80" for i in range(12)]
    put("lifetimes", "\n".join(lifetimes) + "\n")
    put(
        "node_counts", json.dumps({"metadata": {"gap_seconds": 300}, "data": [4, 4, 3, 4]}), ".json"
    )
    put(
        "sweep",
        "devices: [cpu]\nworkloads: [mlp]\nbatch_sizes: [2]\n"
        "settings: {max_time_s: 0.2, min_samples: 3, target_ci: 0.5}\n",
        ".yaml",
    )
    put(
        "sweep_huge",
        "devices: [cpu]\nworkloads: [mlp]\nbatch_sizes: [2]\nrepeats: 1000000000\n",
        ".yaml",
    )
    put(
        "cluster_yaml",
        "name: lab\ngpu: T4\ngpus_per_node: 4\nnodes: 2\n"
        "inter_node_gbps: 50\nprice_usd_per_gpu_hour: 0.5\n",
        ".yaml",
    )
    put("plan_cfg", "workload: mlp\nsteps: 1000\n", ".yaml")
    put("yaml_list", "- workload\n- mlp\n", ".yaml")
    put("skypilot", (FIXTURES / "gcp_vms.csv").read_text(encoding="utf-8"))
    put("offers_bad_rows", "provider,region\n")
    put("bom_crlf_latency", b"\xef\xbb\xbfbatch_size,latency_s\r\n1,0.010\r\n4,0.016\r\n")
    put(
        "bom_crlf_trace",
        b"\xef\xbb\xbfarrival_s\r\n" + b"".join(f"{i * 0.01:.3f}\r\n".encode() for i in range(200)),
    )
    put("profile_list", "[]", ".json")
    put("speed_in_unknown", SPEED_HEADER + "\nK9000,a,,2e9,2.2e6,120\n")
    put("speed_one_row", SPEED_HEADER + ",Step Time (s)\nK80,m0,4.0,5e8,568181,40,0.07\n")
    for name, code in USER_MODULES.items():
        files[f"{name}_py"] = put(name, code, ".py")
    fifo = root / "fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    files["fifo"] = fifo
    files["missing_folder_out"] = root / "no-such-folder" / "out.csv"
    put("runs_export", _runs_export('{"median_s": 0.01}'))
    put("runs_bad_json", _runs_export('{"median_s": '))
    from gpucast.store import open_store

    files["empty_store"] = root / "empty-store.db"
    open_store(files["empty_store"]).close()  # a store with no runs
    put("speed_csv_copy", _speed_rows())
    files["out_csv"] = root / "out.csv"
    files["out_json"] = root / "out.json"
    files["out_html"] = root / "out.html"
    files["db"] = root / "fuzz.db"
    files["no_dir_db"] = root / "no" / "such" / "dir" / "x.db"
    if fitted:
        files.update(fitted)
    return files


_FILE_TOKEN = re.compile(r"@([A-Za-z0-9_]+)")


def resolve_argv(argv: Iterable[str], files: dict[str, Path]) -> list[str]:
    """``argv`` with every ``@NAME`` (alone or inside a token, e.g. ``trace:@NAME``) replaced
    by the path of file NAME."""

    def path(match: re.Match[str]) -> str:
        name = match.group(1)
        return str(files[name]) if name in files else match.group(0)

    return [_FILE_TOKEN.sub(path, token) for token in argv]


# -- commands: a valid, cheap command line each, and its request class -----------------------
@dataclass(frozen=True)
class Command:
    path: tuple[str, ...]
    base: tuple[str, ...]
    request: str  # "module:Class" of the request (the flags are its fields)
    positional: str | None = None  # the base's positional argument (replaced by fuzzing)
    skip_fields: frozenset[str] = frozenset()


QUICK_MEASURE = (
    "--device",
    "cpu",
    "--max-time-s",
    "0.2",
    "--min-samples",
    "3",
    "--target-ci",
    "0.9",
    "--no-save",
)

# fmt: off
COMMANDS: tuple[Command, ...] = (
    Command(("catalog", "gpus"), (), "gpucast.app.catalog:CatalogGpusRequest"),
    Command(("catalog", "offers"), ("--provider", "gcp"), "gpucast.app.catalog:CatalogOffersRequest"),  # noqa: E501
    Command(("catalog", "spot"), (), "gpucast.app.catalog:CatalogSpotRequest"),
    Command(("catalog", "systems"), (), "gpucast.app.catalog:CatalogSystemsRequest"),
    Command(
        ("catalog", "import-skypilot"),
        ("--cloud", "gcp", "--out", "@out_csv"),
        "gpucast.app.catalog:ImportSkypilotRequest",
        positional="@skypilot",
    ),
    Command(
        ("profile",), ("--batch-size", "2", "--no-save"), "gpucast.app.profile:ProfileRequest",
        positional="mlp",
    ),
    Command(
        ("measure", "train"), ("--batch-size", "2", *QUICK_MEASURE),
        "gpucast.app.measure:MeasureTrainRequest", positional="mlp",
        skip_fields=frozenset({"nproc", "nnodes", "node_rank", "master_port", "ps_shards"}),
    ),
    Command(
        ("measure", "infer"), ("--batch-size", "2", *QUICK_MEASURE),
        "gpucast.app.measure:MeasureInferRequest", positional="mlp",
    ),
    Command(
        ("measure", "infer-curve"),
        ("--batch-sizes", "1,2", "--device", "cpu", "--max-time-s", "0.2", "--min-samples",
         "3", "--target-ci", "0.9", "--no-save"),
        "gpucast.app.curves:InferCurveRequest", positional="mlp",
    ),
    Command(
        ("measure", "cmd"),
        ("--repeats", "1", "--warmup", "0", "--timeout", "5", "--cores", "1", "--name", "fz",
         "--target-ci", "0.5", "--max-time-s", "5", "--sample-interval", "0.1", "--no-save"),
        "gpucast.app.program:MeasureCmdRequest", positional="true",
    ),
    Command(
        ("predict", "cmd"), ("--arch", "arm64"), "gpucast.app.program:PredictCmdRequest",
        positional="1",
    ),
    Command(
        ("predict", "kernels"), ("--cpu-instance", "c7i.large"),
        "gpucast.app.kernels:PredictKernelsRequest", positional="1",
    ),
    Command(("runs", "list"), (), "gpucast.app.runs:RunsListRequest"),
    Command(("runs", "show"), (), "gpucast.app.runs:RunsShowRequest", positional="1"),
    Command(("runs", "export"), ("--out", "@out_csv"), "gpucast.app.runs:RunsExportRequest"),
    Command(("runs", "delete"), (), "gpucast.app.runs_edit:RunsDeleteRequest", positional="1"),
    Command(
        ("runs", "import"), (), "gpucast.app.runs_edit:RunsImportRequest",
        positional="@runs_export",
    ),
    Command(
        ("campaign", "run"), (), "gpucast.app.campaign:CampaignRunRequest", positional="@sweep"
    ),
    Command(
        ("campaign", "status"), (), "gpucast.app.campaign:CampaignStatusRequest",
        positional="@sweep",
    ),
    Command(
        ("fit", "speed"), ("--data", "@speed_csv", "--out", "@out_json"),
        "gpucast.app.fit:FitSpeedRequest",
    ),
    Command(
        ("fit", "cluster"), ("--data", "@cluster_dir", "--out", "@out_json"),
        "gpucast.app.fit:FitClusterRequest",
    ),
    Command(
        ("fit", "checkpoint"), ("--data", "@ckpt_csv", "--out", "@out_json"),
        "gpucast.app.fit:FitCheckpointRequest",
    ),
    Command(
        ("fit", "lifetimes"), ("--trace", "@lifetimes", "--name", "fz", "--no-save"),
        "gpucast.app.lifetimes:FitLifetimesRequest",
    ),
    Command(
        ("fit", "power"), ("--data-dir", "@folder", "--out", "@out_json"),
        "gpucast.app.energy:FitPowerRequest",
    ),
    Command(
        ("fit", "variability"), ("--name", "fz", "--factors", "@factors", "--no-save"),
        "gpucast.app.variability:FitVariabilityRequest",
    ),
    Command(
        ("predict", "energy"), ("--workload", "mlp", "--batch-size", "8", "--gpu", "V100"),
        "gpucast.app.energy:PredictEnergyRequest",
    ),
    Command(
        ("fit", "steptime"), ("--data-dir", "@folder", "--out", "@out_json"),
        "gpucast.app.steptime:FitStepTimeRequest",
    ),
    Command(
        ("predict", "train"), ("--workload", "mlp", "--batch-size", "4", "--gpu", "V100"),
        "gpucast.app.predict:PredictTrainRequest",
    ),
    Command(
        ("predict", "speed"),
        ("--model", "@speed_model", "--input", "@speed_in", "--output", "@out_csv"),
        "gpucast.app.predict:PredictSpeedRequest",
    ),
    Command(
        ("predict", "cluster"),
        ("--model", "@cluster_model", "--input", "@cluster_in", "--output", "@out_csv"),
        "gpucast.app.predict:PredictClusterRequest",
    ),
    Command(
        ("predict", "checkpoint"),
        ("--model", "@ckpt_model", "--input", "@ckpt_in", "--output", "@out_csv"),
        "gpucast.app.predict:PredictCheckpointRequest",
    ),
    Command(
        ("predict", "llm-train"), ("--model", "llama-3-8b", "--gpu", "H100", "--gpus", "2",
                                   "--global-batch", "64", "--top", "1"),
        "gpucast.app.llm:PredictLlmTrainRequest",
    ),
    Command(
        ("predict", "infer"), ("--model", "llama-3-8b", "--gpu", "A100-80GB", "--input-len",
                               "128", "--output-len", "16"),
        "gpucast.app.infer:PredictInferRequest",
    ),
    Command(
        ("plan", "train"),
        ("--workload", "mlp", "--steps", "1000", "--provider", "gcp", "--gpu", "T4",
         "--max-gpus", "2", "--runs", "20", "--batch-sizes", "32"),
        "gpucast.domain.plan:TrainRequest",
    ),
    Command(
        ("plan", "llm-train"),
        ("--model", "llama-3-8b", "--tokens", "1e9", "--max-gpus", "16", "--gpu", "H100"),
        "gpucast.app.llm_plan:PlanLlmTrainRequest",
    ),
    Command(
        ("predict", "gnn"), ("--gpu", "A100-80GB", "--nodes", "100000", "--edges", "2000000"),
        "gpucast.app.gnn:PredictGnnRequest",
    ),
    Command(
        ("plan", "embeddings"), ("--model", "dlrm-dcnv2", "--gpu", "A100-80GB", "--gpus", "8"),
        "gpucast.app.embeddings:PlanEmbeddingsRequest",
    ),
    Command(
        ("predict", "embedding-cache"), ("--data-dir", "@folder"),
        "gpucast.app.embeddings:PredictEmbeddingCacheRequest",
    ),
    Command(
        ("plan", "serve"),
        ("--model", "mlp:50", "--slo-ms", "50", "--gpu", "T4", "--no-mig", "--no-cpu",
         "--duration-s", "5", "--max-batch-sizes", "4", "--max-delays-ms", "5",
         "--instances", "1", "--saturation-s", "0.05"),
        "gpucast.app.serve:PlanServeRequest",
    ),
    Command(
        ("simulate", "train"),
        ("--gpu", "K80", "--workers", "2", "--region", "us-east1", "--workload", "mlp",
         "--steps", "1000", "--runs", "20"),
        "gpucast.app.simulation:SimulateTrainRequest",
    ),
    Command(
        ("simulate", "serve"),
        ("--model", "mlp", "--gpu", "T4", "--rate", "20", "--duration-s", "5",
         "--latency-table", "@latency"),
        "gpucast.app.serve:SimulateServeRequest",
    ),
    # serverless (issue #19)
    Command(
        ("simulate", "serverless"),
        ("--synthetic", "20", "--minutes", "120", "--models", "mlp", "--gpu", "T4"),
        "gpucast.app.serverless:SimulateServerlessRequest",
    ),
    # plan serverless (issue #19, items 3-5)
    Command(
        ("plan", "serverless"),
        ("--synthetic", "20", "--minutes", "120", "--models", "mlp", "--gpu", "T4"),
        "gpucast.app.serverless:PlanServerlessRequest",
    ),
    Command(
        ("simulate", "kaas"), ("--models", "mlp", "--rate", "5", "--duration-s", "1"),
        "gpucast.app.kaas:SimulateKaasRequest",
    ),
    Command(
        ("measure", "coldstart"), ("--device", "cpu", "--steady-runs", "2", "--no-save"),
        "gpucast.app.coldstart:MeasureColdstartRequest", positional="mlp",
    ),
    Command(
        ("predict", "coldstart"), ("--gpu", "T4", "--storage", "s3"),
        "gpucast.app.coldstart:PredictColdstartRequest", positional="mlp",
    ),
    Command(
        ("validate",), ("--data-dir", "@folder", "--what", "speed"),
        "gpucast.app.validation:ValidateRequest",
    ),
    Command(
        ("report",), ("--out", "@out_html", "--runs"), "gpucast.app.reports:ReportRequest"
    ),
    # sharing GPUs (#18)
    Command(("catalog", "mig"), ("--gpu", "A100-40GB"), "gpucast.app.catalog:CatalogMigRequest"),
    Command(
        ("plan", "placement"), ("--topology", "dgx1-v100", "--gpus", "2"),
        "gpucast.app.placement:PlanPlacementRequest",
    ),
    # training beyond GPU memory (#16, offload)
    Command(
        ("measure", "optimizer"),
        ("--sizes", "1000,2000", "--implementation", "foreach", "--max-time-s", "0.2",
         "--no-save"),
        "gpucast.app.offload:MeasureOptimizerRequest",
    ),
)
# fmt: on


def _request_class(spec: str) -> type:
    import importlib

    module, _, name = spec.partition(":")
    cls: type = getattr(importlib.import_module(module), name)
    return cls


def _with(base: tuple[str, ...], flag: str, value: str) -> tuple[str, ...]:
    """``base`` with ``flag`` set to ``value`` (replacing the base's own value, if any)."""
    out = list(base)
    if flag in out:
        i = out.index(flag)
        if i + 1 < len(out) and not out[i + 1].startswith("--"):
            out[i + 1] = value
            return tuple(out)
        out.pop(i)
    return (*out, flag, value)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.+-]+", "_", text).strip("_") or "blank"


def _generated(cmd: Command) -> list[Case]:
    from gpucast.domain.options import fields_of

    name = " ".join(cmd.path)
    pos = (cmd.positional,) if cmd.positional else ()
    cases: list[Case] = []
    for f in fields_of(_request_class(cmd.request)):
        if not f.info.cli or f.name in cmd.skip_fields or f.kind == "bool":
            continue
        if f.info.argument:
            values: tuple[str, ...] = ()
            if f.kind == "path" or (cmd.positional and cmd.positional.startswith("@")):
                values = BAD_FILES
            elif f.kind in ("int", "float"):
                values = NUMBERS
            else:
                values = BAD_TEXT[:1]
            for v in values:
                cases.append(Case(f"{name} {f.flag}={_slug(v)}", (*cmd.path, v, *cmd.base)))
            continue
        flag = f.info.cli_flag
        kind = f.info.item if f.kind == "list" else f.kind
        if kind in ("int", "float"):
            values = NUMBERS
        elif kind == "path":
            values = BAD_OUTPUTS if f.flag in OUTPUT_FLAGS else BAD_FILES
        else:
            values = BAD_TEXT
        for v in values:
            argv = (*cmd.path, *pos, *_with(cmd.base, flag, v))
            cases.append(Case(f"{name} {flag}={_slug(v)}", argv))
    return cases


def _named() -> list[Case]:
    """The issue's own examples, with what a truthful answer says."""
    plan = (
        "plan",
        "train",
        "--workload",
        "mlp",
        "--steps",
        "1000",
        "--provider",
        "gcp",
        "--gpu",
        "T4",
        "--runs",
        "20",
        "--batch-sizes",
        "32",
    )
    sim = (
        "simulate",
        "train",
        "--workload",
        "mlp",
        "--steps",
        "1000",
        "--runs",
        "20",
        "--region",
        "us-east1",
    )
    serve = ("simulate", "serve", "--model", "mlp", "--gpu", "T4", "--latency-table", "@latency")
    # fmt: off
    cases = [
        Case("plan train max-gpus 0", (*plan, "--max-gpus", "0"), frozenset({2}), "max-gpus"),
        Case("plan train config list", (*plan, "--config", "@yaml_list"), frozenset({2})),
        Case("plan train profile list", (*plan, "--profile", "@profile_list"), frozenset({2})),
        Case("plan train seed -1", (*plan, "--seed", "-1"), frozenset({2}), "seed"),
        Case("plan train runs huge", (*plan, "--runs", "1000000000"), frozenset({2}), "runs"),
        Case("plan train max-gpus huge", (*plan, "--max-gpus", "100000000"), frozenset({2})),
        Case("plan train epochs 1e308", ("plan", "train", "--workload", "mlp", "--epochs",
             "1e308", "--dataset-size", "1000", "--provider", "gcp", "--gpu", "T4"),
             frozenset({2})),
        Case("plan train hazard 1e9", (*plan, "--hazard-per-hour", "1e9"), frozenset({2}),
             "hazard-per-hour"),
        Case("plan train max-ps-shards huge", (*plan, "--max-ps-shards", "1000000000"),
             frozenset({2})),
        Case("plan train unknown gpu", (*plan, "--gpu", "K9000"), frozenset({2}), "K9000"),
        Case("plan train unknown workload", ("plan", "train", "--workload", "tarot"),
             frozenset({2}), "tarot"),
        Case("plan train run id of empty store", ("plan", "train", "--workload", "run:7"),
             frozenset({2})),
        Case("simulate train speed twice", (*sim, "--gpu", "K80", "--workers", "2", "--speed",
             "K80:5,K80:6"), frozenset({2}), "K80"),
        Case("simulate train lifetime method tarot", (*sim, "--gpu", "K80", "--workers", "2",
             "--spot", "--lifetime-method", "tarot"), frozenset({2}), "lifetime-method"),
        Case("simulate train workers huge", (*sim, "--gpu", "K80", "--workers", "100000000"),
             frozenset({2}), "workers"),
        Case("simulate train runs huge", (*sim, "--gpu", "K80", "--workers", "2", "--runs",
             "1000000000"), frozenset({2}), "runs"),
        Case("simulate train steps 1e15", (*sim, "--gpu", "K80", "--workers", "2", "--steps",
             "1000000000000000"), frozenset({2}), "steps"),
        Case("predict speed unknown gpu",
             ("predict", "speed", "--model", "@speed_model", "--input", "@speed_in_unknown",
              "--output", "@out_csv"), frozenset({0, 2}), "K9000"),
        Case("predict speed output is input",
             ("predict", "speed", "--model", "@speed_model", "--input", "@speed_in",
              "--output", "@speed_in"), frozenset({2}), "input"),
        Case("fit speed one row", ("fit", "speed", "--data", "@speed_one_row", "--out",
             "@out_json"), frozenset({0, 2}), "row"),
        Case("runs list db in missing folder", ("runs", "list"), frozenset({2}), "x.db",
             root=("--db", "@no_dir_db")),
        Case("runs show db in missing folder", ("runs", "show", "1"), frozenset({2}), "x.db",
             root=("--db", "@no_dir_db")),
        Case("runs delete unknown id", ("runs", "delete", "999999"), frozenset({2}),
             "no run with id 999999", root=("--db", "@empty_store")),
        Case("runs import bad json cell", ("runs", "import", "@runs_bad_json"), frozenset({2}),
             "column 'result_json': row 1: is not JSON"),
        Case("campaign run huge repeats", ("campaign", "run", "@sweep_huge"), frozenset({2}),
             "repeats"),
        Case("campaign status json", ("campaign", "status", "@sweep", "--json"),
             frozenset({0, 2})),
        Case("catalog offers bad rows", ("catalog", "offers", "--offers", "@offers_bad_rows"),
             frozenset({2})),
        Case("report plan is a list", ("report", "--out", "@out_html", "--plan", "@json_list"),
             frozenset({2})),
        Case("fit lifetimes node counts json list", ("fit", "lifetimes", "--trace",
             "@json_list", "--name", "x", "--no-save"), frozenset({2})),
        Case("predict llm-train network 0", ("predict", "llm-train", "--model", "llama-3-8b",
             "--gpu", "H100", "--gpus", "16", "--global-batch", "64", "--node-network-gbps",
             "0"), frozenset({2}), "network"),
        # predict train on a cluster: --gpus within it, 1..8 of a node or whole nodes
        *(Case(f"predict train cluster gpus {v}", ("predict", "train", "--workload", "mlp",
               "--batch-size", "8", "--cluster", "DGX-H100", "--nodes", "2", "--gpus", v),
               frozenset({2}), "gpus") for v in ("0", "-1", "9", "17", "1000000000")),
        Case("json flag takes no value", ("catalog", "spot", "--json", "true"),
             frozenset({0, 2})),
        # serving: the simulator's own limits (owned by the serving rework)
        Case("simulate serve network 0", (*serve, "--rate", "20", "--network-gbps", "0"),
             frozenset({2}), "network"),
        Case("simulate serve rate 1e9", (*serve, "--rate", "1e9"), frozenset({2}), "rate"),
        Case("simulate serve duration 1e9", (*serve, "--rate", "20", "--duration-s", "1e9"),
             frozenset({2}), "duration"),
        Case("simulate serve servers huge", (*serve, "--rate", "20", "--servers", "1000000"),
             frozenset({2}), "servers"),
        Case("simulate serve max batch huge", (*serve, "--rate", "20", "--max-batch",
             "1000000000"), frozenset({2}), "max-batch"),
        Case("simulate serve trace of two", ("simulate", "serve", "--model", "mlp", "--gpu",
             "T4", "--rate", "20", "--arrivals", "trace:@trace_two", "--latency-table",
             "@latency"), frozenset({2}), "requests"),
        Case("simulate serve unknown model with a latency table", ("simulate", "serve",
             "--model", "tarot", "--gpu", "T4", "--rate", "20", "--latency-table", "@latency"),
             frozenset({2}), "tarot"),
        Case("simulate serve price 0", (*serve, "--rate", "20", "--price", "0"),
             frozenset({2}), "price"),
        Case("simulate serve trace dev zero", ("simulate", "serve", "--model", "mlp", "--gpu",
             "T4", "--rate", "20", "--arrivals", "trace:/dev/zero", "--latency-table",
             "@latency"), frozenset({2})),
        Case("simulate serve trace with bom and crlf", ("simulate", "serve", "--model", "mlp",
             "--gpu", "T4", "--rate", "20", "--arrivals", "trace:@bom_crlf_trace",
             "--latency-table", "@bom_crlf_latency"), frozenset({0})),
        Case("measure infer-curve colocate unknown", ("measure", "infer-curve", "mlp",
             "--colocate", "tarot", "--device", "cpu", "--no-save"), frozenset({2}),
             "tarot"),
    ]
    # fmt: on
    for module in USER_MODULES:
        if module == "fz_ok":
            continue
        for how in (f"{module}:factory", f"@{module}_py:factory"):
            cases.append(
                Case(
                    f"profile user module {module} {'file' if how.startswith('@') else 'name'}",
                    ("profile", how, "--batch-size", "2", "--no-save"),
                    frozenset({2}),
                    tags=frozenset({"user-module"}),
                )
            )
    cases.append(
        Case(
            "profile user module ok from cwd",
            ("profile", "fz_ok:factory", "--no-save"),
            frozenset({0}),
            tags=frozenset({"user-module"}),
        )
    )
    return cases


def _stores() -> list[Case]:
    """``--db`` (before the verb) for the verbs that read or write the store."""
    verbs = (
        ("runs", "list"),
        ("runs", "show", "1"),
        ("runs", "export", "--out", "@out_csv"),
        ("runs", "delete", "1"),
        ("runs", "import", "@runs_export"),
        ("campaign", "status", "--campaign", "x"),
        ("report", "--out", "@out_html", "--runs"),
        ("profile", "mlp", "--batch-size", "2"),
    )
    return [
        Case(f"--db={_slug(db)} {' '.join(v[:2])}", v, frozenset({0, 2}), root=("--db", db))
        for v in verbs
        for db in BAD_STORES
        # saving there creates the folder
        if not (v[:2] in (("profile", "mlp"), ("runs", "import")) and db == "@no_dir_db")
    ]


def all_cases() -> list[Case]:
    cases = [c for cmd in COMMANDS for c in _generated(cmd)]
    cases += _stores()
    cases += _named()
    ids = [c.id for c in cases]
    dupes = {i for i in ids if ids.count(i) > 1}
    assert not dupes, dupes
    unknown = (set(SERVING_KNOWN_FAILURES) | set(ENERGY_KNOWN_FAILURES)) - set(ids)
    assert not unknown, unknown
    out = []
    for c in cases:
        if c.id in SERVING_KNOWN_FAILURES:
            c = dataclasses.replace(c, xfail=SERVING_REWORK, run=SERVING_KNOWN_FAILURES[c.id])
        elif c.id in ENERGY_KNOWN_FAILURES:
            c = dataclasses.replace(c, xfail=ENERGY_WORK, run=ENERGY_KNOWN_FAILURES[c.id])
        out.append(c)
    return out


# -- judging an answer -------------------------------------------------------------------------
_NONFINITE = re.compile(r"(?<![\w.-])(-?inf(inity)?|nan)(?![\w.-])", re.IGNORECASE)


def nonfinite_in_json(value: Any, path: str = "") -> str | None:
    """The JSON path of a NaN/inf number (``emit_json`` turns them into null, but a raw one
    must never appear)."""
    if isinstance(value, float) and not math.isfinite(value):
        return path or "."
    if isinstance(value, dict):
        for k, v in value.items():
            hit = nonfinite_in_json(v, f"{path}.{k}")
            if hit:
                return hit
    if isinstance(value, list):
        for i, v in enumerate(value):
            hit = nonfinite_in_json(v, f"{path}[{i}]")
            if hit:
                return hit
    return None


def problems(
    case: Case, exit_code: int, stdout: str, stderr: str, exc: BaseException | None
) -> list[str]:
    """What is wrong with this answer to ``case`` (empty: a clean answer)."""
    out: list[str] = []
    if exc is not None and not isinstance(exc, SystemExit):
        return [f"traceback: {type(exc).__name__}: {exc}"]
    if exit_code not in case.codes:
        out.append(f"exit code {exit_code}, expected one of {sorted(case.codes)}")
    if exit_code in (1, 2):
        lines = [line for line in stderr.splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith(("error:", "aborted", "interrupted"))]
        if len(errors) != 1 or lines[-1] != errors[0]:
            out.append(f"not one error line: {stderr!r}")
    if exit_code == 0:
        hit = _NONFINITE.search(stdout)
        if hit:
            start = max(0, hit.start() - 60)
            out.append(f"non-finite result printed: ...{stdout[start : hit.end() + 20]!r}")
    if case.says and case.says.lower() not in (stdout + stderr).lower():
        out.append(f"output does not mention {case.says!r}")
    return out
