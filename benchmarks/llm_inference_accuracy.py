"""LLM inference (``gpucast predict infer``) against LLM-Inference-Bench, out of sample.

Data: ``../shared/data/llm_inference_bench/`` (Argonne's LLM-Inference-Bench, A100-40GB and
MI250 rows only): offline batches of 1-64 sequences of 128-2,048 prompt tokens generating as
many, 1-4 GPUs, vLLM / TensorRT-LLM / DeepSpeed-MII / llama.cpp, fp16; and 12 TTFT rows
(batch 16 x 1,024 prompt tokens, 7-8B models, 1 GPU).

What is printed (nothing is scored on rows it was fitted on, except table 1):

1. The fitted engine parameters on every A100 row (what ``catalog/data/inference_engines.csv``
   ships) and their in-sample error.
2. Leave one model out (A100): each model's rows of every framework predicted by the engine
   parameters fitted without that model (throughput and TTFT rows). Target: throughput MAPE
   <= 15%, TTFT MAPE <= 20%.
3. Leave one framework out (A100): each framework predicted by the pooled parameters of the
   other three (with its own structure: tensor or layer split, identical prompts, one
   sequence for llama.cpp). Same targets.
4. MI250 from the A100 fit and the MI250's datasheet (no MI250 row is fitted on).
5. Leave-one-model-out throughput error by batch size and by sequence length.
6. The 80% intervals ``predict infer`` states (:mod:`gpucast.predict.llm_infer_intervals`): per
   regime (a model left out, an engine left out, another GPU) and quantity, the band at the
   level calibrated over the held-out groups, and its nested coverage (each group against
   the band the other groups place, its level chosen on them alone). Target: 75-85%.

Throughput error is ``|predicted / measured - 1|`` of tokens per second (the same for prompt +
generated and generated tokens: both are a fixed count over the batch latency); signed
medians show the bias (+: predicted faster).

Run: ``python benchmarks/llm_inference_accuracy.py`` (seconds); ``--profiles`` also prints the
fitted rows in the format of ``inference_engines.csv``, ``--intervals`` the rows of
``llm_infer_intervals.csv``.
"""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from gpucast.domain.llm_infer import ENGINE_PARAMS
from gpucast.inputs.llm_bench import BenchData, bench_data
from gpucast.predict.intervals import held_out_bands
from gpucast.predict.llm_infer import LlmInferenceModel
from gpucast.predict.llm_infer_intervals import gpu_factor_rows, held_out_residuals, interval_table

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
A100, MI250 = "A100-40GB", "MI250"
pd.set_option("display.width", 200)
pd.set_option("display.max_rows", 200)


def fit(bench: BenchData, rows: pd.DataFrame, ttft: pd.DataFrame) -> LlmInferenceModel:
    return LlmInferenceModel().fit(
        rows, specs=bench.specs, gpus=bench.gpus, engines=bench.engines, ttft=ttft,
        fitted_on=bench.fitted_on(rows),
    )  # fmt: skip


def throughput_error(model: LlmInferenceModel, bench: BenchData, rows: pd.DataFrame) -> pd.Series:
    """Signed error of tokens/s, % (+: predicted faster than measured)."""
    predicted = model.predict_frame(rows, specs=bench.specs, gpus=bench.gpus)
    return pd.Series(100.0 * (rows["latency_s"].to_numpy() / predicted - 1.0), index=rows.index)


def ttft_error(model: LlmInferenceModel, bench: BenchData, rows: pd.DataFrame) -> pd.Series:
    """Signed error of the time to first token, % (+: predicted longer)."""
    predicted = model.predict_frame(rows, specs=bench.specs, gpus=bench.gpus, ttft=True)
    return pd.Series(100.0 * (predicted / rows["ttft_s"].to_numpy() - 1.0), index=rows.index)


