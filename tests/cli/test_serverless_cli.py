"""`gpucast simulate serverless`, `measure coldstart`, `predict coldstart` on the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucast.cli.app import app

runner = CliRunner()


def test_simulate_serverless_text_and_json() -> None:
    argv = ["simulate", "serverless", "--synthetic", "50", "--minutes", "240", "--models", "mlp"]
    text = runner.invoke(app, [*argv, "--policy", "histogram"])
    assert text.exit_code == 0, text.output
    assert "cold starts" in text.stdout and "GPU-hours billed" in text.stdout
    assert "hybrid histogram" in text.stdout
    # QA 39 S #1: its figures' validated error, as plan serverless prints it
    assert "  validated: " in text.stdout and "wasted memory-time" in text.stdout
    assert "  validated cold start: not validated for T4" in text.stdout
    out = runner.invoke(app, [*argv, "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    assert d["policy"] == "fixed" and d["functions"] == 50 and d["slo"] is None
    assert d["validation"]["model"] == "serverless-keepalive"


def test_simulate_serverless_takes_plan_serverless_slo() -> None:
    """QA 33b #7: simulate serverless --slo read "No such option: --slo"."""
    argv = ["simulate", "serverless", "--synthetic", "50", "--minutes", "240", "--models", "mlp"]
    text = runner.invoke(app, [*argv, "--slo", "P99<3S"])
    assert text.exit_code == 0, text.output
    assert "SLO p99 <= 3 s " in text.stdout and "% of invocations within 3 s" in text.stdout
    out = json.loads(runner.invoke(app, [*argv, "--slo", "p50<1ms", "--json"]).stdout)["slo"]
    assert out["percentile"] == 50 and out["latency_s"] == 0.001
    assert 0 <= out["share_within"] <= 1
    assert out["met"] == (out["latency_at_percentile_s"] <= 0.001)
    bad = runner.invoke(app, [*argv, "--slo", "p99<3"])
    assert bad.exit_code == 2 and "slo: needs the latency's unit" in bad.stderr


def test_bad_input_is_one_line_exit_2(tmp_path: Path) -> None:
    cases = [
        (["--synthetic", "5", "--policy", "fixed:0m"], "policy"),
        (["--synthetic", "5", "--policy", "fixed:-10m"], "policy"),
        (["--synthetic", "5", "--policy", "fixed:10"], "fixed:10m for minutes"),
        (["--synthetic", "5", "--policy", "fixed:"], "needs a number and its unit"),
        (["--synthetic", "10000", "--minutes", "20160"], "201,600,000 function-minutes"),
        (["--trace", str(tmp_path)], "invocations_per_function_md.anon.d01.csv"),
        (["--synthetic", "5", "--gpu", "T5"], "T5"),
    ]
    for extra, says in cases:
        result = runner.invoke(app, ["simulate", "serverless", *extra])
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and says in lines[0]


def test_predict_and_measure_coldstart() -> None:
    p = runner.invoke(app, ["predict", "coldstart", "resnet18", "--gpu", "T4", "--storage", "s3"])
    assert p.exit_code == 0, p.output
    assert "bound by s3" in p.stdout and "validated" in p.stdout
    m = runner.invoke(app, ["measure", "coldstart", "mlp", "--steady-runs", "2", "--no-save"])
    assert m.exit_code == 0, m.output
    assert "weights read" in m.stdout and "first inference" in m.stdout
    # QA 41 QF: on the CPU there is no copy to a device, said as the CUDA context is (not 0.000 s)
    if " on cpu:" in m.stdout:
        assert "  to device         - (on the CPU: no copy)" in m.stdout
        assert "to device         0.000 s" not in m.stdout


