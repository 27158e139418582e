"""`gpucast simulate serve` / `plan serve` with a language model: dispatch, output, errors."""

from __future__ import annotations

import json
import re

from typer.testing import CliRunner

from gpucast.cli.app import app

runner = CliRunner()
SIM = ["simulate", "serve", "--model", "llama-3-8b", "--gpu", "H100-SXM", "--rate", "3",
       "--duration-s", "10"]  # fmt: skip


def test_simulate_serve_with_an_llm_prints_ttft_and_tpot() -> None:
    result = runner.invoke(app, [*SIM, "--slo-ttft-ms", "500", "--slo-tpot-ms", "50"])
    assert result.exit_code == 0, result.output
    for text in ("TTFT", "TPOT", "output tokens/s", "SLO met by", "per million output tokens"):
        assert text in result.stdout
    as_json = runner.invoke(app, [*SIM, "--json", "--tp", "2", "--chunked-prefill"])
    assert as_json.exit_code == 0, as_json.output
    out = json.loads(as_json.stdout)
    assert out["tp"] == 2 and out["batching"]["chunked_prefill"] is True
    assert out["ttft_s"]["p99"] >= out["ttft_s"]["p50"]


def test_a_horizon_before_any_token_prints_no_infinite_price() -> None:
    """--horizon-s 0.001 (before the first arrival): the cost per token is n/a, not 'inf',
    and no instance counts the requests due after the horizon."""
    result = runner.invoke(app, [*SIM, "--horizon-s", "0.001"])
    assert result.exit_code == 0, result.output
    assert "inf US$" not in result.stdout
    assert "per million output tokens n/a (no output token within the horizon)" in result.stdout
    assert re.search(r"colocated #0: busy 0%, 0 requests", result.stdout)


def test_options_of_the_other_kind_are_one_line_errors() -> None:
    wrong = runner.invoke(app, [*SIM, "--max-batch", "8"])
    assert wrong.exit_code == 2
    assert "max-batch: is not an option of LLM serving" in wrong.stderr
    # --engine (a CNN's engine) names the LLM's option for the same thing
    engine = runner.invoke(app, [*SIM, "--engine", "tensorrt-llm"])
    assert engine.exit_code == 2
    assert "engine: is not an option of LLM serving" in engine.stderr
    assert "use --framework tensorrt-llm" in engine.stderr
    cnn = runner.invoke(app, ["simulate", "serve", "--model", "mlp", "--gpu", "T4", "--rate",
                              "10", "--tp", "2"])  # fmt: skip
    assert cnn.exit_code == 2
    assert "tp: applies to language models only" in cnn.stderr
    cnn_ok = runner.invoke(app, ["simulate", "serve", "--model", "mlp", "--gpu", "T4", "--rate",
                                 "10", "--duration-s", "2", "--json"])  # fmt: skip
    assert cnn_ok.exit_code == 0 and "latency_curve" in json.loads(cnn_ok.stdout)


def test_a_token_budget_no_request_fits_is_refused_up_front() -> None:
    # without chunked prefill a 100 + 256-token request never fits 10 tokens an iteration:
    # every request used to be dropped, with exit 0 and an "overloaded" warning
    for verb in (SIM, ["plan", "serve", "--model", "llama-3-8b", "--gpu", "H100-SXM", "--rate",
                       "1", "--duration-s", "10", "--slo-ttft-ms", "500"]):  # fmt: skip
        result = runner.invoke(app, [*verb, "--max-batched-tokens", "10", "--input-len", "100"])
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "max-batched-tokens: without chunked prefill" in lines[0]
        assert "100 + 256 - 1 = 355" in lines[0]
        assert "raise --max-batched-tokens to >= 355 or add --chunked-prefill" in lines[0]
    chunked = runner.invoke(app, [*SIM, "--max-batched-tokens", "64", "--input-len", "100",
                                  "--chunked-prefill"])  # fmt: skip
    assert chunked.exit_code == 0, chunked.output