def summary(errors: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    grouped = errors.groupby(by)["error"]
    out = pd.DataFrame(
        {
            "rows": grouped.size(),
            "MAPE %": grouped.apply(lambda e: e.abs().mean()),
            "median %": grouped.median(),
            "max |e| %": grouped.apply(lambda e: e.abs().max()),
        }
    )
    return out.round(1)


def overall(errors: pd.DataFrame) -> str:
    e = errors["error"]
    return f"MAPE {e.abs().mean():.1f}% over {len(e)} rows (median {e.median():+.1f}%)"


def section_fit(bench: BenchData, a100: pd.DataFrame, ttft: pd.DataFrame) -> LlmInferenceModel:
    model = fit(bench, a100, ttft)
    assert model.profiles_ is not None
    params = pd.DataFrame({n: p.params() for n, p in model.profiles_.items()}).T
    print("1. Engine parameters fitted on every A100 row (inference_engines.csv)")
    print(params.to_string(float_format=lambda v: f"{v:.4g}"))
    errors = a100.assign(error=throughput_error(model, bench, a100))
    print("\n   in-sample throughput error:")
    print(summary(errors, ["framework"]).to_string())
    return model


def section_lomo(bench: BenchData, a100: pd.DataFrame, ttft: pd.DataFrame) -> pd.DataFrame:
    parts, tt = [], []
    for model_name in sorted(set(a100["model"])):
        held = a100["model"] == model_name
        held_ttft = ttft["model"] == model_name
        model = fit(bench, a100[~held], ttft[~held_ttft])
        rows = a100[held]
        parts.append(rows.assign(error=throughput_error(model, bench, rows)))
        if held_ttft.any():
            t = ttft[held_ttft]
            tt.append(t.assign(error=ttft_error(model, bench, t)))
    errors, ttft_errors = pd.concat(parts), pd.concat(tt)
    print("\n2. Leave one model out (A100): throughput, per framework and model")
    print(summary(errors, ["framework", "model"]).to_string())
    print("\n   per framework:")
    print(summary(errors, ["framework"]).to_string())
    print(f"\n   throughput, all frameworks: {overall(errors)}  (target <= 15%)")
    print("   TTFT, leave one model out:")
    print(summary(ttft_errors, ["framework"]).to_string())
    print(f"   TTFT, all: {overall(ttft_errors)}  (target <= 20%)")
    return errors


def section_lofo(bench: BenchData, a100: pd.DataFrame, ttft: pd.DataFrame) -> None:
    parts, tt = [], []
    for framework in sorted(set(a100["framework"])):
        held = a100["framework"] == framework
        held_ttft = ttft["framework"] == framework
        model = fit(bench, a100[~held], ttft[~held_ttft])
        rows = a100[held]
        parts.append(rows.assign(error=throughput_error(model, bench, rows)))
        if held_ttft.any():
            t = ttft[held_ttft]
            tt.append(t.assign(error=ttft_error(model, bench, t)))
    errors, ttft_errors = pd.concat(parts), pd.concat(tt)
    print("\n3. Leave one framework out (A100): the pooled parameters of the other three")
    print(summary(errors, ["framework"]).to_string())
    print(f"   throughput, all: {overall(errors)}  (target <= 15%)")
    print(summary(ttft_errors, ["framework"]).to_string())
    print(f"   TTFT, all: {overall(ttft_errors)}  (target <= 20%)")


def section_mi250(bench: BenchData, model: LlmInferenceModel) -> None:
    rows = bench.throughput[bench.throughput["gpu"] == MI250]
    ttft = bench.ttft[bench.ttft["gpu"] == MI250]
    errors = rows.assign(error=throughput_error(model, bench, rows))
    print("\n4. MI250 (one package = 2 GCDs) from the A100 fit + the MI250 datasheet")
    print(summary(errors, ["framework"]).to_string())
    print(f"   throughput, all: {overall(errors)}")
    print(summary(errors, ["framework", "model"]).to_string())
    if len(ttft):
        t = ttft.assign(error=ttft_error(model, bench, ttft))
        print(f"   TTFT (vLLM, batch 16 x 1,024): {overall(t)}")
    # What one MI250 measurement per framework would fix: a single latency factor, taken
    # (geometric mean) from the *other* models' MI250 rows of that framework.
    ratio = 1.0 + errors["error"] / 100.0  # predicted / measured tokens per second
    parts = []
    for (framework, name), part in errors.groupby(["framework", "model"]):
        others = (errors["framework"] == framework) & (errors["model"] != name)
        factor = float(np.exp(np.log(ratio[others]).mean()))
        parts.append(part.assign(error=100.0 * (ratio[part.index] / factor - 1.0)))
    calibrated = pd.concat(parts)
    print("   one factor per framework from the other models' MI250 rows (leave one model out):")
    print(summary(calibrated, ["framework"]).to_string())
    print(f"   throughput, all: {overall(calibrated)}")


def section_regimes(errors: pd.DataFrame) -> None:
    print("\n5. Leave-one-model-out throughput MAPE % by batch size (sequences) and length")
    table = errors.assign(ape=errors["error"].abs()).pivot_table(
        index="framework", columns="batch_size", values="ape", aggfunc="mean"
    )
    print(table.round(1).to_string())
    table = errors.assign(ape=errors["error"].abs()).pivot_table(
        index="framework", columns="input_len", values="ape", aggfunc="mean"
    )
    print(table.round(1).to_string())
    multi = errors.assign(ape=errors["error"].abs()).pivot_table(
        index="framework", columns="gpus", values="ape", aggfunc="mean"
    )
    print("   by GPU count:")
    print(multi.round(1).to_string())


def section_intervals(bench: BenchData, print_rows: bool, print_factors: bool) -> None:
    residuals = held_out_residuals(
        bench.throughput, bench.ttft, specs=bench.specs, gpus=bench.gpus,
        engines=bench.engines, fitted_gpu=A100,
    )  # fmt: skip
    factors = gpu_factor_rows(residuals)
    by_bench = {e.bench_framework: e.name for e in bench.engines}
    print("\n   latency factors off the fitted GPU (shipped: llm_infer_gpu_factors.csv):")
    print(factors.round(4).to_string(index=False))
    if print_factors:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        from gpucast.catalog.engines import GPU_FACTOR_COLUMNS

        writer.writerow(GPU_FACTOR_COLUMNS)
        for r in factors.itertuples():
            writer.writerow([
                by_bench[str(r.framework)], r.gpu, f"{r.latency_factor:.4f}", r.rows, r.models,
                f"LLM-Inference-Bench (arXiv 2411.00136) {r.gpu} rows: the mean log ratio "
                f"measured / predicted by the {A100} fit, via benchmarks/"
                "llm_inference_accuracy.py --gpu-factors",
                "2026-12-06",
            ])  # fmt: skip
        print("\nllm_infer_gpu_factors.csv:")
        print(out.getvalue(), end="")
    table = interval_table(residuals)
    print("\n6. 80% intervals of predict infer (ratio measured / predicted; tokens/s: inverse)")
    rows = []
    for (regime, quantity), part in residuals.groupby(["regime", "quantity"]):
        name = f"{regime}/{quantity}"
        r = part["residual"].to_numpy(dtype=np.float64)
        groups = part["group"].astype(str).to_numpy()
        bands = held_out_bands(r, groups)
        inside = [
            float(np.mean((r[groups == g] >= lo) & (r[groups == g] <= hi)))
            for g, (lo, hi) in bands.items()
        ]
        judged = sum(int(np.sum(groups == g)) for g in bands)
        covered = sum(
            int(np.sum((r[groups == g] >= lo) & (r[groups == g] <= hi)))
            for g, (lo, hi) in bands.items()
        )
        low, high = table.ratios(name)
        rows.append(
            {
                "band": name,
                "rows": len(r),
                "groups": len(set(groups)),
                "level": table.level[name],
                "x_low": round(low, 2),
                "x_high": round(high, 2),
                "MAPE %": round(table.mape_pct[name], 1),
                "nested coverage": f"{covered / judged:.0%}" if judged else "n/a",
                "per group": ", ".join(f"{v:.0%}" for v in inside) or "n/a",
            }
        )
    print(pd.DataFrame(rows).to_string(index=False))
    if print_rows:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        from gpucast.catalog.engines import INTERVAL_COLUMNS

        writer.writerow(INTERVAL_COLUMNS)
        for name in sorted(table.n):
            groups = residuals[residuals["regime"] + "/" + residuals["quantity"] == name]
            what = ", ".join(sorted(set(groups["group"])))
            writer.writerow([
                name, f"{np.exp(table.q_low[name]):.6g}", f"{np.exp(table.q_high[name]):.6g}",
                f"{table.level[name]:.3f}", table.n[name], f"{table.mape_pct[name]:.2f}",
                what, A100, "nvidia",
                "LLM-Inference-Bench (arXiv 2411.00136) via benchmarks/llm_inference_accuracy.py "
                f"--intervals; held out: {', '.join(sorted(set(groups['gpu'])))}",
                "2026-12-04",
            ])  # fmt: skip
        print("\nllm_infer_intervals.csv:")
        print(out.getvalue(), end="")


def print_profiles(model: LlmInferenceModel, bench: BenchData) -> None:
    from gpucast.catalog.engines import ENGINE_COLUMNS

    assert model.profiles_ is not None
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*ENGINE_COLUMNS, "note"])
    for engine in bench.engines:
        profile = model.profiles_.get(engine.name, engine)
        row = profile.to_dict()
        row["aliases"] = "|".join(profile.aliases)
        row["vendors"] = "|".join(profile.vendors)
        row["kv_precisions"] = "|".join(profile.kv_precisions)
        row["weight_precisions"] = "|".join(profile.weight_precisions)
        row["fitted_params"] = "|".join(profile.fitted_params)
        row["bench_identical_prompts"] = str(profile.bench_identical_prompts).lower()
        for name in (*ENGINE_PARAMS, "memory_fraction"):
            row[name] = f"{row[name]:.4g}"
        writer.writerow([row[c] for c in ENGINE_COLUMNS] + [profile.note])
    print("\ninference_engines.csv (fitted on every A100 row):")
    print(out.getvalue(), end="")


def main(argv: list[str]) -> int:
    if not (DATA / "llm_inference_bench").is_dir():
        print(f"no data at {DATA / 'llm_inference_bench'}", file=sys.stderr)
        return 1
    bench = bench_data(DATA)
    if bench.skipped:
        print(f"left out: {'; '.join(bench.skipped)}")
    a100 = bench.throughput[bench.throughput["gpu"] == A100]
    ttft = bench.ttft[bench.ttft["gpu"] == A100]
    model = section_fit(bench, a100, ttft)
    errors = section_lomo(bench, a100, ttft)
    section_lofo(bench, a100, ttft)
    section_mi250(bench, model)
    section_regimes(errors)
    section_intervals(bench, "--intervals" in argv, "--gpu-factors" in argv)
    if "--profiles" in argv:
        print_profiles(model, bench)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