def test_predict_coldstart_of_a_model_one_gpu_cannot_hold_is_one_line() -> None:
    result = runner.invoke(app, ["predict", "coldstart", "llama-3-70b", "--gpu", "L4", "--tp", "1"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "131.4 GiB of weights" in lines[0] and "--tp 8" in lines[0]
    ok = runner.invoke(app, ["predict", "coldstart", "llama-3-70b", "--gpu", "L4", "--tp", "8"])
    assert ok.exit_code == 0, ok.output
    assert "on 8 x L4" in ok.stdout and "fp16 peak" in ok.stdout and "fp32 peak" not in ok.stdout
    assert "(141.1 GB at " in ok.stdout  # not "141,106.9 MB"
    # without --tp: the fewest of 1, 2, 4, 8 L4s that hold it (predict infer's default), said
    fewest = runner.invoke(app, ["predict", "coldstart", "llama-3-70b", "--gpu", "L4"])
    assert fewest.exit_code == 0, fewest.output
    assert "on 8 x L4" in fewest.stdout and "assumption tp: 8 x L4: the fewest" in fewest.stdout
    gone = runner.invoke(app, ["predict", "coldstart", "llama-3-70b", "--gpu", "T4"])
    assert gone.exit_code == 2 and gone.stderr.startswith("error: gpu: ")
    assert "no 8 T4 GPUs hold it" in gone.stderr


def test_predict_coldstart_instance_on_the_command_line() -> None:
    """--instance: the instance's EBS link binds io2 on a g5.12xlarge, said and in the JSON;
    an unknown type or a figure that cannot apply is one line, exit 2."""
    argv = ["predict", "coldstart", "llama-3-8b", "--gpu", "A10G", "--storage", "ebs-io2"]
    ok = runner.invoke(app, [*argv, "--instance", "g5.12xlarge"])
    assert ok.exit_code == 0, ok.output
    assert "bound by instance-ebs" in ok.stdout and "assumption instance-ebs:" in ok.stdout
    d = json.loads(runner.invoke(app, [*argv, "--instance", "g5.12xlarge", "--json"]).stdout)
    assert d["bound_by"] == "instance-ebs" and d["instance"] == "g5.12xlarge"
    for bad, said in (
        (["--instance", "g9.huge"], "catalog/data/ebs_bandwidth.csv"),
        (["--ebs-gbps", "-1"], "ebs-gbps"),
        (["--storage", "s3", "--ebs-gbps", "16"], "is not one"),
    ):
        result = runner.invoke(app, [*argv, *bad])
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and said in lines[0], lines


def test_serverless_verbs_take_instance_and_ebs_gbps() -> None:
    """simulate/plan serverless take predict coldstart's --instance / --ebs-gbps (QA 39 S):
    the instance's EBS link binds io2 on a g4dn.xlarge; bad values are one line, exit 2."""
    tail = ["--synthetic", "5", "--minutes", "60", "--models", "mlp", "--storage", "ebs-io2"]
    for verb in (["simulate", "serverless"], ["plan", "serverless", "--slo", "p99<5s"]):
        ok = runner.invoke(app, [*verb, *tail, "--instance", "g4dn.xlarge"])
        assert ok.exit_code == 0, ok.output
        assert "bound by instance-ebs" in ok.stdout, ok.stdout
        for bad, said in (
            (["--instance", "g9.huge"], "catalog/data/ebs_bandwidth.csv"),
            (["--ebs-gbps", "0"], "ebs-gbps"),
            (["--instance", "g4dn.xlarge", "--ebs-gbps", "3"], "give one of them"),
        ):
            result = runner.invoke(app, [*verb, *tail, *bad])
            assert result.exit_code == 2, result.output
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1 and said in lines[0], lines


def test_a_trace_without_invocations_says_so(tmp_path: Path) -> None:
    header = "HashOwner,HashApp,HashFunction,Trigger," + ",".join(str(i) for i in range(1, 11))
    (tmp_path / "invocations_per_function_md.anon.d01.csv").write_text(
        header + "\no,a,f,http," + ",".join(["0"] * 10) + "\n"
    )
    (tmp_path / "function_durations_percentiles.anon.d01.csv").write_text(
        "HashOwner,HashApp,HashFunction,Average,Count\n"
    )
    result = runner.invoke(
        app, ["simulate", "serverless", "--trace", str(tmp_path), "--models", "mlp"]
    )
    assert result.exit_code == 0, result.output
    assert "no invocations" in result.stdout and "nan" not in result.stdout.lower()


def test_plan_serverless_text_and_json() -> None:
    argv = ["plan", "serverless", "--synthetic", "60", "--minutes", "240", "--models", "mlp",
            "--policies", "fixed:10m,histogram", "--slo", "p99<3s"]  # fmt: skip
    text = runner.invoke(app, argv)
    assert text.exit_code == 0, text.output
    assert "serverless histogram" in text.stdout and "always-on" in text.stdout
    assert "choice:" in text.stdout
    # QA 39 S #2: the cold start's validated error, as predict coldstart prints it
    assert "  validated cold start: not validated for T4" in text.stdout
    out = runner.invoke(app, [*argv, "--json", "--billing", "execution"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    assert d["billing"] == "execution" and d["functions"] == 60
    kinds = {o["kind"] for o in d["options"]}
    assert {"serverless", "always-on"} <= kinds
    assert d["choice"]["name"] in d["reason"]
    assert "p99 <= 3 s" in d["reason"] and "3000 ms" not in d["reason"]  # QA 33b #21


def test_plan_serve_serverless_is_plan_serverless() -> None:
    """The issue's spelling, `plan serve --serverless`, runs `plan serverless` with the same
    options and gives the same plan; --serverless anywhere after `plan serve`, root options
    before it."""
    load = ["--synthetic", "30", "--minutes", "120", "--models", "mlp", "--json"]
    own = runner.invoke(app, ["plan", "serverless", *load])
    assert own.exit_code == 0, own.output
    for argv in (
        ["plan", "serve", "--serverless", *load],
        ["plan", "serve", *load, "--serverless"],
        ["--debug", "plan", "serve", "--serverless", *load],
    ):
        alias = runner.invoke(app, argv)
        assert alias.exit_code == 0, alias.output
        assert json.loads(alias.stdout) == json.loads(own.stdout)
    # plan serve's --model names the model alone (the QA pass: it needed --models)
    one = ["plan", "serve", "--serverless", "--synthetic", "30", "--minutes", "120", "--json"]
    for flag in (["--model", "mlp"], ["--model=mlp"]):
        alias = runner.invoke(app, [*one, *flag])
        assert alias.exit_code == 0, alias.output
        assert json.loads(alias.stdout) == json.loads(own.stdout)
    rated = runner.invoke(app, [*one, "--model", "mlp:150"])
    assert rated.exit_code == 2
    assert rated.stderr.strip().splitlines() == [  # the flag as typed (QA #15)
        "error: model: takes workload names: the invocations come from --trace or --synthetic, "
        "not a rate (got 'mlp:150'); e.g. --model mlp"
    ]
    # the serverless load's options, not a request rate's: a bad one is one line, exit 2
    bad = runner.invoke(app, ["plan", "serve", "--serverless", "--synthetic", "0"])
    assert bad.exit_code == 2 and "synthetic" in bad.output


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["plan", "serve", "--serverless", "--x"], ["plan", "serverless", "--x"]),
        (["--db", "s.db", "plan", "serve", "--serverless"], ["--db", "s.db", "plan", "serverless"]),
        (["plan", "serve", "--model", "resnet50"], ["plan", "serve", "--model", "resnet50"]),
        (
            ["plan", "serve", "--serverless", "--model", "mlp"],
            ["plan", "serverless", "--models", "mlp"],
        ),
        (["plan", "serve", "--model=mlp", "--serverless"], ["plan", "serverless", "--models=mlp"]),
        (
            ["plan", "serve", "--serverless", "--models", "mlp"],
            ["plan", "serverless", "--models", "mlp"],
        ),
        (["simulate", "serve", "--serverless"], ["simulate", "serve", "--serverless"]),
        (["--db", "plan", "serve", "--serverless"], ["--db", "plan", "serve", "--serverless"]),
        ([], []),
    ],
)
def test_command_aliases(argv: list[str], expected: list[str]) -> None:
    from gpucast.cli.root import command_aliases

    assert command_aliases(argv) == expected


def test_plan_serverless_functions_scope_text_and_json() -> None:
    argv = ["plan", "serverless", "--synthetic", "60", "--minutes", "240", "--models", "mlp",
            "--policies", "fixed:10m,fixed:1h", "--slo", "p99<1s"]  # fmt: skip
    text = runner.invoke(app, [*argv, "--slo-scope", "functions", "--slo-functions", "0.9"])
    assert text.exit_code == 0, text.output
    assert "for >= 90% of the" in text.stdout and "each on its own calls" in text.stdout
    header, _ = _columns(text.stdout)
    assert "fn met" in header and "fn p99>SLO" not in header  # p99: one is the other's rest
    assert "fn met: share of invoked functions whose own p99" in text.stdout
    pooled = json.loads(runner.invoke(app, [*argv, "--json"]).stdout)
    scoped = json.loads(
        runner.invoke(app, [*argv, "--slo-scope", "functions", "--slo-functions", "0.9",
                            "--json"]).stdout
    )  # fmt: skip
    assert pooled["slo_scope"] == "invocations" and scoped["slo_scope"] == "functions"
    assert scoped["slo_function_share"] == 0.9
    for o in scoped["options"]:
        share = o["function_share_meeting_slo"]
        assert o["meets_slo"] == (share >= 0.9)
        assert o["function_share_p99_over_slo"] == pytest.approx(1 - share)
    # the keep-alive policy moves the functions' shares, not the pooled p99
    shares = {o["name"]: o["function_share_meeting_slo"] for o in scoped["options"]}
    assert shares["serverless fixed:10m"] < shares["serverless fixed:1h"]


def test_plan_serverless_bad_input_is_one_line_exit_2(tmp_path: Path) -> None:
    cases = [
        (["--synthetic", "5", "--slo", "p99<0ms"], "slo"),
        (["--synthetic", "5", "--policies", "fixed:0m"], "policies: fixed:DURATION"),
        (["--synthetic", "5", "--billing", "monthly"], "billing"),
        (["--synthetic", "5", "--max-utilisation", "1.5"], "max-utilisation"),
        (["--synthetic", "5", "--slo-scope", "x"], "slo-scope"),
        (["--synthetic", "5", "--slo-functions", "1.5"], "slo-functions"),
        (["--synthetic", "5", "--slo-functions", "0"], "slo-functions"),
        (["--trace", str(tmp_path)], "invocations_per_function_md.anon.d01.csv"),
        (["--synthetic", "5", "--models", "no-such-model"], "no-such-model"),
    ]
    for extra, says in cases:
        result = runner.invoke(app, ["plan", "serverless", *extra])
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and says in lines[0], lines


def test_simulate_kaas_text_and_json() -> None:
    argv = ["simulate", "kaas", "--models", "mlp,resnet18", "--rate", "20", "--pool-gpus", "1",
            "--duration-s", "2"]  # fmt: skip
    text = runner.invoke(app, argv)
    assert text.exit_code == 0, text.output
    assert "dedicated" in text.stdout and "kernel" in text.stdout
    out = runner.invoke(app, [*argv, "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    assert set(d["sharing"]) == {"dedicated", "function", "kernel"}
    assert d["sharing"]["dedicated"]["gpus"] == 2
    # every row counts the kernels the calls ran; the units dispatched one by one differ
    kernels = {name: r["kernels"] for name, r in d["sharing"].items()}
    assert len(set(kernels.values())) == 1, kernels
    dispatches = {name: r["dispatches"] for name, r in d["sharing"].items()}
    assert dispatches["kernel"] == kernels["kernel"]
    calls = d["sharing"]["kernel"]["invocations"]
    assert dispatches["function"] == dispatches["dedicated"] == calls


def test_simulate_kaas_bad_input_is_one_line_exit_2() -> None:
    cases = [
        (["--rate", "-1"], "rate"),
        (["--pool-gpus", "0"], "pool-gpus"),
        (["--dispatch-us", "nan"], "dispatch-us"),
        (["--models", "no-such-model"], "no-such-model"),
        (["--gpu", "T5"], "T5"),
    ]
    for extra, says in cases:
        result = runner.invoke(app, ["simulate", "kaas", "--duration-s", "1", *extra])
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and says in lines[0], lines


def test_simulate_and_plan_serverless_on_an_azure_llm_trace(tmp_path: Path) -> None:
    trace = tmp_path / "AzureLLMInferenceTrace_conv.csv"
    trace.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:27:50.9951690,396,109\n"
    )
    argv = ["--trace", str(trace), "--models", "llama-2-7b", "--gpu", "A100"]
    text = runner.invoke(app, ["simulate", "serverless", *argv])
    assert text.exit_code == 0, text.output
    assert "arrivals replayed: the Azure LLM trace" in text.stdout
    out = runner.invoke(app, ["simulate", "serverless", *argv, "--json"])
    d = json.loads(out.stdout)
    assert d["invocations"] == 2 and d["cold_starts"] == 2  # 12 min apart, fixed 10 min
    plan = runner.invoke(app, ["plan", "serverless", *argv, "--price", "2", "--json"])
    assert plan.exit_code == 0, plan.output
    assert json.loads(plan.stdout)["arrival_process"].startswith("replayed")
    bad = runner.invoke(app, ["simulate", "serverless", "--trace", str(trace)])
    assert bad.exit_code == 2 and "resnet50 is not a language model" in bad.stderr


def test_an_llm_too_big_for_the_gpu_suggests_only_flags_the_verb_has(tmp_path: Path) -> None:
    trace = tmp_path / "AzureLLMInferenceTrace_conv.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374,44\n")
    for verb in ("simulate", "plan"):
        argv = [verb, "serverless", "--trace", str(trace), "--models", "llama-2-70b"]
        result = runner.invoke(app, [*argv, "--gpu", "T4"])
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "does not fit on T4" in lines[0], lines
        assert "--precision" not in lines[0] and "--gpu" in lines[0]


def test_a_file_of_an_azure_functions_trace_asks_for_its_folder(tmp_path: Path) -> None:
    minutes = ",".join(str(i) for i in range(1, 1441))
    counts = tmp_path / "invocations_per_function_md.anon.d03.csv"
    counts.write_text(f"HashOwner,HashApp,HashFunction,Trigger,{minutes}\n")
    renamed = tmp_path / "elsewhere" / "day3.csv"  # known by its header alone
    renamed.parent.mkdir()
    renamed.write_text(counts.read_text())
    # a file under the dataset's name: its folder; a renamed one (QA 34 C #16: the folder
    # the fix named held no file the reader looks for): the names the folder must hold
    renamed_says = "give a folder holding the dataset's files under their names"
    for path, says, fix in (
        (counts, f"--trace {tmp_path} --day 3", "give the folder that holds it"),
        (renamed, "invocations_per_function_md.anon.dNN.csv and function_durations", renamed_says),
    ):
        result = runner.invoke(app, ["simulate", "serverless", "--trace", str(path)])
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and fix in lines[0], lines
        assert says in lines[0] and "1440" not in lines[0]


def _columns(stdout: str) -> tuple[list[str], list[list[str]]]:
    """The header and rows of `plan serverless`'s table, split on runs of spaces."""
    import re

    lines = stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("deployment"))
    rows = []
    for line in lines[at + 1 :]:
        if line.strip().startswith(("fn met:", "choice:")):
            break
        rows.append(re.split(r"\s{2,}", line.strip()))
    return re.split(r"\s{2,}", lines[at].strip()), rows


