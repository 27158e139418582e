"""The step-time model across every published source, validated as users would meet it.

Data: ``../shared/data`` -- CM-DARE (K80/P100, TensorFlow 1), Zeus (V100/P100/RTX 6000 at
their highest power limit, PyTorch), Pollux (T4, PyTorch, single-GPU placements in the fit),
MLPerf Training v4.0 (single-node H100/H200/H100-PCIe/L40S systems in the fit).

What is printed (nothing here is tuned on the rows it is scored on):

1. Cross-validated error per regime, source and GPU (``gpucast fit steptime``'s table): a GPU
   left out of the fit (LOGO), a workload left out (LOMO), a (GPU, workload) pair left out,
   another batch on the same GPU -- each with the coverage of the stated 80% interval, judged
   against quantiles built from the *other* held-out groups (nested).
2. Pollux, unseen placements: every multi-GPU placement (2-16 T4 over 1-16 nodes; none is in
   the fit) = the fitted single-T4 step at the local batch + the gradient all-reduce as
   ``plan train`` prices it (PCIe inside a g4dn.12xlarge, 50 Gbit/s between them; at most 70%
   hidden under backward).
3. MLPerf, leave one system out: each system's time to train = samples to target at its
   global batch (MLCommons' reference convergence points, ``catalog/data/convergence.csv``)
   x (one GPU's step + exposed all-reduce + the run's evaluations per step, by the rules in
   ``catalog/data/mlperf_eval.csv``) / global batch, with the model refitted without that
   system; error per benchmark and by GPU-count bucket (4-8, 9-64, 65-512, 513-3,584),
   before session 9 (no evaluations, a share of a sample priced as a whole one, no per-kernel
   prior) and after.
4. The LLM benchmarks through the 3D-parallel model; 5. ssd (RetinaNet), kept out of the fit.
6. Leave one source out: each source predicted uncalibrated by the model (and its interval
   table) fitted on the others -- a new lab's code on GPUs it may share with them -- with the
   coverage of the 80% band the product would state.

Run: ``python benchmarks/steptime_accuracy.py`` (a few minutes; profiles are cached), or one
section: ``--section mlperf`` (repeatable: cv, pollux, mlperf, llm, held_out, sources).
"""

from __future__ import annotations

import datetime
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gpucast.catalog import load_catalog
from gpucast.catalog.convergence import mlperf_samples_to_target
from gpucast.domain.published import MLPERF_HELD_OUT, MLPERF_WORKLOADS
from gpucast.inputs import steptime as st
from gpucast.predict.collective import RDMA, CollectiveModel
from gpucast.predict.steptime import (
    StepTimeModel,
    cross_validated_residuals,
    error_table,
    nested_coverage,
    source_held_out,
)
from gpucast.predict.validation import held_out_scale

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
pd.set_option("display.width", 200)
pd.set_option("display.max_rows", 200)


def _ape(pred: np.ndarray, actual: np.ndarray) -> np.ndarray:
    return 100.0 * (pred / actual - 1.0)


def section_cv(obs: pd.DataFrame, loso: pd.DataFrame) -> None:
    residuals = cross_validated_residuals(obs)
    table = error_table(residuals, loso)
    print("1. Cross-validated step time per regime / source / GPU (MAPE %, 80% coverage of the")
    print("   band the product states: uncalibrated ones widened to a new code base's)")
    print(table.round(1).to_string(index=False))
    print("\n   nested coverage of the 80% interval, all sources: the regime's own band, and")
    print("   as stated (uncalibrated regimes widened to the new-code-base band)")
    own = nested_coverage(residuals).set_index("regime")
    stated = nested_coverage(residuals, loso).set_index("regime")
    both = own[["rows", "coverage"]].join(stated[["coverage"]], rsuffix="_as_stated")
    print(both.round(3).to_string())
    by = table.groupby(["regime", "source"]).apply(
        lambda p: pd.Series(
            {
                "rows": p.rows.sum(),
                "mape_pct": np.average(p.mape_pct, weights=p.rows),
                "coverage": np.average(p.coverage.fillna(0), weights=p.rows),
            }
        ),
        include_groups=False,
    )
    print("\n   per regime and source:")
    print(by.round(2).to_string())
    two_vs_one(obs)


