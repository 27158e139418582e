"""Rows of two GPU types (:func:`evaluate_mixed`, the formulas of
:mod:`gpucast.plan.hetero`) and how a synchronous one splits its global batch
(:func:`_sync_split`). Split from :mod:`gpucast.plan.evaluate`.
"""

from __future__ import annotations

import numpy as np

from gpucast.plan._evaluate_terms import _average_power, _power, _probe_usd, ps_demands
from gpucast.plan._evaluate_types import _B, BoolArray, Evaluation, FloatArray, IntArray, Work
from gpucast.plan.hetero import (
    SPLIT_EQUAL,
    SPLIT_PROPORTIONAL,
    capped_batches,
    col_argmax,
    col_max,
    col_min,
    col_sum,
    equal_batches,
    equivalent_think_time_s,
    proportional_batches,
    update_shares,
)
from gpucast.plan.inputs import CHECKPOINTING_SLOWDOWN, GpuTable, PerfParams, WorkloadFacts
from gpucast.plan.space import DDP, PS, PS_SYNC, Space
from gpucast.predict import comm


def _sync_split(
    a: FloatArray,
    c: FloatArray,
    counts: IntArray,
    g_sync: IntArray,
    state: FloatArray,
    act_per_sample: FloatArray,
    usable: FloatArray,
    checkpoint_fraction: float,
) -> tuple[IntArray, IntArray, IntArray, FloatArray]:
    """The per-worker batches of a synchronous mixed row: the fastest step of three splits of
    its global batch -- in proportion to speed, the same with a part over its memory held at
    the largest batch that fits (the rest to the other part), and equal batches (which the
    slowest GPU paces). Each is priced by its slowest part's compute ``a + c b`` (x the
    activation-checkpointing slowdown where only that fits; ``inf`` where nothing fits).
    Returns ``(base, extra, split, equal_ratio)``: ``equal_ratio`` = the equal split's step
    compute over the chosen one's."""
    base_p, extra_p = proportional_batches(a, c, counts, g_sync)
    with np.errstate(divide="ignore", invalid="ignore"):
        room = (usable - state) / np.maximum(act_per_sample, 1e-300)
    cap = np.floor(np.clip(room, 0.0, 2.0**40)).astype(np.int64)
    base_c, extra_c, capped = capped_batches(base_p, extra_p, counts, g_sync, cap)
    base_e, extra_e = equal_batches(c, counts, g_sync)

    def step(base: IntArray, extra: IntArray) -> FloatArray:
        top = base + (extra > 0)
        acts = act_per_sample * top
        plain = state + acts <= usable
        ckpt = state + acts * checkpoint_fraction <= usable
        t = (a + c * top) * np.where(plain, 1.0, CHECKPOINTING_SLOWDOWN)
        t = np.where(counts > 0, np.where(plain | ckpt, t, np.inf), 0.0)
        return col_max(t)

    # in proportion to each part's speed with its recomputation where its share needs it (QA 39
    # Y #11: a V100 part at 357 ran 1.33x slower with checkpointing than the split assumed,
    # its K80 part idle 25.6% of the step)
    top_p = base_p + (extra_p > 0)
    slow = np.where(state + act_per_sample * top_p <= usable, 1.0, CHECKPOINTING_SLOWDOWN)
    base_r, extra_r = proportional_batches(a * slow, c * slow, counts, g_sync)

    t_e = step(base_e, extra_e)
    times = np.stack(
        [
            step(base_p, extra_p),
            np.where(capped, step(base_c, extra_c), np.inf),
            t_e,
            step(base_r, extra_r),
        ]
    )
    best = np.argmin(times, axis=0)  # ties: proportional first, the recomputation-aware last
    pick = best[:, None]
    base = np.choose(pick, [base_p, base_c, base_e, base_r])
    extra = np.choose(pick, [extra_p, extra_c, extra_e, extra_r])
    # both proportional splits read "proportional to speed"
    split = np.where(best == 3, SPLIT_PROPORTIONAL, best).astype(np.int64)
    chosen = times[best, np.arange(best.size)]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(np.isfinite(chosen) & (chosen > 0), t_e / chosen, 1.0)
    return base, extra, split, ratio