def test_plan_serverless_table_keeps_its_columns_apart() -> None:
    # trace durations (CPU functions, seconds each): GPU-hours in the thousands
    argv = ["plan", "serverless", "--synthetic", "100", "--minutes", "1440", "--models", "mlp",
            "--durations", "trace", "--policies", "fixed:1h", "--price", "1"]  # fmt: skip
    text = runner.invoke(app, [*argv, "--slo", "p99<100s"])
    assert text.exit_code == 0, text.output
    header, rows = _columns(text.stdout)
    assert header == [
        "deployment", "cold", "swaps", "p50 ms", "p99 ms", "fn met", "GPU-h", "US$", "SLO"
    ]  # fmt: skip
    d = json.loads(runner.invoke(app, [*argv, "--slo", "p99<100s", "--json"]).stdout)
    assert len(rows) == len(d["options"])
    for row, o in zip(rows, d["options"], strict=True):
        assert len(row) == len(header), row
        # three significant figures, whole from 100 GPU-h on (format_amount)
        assert float(row[6].replace(",", "")) == pytest.approx(o["gpu_hours"], rel=0.005)
        share = float(row[5].rstrip("%"))
        assert share == pytest.approx(100 * o["function_share_meeting_slo"], abs=0.06)
    assert max(o["gpu_hours"] for o in d["options"]) >= 1000  # wider than the old column
    p50 = runner.invoke(app, [*argv, "--slo", "p50<1ms"])
    header, rows = _columns(p50.stdout)
    assert header.count("p50 ms") == 1 and "SLO" in header
    assert header[-5:-3] == ["fn met", "fn p99>SLO"]  # the cold-start tail beside a p50 SLO
    assert all(len(row) == len(header) for row in rows)