def two_vs_one(obs: pd.DataFrame) -> None:
    """Rows between two measurements of their configuration on their GPU (the nearest
    smaller and larger batch): priced from both (per-sample and fixed parts each scaled,
    regime same_gpu/calibrated/bracketed) and from the nearer one alone, on the same rows,
    with the shipped fit's terms."""
    from gpucast.catalog.steptime import shipped_step_time_model
    from gpucast.predict.roofline import two_part_solution

    model = shipped_step_time_model()
    if model is None:
        return
    terms = model.terms(obs)
    frame = obs.assign(
        work=terms["compute"] + terms["memory_bandwidth"] + terms["evaluation"],
        fixed=terms["overhead"],
        extra=terms["extra"],
    )
    config = ["source", "workload_key", "gpu", "optimizer", "gpus", "precision", "stack"]
    two, one = [], []
    for _, g in frame.groupby(config, dropna=False):
        b = g["batch"].to_numpy(dtype=float)
        w, f, x = (g[c].to_numpy(dtype=float) for c in ("work", "fixed", "extra"))
        t = g["step_time_s"].to_numpy(dtype=float)
        for i in range(len(g)):
            below, above = np.flatnonzero(b < b[i]), np.flatnonzero(b > b[i])
            if not len(below) or not len(above):
                continue
            j, k = below[np.argmax(b[below])], above[np.argmin(b[above])]
            solved = two_part_solution((w[j], f[j], t[j] - x[j]), (w[k], f[k], t[k] - x[k]))
            if solved is None:
                continue
            two.append(abs((solved[0] * w[i] + solved[1] * f[i] + x[i]) / t[i] - 1))
            n = j if abs(np.log2(b[j] / b[i])) <= abs(np.log2(b[k] / b[i])) else k
            near = (t[n] - x[n]) / (w[n] + f[n]) * (w[i] + f[i]) + x[i]
            one.append(abs(near / t[i] - 1))
    print(
        f"\n   between two measurements ({len(two)} rows, shipped fit): from both "
        f"{100 * np.mean(two):.1f}% MAPE, from the nearer one alone {100 * np.mean(one):.1f}%"
    )


def section_pollux(obs: pd.DataFrame, catalog: object) -> None:
    model = StepTimeModel().fit(obs)
    rows = st.pollux_collective_rows(DATA, catalog, model)
    print("\n2. Pollux T4 step time at unseen multi-GPU placements (compute: the job's measured")
    print("   single-T4 step at the local batch; all-reduce over TCP as NCCL's flat ring at its")
    print("   slowest link: NIC and PCIe shares, fixed cost and overlap fitted by CollectiveModel")
    print("   on the other placements / the other jobs)")
    nominal = rows.compute_s + RDMA.exposed_s(
        RDMA.total_s(rows.gradient_bytes, rows.gpus, rows.gpus_per_node,
                     rows.intra_node_gbps, rows.network_gbps), rows.compute_s)  # fmt: skip
    out = {"nominal links (nothing fitted)": _ape(nominal.to_numpy(), rows.step_time_s.to_numpy())}
    for name, key in (("leave one placement out", "placement"), ("leave one job out", "job")):
        err = np.zeros(len(rows))
        for value in sorted(set(rows[key])):
            held = (rows[key] == value).to_numpy()
            fitted = CollectiveModel().fit(rows[~held])
            err[held] = _ape(fitted.predict(rows[held]), rows.step_time_s.to_numpy()[held])
        out[name] = err
    table = pd.DataFrame(
        {name: rows.assign(e=np.abs(e)).groupby("job").e.mean() for name, e in out.items()}
    )
    table.loc["all"] = [float(np.mean(np.abs(e))) for e in out.values()]
    print(table.round(1).to_string())
    model = CollectiveModel().fit(rows)
    signed = model.predict(rows) / rows.step_time_s.to_numpy() - 1.0
    by_nodes = pd.Series(100.0 * signed).groupby(rows.nodes.to_numpy()).mean().round(1)
    print(f"   mean signed error by node count (fit on all): {by_nodes.to_dict()}")
    fitted = model.constants
    print(f"   fitted on all {len(rows)}: {fitted.network_efficiency:.3f} of the 50 Gbit/s NIC, "
          f"{fitted.intra_efficiency:.3f} of PCIe, {1e3 * fitted.latency_s:.1f} ms per step, "
          f"overlap {fitted.overlap_fraction:.2f}")  # fmt: skip