def test_plan_serve_with_an_llm() -> None:
    result = runner.invoke(app, ["plan", "serve", "--model", "llama-3-8b:2", "--duration-s", "20",
                                 "--gpu", "H100-SXM", "--slo-ttft-ms", "800", "--slo-tpot-ms",
                                 "60", "--tp", "1", "--max-replicas", "4"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "plan serve llama-3-8b" in result.stdout and "R" in result.stdout
    low = runner.invoke(
        app,
        ["plan", "serve", "--model", "llama-3-8b", "--rate", "1", "--duration-s", "10",
         "--gpu", "H100-SXM", "--slo-ttft-ms", "1"],
    )  # fmt: skip
    assert low.exit_code == 2
    assert "below what one request alone takes on every GPU offered" in low.stderr
    big = runner.invoke(app, ["plan", "serve", "--model", "gpt-3-175b", "--rate", "1",
                              "--gpu", "L4", "--tp", "1,2", "--slo-ttft-ms", "500"])  # fmt: skip
    assert big.exit_code == 2 and "does not fit on any GPU offered" in big.stderr
    slo = runner.invoke(app, ["plan", "serve", "--model", "llama-3-8b", "--rate", "1",
                              "--slo", "p99<50ms"])  # fmt: skip
    assert slo.exit_code == 2 and "a language model's SLOs are two: TTFT" in slo.stderr


def test_one_latency_slo_on_a_language_model_says_which_latencies_and_carries_it_over() -> None:
    """QA 33b #7: --slo 'p99<2s' on an LLM read "slo: is not an option of LLM serving"."""
    for verb, flags, fix in (
        (SIM, ["--slo", "P99<2S"], "e.g. --slo-ttft-ms 2000 --slo-tpot-ms 50 (the first"),
        (["plan", "serve", "--model", "llama-3-8b:2"], ["--slo", "p95<500ms"],
         "e.g. --slo-ttft-ms 500 --slo-tpot-ms 50 --slo-percentile 95"),
        (["plan", "serve", "--model", "llama-3-8b:2"], ["--slo-ms", "300"],
         "e.g. --slo-ttft-ms 300 --slo-tpot-ms 50 --slo-percentile 99"),
    ):  # fmt: skip
        result = runner.invoke(app, [*verb, *flags])
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, lines
        assert "not end to end" in lines[0] and fix in lines[0], lines[0]
    helped = runner.invoke(app, ["simulate", "serve", "--help"], env={"COLUMNS": "300"})
    assert "SLOs are on TTFT and TPOT, not end to end" in " ".join(helped.stdout.split())


def test_plan_serve_shows_long_latencies_in_ms_cells_and_as_durations_in_text() -> None:
    # 200 req/s on two L4s: prompts queue for half an hour; the cell read "2061395" (ms), then
    # "34.4 min" under an ms heading: now thousands separated ms, the bound text a duration
    result = runner.invoke(app, ["plan", "serve", "--model", "llama-3-8b", "--rate", "200",
                                 "--duration-s", "20", "--gpu", "L4", "--tp", "1",
                                 "--max-replicas", "2", "--slo-ttft-ms", "500"])  # fmt: skip
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())  # the bound column wraps
    assert re.search(r"\(misses\) │ [\d.]+ │ [\d.]+ │ \d{1,3}(,\d{3}){2,} │", text), text
    assert re.search(r"TTFT p99 [\d.]+ (min|h) over 500 ms", text), text
    assert not re.search(r"\d{5,} ms", text) and " min │" not in text


def test_plan_serve_at_one_price_says_how_the_tie_was_broken() -> None:
    result = runner.invoke(app, ["plan", "serve", "--model", "llama-3-8b", "--rate", "1",
                                 "--duration-s", "10", "--gpu", "A100-80GB,H100-SXM", "--tp",
                                 "1,2", "--slo-tpot-ms", "80", "--price", "1"])  # fmt: skip
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "ties go to lower TTFT, then lower TPOT, then fewer GPUs" in text
    assert re.search(r"pick: \d+ deployments tie at US\$ 1\.000/h; ties go to lower TTFT", text)
    assert "0R" in text and "H100-SXM tp=1" in text.split("0R", 1)[1][:40]


def test_help_names_both_kinds() -> None:
    result = runner.invoke(app, ["simulate", "serve", "--help"])
    assert result.exit_code == 0
    assert "--time-scale" in result.stdout and "--max-batch" in result.stdout


def test_the_llm_arrivals_help_names_every_trace_format_it_reads(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from gpucast.app.llm_serve import SimulateLlmServeRequest
    from gpucast.domain.options import fields_of

    (arrivals,) = [f for f in fields_of(SimulateLlmServeRequest) if f.name == "arrivals"]
    for kind in ("Azure LLM trace", "Azure Functions trace", "arrival_s CSV"):
        assert kind in arrivals.info.help
    functions = tmp_path / "functions.csv"  # 4 minutes of 30 invocations: the help's claim
    functions.write_text("HashOwner,HashApp,HashFunction,Trigger,1,2,3,4\no,a,f,http,30,30,30,30\n")
    csv = tmp_path / "arrivals.csv"
    csv.write_text("arrival_s\n" + "\n".join(str(i * 2) for i in range(30)) + "\n")
    for trace in (functions, csv):
        result = runner.invoke(app, [*SIM[:6], "--arrivals", f"trace:{trace}", "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["requests"] > 0


def test_a_config_file_naming_an_llm_dispatches(tmp_path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text("model: llama-3-8b\ngpu: H100-SXM\nrate: 2\nduration_s: 5\n")
    result = runner.invoke(app, ["simulate", "serve", "--config", str(config), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["model"] == "llama-3-8b"
    bursty = runner.invoke(app, ["plan", "serve", "--model", "llama-3-8b", "--rate", "2",
                                 "--arrivals", "bursty", "--duration-s", "20", "--gpu",
                                 "H100-SXM", "--tp", "1", "--max-replicas", "2",
                                 "--slo-ttft-ms", "800", "--json"])  # fmt: skip
    assert bursty.exit_code == 0, bursty.output
    assert json.loads(bursty.stdout)["assumptions"]["arrivals"].startswith("bursty")


def test_plan_serve_an_llm_report_and_save(tmp_path) -> None:  # type: ignore[no-untyped-def]
    html, saved = tmp_path / "llm.html", tmp_path / "llm.json"
    result = runner.invoke(app, ["plan", "serve", "--model", "llama-3-8b:2", "--duration-s", "20",
                                 "--gpu", "H100-SXM", "--slo-ttft-ms", "800", "--slo-tpot-ms",
                                 "60", "--tp", "1", "--max-replicas", "2", "--report", str(html),
                                 "--save", str(saved)])  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(saved.read_text())
    assert data["kind"] == "llm-serve-plan" and data["model"] == "llama-3-8b"
    page = html.read_text()
    assert "TTFT p99 ms" in page and "tokens/s" in page and "TTFT p99 &lt;= 800 ms" in page


def test_plan_serve_blames_a_degree_that_does_not_split_the_model() -> None:
    options = ["--model", "llama-3-8b", "--rate", "2", "--gpu", "H100-SXM", "--slo-ttft-ms",
               "500", "--tp", "3"]  # fmt: skip
    plan = runner.invoke(app, ["plan", "serve", *options, "--slo-tpot-ms", "50"])
    simulate = runner.invoke(app, ["simulate", "serve", *options])
    assert plan.exit_code == 2 and simulate.exit_code == 2
    lines = plan.stderr.strip().splitlines()
    assert len(lines) == 1 and lines == simulate.stderr.strip().splitlines()
    assert "3 does not divide the 32 attention heads" in lines[0]
    assert "does not fit" not in lines[0] and "larger --tp" not in lines[0]


def test_several_models_with_llms_say_what_the_several_model_form_takes() -> None:
    for verb in ("plan", "simulate"):
        result = runner.invoke(app, [verb, "serve", "--model", "llama-3-8b:3,llama-3-70b:1",
                                     "--gpu", "H100-SXM", "--slo-ttft-ms", "500"])  # fmt: skip
        assert result.exit_code == 2
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, lines
        assert "applies to language models only" not in lines[0]
        assert "llama-3-8b:3, llama-3-70b:1 are language models" in lines[0]
        assert f"{verb} serve takes one" in lines[0]


def test_plan_serve_prints_every_candidate_not_simulated() -> None:
    result = runner.invoke(app, ["plan", "serve", "--model", "llama-3-70b", "--rate", "0.5",
                                 "--duration-s", "4", "--gpu", "MI300X,H100-SXM,L40S",
                                 "--slo-ttft-ms", "60000", "--slo-tpot-ms", "1000",
                                 "--max-replicas", "1", "--no-disaggregation",
                                 "--tp", "1,2,4,8,16"], terminal_width=250)  # fmt: skip
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "not simulated: MI300X: no catalog offer prices it" in text
    assert "not simulated: L40S tp=16: the largest L40S instance offered has 8 GPUs" in text
    assert "not simulated: H100-SXM tp=1; L40S tp=1, 2: does not fit" in text
    # QA 33b #10: the catalog had only 1-GPU L40S offers; g6e.12xlarge/24xlarge/48xlarge now
    assert "L40S tp=4, 1 replica (4 GPUs)" in text and "L40S tp=8, 1 replica (8 GPUs)" in text


def test_not_simulated_lines_group_the_same_reason_and_keep_every_label() -> None:
    from gpucast.plan.llm_serve import grouped_reasons as not_simulated_lines

    reasons = [f"G{i} tp=1: does not fit" for i in range(12)] + [
        "G0 tp=2: does not fit", "tp=3 (every GPU): cannot split", "MI300X: no offer", "plain",
    ]  # fmt: skip
    lines = not_simulated_lines(reasons)
    assert lines[0] == "G0 tp=1, 2; " + "; ".join(f"G{i} tp=1" for i in range(1, 12)) + (
        ": does not fit"
    )
    assert lines[1:] == ["tp=3 (every GPU): cannot split", "MI300X: no offer", "plain"]


def test_nonsense_llm_deployments_are_one_line_exit_2() -> None:
    """The QA pass: --replicas 100000 printed 100,024 lines, --replicas 3 with pools ran 1 + 1,
    --block-size 7 ran."""
    base = ["simulate", "serve", "--model", "llama-3-8b", "--gpu", "L40S", "--rate", "2",
            "--duration-s", "10"]  # fmt: skip
    for extra, text in (
        (["--replicas", "100000"], "replicas: must be at most 1024 instances"),
        (["--replicas", "3", "--prefill-instances", "1", "--decode-instances", "1"],
         "replicas: does not apply to disaggregated serving"),
        (["--block-size", "7"], "block-size: must be one of 8, 16, 32, 64, 128 tokens"),
    ):  # fmt: skip
        result = runner.invoke(app, [*base, *extra])
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and text in lines[0], lines
    many = runner.invoke(app, [*base, "--replicas", "40"])
    assert many.exit_code == 0, many.output
    assert "colocated: 40 instances, busy" in many.stdout
    assert "colocated #" not in many.stdout
    assert "the steady part of the run" in many.stdout


def test_plan_serve_takes_the_deployment_options_simulate_serve_has() -> None:
    """--price, --kv-link-gbps, --preemption, --block-size: in both verbs' help, checked
    alike (one line, exit 2), and language models only."""
    helps = [runner.invoke(app, [verb, "serve", "--help"]).stdout for verb in ("plan", "simulate")]
    for flag in ("--price", "--kv-link-gbps", "--preemption", "--block-size", "--provider",
                 "--region", "--spot"):  # fmt: skip
        assert all(flag in text for text in helps), flag
    plan = ["plan", "serve", "--model", "llama-3-8b", "--rate", "2", "--duration-s", "20",
            "--gpu", "H100-SXM", "--tp", "1", "--max-replicas", "2",
            "--slo-ttft-ms", "800"]  # fmt: skip
    ok = runner.invoke(app, [*plan, "--price", "1", "--preemption", "swap", "--block-size", "32",
                             "--kv-link-gbps", "50", "--json"])  # fmt: skip
    assert ok.exit_code == 0, ok.output
    out = json.loads(ok.stdout)
    assert out["best"]["cost_usd_per_hour"] == out["best"]["gpus"] * 1.0
    assert "32-token KV blocks, preemption by swap" in out["assumptions"]["scheduler"]
    for extra, text in (
        (["--preemption", "evict"], "preemption: must be one of recompute, swap"),
        (["--block-size", "7"], "block-size: must be one of 8, 16, 32, 64, 128 tokens"),
        (["--price", "-1"], "price: must be in (0, 1,000,000] US$/h per GPU"),
        (["--kv-link-gbps", "0"], "kv-link-gbps: must be > 0"),
    ):
        bad = runner.invoke(app, [*plan, *extra])
        assert bad.exit_code == 2, bad.output
        lines = bad.stderr.strip().splitlines()
        assert len(lines) == 1 and text in lines[0], lines
    cnn = runner.invoke(app, ["plan", "serve", "--model", "resnet50:100", "--slo-ms", "50",
                              "--price", "1", "--gpu", "T4", "--no-mig"])  # fmt: skip
    assert cnn.exit_code == 0, cnn.output  # --price is every model's (QA 34 #12)
    assert "prices: 1 US$/h per GPU for every GPU type (given with --price" in cnn.stdout


def test_a_simulated_gpu_that_misses_is_not_listed_as_not_simulated_and_cells_stay_in_ms() -> None:
    """QA 33b #9: "not simulated: L4 tp=2: SLO missed even with 32 replicas" beside L4 tp=2
    rows, and "4.15 min" in the "TTFT p99 ms" column."""
    result = runner.invoke(app, ["plan", "serve", "--model", "llama-3-8b", "--gpu", "L40S",
                                 "--rate", "60", "--duration-s", "20", "--slo-ttft-ms", "300",
                                 "--max-replicas", "1", "--no-disaggregation", "--tp", "1"],
                           env={"COLUMNS": "200"})  # fmt: skip
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "L40S tp=1, 1 replica (1 GPU) (misses)" in text
    assert "not simulated: L40S" not in text
    assert (
        "L40S tp=1: simulated, every replica count tried misses the SLO (up to 1 replica)" in text
    )
    assert "1 deployment simulated" in text
    row = next(line for line in result.stdout.splitlines() if "(misses)" in line)
    ttft_cell = row.split("│")[5].strip()
    assert re.fullmatch(r"\d{1,3}(,\d{3})+", ttft_cell), ttft_cell  # over 10 s, in ms


def test_a_limit_below_the_pareto_front_still_shows_the_pick() -> None:
    # the cheapest row (1 replica) misses and is on the front; --limit 1 used to show only it
    result = runner.invoke(app, ["plan", "serve", "--model", "llama-3-8b:20", "--duration-s",
                                 "20", "--gpu", "H100-SXM", "--slo-ttft-ms", "800",
                                 "--slo-tpot-ms", "60", "--tp", "1", "--max-replicas", "4",
                                 "--no-disaggregation", "--limit", "1"])  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = [line for line in result.stdout.splitlines() if "replica" in line and "│" in line]
    assert len(rows) == 1 and "R" in rows[0].split("│")[1] and "(misses)" not in rows[0]


def test_a_rate_in_the_model_that_is_not_finite_says_so() -> None:
    for bad in ("nan", "inf"):
        result = runner.invoke(app, ["plan", "serve", "--model", f"llama-3-8b:{bad}",
                                     "--slo-ttft-ms", "500"])  # fmt: skip
        assert result.exit_code == 2
        assert "must be a finite number (requests per second)" in result.stderr
        assert "e.g. --model llama-3-8b:5" in result.stderr


def test_a_rate_in_the_model_at_or_below_zero_names_the_model_flag() -> None:
    # F2 left: the --model NAME:RATE errors start with `model:`; a rate <= 0 said `rate:`
    # (the --rate flag's field)
    for bad in ("0", "-1", "nan"):
        result = runner.invoke(app, ["plan", "serve", "--model", f"llama-3-8b:{bad}",
                                     "--slo-ttft-ms", "500"])  # fmt: skip
        assert result.exit_code == 2
        assert result.stderr.startswith(f"error: model: the rate in llama-3-8b:{bad} must be")


def test_simulate_serve_with_plan_serves_name_rate_form_names_rate() -> None:
    result = runner.invoke(app, ["simulate", "serve", "--model", "llama-3-8b:5", "--gpu",
                                 "H100-SXM"])  # fmt: skip
    assert result.exit_code == 2
    assert "unknown model" not in result.stderr
    assert "model: takes no rate in simulate serve" in result.stderr
    assert "--model llama-3-8b --rate 5" in result.stderr
