"""One instance of :mod:`gpucast.simulate.llm_serving` (colocated or a decode instance):
continuous batching with the paged KV cache, preemption (recompute or swap) and the jumps
over stretches of identical decode steps (:func:`_run_instance`; the module docstring of
:mod:`gpucast.simulate.llm_serving` describes the model and why it is fast), with the
per-request state its loops share (:class:`_Shared`) and what a loop reports
(:class:`_Outcome`).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from gpucast.domain.llm_serving import IterationCost, SchedulerConfig

_WAITING, _RUN, _SWAPPED, _DONE, _DROP = 0, 1, 2, 3, 4


class ClientLoop(Protocol):
    """A closed loop's source of requests (:mod:`gpucast.simulate.llm_closed_loop`)."""

    def finished(self, t: float, count: int) -> None:
        """``count`` requests finished at ``t``: their clients' next requests are queued."""


@dataclass(slots=True)
class _Shared:
    """Per-request state shared by the instance loops (Python lists: fast scalar access)."""

    inp: list[int]
    out: list[int]
    gen: list[int]
    first: list[float]
    finish: list[float]
    state: list[int]
    preempted: list[int]
    itl_lo: list[float]
    itl_hi: list[float]
    itl_w: list[float]


@dataclass(slots=True)
class _Outcome:
    iterations: int = 0
    busy_s: float = 0.0
    preemptions: int = 0
    peak_blocks: int = 0
    decode_seq_steps: float = 0.0
    decode_steps: int = 0
    max_waiting: int = 0
    tokens: int = 0
    ready_out: list[float] = field(default_factory=list)  # prefill pool: ready time per id
    link_transfers: int = 0  # prefill pool: its KV link (InstanceStats.link_*)
    link_bytes: float = 0.0
    link_busy_s: float = 0.0


def _window(hist: list[int], end: int, length: int, bs: int) -> int:
    """Sum of ``hist`` over the ``length`` residues ending at ``end`` (cyclic, mod ``bs``)."""
    if length <= 0:
        return 0
    start = end - length + 1
    if start >= 0:
        return sum(hist[start : end + 1])
    return sum(hist[: end + 1]) + sum(hist[start + bs :])