def _mlperf_step(
    model: StepTimeModel, systems: pd.DataFrame, totals: np.ndarray, *, factors: bool = True
) -> np.ndarray:
    """Predicted per-GPU step of MLPerf systems: the GPU's step, the all-reduce past what its
    backward hides, and the evaluations of the timed run per step (``factors``: with the
    fitted per-workload factors; False: as a user's own code is priced)."""
    terms = model.terms(systems, use_workload_factor=factors)
    gpu_step = terms["compute"] + terms["memory_bandwidth"] + terms["overhead"]
    return np.asarray(
        gpu_step + RDMA.exposed_s(totals, gpu_step) + terms["evaluation"], dtype=np.float64
    )


def without_run_terms(frame: pd.DataFrame, catalog: object) -> pd.DataFrame:
    """``frame`` as the model saw MLPerf before session 9: no evaluations in the timed run,
    and a per-GPU batch under one sample priced as one whole sample (fitted, in section 3,
    without the per-kernel prior too)."""
    out = frame.assign(eval_runs=0.0, eval_work=0.0)
    split = out.sample_share < 1.0
    if split.any():
        out.loc[split] = st.with_features(out.loc[split].assign(sample_share=1.0), catalog)
    return out.assign(sample_share=1.0)


BUCKETS = ([0, 8, 64, 512, 20000], ["4-8", "9-64", "65-512", "513-3,584"])


def section_mlperf(obs: pd.DataFrame, catalog: object) -> None:
    def s2t(benchmark: str, batch: float) -> float:
        return float(mlperf_samples_to_target(benchmark, round(batch)).samples_mean)

    systems = st.mlperf_system_rows(DATA, s2t, catalog=catalog)
    systems = st.with_collective(systems, catalog)  # extra_s: (1 - overlap) x all-reduce
    totals = systems.extra_s.to_numpy() / (1.0 - RDMA.overlap_fraction)
    systems = st.with_features(systems.assign(extra_s=0.0), catalog)
    # before: every system in the fit (the spatially split 3D U-Net too), no run terms
    every = st.with_features(st.with_collective(systems.assign(extra_s=0.0), catalog), catalog)
    every = pd.concat([obs[obs.source != "mlperf"], every], ignore_index=True)
    variants = {
        "before": (without_run_terms(every, catalog), without_run_terms(systems, catalog)),
        "after": (obs, systems),
    }
    rows = []
    for i, r in enumerate(systems.to_dict("records")):
        samples = s2t(str(r["group"]).split("/")[-1], float(r["batch"]) * int(r["gpus"]))
        row = {
            "benchmark": str(r["group"]).split("/")[-1],
            "system": "/".join(str(r["group"]).split("/")[:2]),
            "gpu": r["gpu"],
            "gpus": int(r["gpus"]),
            "per_gpu": float(r["batch"]),
            "measured_min": float(samples * r["step_time_s"] / (r["batch"] * r["gpus"]) / 60.0),
            "in_fit": bool((obs.group == r["group"]).any()),
        }
        for name, (frame, rows_of) in variants.items():
            prior = math.inf if name == "before" else 1.0
            model = StepTimeModel(kernel_prior_sd=prior).fit(frame[frame.group != r["group"]])
            step = _mlperf_step(model, rows_of.iloc[[i]], totals[[i]])
            # one step of the global batch = one GPU's step of its share
            row[f"{name}_min"] = float(samples * step[0] / (r["batch"] * r["gpus"]) / 60.0)
        rows.append(row)
    table = pd.DataFrame(rows)
    measured = table.measured_min.to_numpy()
    for name in variants:
        table[f"{name}_pct"] = _ape(table[f"{name}_min"].to_numpy(), measured)
    print("\n3. MLPerf Training v4.0, leave one system out: time to train (before, as session 8:")
    print("   no evaluation in the timed run, a share of a sample priced as a whole one, the tuned")
    print("   stack's per-kernel cost free to reach its bound; after: all three modelled)")
    print(table.sort_values(["benchmark", "gpus"]).round(2).to_string(index=False))
    after = StepTimeModel().fit(obs)
    print(f"   fitted on all: {after.eval_latency_s_:.3f} s per evaluation")
    bucket = pd.cut(table.gpus, BUCKETS[0], labels=BUCKETS[1])
    summary = (
        table.assign(bucket=bucket)
        .groupby(["benchmark", "bucket"], observed=True)
        .agg(
            systems=("after_pct", "size"),
            before_abs_pct=("before_pct", lambda e: float(np.median(np.abs(e)))),
            before_signed_pct=("before_pct", "median"),
            after_abs_pct=("after_pct", lambda e: float(np.median(np.abs(e)))),
            after_signed_pct=("after_pct", "median"),
        )
    )
    print("\n   error by benchmark and GPU count (median |error| and median signed error, %):")
    print(summary.round(1).to_string())
    for bench, part in table.groupby("benchmark"):
        before, after = (float(np.median(np.abs(part[c]))) for c in ("before_pct", "after_pct"))
        print(f"   {bench}: median |error| before {before:.1f}%, after {after:.1f}% over "
              f"{len(part)} systems")  # fmt: skip
    for name in variants:
        e = table[f"{name}_pct"].to_numpy()
        slope = np.polyfit(np.log10(table.gpus.to_numpy(dtype=float)), e, 1)[0]
        print(f"   {name}: signed error vs log10(GPUs), least-squares slope {slope:+.1f} points "
              f"per decade")  # fmt: skip


