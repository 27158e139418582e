"""Rows of one GPU type (:func:`_evaluate_single`; the formulas are
:mod:`gpucast.plan.evaluate`'s docstring). Split from :mod:`gpucast.plan.evaluate`.
"""

from __future__ import annotations

import numpy as np

from gpucast.plan._evaluate_offload import (
    _PARAM_BUFFER_TENSORS,
    _offload_gpu_state,
    _offload_memory,
    _offload_step,
)
from gpucast.plan._evaluate_terms import _average_power, _power, _single_prices, ps_demands
from gpucast.plan._evaluate_types import _B, BoolArray, EvalMemo, Evaluation, FloatArray, Work
from gpucast.plan.hetero import SPLIT_EQUAL, col_argmax, col_sum
from gpucast.plan.inputs import CHECKPOINTING_SLOWDOWN, GpuTable, PerfParams, WorkloadFacts
from gpucast.plan.space import DDP, FSDP, PS, Space
from gpucast.predict import comm


def _evaluate_single(
    space: Space,
    *,
    facts: WorkloadFacts,
    gpus: GpuTable,
    params: PerfParams,
    work: Work,
    startup_s: float,
    memo: EvalMemo | None = None,
) -> Evaluation:
    """Rows of one GPU type (see the module docstring)."""
    off = space.offers
    o = space.offer
    gpn = off.gpus_per_node[o]
    n = space.nodes * gpn
    nf = n.astype(np.float64)
    g = off.gpu[o]
    sync = space.strategy != PS
    if space.global_batch is not None:
        per_worker = np.where(space.batch > 0, space.batch, space.global_batch // n)
    else:
        per_worker = space.batch.copy()
    valid_batch = per_worker >= 1
    b = np.maximum(per_worker, 1).astype(np.float64)

    # -- memory ----------------------------------------------------------------------------
    state = np.where(
        space.strategy == DDP,
        facts.weights_bytes + facts.gradient_bytes + facts.optimizer_bytes,
        np.where(
            space.strategy == FSDP,
            (facts.weights_bytes + facts.gradient_bytes + facts.optimizer_bytes) / nf
            + 2.0 * facts.max_tensor_bytes,
            facts.weights_bytes + facts.gradient_bytes,
        ),
    )
    acts = gpus.activation_bytes_per_sample[g] * b
    usable = gpus.usable_bytes[g]
    plain_fits = state + acts <= usable
    ckpt_fits = state + acts * facts.checkpoint_fraction <= usable
    checkpointing = ~plain_fits & ckpt_fits
    fits = plain_fits | ckpt_fits
    mem_bytes = np.where(checkpointing, state + acts * facts.checkpoint_fraction, state + acts)

    offload, params_off, nvme_off, host_need, host_short = _offload_memory(
        space, facts, gpus, g, acts, nf, fits, params.offload
    )
    if offload.any():
        gpu_state = np.where(
            params_off,
            _PARAM_BUFFER_TENSORS * facts.max_tensor_bytes,
            _offload_gpu_state(space, facts, nf),
        )
        off_plain = gpu_state + acts <= usable
        checkpointing = np.where(offload, ~off_plain, checkpointing)
        mem_bytes = np.where(
            offload,
            gpu_state + np.where(off_plain, acts, acts * facts.checkpoint_fraction),
            mem_bytes,
        )
        fits = fits | offload

    # -- compute ---------------------------------------------------------------------------
    terms = gpus.step_terms(g, b)
    slow = np.where(checkpointing, CHECKPOINTING_SLOWDOWN, 1.0)
    spread = params.gpu_slowdown(nf, sync, gpn)
    compute = col_sum(terms) * slow * spread
    power_slow, busy_power, power_limit, idle_power = _power(params, terms, g, gpus, b, memo)
    compute = compute * power_slow
    roof_bottleneck = col_argmax(terms)
    offload_s = np.zeros(len(space))
    if offload.any():
        compute, offload_s, nvme_bound = _offload_step(
            compute, offload, params_off, nvme_off, space, facts, gpus, g, nf, params
        )
        host_side = np.where(nvme_bound, _B["nvme_offload"], _B["cpu_offload"])
        roof_bottleneck = np.where(offload_s > 0, host_side, roof_bottleneck)

    # -- synchronous collectives -----------------------------------------------------------
    rdma = np.isin(np.asarray(off.instance_type), list(params.rdma_instances))[o]
    coll, exposed_sync = params.sync_collective(
        facts.gradient_bytes,
        nf,
        gpn,
        off.intra_link_gbps(o, gpus.intra_node_gbps[g]),
        off.network_gbps[o],
        compute,
        rdma=rdma,
        nvlink=off.nvlink_rows(o, gpus.nvlink[g]),
        passes=np.where(space.strategy == FSDP, 3.0, 2.0),
    )
    step_sync = compute + exposed_sync

    # -- asynchronous parameter server -----------------------------------------------------
    has_cpu = ~np.isnan(off.cpu_usd_per_hour[o])
    shards = np.maximum(space.shards, 1).astype(np.float64)
    ps_gbps = np.where(has_cpu, off.cpu_network_gbps[o], 1.0)
    push, pull = ps_demands(facts, ps_gbps, shards, params)
    # a worker's own node NIC carries every shard's bytes: a delay where it is the slower end
    worker_s = facts.gradient_bytes * 8.0 / (off.network_gbps[o] * params.ps_network_efficiency)
    worker_s = worker_s / 1e9
    lo_ratio, hi_ratio = gpus.interval_ratios(g, b)
    x_ps = np.zeros(len(space))
    x_fast = np.zeros(len(space))  # at the fast end of the step model's interval
    x_slow = np.zeros(len(space))  # ... and at its slow end
    util = np.zeros(len(space))
    nic_bound = np.zeros(len(space), dtype=bool)
    is_ps = ~sync
    if is_ps.any():
        sel = np.flatnonzero(is_ps)
        # rows share an MVA solution when GPU, batch, checkpointing, shards, PS NIC and node
        # NIC agree: solve each distinct one once, for every population up to the largest
        # (a code per distinct PS NIC and per node NIC, combined: far faster than unique rows)
        _, ps_code = np.unique(ps_gbps[sel], return_inverse=True)
        _, node_code = np.unique(off.network_gbps[o[sel]], return_inverse=True)
        pair = ps_code.reshape(-1).astype(np.int64) * (int(node_code.max()) + 1) + node_code
        _, net_idx = np.unique(pair.reshape(-1), return_inverse=True)
        net_idx = net_idx.reshape(-1)
        n_gpus = len(gpus.names)
        key = (
            ((b[sel].astype(np.int64) * n_gpus + g[sel]) * 2 + checkpointing[sel])
            * (int(shards[sel].max()) + 1)
            + shards[sel].astype(np.int64)
        ) * (int(net_idx.max()) + 1) + net_idx
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        u = sel[first]
        delay = comm.worker_nic_delay_s(pull[u], worker_s[u])
        nic_rate = (
            space.nodes[sel]
            * off.network_gbps[o[sel]]
            * params.ps_network_efficiency
            * 1e9
            / (8.0 * facts.gradient_bytes)
        )

        def rate(compute_ratio: FloatArray, ps_ratio: float) -> tuple[FloatArray, BoolArray]:
            """Updates/s of the PS rows with the compute x ``compute_ratio`` and every PS
            and NIC time x ``ps_ratio``; and where the node NICs bound them."""
            think = compute[u] * compute_ratio[u] + delay * ps_ratio
            solve = comm.ps_async_table if memo is None else memo.ps.table
            table = solve(think, push[u] * ps_ratio, pull[u] * ps_ratio, int(n[sel].max()))
            x_mva = table[inverse.reshape(-1), n[sel] - 1]
            return np.minimum(x_mva, nic_rate / ps_ratio), nic_rate / ps_ratio < x_mva

        x_ps[sel], nic_bound[sel] = rate(np.ones(len(space)), 1.0)
        util[sel] = x_ps[sel] * push[sel]
        # the interval: the same network solved with the compute at the ends of the step
        # model's interval and the PS at the ends of its residual band, both at once (as a
        # DDP row's compute and exposed all-reduce): a PS-bound row gains little from faster
        # GPUs and loses much to slower ones, whose compute the PS no longer hides
        x_fast[sel], _ = rate(lo_ratio, float(np.exp(-params.ps_log_residual_q90)))
        x_slow[sel], _ = rate(hi_ratio, float(np.exp(-params.ps_log_residual_q10)))
    step_async = np.where(x_ps > 0, nf / np.where(x_ps > 0, x_ps, 1.0), np.inf)

    # -- throughput, work, time, cost ------------------------------------------------------
    samples_per_s = np.where(sync, nf * b / step_sync, x_ps * b)
    global_batch = np.where(sync, nf * b, b)
    samples = work.samples_needed(global_batch)
    steps = np.ceil(samples / global_batch).astype(np.int64)
    eval_s = work.evaluation_s(samples, np.maximum(nf * b, 1.0), compute)
    train_s = samples / samples_per_s + eval_s
    time_s = startup_s + train_s
    unc = params.collective_uncertainty
    lo_sync = (compute * lo_ratio + exposed_sync * (1.0 - unc)) / step_sync
    hi_sync = (compute * hi_ratio + exposed_sync * (1.0 + unc)) / step_sync
    ps_bound = util >= params.ps_bottleneck_utilization
    lo_async = np.where(x_fast > 0, x_ps / np.where(x_fast > 0, x_fast, 1.0), lo_ratio)
    hi_async = np.where(x_slow > 0, x_ps / np.where(x_slow > 0, x_slow, 1.0), hi_ratio)
    ratio_lower = np.where(sync, lo_sync, lo_async)
    ratio_upper = np.where(sync, hi_sync, hi_async)
    ratio_lower, ratio_upper = work.widen(ratio_lower, ratio_upper, global_batch)
    time_lower = startup_s + train_s * ratio_lower
    time_upper = startup_s + train_s * ratio_upper

    has_market, usd_per_hour, probe, cost = _single_prices(
        space, params, time_s, has_cpu, startup_s
    )

    comm_term = np.where(space.strategy == FSDP, _B["fsdp_comm"], _B["allreduce"])
    sync_bn = np.where(exposed_sync > compute, comm_term, roof_bottleneck)
    ps_term = np.where(pull >= push - pull, _B["ps_network"], _B["ps_cpu"])
    async_bn = np.where(
        nic_bound, _B["worker_network"], np.where(ps_bound, ps_term, roof_bottleneck)
    )
    bottleneck = np.where(sync, sync_bn, async_bn).astype(np.int64)

    exposed_async = np.maximum(np.where(x_ps > 0, step_async - compute, 0.0), 0.0)
    return Evaluation(
        workers=n,
        batch=per_worker,
        global_batch=global_batch.astype(np.int64),
        valid_batch=valid_batch,
        mem_bytes=mem_bytes,
        fits=fits,
        checkpointing=checkpointing,
        offload=offload,
        params_offload=params_off,
        nvme_offload=nvme_off,
        host_bytes=host_need,
        host_short=host_short,
        compute_s=compute,
        offload_s=offload_s,
        comm_s=np.where(sync, coll, exposed_async),
        exposed_s=np.where(sync, exposed_sync, exposed_async),
        step_s=np.where(sync, step_sync, step_async),
        samples_per_s=samples_per_s,
        samples_needed=samples,
        steps=steps,
        train_s=train_s,
        eval_s=eval_s,
        time_s=time_s,
        time_lower_s=time_lower,
        time_upper_s=time_upper,
        usd_per_hour=usd_per_hour,
        cost_usd=cost,
        probe_usd=probe,
        bottleneck=bottleneck,
        ps_utilization=util,
        has_cpu=has_cpu,
        has_market=has_market,
        train_ratio_lower=ratio_lower,
        train_ratio_upper=ratio_upper,
        part_batch=np.stack([per_worker, np.zeros_like(per_worker)], axis=1),
        part_extra=np.zeros((len(space), 2), dtype=np.int64),
        part_compute_s=np.stack([compute, np.zeros_like(compute)], axis=1),
        batch_split=np.full(len(space), SPLIT_EQUAL, dtype=np.int64),
        equal_compute_s=compute,
        gpu_power_w=_average_power(
            busy_power,
            idle_power,
            compute * params.gpu_busy_share(spread, sync),
            np.where(sync, step_sync, step_async),
        ),
        power_limit_w=power_limit,
    )
