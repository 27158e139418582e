"""Speed of the token-level LLM serving simulator: a million requests on one core.

The Azure LLM conversation trace (``../shared/data/azure_llm_2023/``, 19,366 requests with
their prompt and output tokens) is tiled end to end until it holds 1,000,000 requests
(about 52 hours), replayed ``--time-scale`` times faster, and served by Llama-3-8B on
H100-SXM replicas with vLLM's scheduler (``gpucast.simulate.llm_serving``). Printed: the
simulator's CPU time (``time.process_time``: one core), the engine iterations it stood for,
and the run's TTFT / TPOT so the load is visible. Target: under 30 s. Without the data the
same number of requests is drawn (Poisson arrivals, lognormal lengths).

Run: ``python benchmarks/llm_serving_speed.py [--requests 1000000] [--replicas 4]
[--time-scale 8] [--chunked]``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from gpucast.catalog import load_catalog
from gpucast.catalog.engines import inference_engine
from gpucast.catalog.llm import llm_model
from gpucast.domain.llm_serving import LlmRequests, SchedulerConfig
from gpucast.predict.llm_infer import iteration_cost
from gpucast.simulate.llm_serving import simulate_llm_serving

TRACE = (
    Path(__file__).resolve().parents[1]
    / ".."
    / "shared"
    / "data"
    / "azure_llm_2023"
    / "AzureLLMInferenceTrace_conv.csv"
)


def requests(n: int, time_scale: float) -> tuple[LlmRequests, str]:
    if TRACE.exists():
        from gpucast.store.datasets.azure_traces import read_arrival_trace

        frame = read_arrival_trace(TRACE).frame
        times = frame["arrival_s"].to_numpy()
        span = float(times[-1]) + float(np.median(np.diff(times)))
        copies = -(-n // times.size)
        arrival = (times[None, :] + span * np.arange(copies)[:, None]).ravel()[:n]
        inp = np.tile(frame["context_tokens"].to_numpy(), copies)[:n]
        out = np.tile(frame["generated_tokens"].to_numpy(), copies)[:n]
        what = f"{TRACE.name} tiled {copies}x"
    else:  # pragma: no cover - without the shared data
        rng = np.random.default_rng(0)
        arrival = np.cumsum(rng.exponential(1 / 5.4, n))
        inp = np.rint(1000 * np.exp(0.9 * rng.standard_normal(n)))
        out = np.rint(120 * np.exp(1.0 * rng.standard_normal(n)))
        what = "Poisson 5.4 req/s, lognormal lengths (no shared data)"
    return (
        LlmRequests(
            arrival_s=arrival / time_scale,
            input_tokens=np.clip(inp, 1, 7000),
            output_tokens=np.clip(out, 1, 1000),
        ),
        what,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--time-scale", type=float, default=8.0)
    parser.add_argument("--chunked", action="store_true")
    args = parser.parse_args()
    spec = llm_model("llama-3-8b")
    gpu, engine = load_catalog().gpu("H100-SXM"), inference_engine("vllm")
    scheduler = SchedulerConfig(chunked_prefill=args.chunked)
    cost = iteration_cost(spec, gpu, engine, tp=1, max_tokens=scheduler.budget(spec.max_context))
    req, what = requests(args.requests, args.time_scale)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    sim = simulate_llm_serving(
        req, cost, scheduler, max_context=spec.max_context, replicas=args.replicas
    )
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    out = sim.to_dict()
    iterations = sum(i.iterations for i in sim.instances)
    print(f"{req.count:,} requests ({what}, {args.time_scale:g}x faster), llama-3-8b on "
          f"{args.replicas} x H100-SXM, {scheduler.describe(spec.max_context)}")  # fmt: skip
    print(f"  simulated {iterations:,} engine iterations, {out['output_tokens']:,} output tokens")
    met = "met" if req.count / cpu >= 1e6 / 30 else "MISSED"
    print(f"  CPU {cpu:.1f} s (wall {wall:.1f} s): {req.count / cpu:,.0f} requests/s on one core"
          f"  (target: 1,000,000 in < 30 s: {met})")  # fmt: skip
    t, p = out["ttft_s"], out["tpot_s"]
    print(f"  load: busy {np.mean([i.busy_fraction for i in sim.instances]):.0%}, TTFT p50 "
          f"{t['p50'] * 1e3:.0f} ms p99 {t['p99'] * 1e3:.0f} ms, TPOT p50 {p['p50'] * 1e3:.1f} ms, "
          f"mean batch {out['mean_batch_size']:.0f}")  # fmt: skip


if __name__ == "__main__":
    main()