def evaluate_mixed(
    space: Space,
    *,
    facts: WorkloadFacts,
    gpus: GpuTable,
    params: PerfParams,
    work: Work,
    startup_s: float,
) -> Evaluation:
    """Rows with two GPU types (``offer`` x ``nodes`` and ``offer2`` x ``nodes2``).

    * DDP and ``ps-sync``: the global batch (``workers x batch``, or ``--global-batch``) is
      split in proportion to speed (:func:`~gpucast.plan.hetero.proportional_batches`); the
      step's compute is the slowest worker's at its batch. DDP's ring crosses both instance
      types: its slowest link is the smallest of their NICs and intra-node links.
      ``ps-sync`` then waits for all ``n`` pushes and then all ``n`` pulls: each phase's
      transfer for the busiest shard's NIC (``n`` shares) or the slowest node NIC (its
      workers' bytes), whichever is longer, plus the busiest shard's apply of ``n`` shares.
    * ``ps`` (asynchronous): every worker trains on ``batch``; exact MVA with the equivalent
      think time, each part's node NICs bounding the updates it sends.
    """
    off = space.offers
    rows = len(space)
    oa, ob = space.offer, space.part2
    gpn = np.stack([off.gpus_per_node[oa], off.gpus_per_node[ob]], axis=1)
    nodes = np.stack([space.nodes, space.count2], axis=1)
    counts = nodes * gpn
    n = col_sum(counts)
    nf = n.astype(np.float64)
    g = np.stack([off.gpu[oa], off.gpu[ob]], axis=1)
    strat = space.strategy
    sync = strat != PS
    fixed = gpus.fixed_s[g]  # (rows, 2, terms)
    per = gpus.per_sample_s[g]
    a = col_sum(fixed)
    c = col_sum(per)

    # -- batches -----------------------------------------------------------------------------
    if space.global_batch is not None:
        mean_b = np.where(space.batch > 0, space.batch, space.global_batch // n)
        g_sync = np.where(space.batch > 0, space.batch * n, space.global_batch)
    else:
        mean_b = space.batch.copy()
        g_sync = space.batch * n
    state = np.where(
        strat == DDP,
        facts.weights_bytes + facts.gradient_bytes + facts.optimizer_bytes,
        facts.weights_bytes + facts.gradient_bytes,
    )[:, None]
    act_per_sample = gpus.activation_bytes_per_sample[g]
    usable = gpus.usable_bytes[g]
    base_sync, extra_sync, split, split_ratio = _sync_split(
        a, c, counts, g_sync, state, act_per_sample, usable, facts.checkpoint_fraction
    )
    base = np.where(sync[:, None], base_sync, np.maximum(mean_b, 1)[:, None])
    extra = np.where(sync[:, None], extra_sync, 0)
    valid_batch = np.where(sync, g_sync >= n, mean_b >= 1)
    top = (base + (extra > 0)).astype(np.float64)  # the largest batch in each part

    # -- memory per part ---------------------------------------------------------------------
    acts = act_per_sample * top
    plain = state + acts <= usable
    ckpt_fits = state + acts * facts.checkpoint_fraction <= usable
    ckpt = ~plain & ckpt_fits
    fits = col_min(plain | ckpt_fits)
    mem_bytes = col_max(np.where(ckpt, state + acts * facts.checkpoint_fraction, state + acts))

    # -- compute per part --------------------------------------------------------------------
    terms = (fixed + per * top[:, :, None]) * gpus.term_scales(g, top)
    part_compute = col_sum(terms) * np.where(ckpt, CHECKPOINTING_SLOWDOWN, 1.0)
    # dropping the slowest (exclude_slowest) by the coarser part's nodes
    spread = params.gpu_slowdown(nf, sync, col_max(gpn))
    part_compute = part_compute * spread[:, None]
    power_parts = [_power(params, terms[:, k], g[:, k], gpus, top[:, k]) for k in range(2)]
    part_compute = part_compute * np.stack([p[0] for p in power_parts], axis=1)
    part_watts = np.stack([p[1] for p in power_parts], axis=1)
    part_idle = np.stack([p[3] for p in power_parts], axis=1)
    power_limit = np.where(power_parts[0][2] == power_parts[1][2], power_parts[0][2], np.nan)
    slowest = col_argmax(part_compute)
    r = np.arange(rows)
    compute = part_compute[r, slowest]
    roof_bottleneck = col_argmax(terms[r, slowest])

    # -- DDP ring over both instance types ---------------------------------------------------
    types = np.asarray(off.instance_type)
    rdma = np.isin(types[oa], list(params.rdma_instances)) & np.isin(
        types[ob], list(params.rdma_instances)
    )
    coll, exposed_ddp = params.sync_collective(
        facts.gradient_bytes,
        nf,
        np.minimum(off.gpus_per_node[oa], off.gpus_per_node[ob]),
        np.minimum(gpus.intra_node_gbps[g[:, 0]], gpus.intra_node_gbps[g[:, 1]]),
        np.minimum(off.network_gbps[oa], off.network_gbps[ob]),
        compute,
        rdma=rdma,
        nvlink=gpus.nvlink[g[:, 0]] & gpus.nvlink[g[:, 1]],
    )

    # -- parameter server (both modes) -------------------------------------------------------
    has_cpu = ~np.isnan(off.cpu_usd_per_hour[oa])
    shards = np.maximum(space.shards, 1).astype(np.float64)
    ps_gbps = np.where(has_cpu, off.cpu_network_gbps[oa], 1.0)
    push, pull = ps_demands(facts, ps_gbps, shards, params)
    demand = push + pull  # the busiest shard's stations: a worker's wait on an idle PS
    nic = np.stack([off.network_gbps[oa], off.network_gbps[ob]], axis=1)
    per_node_update_s = facts.gradient_bytes * 8.0 / (nic * params.ps_network_efficiency * 1e9)
    nic_delay = comm.worker_nic_delay_s(pull[:, None], per_node_update_s)  # (rows, parts)
    # sync: all n push (the busiest shard receives and applies n shares), then all pull;
    # each phase's transfer waits for the busiest shard's NIC or the slowest node NIC
    ps_serve = nf * push
    node_nic = col_max(gpn * per_node_update_s)
    exposed_psync = nf * (push - pull) + 2.0 * np.maximum(nf * pull, node_nic)
    # async: equivalent think time, exact MVA, each part's node NICs bound its update rate
    is_async = strat == PS
    lo_parts, hi_parts = gpus.interval_ratios(g, top)
    lo_ratio = col_min(lo_parts)  # the wider of the two GPUs' intervals
    hi_ratio = col_max(hi_parts)
    x_ps = np.zeros(rows)
    x_fast = np.zeros(rows)  # at the ends of the step model's interval (as _evaluate_single)
    x_slow = np.zeros(rows)
    nic_bound = np.zeros(rows, dtype=bool)
    if is_async.any():
        sel = np.flatnonzero(is_async)

        def rate(compute_ratio: FloatArray, ps_ratio: float) -> tuple[FloatArray, BoolArray]:
            """Updates/s with the compute x ``compute_ratio`` and every PS and NIC time x
            ``ps_ratio``; and where the node NICs bound them."""
            think = part_compute[sel] * compute_ratio[sel, None] + nic_delay[sel] * ps_ratio
            d = demand[sel] * ps_ratio
            z_eq = equivalent_think_time_s(think, counts[sel], d)
            x_mva, _ = comm.ps_async_throughput(
                z_eq, push[sel] * ps_ratio, pull[sel] * ps_ratio, n[sel]
            )
            share = update_shares(think, counts[sel], d)
            # updates/s each part's NICs carry
            part_nic_rate = nodes[sel] / (per_node_update_s[sel] * ps_ratio)
            nic_rate = col_min(part_nic_rate / np.maximum(share, 1e-300))
            return np.minimum(x_mva, nic_rate), nic_rate < x_mva

        x_ps[sel], nic_bound[sel] = rate(np.ones(rows), 1.0)
        x_fast[sel], _ = rate(lo_ratio, float(np.exp(-params.ps_log_residual_q90)))
        x_slow[sel], _ = rate(hi_ratio, float(np.exp(-params.ps_log_residual_q10)))
    step_async = np.where(x_ps > 0, nf / np.where(x_ps > 0, x_ps, 1.0), np.inf)

    exposed_sync = np.where(strat == DDP, exposed_ddp, exposed_psync)
    step_sync = compute + exposed_sync
    g_stat = np.where(sync, g_sync, np.maximum(mean_b, 1)).astype(np.float64)
    samples_per_s = np.where(sync, g_stat / step_sync, x_ps * g_stat)
    util = np.where(sync, np.where(strat == PS_SYNC, ps_serve / step_sync, 0.0), x_ps * push)
    samples = work.samples_needed(g_stat)
    steps = np.ceil(samples / g_stat).astype(np.int64)
    eval_s = work.evaluation_s(samples, np.where(sync, g_stat, nf * g_stat), compute)
    train_s = samples / samples_per_s + eval_s
    time_s = startup_s + train_s

    unc = params.collective_uncertainty
    comm_unc = np.where(strat == DDP, unc, 0.0)
    lo_sync = (compute * lo_ratio + exposed_sync * (1.0 - comm_unc)) / step_sync
    hi_sync = (compute * hi_ratio + exposed_sync * (1.0 + comm_unc)) / step_sync
    q90, q10 = np.exp(-params.ps_log_residual_q90), np.exp(-params.ps_log_residual_q10)
    lo_psync = (compute * lo_ratio + exposed_sync * q90) / step_sync
    hi_psync = (compute * hi_ratio + exposed_sync * q10) / step_sync
    lo_async = np.where(x_fast > 0, x_ps / np.where(x_fast > 0, x_fast, 1.0), lo_ratio)
    hi_async = np.where(x_slow > 0, x_ps / np.where(x_slow > 0, x_slow, 1.0), hi_ratio)
    ratio_lower = np.where(strat == DDP, lo_sync, np.where(strat == PS_SYNC, lo_psync, lo_async))
    ratio_upper = np.where(strat == DDP, hi_sync, np.where(strat == PS_SYNC, hi_psync, hi_async))
    ratio_lower, ratio_upper = work.widen(ratio_lower, ratio_upper, g_stat)

    spot = space.spot
    price_a = np.where(spot, off.spot_usd_per_hour[oa], off.on_demand_usd_per_hour[oa])
    price_b = np.where(spot, off.spot_usd_per_hour[ob], off.on_demand_usd_per_hour[ob])
    has_market = ~np.isnan(price_a) & ~np.isnan(price_b)
    is_ps = strat != DDP
    cpu_price = np.where(is_ps & has_cpu, off.cpu_usd_per_hour[oa] * space.shards, 0.0)
    usd_per_hour = (
        space.nodes * np.nan_to_num(price_a, nan=0.0)
        + space.count2 * np.nan_to_num(price_b, nan=0.0)
        + cpu_price
    )
    probe = _probe_usd(
        params,
        space.nodes + space.count2,
        sync,
        np.maximum(np.nan_to_num(price_a, nan=0.0), np.nan_to_num(price_b, nan=0.0)),
        startup_s,
    )
    cost = time_s / 3600.0 * usd_per_hour + probe

    ps_bound = util >= params.ps_bottleneck_utilization
    ps_term = np.where(pull >= push - pull, _B["ps_network"], _B["ps_cpu"])
    ddp_bn = np.where(exposed_ddp > compute, _B["allreduce"], roof_bottleneck)
    psync_bn = np.where(
        exposed_psync > compute,
        np.where(node_nic > nf * pull, _B["worker_network"], ps_term),
        roof_bottleneck,
    )
    async_bn = np.where(
        nic_bound, _B["worker_network"], np.where(ps_bound, ps_term, roof_bottleneck)
    )
    bottleneck = np.where(
        strat == DDP, ddp_bn, np.where(strat == PS_SYNC, psync_bn, async_bn)
    ).astype(np.int64)
    exposed_async = np.maximum(np.where(x_ps > 0, step_async - compute, 0.0), 0.0)
    exposed = np.where(sync, exposed_sync, exposed_async)
    return Evaluation(
        workers=n,
        batch=np.where(sync, g_sync // np.maximum(n, 1), mean_b).astype(np.int64),
        global_batch=g_stat.astype(np.int64),
        valid_batch=valid_batch,
        mem_bytes=mem_bytes,
        fits=fits,
        checkpointing=col_max(ckpt),
        offload=np.zeros(rows, dtype=bool),
        params_offload=np.zeros(rows, dtype=bool),
        nvme_offload=np.zeros(rows, dtype=bool),
        host_bytes=np.zeros(rows),
        host_short=np.zeros(rows, dtype=bool),
        compute_s=compute,
        offload_s=np.zeros(rows),
        comm_s=np.where(strat == DDP, coll, exposed),
        exposed_s=exposed,
        step_s=np.where(sync, step_sync, step_async),
        samples_per_s=samples_per_s,
        samples_needed=samples,
        steps=steps,
        train_s=train_s,
        eval_s=eval_s,
        time_s=time_s,
        time_lower_s=startup_s + train_s * ratio_lower,
        time_upper_s=startup_s + train_s * ratio_upper,
        usd_per_hour=usd_per_hour,
        cost_usd=cost,
        probe_usd=probe,
        bottleneck=bottleneck,
        ps_utilization=util,
        has_cpu=has_cpu,
        has_market=has_market,
        train_ratio_lower=ratio_lower,
        train_ratio_upper=ratio_upper,
        part_batch=base.astype(np.int64),
        part_extra=extra.astype(np.int64),
        part_compute_s=part_compute,
        batch_split=np.where(sync, split, SPLIT_EQUAL).astype(np.int64),
        equal_compute_s=np.where(sync, compute * split_ratio, compute),
        # one GPU's mean draw over the cluster (its parts weighted by their GPU counts)
        gpu_power_w=col_sum(
            _average_power(
                part_watts,
                part_idle,
                part_compute * params.gpu_busy_share(spread, sync)[:, None],
                np.where(sync, step_sync, step_async)[:, None],
            )
            * counts
        )
        / np.maximum(col_sum(counts), 1),
        power_limit_w=power_limit,
    )
