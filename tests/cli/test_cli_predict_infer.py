"""`gpucast predict infer`: flags, the rendered lines, exit codes."""

from __future__ import annotations

from typer.testing import CliRunner

from gpucast.cli.app import app

runner = CliRunner()
BASE = ["predict", "infer", "--model", "llama-2-7b", "--gpu", "A100-40GB", "--input-len", "512",
        "--output-len", "256"]  # fmt: skip


def test_help_lists_the_flags() -> None:
    result = runner.invoke(app, ["predict", "infer", "--help"])
    assert result.exit_code == 0
    for flag in ("--model", "--gpu", "--batch-size", "--input-len", "--output-len",
                 "--framework", "--tp", "--precision", "--kv-precision", "--max-num-seqs",
                 "--json"):  # fmt: skip
        assert flag in result.output


def test_renders_the_prediction_its_engine_and_validation() -> None:
    result = runner.invoke(app, [*BASE, "--batch-size", "64", "--framework", "trt-llm"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "with TensorRT-LLM" in out and "TTFT" in out and "generated tokens/s" in out
    assert "memory per GPU" in out and "fits" in out
    assert "engine: TensorRT-LLM: fitted on LLM-Inference-Bench" in out
    assert "validated: A100-40GB: throughput MAPE" in out


def test_bad_input_exits_2_with_one_line() -> None:
    result = runner.invoke(app, [*BASE, "--tp", "3"])
    assert result.exit_code == 2
    assert result.stderr.strip().startswith("error: tp: cannot split llama-2-7b")


def test_a_cache_bound_batch_prints_the_hint() -> None:
    args = ["predict", "infer", "--model", "llama-3-70b", "--gpu", "H100", "--batch-size", "64",
            "--input-len", "2048", "--output-len", "256"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "hint: the KV cache holds 9.0 of 64 sequences on 2 GPUs; --tp 4" in result.output
    assert "hint:" not in runner.invoke(app, [*args, "--tp", "4"]).output


def test_the_first_line_names_a_kv_cache_precision_unlike_the_weights() -> None:
    """A TensorRT-LLM int8 KV run printed only "(fp16, ...)", the weights' precision."""
    trt = [*BASE, "--framework", "trt-llm"]
    int8 = runner.invoke(app, [*trt, "--kv-precision", "int8"])
    assert int8.exit_code == 0, int8.output
    assert "with TensorRT-LLM (fp16 weights, int8 KV cache, batch 1 x 512" in int8.output
    same = runner.invoke(app, trt)
    assert same.exit_code == 0, same.output
    assert (
        "with TensorRT-LLM (fp16, batch 1 x 512" in same.output
        and "KV cache," not in (same.output.splitlines()[0])
    )


def test_the_text_states_how_the_precisions_were_chosen() -> None:
    """QA 40 I #4: the fp8 KV cache chosen for fp8 weights was in the JSON's assumptions only."""
    fp8 = runner.invoke(app, [*BASE[:5], "H100-SXM", *BASE[6:], "--precision", "fp8"])
    assert fp8.exit_code == 0, fp8.output
    line = next(x for x in fp8.output.splitlines() if x.startswith("  precision: "))
    assert line.startswith("  precision: fp8 weights, fp8 KV cache (the KV cache follows fp8")
    default = runner.invoke(app, BASE)
    assert "  precision: fp16 weights, fp16 KV cache (the engine's default)" in default.output