def test_an_overloaded_pool_says_so_and_bills_the_execution() -> None:
    # trace durations (CPU functions, seconds a call) on one GPU: far more than it can run
    argv = ["simulate", "serverless", "--synthetic", "40", "--minutes", "60", "--models", "mlp",
            "--durations", "trace", "--pool-gpus", "1"]  # fmt: skip
    text = runner.invoke(app, argv)
    assert text.exit_code == 0, text.output
    assert "p99 not modelled (overloaded in 60 minutes" in text.stdout
    assert "warning: the pool of 1 GPU is compute-overloaded in 60 of 60 bins" in text.stdout
    pool = json.loads(runner.invoke(app, [*argv, "--json"]).stdout)["pool"]
    assert pool["latency_s"] is None and pool["overloaded_bins"] == 60
    assert pool["gpu_hours"] == pytest.approx(pool["busy_gpu_hours"]) and pool["gpu_hours"] > 1
    assert pool["gpus_needed"] > 1
    calm = json.loads(runner.invoke(app, [*argv[:-4], "--pool-gpus", "1", "--json"]).stdout)
    assert calm["pool"]["overloaded_bins"] == 0 and calm["pool"]["latency_s"]["p99"] > 0
    assert calm["pool"]["gpu_hours"] == pytest.approx(1.0)


