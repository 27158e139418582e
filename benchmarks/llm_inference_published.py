"""LLM inference on GPUs the fit never saw: ``predict infer`` against NVIDIA's published
TensorRT-LLM figures (issue #13: "we also check against published results you do not have").

``predict infer``'s engine efficiencies are fitted on LLM-Inference-Bench's A100-40GB rows
(fp16, batches <= 64, 1-4 GPUs). Each row of ``catalog/data/llm_infer_published.csv`` is a
figure NVIDIA published for TensorRT-LLM v0.5 / v0.6.1 (``docs/source/performance.md``):
static-batch generated tokens/s per GPU on H100-SXM (fp8 weights and KV cache), L40S (fp8)
and A100-80GB (fp16), batches of 16-1,280 sequences of 128 / 2,048 tokens in and out,
Llama-2-7B/70B and GPT-J-6B, 1-4 GPUs; and the first-token latency of one sequence. The
prediction is the one a user gets from::

    gpucast predict infer --model M --gpu G --framework tensorrt-llm --precision P \\
        --kv-precision P --tp N --batch-size B --input-len I --output-len O --max-num-seqs B

``--max-num-seqs B``: NVIDIA built each engine for the batch it ran in one pass (the
engine profile's default cap is 256 sequences, what a user who omits it gets: the column
"at the default cap"). First-token rows are ``--batch-size 1 --output-len 1``, ``ttft_s``.
Nothing is fitted on these figures. Rows the model cannot express (GPT-J past its
2,048-token context window, which ``predict infer`` refuses) are listed and not counted.

    .venv/bin/python benchmarks/llm_inference_published.py [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any

import gpucast
from gpucast.catalog.llm_published import load_published_inference


def rows() -> list[dict[str, Any]]:
    """One dict per published figure: its setting, published and predicted value, error,
    and whether the 80% interval ``predict infer`` states covers it."""
    out: list[dict[str, Any]] = []
    for pub in load_published_inference():
        row: dict[str, Any] = {
            "source": pub.source,
            "gpu": pub.gpu,
            "model": pub.model,
            "precision": pub.precision,
            "tp": pub.tp,
            "batch_size": pub.batch_size,
            "input_len": pub.input_len,
            "output_len": pub.output_len,
            "metric": pub.metric,
            "engine_version": pub.engine_version,
            "published": pub.published,
            "expressible": pub.expressible,
            "note": pub.note,
        }
        out.append(row)
        if not pub.expressible:
            continue
        ask = {
            "model": pub.model, "gpu": pub.gpu, "framework": pub.engine,
            "precision": pub.precision, "kv_precision": pub.kv_precision, "tp": pub.tp,
            "batch_size": pub.batch_size, "input_len": pub.input_len,
            "output_len": pub.output_len,
        }  # fmt: skip
        result = gpucast.predict_infer(**ask, max_num_seqs=pub.max_num_seqs)
        if pub.metric == "ttft_ms":
            predicted = result.prediction.ttft_s * 1e3
            lo, hi = (v * 1e3 for v in result.interval("ttft_s"))
        else:
            per = pub.tp if pub.metric == "out_tokens_per_s_per_gpu" else 1
            predicted = result.prediction.tokens_per_s / per
            lo, hi = (v / per for v in result.interval("tokens_per_s"))
            default = gpucast.predict_infer(**ask).prediction.tokens_per_s / per
            row["at_default_cap"] = default / pub.published - 1
        row.update(
            predicted=predicted,
            error=predicted / pub.published - 1,
            covered=lo <= pub.published <= hi,
            bottleneck=result.prediction.bottleneck,
            waves=result.prediction.waves,
            validated=result.validation.validated,
        )
    return out


def summary(table: list[dict[str, Any]]) -> dict[str, Any]:
    """MAPE, median and signed mean error and interval coverage per GPU and metric."""
    out: dict[str, Any] = {}
    checked = [r for r in table if r["expressible"]]
    groups: dict[str, list[dict[str, Any]]] = {"all": checked}
    for r in checked:
        kind = "ttft" if r["metric"] == "ttft_ms" else "throughput"
        groups.setdefault(f"{r['source']} {kind}", []).append(r)
        groups.setdefault(f"{r['source']} {kind} {r['gpu']}", []).append(r)
        groups.setdefault(f"{r['source']} {kind} {r['model']}", []).append(r)
        gpus = "1 GPU" if r["tp"] == 1 else "2-8 GPUs"
        groups.setdefault(f"any {kind} {r['gpu']}", []).append(r)  # the validation.csv rows
        groups.setdefault(f"any {kind} {r['gpu']} {gpus}", []).append(r)
    for name, rs in groups.items():
        errors = [r["error"] for r in rs]
        out[name] = {
            "rows": len(rs),
            "mape": statistics.fmean(abs(e) for e in errors),
            "median_abs": statistics.median(abs(e) for e in errors),
            "mean_signed": statistics.fmean(errors),
            "covered": sum(r["covered"] for r in rs) / len(rs),
        }
    capped = [r for r in checked if "at_default_cap" in r and r["batch_size"] > 256]
    if capped:
        out["default_cap_rows"] = {
            "rows": len(capped),
            "mape": statistics.fmean(abs(r["at_default_cap"]) for r in capped),
            "mape_with_cap_given": statistics.fmean(abs(r["error"]) for r in capped),
        }
    out["not_expressible"] = len(table) - len(checked)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the rows and summary")
    args = parser.parse_args()
    table = rows()
    stats = summary(table)
    if args.json:
        print(json.dumps({"rows": table, "summary": stats}, indent=2, default=str))
        return
    print(
        "| source | GPU | model | prec | tp | batch | in / out | metric | published | predicted "
        "| error | 80% interval covers | bound by |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in table:
        head = (
            f"| {r['source']} | {r['gpu']} | {r['model']} | {r['precision']} | {r['tp']} "
            f"| {r['batch_size']} | {r['input_len']} / {r['output_len']} | {r['metric']} "
            f"| {r['published']:,.0f} "
        )
        if not r["expressible"]:
            print(head + "| - | not expressible | - | - |")
            continue
        print(
            head + f"| {r['predicted']:,.0f} | {r['error']:+.1%} | "
            f"{'yes' if r['covered'] else 'no'} | {r['bottleneck']} |"
        )
    print()
    print("| rows | n | MAPE | median abs | mean signed | 80% interval covers |")
    print("|---|---|---|---|---|---|")
    for name, s in sorted(stats.items()):
        if isinstance(s, dict) and "covered" in s:
            print(
                f"| {name} | {s['rows']} | {s['mape']:.1%} | {s['median_abs']:.1%} "
                f"| {s['mean_signed']:+.1%} | {s['covered']:.0%} |"
            )
    cap = stats.get("default_cap_rows")
    if cap:
        print(
            f"batches above the engine's default 256 sequences ({cap['rows']} rows): MAPE "
            f"{cap['mape']:.1%} at the default cap, {cap['mape_with_cap_given']:.1%} with "
            "--max-num-seqs set to the batch"
        )
    print(f"not expressible (listed, not counted): {stats['not_expressible']}")


if __name__ == "__main__":
    main()