def section_sources(loso: pd.DataFrame, obs: pd.DataFrame) -> None:
    """Leave one source out (:func:`gpucast.predict.steptime.source_held_out`): each source's
    rows predicted uncalibrated by the model and interval table fitted on the other sources,
    against the 80% band the product would state -- the regime's own, and widened to the
    new-code-base band the other sources give (what an uncalibrated prediction states)."""
    out = loso.assign(
        ape=100.0 * np.abs(np.exp(-loso["residual"]) - 1.0),
        err=100.0 * (np.exp(-loso["residual"]) - 1.0),
    )
    stacks = {s: set(obs.loc[obs.source != s, "stack"]) for s in set(obs.source)}
    pairs = zip(out["source"], out["stack"], strict=True)
    out["stack_fitted"] = [st in stacks[src] for src, st in pairs]
    print("6. Leave one source out: a source's rows predicted uncalibrated by the model fitted")
    print("   on the other sources; coverage of the 80% band of its uncalibrated regime")
    print("   (calibrated on the other sources' cross-validation), and widened (the band the")
    print("   product states: that one or the new-code-base band the other sources give)")
    table = (
        out.groupby(["source", "gpu", "stack_fitted"])
        .agg(rows=("ape", "size"), mape_pct=("ape", "mean"), median_error_pct=("err", "median"),
             coverage=("inside", "mean"), widened=("widened_inside", "mean"))
        .reset_index()
    )  # fmt: skip
    print(table.round(2).to_string(index=False))
    by = out.groupby(["source", "stack_fitted"]).agg(
        rows=("ape", "size"), mape_pct=("ape", "mean"), coverage=("inside", "mean"),
        widened=("widened_inside", "mean"),
        band_low=("widened_low", lambda x: math.exp(x.min())),
        band_high=("widened_high", lambda x: math.exp(x.max())),
    )  # fmt: skip
    per_workload = (
        out.groupby(["source", "workload_key"])
        .agg(rows=("ape", "size"), median_error_pct=("err", "median"),
             widened=("widened_inside", "mean"))
        .reset_index()
    )  # fmt: skip
    print("\n   per workload (what a left-out source's miss is made of):")
    print(per_workload.round(2).to_string(index=False))
    print("\n   per source (stack_fitted: another source was measured with its software stack):")
    print(by.round(2).to_string())
    same = out[out.stack_fitted]
    print(
        f"   sources whose stack another source has ({', '.join(sorted(set(same.source)))}): "
        f"MAPE {same.ape.mean():.1f}%, the regime's 80% band covered "
        f"{100 * same.inside.mean():.1f}%, widened {100 * same.widened_inside.mean():.1f}%"
    )
    per_source = out.groupby("source").widened_inside.mean()
    print(
        f"   all sources, widened: {100 * out.widened_inside.mean():.1f}% of rows, "
        f"{100 * per_source.mean():.1f}% averaged over sources "
        f"({', '.join(f'{k} {100 * v:.0f}%' for k, v in per_source.items())})"
    )


def _priced_rows(
    catalog: object, s2t: Callable[[str, float], float], **which: Any
) -> tuple[pd.DataFrame, np.ndarray] | None:
    """MLPerf system rows kept out of the fit (``which``: :func:`st.mlperf_system_rows`'
    selection), with their features and their all-reduce totals (None: no such rows)."""
    systems = st.mlperf_system_rows(DATA, s2t, catalog=catalog, **which)
    if not len(systems):
        return None
    systems = st.with_collective(systems, catalog)
    totals = systems.extra_s.to_numpy() / (1.0 - RDMA.overlap_fraction)
    return st.with_features(systems.assign(extra_s=0.0), catalog), totals