def test_simulate_serverless_names_its_bill() -> None:
    argv = ["simulate", "serverless", "--synthetic", "30", "--minutes", "240", "--models", "mlp"]
    text = runner.invoke(app, argv)
    assert text.exit_code == 0, text.output
    # execution_gpu_hours is execution + cold starts (ServerlessResult.billed_s): the line says
    # so; "execution alone" is the pool's execution without cold starts (QA 41 QF F3)
    assert "(instance billing; execution and cold starts" in text.stdout
    assert "execution alone" not in text.stdout
    assert "assumption billing: instance:" in text.stdout
    d = json.loads(runner.invoke(app, [*argv, "--billing", "execution", "--json"]).stdout)
    assert d["billing"] == "execution"
    assert d["billed_gpu_hours"] == pytest.approx(d["execution_gpu_hours"])
    assert d["assumptions"]["billing"].startswith("execution:")
    bad = runner.invoke(app, [*argv, "--billing", "monthly"])
    assert bad.exit_code == 2 and "billing" in bad.stderr


def _stored_coldstart(db: Path, workload: str = "mlp") -> int:
    from gpucast.domain.serverless import ColdStartMeasurement
    from gpucast.store import Store
    from gpucast.store.coldstart import save_coldstart

    m = ColdStartMeasurement(
        workload=workload, options={}, device="cuda:0", batch_size=1, weight_bytes=10**8,
        parameter_tensors=4, cuda_context_s=0.25, weight_read_s=3.0, to_device_s=0.5,
        first_inference_s=0.125, steady_inference_s=0.001, cache_dropped=True, host="lab",
        created_at="2026-01-01T00:00:00", gpu_name="Tesla T4",
    )  # fmt: skip
    with Store(db) as store:
        return save_coldstart(store, m)