def _run_instance(
    ids: Sequence[int],
    ready: Sequence[float],
    st: _Shared,
    cost: IterationCost,
    sched: SchedulerConfig,
    *,
    budget: int,
    total_blocks: int,
    prefilled: bool,
    until: float,
    swap_s_per_block: float,
    swap_blocks: int,
    clients: ClientLoop | None = None,
) -> _Outcome:
    """Continuous batching on one instance (module docstring). ``prefilled``: the requests
    arrive with their KV cache (a decode instance) and join without a prefill. ``clients``
    (a closed loop): each finish may append the next request to ``ids`` / ``ready`` (lists,
    in time order), which the loop reads as they grow."""
    inp, out, gen, first, finish = st.inp, st.out, st.gen, st.first, st.finish
    state, preempted = st.state, st.preempted
    itl_lo, itl_hi, itl_w = st.itl_lo, st.itl_hi, st.itl_w
    bs = sched.block_size
    max_seqs = sched.max_num_seqs
    chunked = sched.chunked_prefill
    watermark = int(sched.watermark * total_blocks)
    swap_mode = sched.preemption == "swap"
    table = cost.pass_s
    table_max = table.size - 1
    tok_s, seq_s = cost.token_s, cost.sequence_s
    kv_s, att_s = cost.kv_s_per_token, cost.attention_s_per_unit
    ctx_s = kv_s + att_s  # a decode token at context c costs ctx_s * c
    decode_base = [
        float(table[min(n, table_max)]) + (tok_s + seq_s) * n for n in range(max_seqs + 1)
    ]
    iteration_s = cost.iteration_s
    passes_of = cost.passes

    res = _Outcome()
    m = len(ids)
    nxt = 0
    t = 0.0
    G = 0  # decode steps so far: a running sequence holds base + G tokens
    waiting: deque[int] = deque()
    swapped: deque[int] = deque()
    fresh: set[int] = set(ids) if prefilled else set()  # KV present, no prefill needed
    base: dict[int, int] = {}
    fin_step: dict[int, int] = {}
    fin_heap: list[tuple[int, int]] = []
    victims: list[int] = []  # max-heap of running ids (latest arrival first) as -id
    partial: dict[int, int] = {}  # chunked prefill: tokens of the prompt done so far
    partial_order: deque[int] = deque()
    hist = [0] * bs
    n = 0
    S = 0  # sum of base over running
    used = 0
    swap_used = 0
    stall = 0.0
    stalled = 0
    preempt_time: dict[int, float] = {}
    block_cap = total_blocks
    hold = False  # after a preemption the next iteration decodes (no thrashing re-prefill)

    def length_of(r: int) -> int:
        # tokens a (re)prefill computes: prompt + generated tokens so far
        return inp[r] + gen[r]

    def prefill_done(r: int, stored: int, now: float, at: int) -> None:
        """The prefill of ``r`` (``stored`` tokens) ended at ``now``: its next token is out;
        it finishes or joins the decodes from step ``at``."""
        nonlocal used, m
        res.tokens += 1
        g = gen[r] + 1
        gen[r] = g
        if first[r] != first[r]:
            first[r] = now
        elif r in preempt_time:  # a recomputed sequence: its gap since preemption
            gap = now - preempt_time.pop(r)
            itl_lo.append(gap)
            itl_hi.append(gap)
            itl_w.append(1.0)
        if g >= out[r]:
            finish[r] = now
            state[r] = _DONE
            used -= -(-stored // bs)
            if clients is not None:
                clients.finished(now, 1)
                m = len(ids)
        else:
            join(r, stored, at)

    def join(r: int, stored: int, at: int) -> None:
        """Sequence ``r``, holding ``stored`` tokens, decodes from step ``at`` on."""
        nonlocal n, S
        b = stored - at
        base[r] = b
        fs = at + out[r] - gen[r]
        fin_step[r] = fs
        heapq.heappush(fin_heap, (fs, r))
        heapq.heappush(victims, -r)
        state[r] = _RUN
        hist[b % bs] += 1
        S += b
        n += 1

    progress = (-1, -1)
    stuck = 0
    while True:
        # every pass emits a token, admits an arrival or ends; a scheduler that loops without
        # either is a bug, said rather than hung on
        mark = (res.tokens, nxt)
        stuck = stuck + 1 if mark == progress else 0
        progress = mark
        if stuck > _STUCK_PASSES:
            raise RuntimeError(
                f"LLM serving simulation made no progress in {_STUCK_PASSES:,} scheduler passes "
                f"(running {n}, waiting {len(waiting)}, swapped {len(swapped)}, "
                f"prefilling {len(partial)}, KV blocks {used}/{block_cap})"
            )
        while nxt < m and ready[nxt] <= t:
            waiting.append(ids[nxt])
            nxt += 1
        if len(waiting) > res.max_waiting:
            res.max_waiting = len(waiting)
        if t >= until:
            break
        if n == 0 and not waiting and not swapped and not partial:
            if nxt >= m:
                break
            t = ready[nxt]
            continue
        held = hold and n > 0  # a preemption just happened: decode once before re-admitting
        hold = False
        # -- swap in (before any new prompt)
        if swapped and not held:
            while swapped and n < max_seqs:
                r = swapped[0]
                stored = inp[r] + gen[r] - 1
                need = -(-stored // bs)
                # back in only with room for its next token too (a new block when the stored
                # tokens fill theirs): else it is swapped out again before a step -- a livelock
                # when prompts half-prefilled hold the rest of the cache
                if block_cap - used - need - (stored % bs == 0) < watermark:
                    break
                swapped.popleft()
                used += need
                swap_used -= need
                dt = need * swap_s_per_block
                t += dt
                res.busy_s += dt
                join(r, stored, G)
                gap = t - preempt_time.pop(r, t)
                itl_lo.append(gap)
                itl_hi.append(gap)
                itl_w.append(1.0)
        # -- admissions
        if held:
            prefill_work = False
        elif chunked:
            prefill_work = bool(partial) or bool(waiting)
        else:
            prefill_work = bool(waiting) and not swapped
        if prefill_work and not chunked:
            batch: list[int] = []
            tokens = 0
            att = 0.0
            longest = 0
            while waiting:
                r = waiting[0]
                if n + len(batch) >= max_seqs:
                    break
                if r in fresh:
                    need = -(-inp[r] // bs)
                    if block_cap - used - need < watermark:
                        break
                    waiting.popleft()
                    fresh.discard(r)
                    used += need
                    join(r, inp[r], G)
                    continue
                L = length_of(r)
                if tokens + L > budget:
                    break
                need = -(-L // bs)
                if block_cap - used - need < watermark:
                    break
                waiting.popleft()
                used += need
                batch.append(r)
                tokens += L
                att += 0.5 * L * L
                if longest < L:
                    longest = L
            if used > res.peak_blocks:
                res.peak_blocks = used
            if batch:
                dt = iteration_s(tokens, len(batch), tokens, att, passes_of(longest))
                t += dt
                res.busy_s += dt
                res.iterations += 1
                if n:
                    stall += dt
                    stalled = n
                for r in batch:
                    prefill_done(r, inp[r] + gen[r], t, G)
                continue
        if chunked and prefill_work:
            # one mixed iteration: every decode, then prompt chunks in the leftover budget
            while waiting and waiting[0] in fresh and n + len(partial_order) < max_seqs:
                r = waiting[0]
                need = -(-inp[r] // bs)
                if block_cap - used - need < watermark:
                    break
                waiting.popleft()
                fresh.discard(r)
                used += need
                join(r, inp[r], G)
            end = (-G) % bs
            need_dec = _window(hist, end, 1, bs) if n else 0
            if need_dec > block_cap - used:
                n, S, used, swap_used, t = _preempt(
                    need_dec, bs, hist, end, block_cap, n, S, used, swap_used, swap_mode,
                    swap_blocks, swap_s_per_block, t, G, victims, state, base, inp, out, gen,
                    fin_step, waiting, swapped, preempted, preempt_time, res,
                )  # fmt: skip
                hold = True
                continue
            room = budget - n
            chunks: list[tuple[int, int, int]] = []  # (id, done before, tokens now)
            for r in partial_order:
                if room <= 0:
                    break
                L = length_of(r)
                done = partial[r]
                take = min(L - done, room)
                extra = -(-(done + take) // bs) - (-(-done // bs))
                if block_cap - used - need_dec - extra < 0:
                    break
                used += extra
                chunks.append((r, done, take))
                room -= take
            while waiting and room > 0 and n + len(partial_order) < max_seqs:
                r = waiting[0]
                if r in fresh:
                    break  # joins at the start of a later iteration
                L = length_of(r)
                take = min(L, room)
                need = -(-take // bs)
                if block_cap - used - need_dec - need < watermark:
                    break
                waiting.popleft()
                used += need
                partial[r] = 0
                partial_order.append(r)
                chunks.append((r, 0, take))
                room -= take
            if not chunks and n == 0:
                if partial_order:
                    # prompts half-prefilled hold the cache: recompute the latest later
                    r = partial_order.pop()
                    used -= -(-partial.pop(r) // bs)
                    waiting.appendleft(r)
                    preempted[r] += 1
                    res.preemptions += 1
                    continue
                if nxt >= m:  # pragma: no cover - guarded by the up-front checks
                    break
                t = max(t, ready[nxt])
                continue
            if chunks:
                ctx_dec = S + n * (G + 1)
                tokens = n
                kv_tok = float(ctx_dec)
                att = float(ctx_dec)
                for _r, done, take in chunks:
                    tokens += take
                    kv_tok += done + take
                    att += take * done + 0.5 * take * take
                dt = iteration_s(tokens, n + len(chunks), kv_tok, att)
                if n:
                    itl_lo.append(dt)
                    itl_hi.append(dt)
                    itl_w.append(float(n))
                    res.decode_seq_steps += n
                    res.tokens += n
                    res.decode_steps += 1
                t += dt
                res.busy_s += dt
                res.iterations += 1
                if n:
                    used += need_dec
                    G += 1
                if used > res.peak_blocks:
                    res.peak_blocks = used
                for r, done, take in chunks:
                    L = length_of(r)
                    if done + take < L:
                        partial[r] = done + take
                        continue
                    del partial[r]
                    partial_order.remove(r)
                    prefill_done(r, L, t, G)
                before = n
                n, S, used = _finish_due(
                    G, t, fin_heap, fin_step, base, state, finish, inp, out, gen, hist, bs, n,
                    S, used,
                )  # fmt: skip
                if clients is not None and n < before:
                    clients.finished(t, before - n)
                    m = len(ids)
                continue
        if n == 0:
            if nxt >= m:
                break
            t = max(t, ready[nxt])
            continue
        # -- a stretch of decode steps
        while fin_heap:
            fs, r = fin_heap[0]
            if state[r] == _RUN and fin_step[r] == fs:
                break
            heapq.heappop(fin_heap)
        k = fin_heap[0][0] - G
        step0 = decode_base[n] + ctx_s * (S + n * (G + 1))
        d_step = ctx_s * n
        if waiting or swapped:
            if held:
                k = 1
        elif not partial and nxt < m:
            k = min(k, _steps_until(ready[nxt] - t, step0, d_step))
        # a horizon past these k steps cannot shorten them (and 1e100 s would spin the search)
        if until < math.inf and until - t <= k * step0 + d_step * (k * (k - 1) / 2.0):
            k = min(k, _steps_until(until - t, step0, d_step))
        free = block_cap - used
        end = (-G) % bs
        if n * (k // bs + 1) > free:
            per_round = free // n
            left = free - n * per_round
            r_max = 0
            acc = 0
            while r_max < bs - 1:
                acc += hist[(end - r_max) % bs]
                if acc > left:
                    break
                r_max += 1
            k2 = per_round * bs + r_max
            if k2 == 0:
                n, S, used, swap_used, t = _preempt(
                    _window(hist, end, 1, bs), bs, hist, end, block_cap, n, S, used,
                    swap_used, swap_mode, swap_blocks, swap_s_per_block, t, G, victims, state,
                    base, inp, out, gen, fin_step, waiting, swapped, preempted, preempt_time,
                    res,
                )  # fmt: skip
                stall = 0.0
                stalled = 0
                hold = True
                continue
            if k2 < k:
                k = k2
        need = n * (k // bs) + _window(hist, end, k % bs, bs)
        dt = k * step0 + d_step * (k * (k - 1) / 2.0)
        if stalled:
            w = float(min(stalled, n))
            itl_lo.append(step0 + stall)
            itl_hi.append(step0 + stall)
            itl_w.append(w)
            itl_lo.append(step0)
            itl_hi.append(step0 + d_step * (k - 1))
            itl_w.append(n * k - w)
            stall = 0.0
            stalled = 0
        else:
            itl_lo.append(step0)
            itl_hi.append(step0 + d_step * (k - 1))
            itl_w.append(float(n * k))
        res.decode_seq_steps += n * k
        res.tokens += n * k
        res.decode_steps += k
        res.iterations += k
        t += dt
        res.busy_s += dt
        G += k
        used += need
        if used > res.peak_blocks:
            res.peak_blocks = used
        before = n
        n, S, used = _finish_due(
            G, t, fin_heap, fin_step, base, state, finish, inp, out, gen, hist, bs, n, S, used
        )
        if clients is not None and n < before:
            clients.finished(t, before - n)
            m = len(ids)
    # every block handed out comes back: what is left is held by the sequences still in
    assert used >= 0 and (used > 0) == (n > 0 or bool(partial)), (used, n, len(partial))
    return res


#: Scheduler passes without a token or an arrival before :func:`_run_instance` gives up
_STUCK_PASSES = 100_000


def _steps_until(delta_s: float, step0: float, d_step: float) -> int:
    """Fewest decode steps whose cumulative time (``step0``, ``step0 + d_step``, ...) reaches
    ``delta_s`` (at least one)."""
    if delta_s <= step0:
        return 1
    if d_step > 0:
        b = step0 - d_step / 2.0
        k = math.ceil((-b + math.sqrt(b * b + 2.0 * d_step * delta_s)) / d_step)
    else:
        k = math.ceil(delta_s / step0)
    k = max(k, 1)
    while k > 1 and (k - 1) * step0 + d_step * ((k - 1) * (k - 2) / 2.0) >= delta_s:
        k -= 1
    while k * step0 + d_step * (k * (k - 1) / 2.0) < delta_s:
        k += 1
    return k


def _finish_due(
    G: int,
    t: float,
    fin_heap: list[tuple[int, int]],
    fin_step: dict[int, int],
    base: dict[int, int],
    state: list[int],
    finish: list[float],
    inp: list[int],
    out: list[int],
    gen: list[int],
    hist: list[int],
    bs: int,
    n: int,
    S: int,
    used: int,
) -> tuple[int, int, int]:
    """Retire the running sequences whose last token came at step ``G`` (time ``t``)."""
    while fin_heap and fin_heap[0][0] <= G:
        fs, r = heapq.heappop(fin_heap)
        if state[r] != _RUN or fin_step[r] != fs:
            continue
        b = base[r]
        finish[r] = t
        gen[r] = out[r]
        state[r] = _DONE
        used -= -(-(b + G) // bs)
        hist[b % bs] -= 1
        S -= b
        n -= 1
    return n, S, used


def _preempt(
    need: int,
    bs: int,
    hist: list[int],
    end: int,
    block_cap: int,
    n: int,
    S: int,
    used: int,
    swap_used: int,
    swap_mode: bool,
    swap_blocks: int,
    swap_s_per_block: float,
    t: float,
    G: int,
    victims: list[int],
    state: list[int],
    base: dict[int, int],
    inp: list[int],
    out: list[int],
    gen: list[int],
    fin_step: dict[int, int],
    waiting: deque[int],
    swapped: deque[int],
    preempted: list[int],
    preempt_time: dict[int, float],
    res: _Outcome,
) -> tuple[int, int, int, int, float]:
    """Preempt the latest-arrived running sequences until the next decode step fits."""
    while n and need > block_cap - used:
        r = -heapq.heappop(victims)
        if state[r] != _RUN:
            continue
        b = base[r]
        stored = b + G
        blocks = -(-stored // bs)
        gen[r] = out[r] - (fin_step[r] - G)
        used -= blocks
        hist[b % bs] -= 1
        S -= b
        n -= 1
        if stored % bs == 0:
            need -= 1  # it no longer needs its next block
        preempted[r] += 1
        res.preemptions += 1
        preempt_time[r] = t
        if swap_mode and swap_used + blocks <= swap_blocks:
            state[r] = _SWAPPED
            swapped.append(r)
            swap_used += blocks
            dt = blocks * swap_s_per_block
            t += dt
            res.busy_s += dt
        else:
            state[r] = _WAITING
            waiting.appendleft(r)
    return n, S, used, swap_used, t