def section_held_out(obs: pd.DataFrame, catalog: object) -> None:
    """MLPerf benchmarks expressed but not in the fit (MLPERF_HELD_OUT): every system predicted
    by the model fitted on all sources, uncalibrated and with one factor from its benchmark's
    other systems (leave one system out)."""

    def s2t(benchmark: str, batch: float) -> float:
        return float(mlperf_samples_to_target(benchmark, round(batch)).samples_mean)

    read = _priced_rows(catalog, s2t, workloads=MLPERF_HELD_OUT)
    if read is None:
        return
    systems, totals = read
    predicted = _mlperf_step(StepTimeModel().fit(obs), systems, totals)
    measured = systems.step_time_s.to_numpy()
    table = pd.DataFrame(
        {
            "benchmark": [str(g).split("/")[-1] for g in systems.group],
            "system": ["/".join(str(g).split("/")[:2]) for g in systems.group],
            "gpu": systems.gpu,
            "gpus": systems.gpus.astype(int),
            "per_gpu_batch": systems.batch,
            "measured_step_ms": 1e3 * measured,
            "predicted_step_ms": 1e3 * predicted,
        }
    )
    table["uncalibrated_pct"] = _ape(predicted, measured)
    table["calibrated_pct"] = np.nan
    for _, part in table.groupby("benchmark"):
        idx = part.index.to_numpy()
        scale = held_out_scale(predicted[idx], measured[idx])
        table.loc[idx, "calibrated_pct"] = _ape(predicted[idx] * scale, measured[idx])
    print(
        "\n5. MLPerf benchmarks expressed but kept out of the fit (ssd: RetinaNet;\n"
        "   stable_diffusion: SD v2 UNet + frozen text encoder), per-GPU"
    )
    print("   step: uncalibrated, and with one factor from the benchmark's other systems")
    print(table.sort_values(["benchmark", "gpus"]).round(1).to_string(index=False))
    for bench, part in table.groupby("benchmark"):
        print(
            f"   {bench}: median |error| uncalibrated "
            f"{np.median(np.abs(part.uncalibrated_pct)):.1f}%, calibrated "
            f"{np.median(np.abs(part.calibrated_pct)):.1f}% over {len(part)} systems"
        )
    other_stacks(obs, catalog, s2t)


def other_stacks(obs: pd.DataFrame, catalog: object, s2t: Callable[[str, float], float]) -> None:
    """MLPerf systems of a stack no fit describes (tinygrad on consumer cards), kept out of
    every fit: predicted as ``predict train`` prices a user's code on a GPU the step-time data
    never ran -- the pricing stack, no workload factor -- against the band it states."""
    from gpucast.catalog.steptime import shipped_step_time_model
    from gpucast.inputs.calibration import step_time_efficiency
    from gpucast.predict.roofline import regime_band, uncalibrated_regime

    read = _priced_rows(catalog, s2t, other_stacks=True)
    if read is None:
        return
    systems, totals = read
    model = shipped_step_time_model() or StepTimeModel().fit(obs)
    predicted = _mlperf_step(model, systems, totals, factors=False)
    measured = systems.step_time_s.to_numpy()
    bands = []
    for gpu, stack in zip(systems.gpu, systems["stack"], strict=True):
        eff = step_time_efficiency(str(stack)).value
        regime = uncalibrated_regime(str(gpu) in eff.gpu_factors, workload_seen=True)
        bands.append(regime_band(eff, regime, None))
    ratio = measured / predicted
    table = pd.DataFrame(
        {
            "system": ["/".join(str(g).split("/")[:2]) for g in systems.group],
            "benchmark": [str(g).split("/")[-1] for g in systems.group],
            "gpu": systems.gpu,
            "gpus": systems.gpus.astype(int),
            "priced_as": systems["stack"],
            "measured_step_ms": 1e3 * measured,
            "predicted_step_ms": 1e3 * predicted,
            "error_pct": _ape(predicted, measured),
            "band": [f"x{lo:.2f}-{hi:.2f}" for lo, hi in bands],
            "inside": [lo <= x <= hi for (lo, hi), x in zip(bands, ratio, strict=True)],
        }
    )
    print(
        "\n   another stack on consumer cards (tinygrad; kept out of every fit), priced as the\n"
        "   stack named, no workload factor, against the band predict train states:"
    )
    print(table.round(1).to_string(index=False))
    print(
        f"   median |error| {np.median(np.abs(table.error_pct)):.1f}% over {len(table)} "
        f"systems; inside the stated band: {int(table.inside.sum())} of {len(table)}"
    )