def test_a_stored_cold_start_on_the_command_line(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    run = _stored_coldstart(Path(db))
    load = ["--synthetic", "30", "--minutes", "240", "--models", "mlp", "--gpu", "T4"]
    text = runner.invoke(app, ["--db", db, "simulate", "serverless", *load, "--coldstart-run",
                               str(run)])  # fmt: skip
    assert text.exit_code == 0, text.output
    assert f"(run {run} measured: CUDA context 0.250 s, weights 3.500 s, first inference " in (
        text.stdout
    )
    assert "predicted: container" in text.stdout and "assumption cold start:" in text.stdout
    # QA 39 S: the measured run's provenance, not the predicted cold start's validation
    assert f"measured cold start of mlp: measured: run {run}, mlp on " in text.stdout
    assert "validated cold start" not in text.stdout
    plan = runner.invoke(app, ["--db", db, "plan", "serverless", *load, "--coldstart-run",
                               "latest", "--json"])  # fmt: skip
    assert plan.exit_code == 0, plan.output
    cold = json.loads(plan.stdout)["models"][0]["cold_start"]
    assert cold["run_id"] == run and cold["weight_load_s"] == pytest.approx(3.5)
    other = _stored_coldstart(Path(db), "resnet18")
    cases = [
        (["--coldstart-run", str(other)], "measured resnet18, which is not one of --models"),
        (["--coldstart-run", "0"], "coldstart-run"),
        (["--coldstart-run", "99"], "no run with id 99"),
        (["--cuda-context-s", "-1"], "cuda-context-s"),
    ]
    for verb in ("simulate", "plan"):
        for extra, says in cases:
            result = runner.invoke(app, ["--db", db, verb, "serverless", *load, *extra])
            assert result.exit_code == 2, result.output
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1 and says in lines[0], lines


def test_a_warmup_on_the_command_line() -> None:
    argv = ["--synthetic", "30", "--minutes", "240", "--models", "mlp"]
    plain = runner.invoke(app, ["simulate", "serverless", *argv])
    assert plain.exit_code == 0, plain.output
    assert "assumption warm-up: none" in plain.stdout and "not counted)" not in plain.stdout
    text = runner.invoke(app, ["simulate", "serverless", *argv, "--warmup", "1h"])
    assert text.exit_code == 0, text.output
    assert "4 h (the first 1 h a warm-up, not counted)" in text.stdout
    assert "assumption warm-up: the first 1 h simulated" in text.stdout
    plan = runner.invoke(app, ["plan", "serverless", *argv, "--warmup", "90m", "--json"])
    assert plan.exit_code == 0, plan.output
    assert json.loads(plan.stdout)["warmup_s"] == 5400.0
    for verb in ("simulate", "plan"):
        for bad, says in (("4h", "warmup: 4 h is not shorter than the trace (4 h)"),
                          ("later", "warmup: must be a duration")):  # fmt: skip
            result = runner.invoke(app, [verb, "serverless", *argv, "--warmup", bad])
            assert result.exit_code == 2, result.output
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1 and says in lines[0], lines


def _two_apps(folder: Path) -> Path:
    """App o/a: f1 and f2 alternate every 7 minutes over 1 h; app o/b: h every 30 minutes;
    a's memory 150 MB, b without a row."""
    header = "HashOwner,HashApp,HashFunction,Trigger," + ",".join(str(m) for m in range(1, 61))

    def row(key: str, minutes: range) -> str:
        return key + ",http," + ",".join("1" if m in minutes else "0" for m in range(60))

    rows = [row("o,a,f1", range(0, 60, 14)), row("o,a,f2", range(7, 60, 14)),
            row("o,b,h", range(0, 60, 30))]  # fmt: skip
    (folder / "invocations_per_function_md.anon.d01.csv").write_text(
        header + "\n" + "\n".join(rows) + "\n"
    )
    (folder / "function_durations_percentiles.anon.d01.csv").write_text(
        "HashOwner,HashApp,HashFunction,Average,Count\n"
    )
    pct = ",".join(f"AverageAllocatedMb_pct{p}" for p in (1, 5, 25, 50, 75, 95, 99, 100))
    (folder / "app_memory_percentiles.anon.d01.csv").write_text(
        f"HashOwner,HashApp,SampleCount,AverageAllocatedMb,{pct}\n"
        "o,a,100,150,100,110,120,140,160,200,250,300\n"
    )
    return folder


def test_the_unit_on_the_command_line(tmp_path: Path) -> None:
    argv = ["simulate", "serverless", "--trace", str(_two_apps(tmp_path)), "--models", "mlp"]
    app_text = runner.invoke(app, argv)
    assert app_text.exit_code == 0, app_text.output
    out = app_text.stdout
    assert out.startswith("2 apps (3 functions) on T4")
    assert "keep-alive per app" in out and "75th percentile of apps" in out
    assert "AverageAllocatedMb p50 150 MB" in out and "the apps' own memory" in out
    assert "1 of 2 apps have no row" in out
    function = runner.invoke(app, [*argv, "--unit", "function"])
    assert function.exit_code == 0, function.output
    assert function.stdout.startswith("3 functions on T4")
    assert "keep-alive per function" in function.stdout
    assert "own memory" not in function.stdout
    d = json.loads(runner.invoke(app, [*argv, "--json"]).stdout)
    # a: 9 calls 7 minutes apart, one cold; b: 2 calls, both cold; per function all 11 cold
    assert (d["unit"], d["units"], d["functions"], d["cold_starts"]) == ("app", 2, 3, 3)
    f = json.loads(runner.invoke(app, [*argv, "--unit", "function", "--json"]).stdout)
    assert (f["unit"], f["units"], f["cold_starts"]) == ("function", 3, 11)
    plan = runner.invoke(app, ["plan", *argv[1:], "--slo-scope", "functions"])
    assert plan.exit_code == 0, plan.output
    assert plan.stdout.startswith("2 apps (3 functions) on T4")
    assert "app met" in plan.stdout and "invoked apps" in plan.stdout


def test_a_bad_unit_is_one_line_exit_2(tmp_path: Path) -> None:
    cases = [
        (["simulate", "serverless", "--synthetic", "5", "--unit", "apps"],
         "unit: must be one of app, function (got 'apps')"),
        (["plan", "serverless", "--synthetic", "5", "--unit", "tenant"],
         "unit: must be one of app, function"),
        (["simulate", "serverless", "--synthetic", "5", "--unit", "app"],
         "unit: app needs a trace's applications"),
    ]  # fmt: skip
    for argv, says in cases:
        result = runner.invoke(app, argv)
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and says in lines[0]


def test_an_llm_trace_refuses_what_it_has_not_and_sizes_always_on_as_plan_serve(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "AzureLLMInferenceTrace_code.csv"
    rows = "".join(f"2023-11-16 12:{i // 60:02d}:{i % 60:02d}.5,300,60\n" for i in range(0, 240, 2))
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + rows)
    load = ["--trace", str(trace), "--models", "llama-3-70b", "--gpu", "H100-SXM"]
    for extra, says in (
        (["--minutes", "30"], "minutes: sets the length of a --synthetic workload"),
        (["--day", "2"], "day: picks a day of an Azure Functions 2019 trace"),
        (["--pool-gpus", "1"], "pool-gpus: a pool of 1 x H100-SXM holds 75.0 GiB usable"),
    ):
        result = runner.invoke(app, ["simulate", "serverless", *load, *extra])
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and says in lines[0], lines
    text = runner.invoke(app, ["simulate", "serverless", *load, "--pool-gpus", "2"])
    assert text.exit_code == 0, text.output
    assert "cold starts (" in text.stdout and "assumption gpus per instance" in text.stdout
    plan = runner.invoke(app, ["plan", "serve", "--serverless", *load, "--slo", "p99<60s"])
    assert plan.exit_code == 0, plan.output
    assert "sized as plan serve sizes it" in plan.stdout
    assert "  always-on " in plan.stdout and "plan serve: " in plan.stdout


def test_simulate_kaas_defaults_are_one_mark_and_a_trace_window_a_duration() -> None:
    """QA 33b #22: "(--rate default) (--duration-s default)" and "for 999.855 s"."""
    base = ["simulate", "kaas", "--models", "mlp", "--pool-gpus", "1"]
    text = runner.invoke(app, [*base, "--arrivals", "bursty"], terminal_width=250)
    assert text.exit_code == 0, text.output
    assert "for 10 s (--rate, --duration-s default)" in text.stdout
    assert "default) (" not in text.stdout


@pytest.mark.parametrize(
    ("verb", "config", "flags"),
    [
        (["simulate", "serverless"], "synthetic: 20\nminutes: 60\nmodels: [mlp]\n",
         ["--synthetic", "20", "--minutes", "60", "--models", "mlp"]),
        (["plan", "serverless"], "synthetic: 20\nminutes: 60\nmodels: mlp\nprice: 1.0\n",
         ["--synthetic", "20", "--minutes", "60", "--models", "mlp", "--price", "1.0"]),
        (["simulate", "kaas"], "models: [mlp]\nrate: 50\nduration-s: 1\nseed: 3\n",
         ["--models", "mlp", "--rate", "50", "--duration-s", "1", "--seed", "3"]),
        (["plan", "placement"], "topology: dgx1-v100\ngpus: 2\ntop: 3\n",
         ["--topology", "dgx1-v100", "--gpus", "2", "--top", "3"]),
    ],
)  # fmt: skip
def test_config_file_for_serverless_kaas_and_placement(
    tmp_path: Path, verb: list[str], config: str, flags: list[str]
) -> None:
    """QA 35 S #12: these verbs read --config as the other simulate/plan verbs do."""
    path = tmp_path / "c.yaml"
    path.write_text(config)
    from_file = runner.invoke(app, [*verb, "--config", str(path), "--json"])
    assert from_file.exit_code == 0, from_file.output
    assert json.loads(from_file.stdout) == json.loads(
        runner.invoke(app, [*verb, *flags, "--json"]).stdout
    )
    path.write_text(config + "nope: 1\n")
    bad = runner.invoke(app, [*verb, "--config", str(path)])
    assert bad.exit_code == 2 and "nope" in bad.stderr


def test_plan_serverless_budget_usd_cli_and_api() -> None:
    """--budget-usd caps the cost over the counted minutes (the US$ column), as plan serve's
    --budget-usd-per-hour caps its US$/h: dearer rows marked, none within it is exit 2."""
    import gpucast

    argv = ["plan", "serverless", "--synthetic", "60", "--minutes", "240", "--models", "mlp",
            "--policies", "fixed:10m,histogram", "--slo", "p99<3s"]  # fmt: skip
    free = json.loads(runner.invoke(app, [*argv, "--json"]).stdout)
    costs = sorted(o["cost_usd"] for o in free["options"] if o["meets_slo"])
    budget = (costs[0] + costs[1]) / 2
    text = runner.invoke(app, [*argv, "--budget-usd", f"{budget:.4f}"])
    assert text.exit_code == 0, text.output
    assert "met, over budget" in text.stdout and "(budget US$" in text.stdout
    api = gpucast.plan_serverless(
        synthetic=60, minutes=240, models=["mlp"], policies=["fixed:10m", "histogram"],
        slo="p99<3s", budget_usd=round(budget, 4),
    ).to_dict()  # fmt: skip
    cli = json.loads(runner.invoke(app, [*argv, "--budget-usd", f"{budget:.4f}", "--json"]).stdout)
    assert cli["choice"] == api["choice"] and cli["budget_usd"] == api["budget_usd"]
    assert [o["within_budget"] for o in api["options"]] == [
        o["cost_usd"] <= budget for o in api["options"]
    ]
    low = runner.invoke(app, [*argv, "--budget-usd", f"{costs[0] / 2:.4f}"])
    assert low.exit_code == 2, low.output
    lines = low.stderr.strip().splitlines()
    assert len(lines) == 1 and "raise --budget-usd to >= " in lines[0]
    assert free["choice"]["name"] in lines[0]
    bad = runner.invoke(app, [*argv, "--budget-usd", "0"])
    assert bad.exit_code == 2 and "budget-usd: must be > 0" in bad.stderr
