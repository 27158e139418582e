"""The token-level LLM serving simulator against the analytic model and LLM-Inference-Bench.

Data: ``../shared/data/llm_inference_bench/`` (A100-40GB rows of vLLM, the engine the
simulator's scheduler follows). Each throughput row is an offline batch of ``B`` equal
prompts sent at once; the simulator replays it as ``B`` requests at t=0 through vLLM's
scheduler (prefill-first, ``max_num_batched_tokens = max(context, 2048)``, 16-token KV
blocks, preemption by recompute), with iteration times from the engine profile fitted
**without that row's model** (leave one model out, as ``benchmarks/llm_inference_accuracy.py``
section 2). Where the KV cache cannot hold the whole batch (Llama-2-70B on 4 x 40 GB,
batches of 64 at 2,048 tokens), the analytic model runs time-averaged "waves" and the
simulator the real admission, block growth and preemption; elsewhere the two must agree to
one decode step (the analytic model counts ``O`` steps after the prefill, vLLM ``O - 1``).

Printed: per model, the throughput MAPE of the analytic model and of the simulator on the
same folds, and the largest simulator/analytic gap where everything fits. There are no
latencies-under-load measurements (an online trace with TTFT/TPOT per request) in
``../shared/data``: the Azure trace has arrivals and token counts only, so the online
behaviour (queueing, continuous admission) is checked by the tests' invariants, not data.

Run: ``python benchmarks/llm_serving_validation.py`` (~1 minute).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from gpucast.domain.llm_serving import LlmRequests, SchedulerConfig
from gpucast.inputs.llm_bench import bench_data
from gpucast.predict.llm_infer import LlmInferenceModel, iteration_cost
from gpucast.simulate.llm_serving import simulate_llm_serving

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
A100 = "A100-40GB"


def main() -> None:
    bench = bench_data(DATA)
    rows = bench.throughput
    a100 = rows[(rows["gpu"] == A100)]
    ttft = bench.ttft[bench.ttft["gpu"] == A100]
    vllm = a100[a100["framework"] == "vLLM"]
    out = []
    for name in sorted(set(vllm["model"])):
        held = a100["model"] == name
        model = LlmInferenceModel().fit(
            a100[~held], specs=bench.specs, gpus=bench.gpus, engines=bench.engines,
            ttft=ttft[ttft["model"] != name],
        )  # fmt: skip
        engine = model.profile("vllm")
        part = vllm[vllm["model"] == name]
        analytic = model.predict_frame(part, specs=bench.specs, gpus=bench.gpus)
        spec = bench.specs[name]
        costs: dict[int, object] = {}
        for (_, row), latency in zip(part.iterrows(), analytic, strict=True):
            tp = int(row["gpus"])
            if tp not in costs:
                costs[tp] = iteration_cost(
                    spec, bench.gpus[A100], engine, tp=tp, max_tokens=max(spec.max_context, 2048)
                )
            cost = costs[tp]
            b, n_in, n_out = int(row["sequences"]), int(row["input_len"]), int(row["output_len"])
            req = LlmRequests(
                arrival_s=np.zeros(b),
                input_tokens=np.full(b, n_in),
                output_tokens=np.full(b, n_out),
            )
            sim = simulate_llm_serving(
                req, cost, SchedulerConfig(max_num_seqs=engine.max_sequences),  # type: ignore[arg-type]
                max_context=spec.max_context,
            )  # fmt: skip
            simulated = float(np.nanmax(sim.finish_s))
            out.append(
                {
                    "model": name,
                    "gpus": tp,
                    "batch": b,
                    "length": n_in,
                    "measured_s": float(row["latency_s"]),
                    "analytic_s": float(latency),
                    "simulated_s": simulated,
                    "preemptions": int(sim.preemptions.sum()),
                    "dropped": sim.count(1),
                }
            )
    frame = pd.DataFrame(out)
    # throughput error: |predicted tokens/s / measured - 1| = |measured latency / predicted - 1|
    frame["analytic %"] = 100 * (frame["measured_s"] / frame["analytic_s"] - 1)
    frame["simulator %"] = 100 * (frame["measured_s"] / frame["simulated_s"] - 1)
    frame["sim/analytic %"] = 100 * (frame["simulated_s"] / frame["analytic_s"] - 1)
    by = frame.groupby("model")
    table = pd.DataFrame(
        {
            "rows": by.size(),
            "analytic MAPE %": by["analytic %"].apply(lambda e: e.abs().mean()),
            "simulator MAPE %": by["simulator %"].apply(lambda e: e.abs().mean()),
            "rows with preemption": by["preemptions"].apply(lambda p: int((p > 0).sum())),
        }
    ).round(1)
    print("vLLM on A100-40GB, leave one model out: throughput error of the offline batches")
    print(table.to_string())
    a, s = frame["analytic %"].abs().mean(), frame["simulator %"].abs().mean()
    print(f"\nall {len(frame)} rows: analytic MAPE {a:.1f}%, simulator MAPE {s:.1f}%")
    calm = frame[frame["preemptions"] == 0]
    gap = calm["sim/analytic %"].abs()
    print(
        f"rows without preemption ({len(calm)}): simulator vs analytic median "
        f"{gap.median():.2f}%, max {gap.max():.2f}% (one decode step of O, and vLLM's "
        "token budget splitting large prefills)"
    )
    worst = frame.loc[frame["simulator %"].abs().idxmax()]
    print(f"largest simulator miss: {worst.to_dict()}")


if __name__ == "__main__":
    main()