def _fp8_held_out(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with each system the fp8 efficiency was fitted on predicted with it refitted
    on the others (leave one system out); the rest stay as the shipped fit prices them."""
    from gpucast.inputs.mlperf_llm import FP8_FIT_BENCHMARKS, fit_fp8_ratio, llm_system_predictions

    out = table.copy()
    fitted = table[table.benchmark.isin(FP8_FIT_BENCHMARKS) & (table.software == "tuned")]
    for i, system in fitted.system.items():
        refit = fit_fp8_ratio(DATA, exclude=(system,))
        ratio = refit.ratio if refit is not None else 1.0
        rows = llm_system_predictions(DATA, fp8_ratio=ratio, benchmarks=FP8_FIT_BENCHMARKS)
        row = rows[rows.system == system].iloc[0]
        out.loc[i, ["predicted_min", "residual"]] = [row.predicted_min, row.residual]
        print(f"   fp8 refitted without {system}: {ratio:.3f}x the 16-bit efficiency")
    return out


def _host_held_out(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with each system the host's time per layer was fitted on predicted with it
    refitted on the others (leave one system out; the fitted runs' tables are shared)."""
    from gpucast.inputs.mlperf_llm import HOST_FIT_BENCHMARKS, HostGridMemo, fit_host_layer_s

    out = table.copy()
    fitted = table[table.benchmark.isin(HOST_FIT_BENCHMARKS) & (table.software == "tuned")]
    memo = HostGridMemo()
    chosen = []
    for i, system in fitted.system.items():
        refit = fit_host_layer_s(DATA, exclude=(system,), memo=memo)
        seconds = refit.seconds if refit is not None else 0.0
        warmup = refit.warmup_s if refit is not None else 0.0
        rows = memo.tables[round(seconds, 6)]  # priced without the warm-up: add the refit's
        row = rows[rows.system == system].iloc[0]
        predicted = row.predicted_min + warmup / 60.0
        out.loc[i, ["predicted_min", "residual"]] = [
            predicted,
            float(np.log(row.measured_min / predicted)),
        ]
        chosen.append((1e3 * seconds, warmup))
    if chosen:
        ms, warm = [c[0] for c in chosen], [c[1] for c in chosen]
        print(
            f"   host refitted without each of {len(chosen)} systems: "
            f"{min(ms):.2f}-{max(ms):.2f} ms per layer and micro-batch, warm-up "
            f"{min(warm):.1f}-{max(warm):.1f} s"
        )
    return out


def section_llm(print_intervals: bool = False) -> None:
    from gpucast.catalog.steptime import shipped_step_time_model
    from gpucast.inputs.mlperf_llm import llm_system_predictions, submitter_held_out_predictions

    # gpucast.inputs.mlperf_llm.LLM_BENCHMARKS: GPT-3 175B at 2,048 tokens; Llama-2-70B LoRA
    # on GovReport at 8,192 tokens, rank 16 (the MLPerf Training v4.0 rules). The fp8
    # efficiency is fitted on GPT-3, the host's time per layer on LoRA (gpucast fit
    # steptime): each system is scored with them refitted without it
    shipped = shipped_step_time_model()
    print(f"\n   fp8 efficiency: {shipped.fp8_source_ if shipped else ''}")
    print(f"   host pacing: {1e3 * shipped.host_layer_s_ if shipped else 0:.2f} ms per layer, ")
    print(f"      {shipped.host_source_ if shipped else ''}")
    table = _host_held_out(_fp8_held_out(llm_system_predictions(DATA)))
    table["uncalibrated_pct"] = _ape(table.predicted_min.to_numpy(), table.measured_min.to_numpy())
    # calibrated: one factor per benchmark, the median measured/predicted of its OTHER systems
    ratio = table.measured_min / table.predicted_min
    factor = [
        float(np.median(ratio[(table.benchmark == b) & (table.index != i)]))
        for i, b in zip(table.index, table.benchmark, strict=True)
    ]
    table["calibrated_pct"] = _ape(
        table.predicted_min.to_numpy() * np.asarray(factor), table.measured_min.to_numpy()
    )
    print("\n4. MLPerf LLM benchmarks through the 3D-parallel model (best layout found among")
    print("   those predict llm-train searches; tuned stack; the fp8 efficiency is fitted on")
    print("   GPT-3's rows and the host's time per layer on LoRA's, each scored leave one")
    print("   system out), plus")
    print("   the evaluations the rules hold in the timed run (eval_pct: their time as % of")
    print("   training): uncalibrated, and calibrated by one factor per benchmark from its")
    print("   other systems (leave one system out)")
    print(table.sort_values(["benchmark", "gpus"]).round(2).to_string(index=False))
    bucket = pd.cut(table.gpus, [0, 8, 64, 512, 20000], labels=["4-8", "9-64", "65-512", "513+"])
    summary = (
        table.assign(bucket=bucket)
        .groupby(["benchmark", "bucket"], observed=True)
        .agg(
            systems=("calibrated_pct", "size"),
            uncalibrated_signed_pct=("uncalibrated_pct", "median"),
            calibrated_signed_pct=("calibrated_pct", "median"),
        )
    )
    print("\n   median signed error by benchmark and GPU count (%):")
    print(summary.round(1).to_string())
    for bench, part in table.groupby("benchmark"):
        unc, cal = np.abs(part.uncalibrated_pct), np.abs(part.calibrated_pct)
        print(
            f"   {bench}: median |error| uncalibrated {np.median(unc):.1f}%, calibrated "
            f"{np.median(cal):.1f}% (mean {unc.mean():.1f}% / {cal.mean():.1f}%) over "
            f"{len(part)} systems"
        )
    # without the fitted host pacing and warm-up (--host-ms-per-layer 0: as with CUDA graphs)
    ahead = llm_system_predictions(
        DATA, host_layer_s=0.0, warmup_s=0.0, benchmarks=("llama2_70b_lora",)
    )
    ahead = ahead[ahead.software == "tuned"]
    signed = 100.0 * (ahead.predicted_min / ahead.measured_min - 1.0)
    bucket = pd.cut(ahead.gpus, [0, 8, 64, 512, 20000], labels=["4-8", "9-64", "65-512", "513+"])
    print(
        "\n   llama2_70b_lora (tuned stack) without host pacing or warm-up (--host-ms-per-layer 0):"
    )
    print(signed.groupby(bucket, observed=True).median().round(1).to_string())
    print(f"   median |error| {np.median(np.abs(signed)):.1f}% over {len(ahead)} systems")
    # the bands: each submitter as a model fitted without it would price it
    llm_intervals(submitter_held_out_predictions(DATA), print_intervals)
    cross_vendor()


def cross_vendor() -> None:
    """Systems of other vendors than the fits' (Intel Gaudi 2), priced from their datasheet
    with the NVIDIA-fitted priors, against the band a GPU type without step-time data states."""
    from gpucast.inputs.calibration import step_time_efficiency
    from gpucast.inputs.mlperf_llm import (
        CALIBRATION_VENDORS,
        gpu_band,
        llm_system_predictions,
        stated_band,
    )

    rows = llm_system_predictions(DATA, vendors=None)
    rows = rows[~rows.vendor.isin(CALIBRATION_VENDORS)].copy()
    if rows.empty:
        print("\n   other vendors: none in the data's catalog GPUs")
        return
    bands = [
        gpu_band(stated_band(sw), gpu, step_time_efficiency(sw).value)[:2]
        for sw, gpu in zip(rows.software, rows.gpu, strict=True)
    ]
    ratio = np.exp(rows.residual.to_numpy())
    rows["error_pct"] = _ape(rows.predicted_min.to_numpy(), rows.measured_min.to_numpy())
    rows["band"] = [f"x{lo:.2f}-{hi:.2f}" for lo, hi in bands]
    rows["inside"] = [lo <= x <= hi for (lo, hi), x in zip(bands, ratio, strict=True)]
    print(
        f"\n   other vendors (kept out of every fit and band: priced from the datasheet with the "
        f"{'/'.join(CALIBRATION_VENDORS)}-fitted priors; band = what predict llm-train states)"
    )
    shown = ["benchmark", "system", "gpu", "gpus", "layout", "measured_min", "predicted_min",
             "error_pct", "band", "inside"]  # fmt: skip
    print(rows[shown].round(2).to_string(index=False))
    print(
        f"   median |error| {np.median(np.abs(rows.error_pct)):.1f}% over {len(rows)} systems; "
        f"inside the stated band: {int(rows.inside.sum())} of {len(rows)}"
    )


def _inside(residuals: np.ndarray, groups: np.ndarray, *, with_point: bool = False) -> np.ndarray:
    """Per row, whether its residual lies in the band the other groups give its group (NaN:
    no band); ``with_point``: the interval as stated, stretched to hold the point (0)."""
    from gpucast.predict.intervals import held_out_bands

    bands = held_out_bands(residuals, groups)
    out = []
    for g, x in zip(groups, residuals, strict=True):
        if g not in bands:
            out.append(np.nan)
            continue
        lo, hi = bands[g]
        if with_point:
            lo, hi = min(lo, 0.0), max(hi, 0.0)
        out.append(float(lo <= x <= hi))
    return np.asarray(out, dtype=float)


def llm_intervals(table: pd.DataFrame, print_rows: bool) -> None:
    """The 80% bands predict/plan llm-train state, and how they cover what they did not see."""
    import csv
    import io

    from gpucast.catalog._intervals import INTERVAL_COLUMNS
    from gpucast.inputs.mlperf_llm import ANY_STACK, CITATION, TUNED, interval_table

    band = interval_table(table)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(INTERVAL_COLUMNS)
    for regime, rows in ((TUNED, table[table.software == "tuned"]), (ANY_STACK, table)):
        low, high = band.ratios(regime)
        r = rows.residual.to_numpy()
        print(
            f"\n   80% band {regime} ({len(rows)} systems): x{low:.2f}-{high:.2f} (level "
            f"{band.level[regime]:.3f}, MAPE {band.mape_pct[regime]:.1f}%)"
        )
        # nested: each submitter scored against the band the other submitters give it
        inside = _inside(r, rows.submitter.to_numpy())
        print(
            f"   coverage, each submitter against the others' band: {np.nanmean(inside):.0%} "
            f"of {int(np.isfinite(inside).sum())} systems (target 75-85%)"
        )
        # what a prediction states: the band with the point in it (lower = min(point, band))
        stated_inside = _inside(r, rows.submitter.to_numpy(), with_point=True)
        print(
            f"   ... against the interval a prediction states (the point included): "
            f"{np.nanmean(stated_inside):.0%}"
        )
        # a looser unit: one submitter's runs of one benchmark (its stack on one workload)
        pair_inside = _inside(r, (rows.submitter + "/" + rows.benchmark).to_numpy())
        print(
            f"   coverage, each submitter's runs of one benchmark against the rest's band: "
            f"{np.nanmean(pair_inside):.0%} of {int(np.isfinite(pair_inside).sum())} systems"
        )
        scored = rows.assign(
            inside_nested=inside, inside_stated=(r >= np.log(low)) & (r <= np.log(high))
        )
        for column in ("gpu", "benchmark"):
            part = scored.groupby(column).agg(
                systems=("residual", "size"),
                nested=("inside_nested", "mean"),
                stated=("inside_stated", "mean"),
            )
            print(f"   coverage by {column} (nested / of the stated band):")
            print(part.round(2).to_string())
        gpus = "/".join(sorted(set(rows.gpu)))
        writer.writerow([
            regime, f"{low:.6g}", f"{high:.6g}", f"{band.level[regime]:.3f}", band.n[regime],
            f"{band.mape_pct[regime]:.2f}", ", ".join(sorted(set(rows.submitter))),
            f"{CITATION} ({len(rows)} systems, {rows.gpus.min()}-{rows.gpus.max():,} "
            f"{gpus}) via benchmarks/steptime_accuracy.py --section llm --intervals",
            datetime.date.today().isoformat(),
        ])  # fmt: skip
    if print_rows:
        print("\nllm_train_intervals.csv:")
        print(out.getvalue(), end="")


SECTIONS = ("cv", "pollux", "mlperf", "llm", "held_out", "sources")


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--section",
        action="append",
        choices=SECTIONS,
        help="run only these sections (repeatable; default: all)",
    )
    parser.add_argument(
        "--intervals",
        action="store_true",
        help="print llm_train_intervals.csv (the LLM band, section llm)",
    )
    args = parser.parse_args(argv)
    wanted = set(args.section or SECTIONS)
    if not (DATA / "README.md").is_file():
        print(f"published data not found at {DATA.resolve()}; nothing to compare")
        return 0
    catalog = load_catalog()
    obs = st.step_time_observations(DATA, catalog)
    print(f"{len(obs)} step times: {obs.source.value_counts().to_dict()}")
    print(f"   MLPerf benchmarks expressed: {', '.join(sorted(MLPERF_WORKLOADS))}\n")
    loso = source_held_out(obs) if wanted & {"cv", "sources"} else None
    if "cv" in wanted:
        section_cv(obs, loso)
    if "pollux" in wanted:
        section_pollux(obs, catalog)
    if "mlperf" in wanted:
        section_mlperf(obs, catalog)
    if "llm" in wanted:
        section_llm(args.intervals)
    if "held_out" in wanted:
        section_held_out(obs, catalog)
    if "sources" in wanted:
        section_sources(loso, obs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
