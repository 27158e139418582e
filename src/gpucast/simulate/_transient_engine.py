"""The vectorised engine of :mod:`gpucast.simulate.transient`: one batch of runs, window by
window (the server chains, then the job on top of them; the module docstring of
:mod:`gpucast.simulate.transient` describes the model and the method).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpucast.domain.simulation import RunStatistics
from gpucast.simulate._transient_job import FloatArray, IntArray
from gpucast.simulate._transient_servers import _Servers
from gpucast.simulate._transient_window import _Chains, _Incarnations, _State, _take, _Window

#: incarnations simulated together in a first window: bounds a window's event arrays
_CHUNK_INCARNATIONS = 500_000


class _Engine(_Servers):
    """One batch of runs (of one or more jobs): the server matrices (original run x column)
    and the event loop.

    Jobs are laid side by side: run ``r`` belongs to job ``job[r]``; its columns are that
    job's workers (group by group), then its parameter servers, then padding up to the widest
    job (never ready, never revoked, never billed). Lifetime/start-up classes are numbered
    across jobs (job 0's groups and PS, then job 1's, ...), so the draws go class by class in
    a fixed order and one job alone draws exactly as :func:`simulate_runs` always has.
    """

    # -- server chains: incarnation after incarnation -----------------------------------------
    def _launch(
        self, o: IntArray, col: IntArray, created: FloatArray
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, npt.NDArray[np.bool_], IntArray]:
        """The next incarnations of servers (run ``o``, column ``col``) revoked at ``created``:
        (request, up, down, US$/s, launched on demand, class). A spot replacement first waits
        its capacity gap; once it would wait its job's ``Move.after_s`` it goes to the other
        region and waits there; once the whole wait would exceed ``fallback_after_s`` it is
        launched on demand instead."""
        cls_of = self.chain.cls[o, col]
        launch = created
        on_demand: npt.NDArray[np.bool_] | None = None
        if self.gaps is not None:
            gap = self._draw_gap(cls_of)
            after = self.move_after[self.job[o]]
            move = (gap > after) & (self.alt_class[cls_of] >= 0)
            if move.any():
                cls_of = cls_of.copy()
                cls_of[move] = self.alt_class[cls_of[move]]
                gap[move] = after[move] + self._draw_gap(cls_of[move])
            if self.fallback_after_s is not None:
                on_demand = gap > self.fallback_after_s
                gap = np.where(on_demand, self.fallback_after_s, gap)
                if not on_demand.any():
                    on_demand = None
            launch = launch + gap
        up = launch + self._draw_startup(cls_of, on_demand)
        price = self.cls_price[cls_of]
        if on_demand is None:
            down = launch + self._draw_life(cls_of, launch, o)
            return launch, up, down, price, np.zeros(o.size, dtype=bool), cls_of
        spot = ~on_demand
        life = np.full(col.size, np.inf)  # an on-demand incarnation is never revoked
        life[spot] = self._draw_life(cls_of[spot], launch[spot], o[spot])
        price = np.where(on_demand, self.cls_od_price[cls_of], price)
        return launch, up, launch + life, price, on_demand, cls_of

    def _window(self, rs: IntArray, a: FloatArray, b: FloatArray) -> _Window:
        """Every incarnation of runs ``rs`` alive in their windows ``[a, b)`` (the chains'
        current ones, then replacements until each chain outlives ``b`` or ends), the ready
        workers and the speed between their events, and the critical revocations."""
        ch = self.chain
        C = self.n_cols
        loc0, col0 = np.nonzero(ch.live[rs])
        o0 = rs[loc0]
        parts = [(loc0, col0, ch.req[o0, col0], ch.up[o0, col0], ch.down[o0, col0],
                  ch.price[o0, col0], ch.fb[o0, col0], ch.created[o0, col0],
                  ch.moved[o0, col0])]  # fmt: skip
        todo = self.renew[o0, col0] & (ch.down[o0, col0] < b[loc0])
        loc, col = loc0[todo], col0[todo]
        capped = np.zeros(rs.size, dtype=bool)
        generations = 0
        while loc.size:
            generations += 1
            if generations > self.max_rounds:  # a chain that never outlives its window
                capped[loc] = True
                break
            o = rs[loc]
            created = ch.down[o, col]
            req, up, down, price, fb, cls = self._launch(o, col, created)
            moved = cls != ch.cls[o, col]
            ch.req[o, col], ch.up[o, col], ch.down[o, col] = req, up, down
            ch.price[o, col], ch.fb[o, col], ch.created[o, col] = price, fb, created
            ch.cls[o, col], ch.moved[o, col] = cls, moved
            parts.append((loc, col, req, up, down, price, fb, created, moved))
            more = down < b[loc]
            loc, col = loc[more], col[more]
        cat = [np.concatenate(x) for x in zip(*parts, strict=True)]
        inc = _Incarnations(
            loc=cat[0], col=cat[1], req=cat[2], up=cat[3], down=cat[4], price=cat[5],
            fb=cat[6], created=cat[7], moved=cat[8],
        )  # fmt: skip
        L, G = rs.size, self.n_groups
        job = self.job[rs]
        j_inc = job[inc.loc]
        spans = np.concatenate([[0.0], np.cumsum(b - a + 1.0)[:-1]])  # times, increasing
        # the chains a restart waits for -- the parameter servers, the chief column when it
        # is replaced (a synchronous job's workers: see ``full_next``) -- by row, column and
        # creation (each generation is sorted by row and column: a stable sort merges)
        o_inc = rs[inc.loc]
        sync = self.restarts_on_worker_loss[o_inc]
        keep = self.replace_revoked[o_inc]
        worker = self.col_worker[j_inc, inc.col]
        looked = self.col_ps[j_inc, inc.col] | (
            (inc.col == 0) & keep & ~sync & ~self.elastic[o_inc]
        )
        pick = np.flatnonzero(looked)
        pick = pick[np.argsort(inc.loc[pick] * C + inc.col[pick], kind="stable")]
        l_loc, l_col, l_up, l_down = inc.loc[pick], inc.col[pick], inc.up[pick], inc.down[pick]
        counts = np.bincount(l_loc * C + l_col, minlength=L * C)
        first = np.concatenate([[0], np.cumsum(counts)[:-1]])
        # critical revocations: those chains' (a dropped chief is followed separately) and
        # any worker's of a synchronous job
        crit_inc = worker & sync
        c_loc = np.concatenate([l_loc, inc.loc[crit_inc]])
        c_t = np.concatenate([l_down, inc.down[crit_inc]])
        within = c_t < b[c_loc]
        c_loc, c_t = c_loc[within], c_t[within]
        c_key = c_t - a[c_loc] + spans[c_loc]
        order = np.argsort(c_key, kind="stable")
        c_loc, c_t, c_key = c_loc[order], c_t[order], c_key[order]
        # ready workers: +1 at up, -1 at down, within [a, b); the rest at a
        group = self.col_group[j_inc, inc.col]
        ready = (group >= 0) & (inc.up < inc.down)
        a_i, b_i = a[inc.loc], b[inc.loc]
        at_start = ready & (inc.up < a_i)  # (every incarnation here has down >= a)
        ups = np.flatnonzero(ready & (inc.up >= a_i) & (inc.up < b_i))
        downs = np.flatnonzero(ready & (inc.down < b_i))
        start = np.zeros((L, G), dtype=np.int64)
        np.add.at(start, (inc.loc[at_start], group[at_start]), 1)
        # at one instant: the window's start first, then revocations, then start-ups (a
        # replacement up the moment its predecessor goes never counts twice)
        ev_loc = np.concatenate([np.arange(L), inc.loc[downs], inc.loc[ups]])
        ev_t = np.concatenate([a, inc.down[downs], inc.up[ups]])
        ev_key = ev_t - a[ev_loc] + spans[ev_loc]  # over the rows: one sort for all
        order = np.argsort(ev_key, kind="stable")
        per_row = np.bincount(ev_loc, minlength=L)
        ev_off = np.concatenate([[0], np.cumsum(per_row)])
        ev_loc = np.repeat(np.arange(L), per_row)  # = ev_loc[order]: rows stay in order
        ev_t, ev_key = ev_t[order], ev_key[order]
        pos = np.empty_like(order)
        pos[order] = np.arange(order.size)  # where each event went
        n_down = downs.size
        delta = np.zeros((ev_loc.size, G), dtype=np.int64)
        delta[pos[:L]] = start
        delta[pos[L : L + n_down], group[downs]] = -1
        delta[pos[L + n_down :], group[ups]] = 1
        total = np.cumsum(delta, axis=0)
        base = total[ev_off[:-1]] - delta[ev_off[:-1]]
        # (times a few 1e-7 s apart may swap in the key: keep counts in range)
        alive = np.clip(total - base[ev_loc], 0, self.n_workers_by_group[job[ev_loc]])
        runs_e = rs[ev_loc]
        if self.speeds is None:
            spd = np.asarray(self.speed(alive), dtype=np.float64)
        else:
            spd = self.speeds(alive, self.job[runs_e])
        if self.run_slowdown is not None:
            spd = spd / self.run_slowdown[runs_e]
        if self.elastic[rs].any():
            # an elastic job keeps its state in its workers' memory: losing the last one is
            # critical (back to the checkpoint)
            last = np.flatnonzero(
                self.elastic[runs_e]
                & (delta.sum(axis=1) < 0)
                & (alive.sum(axis=1) == 0)
                & (ev_t < b[ev_loc])
            )
            if last.size:
                c_loc = np.concatenate([c_loc, ev_loc[last]])
                c_t = np.concatenate([c_t, ev_t[last]])
                c_key = c_t - a[c_loc] + spans[c_loc]
                order = np.argsort(c_key, kind="stable")
                c_loc, c_t, c_key = c_loc[order], c_t[order], c_key[order]
        # synchronous jobs: the first event from which every worker is ready
        full_next = None
        if self.restarts_on_worker_loss[rs].any():
            full = np.all(alive == self.n_workers_by_group[job[ev_loc]], axis=1)
            marks = np.where(full, np.arange(full.size), full.size)
            full_next = np.minimum.accumulate(marks[::-1])[::-1]
        nxt = np.empty_like(ev_t)
        nxt[:-1] = ev_t[1:]
        nxt[ev_off[1:] - 1] = b
        resume = None
        if (self.reshard_s[rs] > 0).any():
            # elastic: each change in ready workers (not a window's start) pauses progress
            # for reshard_s; pauses that overlap merge (the latest change's end counts)
            change = ev_t > self.elastic_start[runs_e]
            change[ev_off[:-1]] = False
            idx = np.maximum.accumulate(np.where(change, np.arange(ev_t.size), -1))
            mine = idx >= ev_off[ev_loc]
            until = np.where(mine, ev_t[np.maximum(idx, 0)] + self.reshard_s[runs_e], -np.inf)
            resume = np.clip(until, ev_t, nxt)
            work = np.concatenate([[0.0], np.cumsum(spd * (nxt - resume))])
        else:
            work = np.concatenate([[0.0], np.cumsum(spd * (nxt - ev_t))])
        return _Window(
            runs=rs, a=a, b=b, inc=inc, look_up=l_up, look_down=l_down, look_first=first,
            look_count=counts, spans=spans, ev_t=ev_t, ev_key=ev_key, ev_off=ev_off, speed=spd,
            full_next=full_next, resume=resume,
            work=work, crit_t=c_t, crit_key=c_key,
            crit_off=np.concatenate([[0], np.cumsum(np.bincount(c_loc, minlength=L))]),
            capped=capped,
        )  # fmt: skip

    def _current_up(self, w: _Window, loc: IntArray, col: IntArray, at: FloatArray) -> FloatArray:
        """Up time of each chain's incarnation current at ``at`` (the first one revoked after
        it); ``inf`` where the chain has ended."""
        k = loc * self.n_cols + col
        idx, end = w.look_first[k], w.look_first[k] + w.look_count[k]
        while True:
            move = (idx < end) & (_take(w.look_down, idx, idx < end, np.inf) <= at)
            if not move.any():
                break
            idx = idx + move
        return _take(w.look_up, idx, idx < end, np.inf)

    def _latest_up(
        self, w: _Window, loc: IntArray, mask: npt.NDArray[np.bool_], at: FloatArray
    ) -> FloatArray:
        """Per row, the latest up time of the current incarnations of the columns ``mask``
        (rows x columns) at ``at``; -inf for a row without such columns."""
        rr, cc = np.nonzero(mask)
        out = np.full(loc.size, -np.inf)
        if rr.size:
            np.maximum.at(out, rr, self._current_up(w, loc[rr], cc, at[rr]))
        return out

    def _all_ready(self, w: _Window, loc: IntArray, o: IntArray, at: FloatArray) -> FloatArray:
        """When every worker of a synchronous job that replaces them is ready again after a
        revocation at ``at``: the first full count of ready workers from ``at`` on. Where the
        window has none, the latest start-up among the chains' latest incarnations: then a
        current incarnation is either the latest or revoked within the window, and that
        revocation rolls the job back before this time could count (the same time for every
        revocation of the window after ``at``)."""
        assert w.full_next is not None
        lo, hi = w.ev_off[loc], w.ev_off[loc + 1]
        first = np.clip(np.searchsorted(w.ev_key, at - w.a[loc] + w.spans[loc], "left"), lo, hi)
        nxt = w.full_next[np.minimum(first, w.full_next.size - 1)]
        found = (first < hi) & (nxt < hi)
        latest = np.where(self.col_worker[self.job[o]], self.chain.up[o], -np.inf).max(axis=1)
        return np.where(found, w.ev_t[np.minimum(nxt, w.ev_t.size - 1)], latest)

    # -- the job on top of its servers ----------------------------------------------------------
    def _next_critical(
        self, w: _Window, loc: IntArray, o: IntArray, after: FloatArray
    ) -> tuple[FloatArray, IntArray]:
        """The next critical revocation after ``after``, the last one handled (``inf``: none
        in the window), and its index in ``w.crit_t`` (where it is one of those)."""
        q = after - w.a[loc] + w.spans[loc]
        lo, hi = w.crit_off[loc], w.crit_off[loc + 1]
        idx = np.maximum(np.searchsorted(w.crit_key, q, side="right"), lo)
        c = _take(w.crit_t, idx, idx < hi, np.inf)
        # the chief of a job that drops revoked workers (an elastic job has none)
        dropped = ~self.replace_revoked[o] & ~self.elastic[o]
        if dropped.any():
            chief_down = self.down[o, self.state.chief[o]]
            follow = dropped & (chief_down > after) & (chief_down < w.b[loc])
            c = np.where(follow, np.minimum(c, chief_down), c)
        return c, idx

    def _reach(self, w: _Window, loc: IntArray, start: FloatArray, need: FloatArray) -> FloatArray:
        """When each row, progressing from ``start``, has made ``need`` more steps (``inf``:
        not within its window)."""
        lo, hi = w.ev_off[loc], w.ev_off[loc + 1] - 1
        i0 = np.clip(
            np.searchsorted(w.ev_key, start - w.a[loc] + w.spans[loc], "right") - 1, lo, hi
        )
        if w.resume is None:
            v = w.work[i0] + w.speed[i0] * (start - w.ev_t[i0]) + need
        else:
            v = w.work[i0] + w.speed[i0] * np.maximum(start - w.resume[i0], 0.0) + need
        j = np.clip(np.searchsorted(w.work, v, "left") - 1, lo, hi)
        rate = w.speed[j]
        with np.errstate(divide="ignore", invalid="ignore"):
            at = w.ev_t[j] if w.resume is None else w.resume[j]
            t = at + (v - w.work[j]) / rate
        ok = (v <= w.work[hi + 1]) & (rate > 0) & (start < w.b[loc])
        return np.where(ok, np.maximum(t, start), np.inf)

    def _roll_back(self, w: _Window, loc: IntArray, o: IntArray, at: FloatArray) -> None:
        """A critical revocation at ``at``: back to the checkpoint; resume ``penalty`` after
        the chief (re-elected among the survivors if it was dropped), every parameter server
        and, when synchronous, every remaining worker are ready."""
        s = self.state
        s.prog[o] = s.ckpt[o]
        s.crit_after[o], s.pause[o] = self._rolled_back(w, loc, o, at)
        s.t[o] = s.crit_after[o]

    def _rolled_back(
        self, w: _Window, loc: IntArray, o: IntArray, at: FloatArray
    ) -> tuple[FloatArray, FloatArray]:
        """After a rollback at ``at``: the last critical revocation it handles (``at``, or a
        later one of the same storm) and when the job resumes. Only a job that drops revoked
        workers changes state here (it re-elects its chief): for the others both are a
        function of ``at`` alone."""
        s = self.state
        jobs = self.job[o]
        after = np.array(at, dtype=np.float64)
        keep = self.replace_revoked[o]
        resume = np.full(o.size, -np.inf)
        sync_keep = keep & self.restarts_on_worker_loss[o]
        elastic = self.elastic[o]  # (no chief to wait for: the PS only)
        if (keep & ~sync_keep & ~elastic).any():  # (a synchronous job's chief: a worker)
            k = np.flatnonzero(keep & ~sync_keep & ~elastic)
            resume[k] = self._current_up(w, loc[k], s.chief[o[k]], at[k])
        drop = np.flatnonzero(~keep & ~elastic)
        if drop.size:
            od, at_d = o[drop], at[drop]
            up0, down0 = self.up[od], self.down[od]
            gone = down0 <= at_d[:, None]
            workers = self.col_worker[jobs[drop]]
            lost = gone[np.arange(drop.size), s.chief[od]]
            if lost.any():
                key = np.where(up0 <= at_d[:, None], -np.inf, up0)
                key = np.where(gone | ~workers, np.inf, key)
                s.chief[od[lost]] = np.argmin(key[lost], axis=1)
            chief = s.chief[od]
            ok = ~gone[np.arange(drop.size), chief]
            resume[drop] = np.where(ok, up0[np.arange(drop.size), chief], np.inf)
            sync = self.restarts_on_worker_loss[od]
            if sync.any():
                wait = np.where(workers & ~gone, up0, -np.inf).max(axis=1)
                resume[drop] = np.where(sync, np.maximum(resume[drop], wait), resume[drop])
        if sync_keep.any():
            k = np.flatnonzero(sync_keep)
            ready = self._all_ready(w, loc[k], o[k], at[k])
            resume[k] = np.maximum(resume[k], ready)
            # without parameter servers, the revocations before every worker is ready again
            # change nothing: the job stays at its checkpoint until then, and each of them
            # would find the same ready time (a storm is one rollback, not one per node)
            quiet = self.n_ps[jobs[k]] == 0
            if quiet.any():
                q = k[quiet]
                key = ready[quiet] - w.a[loc[q]] + w.spans[loc[q]]
                last = np.searchsorted(w.crit_key, key, "left") - 1
                later = last >= w.crit_off[loc[q]]
                skip = _take(w.crit_t, last, later, -np.inf)
                moved = later & (skip > at[q])
                after[q[moved]] = skip[moved]
        ps = self.col_ps[jobs]
        if ps.any():
            resume = np.maximum(resume, self._latest_up(w, loc, ps, at))
        return after, np.maximum(at, resume) + self.penalty[self.job[o]]

    def _ahead(
        self,
        w: _Window,
        loc: IntArray,
        o: IntArray,
        t: FloatArray,
        pause: FloatArray,
        after: FloatArray,
        prog: FloatArray,
    ) -> tuple[FloatArray, FloatArray, IntArray, FloatArray]:
        """From a state (clock, paused until, last critical revocation handled, progress):
        when the job reaches its next checkpoint target (``inf``: not within the window, or
        not before ``start`` catches up), the next critical revocation and its index in
        ``w.crit_t`` (see :meth:`_next_critical`), and that target."""
        start = np.maximum(t, pause)
        c, idx = self._next_critical(w, loc, o, after)
        target = np.minimum(self.steps[o], self.state.ckpt[o] + self.every[o])
        reach = np.full(loc.size, np.inf)
        go = start < np.minimum(c, w.b[loc])
        if go.any():
            g = np.flatnonzero(go)
            reach[g] = self._reach(w, loc[g], start[g], target[g] - prog[g])
        return reach, c, idx, target

    def _last_roll_back(self, w: _Window, loc: IntArray, o: IntArray, idx: IntArray) -> IntArray:
        """Rows whose revoked servers are replaced, rolling back at critical revocation
        ``idx`` (an index into ``w.crit_t``): the index of their last rollback before the job
        next checkpoints, ends or needs the next window. What follows a rollback depends on
        its time alone (the checkpoint stays until the next one), so a block of each row's
        next critical revocations is played at once and the chain of rollbacks followed by
        pointer doubling: a storm of revocations is a few rounds, not one per revocation,
        and every row ends where the round-by-round loop would have left it."""
        s = self.state
        hi = w.crit_off[loc + 1]
        out = np.array(idx, dtype=np.int64)
        todo = np.arange(loc.size)
        block = 16
        while todo.size:
            i0 = out[todo]
            n = np.minimum(i0 + block, hi[todo]) - i0  # >= 1: i0 itself is a rollback
            first = np.concatenate([[0], np.cumsum(n)[:-1]])
            row = np.repeat(np.arange(todo.size), n)
            pos = np.arange(row.size)
            k = i0[row] + pos - first[row]
            lr, orr = loc[todo][row], o[todo][row]
            after, pause = self._rolled_back(w, lr, orr, w.crit_t[k])
            reach, c, j, _ = self._ahead(w, lr, orr, after, pause, after, s.ckpt[orr])
            back = np.isfinite(c) & (reach > c)  # the next round rolls back at c (= j's)
            f = np.where(back & (j < (i0 + n)[row]), pos + (j - k), pos)
            while True:
                g = f[f]
                if np.array_equal(g, f):
                    break
                f = g
            last = f[first]
            leave = back[last]  # the chain goes on past the block, at j
            out[todo] = np.where(leave, j[last], k[last])
            todo = todo[leave]
            # bound the block's (rows x columns) arrays
            block = max(16, min(4 * block, (1 << 22) // max(1, todo.size * self.n_cols)))
        return out

    def _settle(self, w: _Window, ended: list[tuple[IntArray, FloatArray, bool]]) -> None:
        """Rows that ended (rows, end times, finished?): bill their incarnations up to the
        end, count revocations and fallbacks, write their outputs."""
        if not ended:
            return
        s, inc = self.state, w.inc
        loc = np.concatenate([e[0] for e in ended])
        if loc.size == 0:
            return
        end = np.concatenate([e[1] for e in ended])
        finished = np.concatenate([np.full(e[0].size, e[2]) for e in ended])
        o = w.runs[loc]
        L = w.runs.size
        stop = np.full(L, np.nan)
        stop[loc] = end
        e = stop[inc.loc]
        mine = ~np.isnan(e)
        e, li = e[mine], inc.loc[mine]
        down = inc.down[mine]
        billed_s = np.clip(np.minimum(down, e) - inc.req[mine], 0.0, None)
        billed = billed_s * inc.price[mine]
        gpus = self.col_gpus[self.job[w.runs[li]], inc.col[mine]]
        fb = inc.fb[mine] & (inc.created[mine] <= e)
        self.out_cost[o] = s.cost[o] + np.bincount(li, weights=billed, minlength=L)[loc]
        self.out_gpu_s[o] = s.gpu_s[o] + np.bincount(li, weights=billed_s * gpus, minlength=L)[loc]
        revs = np.bincount(li, weights=down <= e, minlength=L)[loc]
        self.out_revs[o] = s.revs[o] + revs.astype(np.int64)
        fbs = np.bincount(li, weights=fb, minlength=L)[loc]
        self.out_fallbacks[o] = s.fallbacks[o] + fbs.astype(np.int64)
        mv = inc.moved[mine] & (inc.created[mine] <= e)
        self.out_moves[o] = s.moves[o] + np.bincount(li, weights=mv, minlength=L)[loc].astype(
            np.int64
        )
        self.out_dur[o] = np.where(finished, end, np.inf)

    def _retire(self, w: _Window, loc: IntArray) -> None:
        """Rows ``loc`` go on past their window: bill and count what ended within it."""
        s, inc = self.state, w.inc
        moving = np.zeros(w.runs.size, dtype=bool)
        moving[loc] = True
        old = moving[inc.loc] & (inc.down < w.b[inc.loc])
        li = inc.loc[old]
        L = w.runs.size
        o = w.runs[loc]
        paid_s = inc.down[old] - inc.req[old]
        s.cost[o] += np.bincount(li, weights=paid_s * inc.price[old], minlength=L)[loc]
        gpus = self.col_gpus[self.job[w.runs[li]], inc.col[old]]
        s.gpu_s[o] += np.bincount(li, weights=paid_s * gpus, minlength=L)[loc]
        s.revs[o] += np.bincount(li, minlength=L)[loc]
        s.fallbacks[o] += np.bincount(li, weights=inc.fb[old], minlength=L)[loc].astype(np.int64)
        s.moves[o] += np.bincount(li, weights=inc.moved[old], minlength=L)[loc].astype(np.int64)
        gone = old & ~self.renew[w.runs[inc.loc], inc.col]
        self.chain.live[w.runs[inc.loc[gone]], inc.col[gone]] = False

    def _play(self, w: _Window) -> IntArray:
        """Advance the job of every run of window ``w`` from event to event (a checkpoint, the
        end, a critical revocation) until it ends or needs the next window; returns the rows
        that need it."""
        s = self.state
        later: list[IntArray] = []
        ended: list[tuple[IntArray, FloatArray, bool]] = []
        pending = np.arange(w.runs.size)
        capped = np.flatnonzero(w.capped)
        if capped.size:
            ended.append((capped, s.t[w.runs[capped]], False))
            pending = pending[~w.capped]
        while pending.size:
            self.rounds += 1
            o = w.runs[pending]
            if self.rounds > self.max_rounds:  # the cap: what is left ends unfinished
                rest = np.concatenate([pending, *later])
                ended.append((rest, s.t[w.runs[rest]], False))
                later = []
                break
            b, horizon = w.b[pending], self.horizon[o]
            reach, c, idx, target = self._ahead(
                w, pending, o, s.t[o], s.pause[o], s.crit_after[o], s.prog[o]
            )
            steps = self.steps[o]
            first = np.minimum(reach, c)
            stall = self.stall_s[o]
            stalled = (stall < b) & (stall <= first)
            unknown = ~stalled & ~np.isfinite(first)
            out_of_time = unknown & (b >= horizon)
            wait = unknown & ~out_of_time
            hit = ~stalled & ~unknown & (reach <= c)
            done = hit & (target >= steps)
            ckpt = hit & ~done
            back = ~stalled & ~unknown & ~hit
            ended.append((pending[stalled], stall[stalled], False))
            ended.append((pending[out_of_time], horizon[out_of_time], False))
            ended.append((pending[done], reach[done], True))
            if ckpt.any():
                k = o[ckpt]
                s.t[k] = reach[ckpt]
                s.prog[k] = s.ckpt[k] = target[ckpt]
                cost = self.ckpt_cost(self.rng, k.size)
                own = self.own_ckpt[self.job[k]]
                s.pause[k] = reach[ckpt] + np.where(np.isnan(own), cost, own)
            if back.any():
                at = c[back]
                fast = np.flatnonzero(self.replace_revoked[o[back]] & self.jump)
                if fast.size:  # a storm: straight to its last rollback
                    rows = pending[back][fast]
                    last = self._last_roll_back(w, rows, o[back][fast], idx[back][fast])
                    at[fast] = w.crit_t[last]
                self._roll_back(w, pending[back], o[back], at)
            if wait.any():
                later.append(pending[wait])
            pending = pending[ckpt | back]
        self._settle(w, ended)
        # (in row order: the next window draws the same whatever round each row stopped in)
        return np.sort(np.concatenate(later)) if later else np.zeros(0, dtype=np.int64)

    # -- the simulation -------------------------------------------------------------------------
    def run(self) -> list[RunStatistics]:
        R, C = self.runs, self.n_cols
        self._initial()
        real = self.col_cls[self.job] >= 0
        self.renew = real & (self.replace_revoked[:, None] | self.col_ps[self.job])
        self.chain = _Chains(
            live=real, req=self.req.copy(), up=self.up.copy(), down=self.down.copy(),
            price=self.col_price[self.job], fb=np.zeros((R, C), dtype=bool),
            created=np.full((R, C), -np.inf), cls=self.col_cls[self.job],
            moved=np.zeros((R, C), dtype=bool),
        )  # fmt: skip
        # a job dropping revoked workers stalls when its last worker is gone
        workers = self.col_worker[self.job]
        last = np.where(workers, self.down, -np.inf).max(axis=1)
        self.stall_s = np.where(self.replace_revoked, np.inf, last)
        s = self.state = _State(R)
        s.chief[:] = 0
        first_up = self.up[np.arange(R), 0]
        ps_up = np.where(self.col_ps[self.job], self.up, -np.inf).max(axis=1)
        s.pause[:] = np.maximum(first_up, ps_up)
        # an elastic job starts once its initial workers are all up (their arrivals are its
        # first rendezvous, not re-shards)
        all_up = np.where(workers & (self.down > self.up), self.up, -np.inf).max(axis=1)
        self.elastic_start = np.where(self.elastic, np.maximum(all_up, 0.0), np.inf)
        s.pause[:] = np.where(self.elastic, np.maximum(s.pause, all_up), s.pause)
        self.out_dur = np.full(R, np.inf)
        self.out_cost = np.zeros(R)
        self.out_gpu_s = np.zeros(R)
        self.out_revs = np.zeros(R, dtype=np.int64)
        self.out_fallbacks = np.zeros(R, dtype=np.int64)
        self.out_moves = np.zeros(R, dtype=np.int64)
        first_span = self._first_span()
        # runs in chunks of about _CHUNK_INCARNATIONS incarnations in their first window, from
        # each job's incarnations per server so far: the windows' arrays stay small
        servers = np.count_nonzero(self.col_cls >= 0, axis=1).astype(np.float64)
        per_server = np.full(len(self.jobs), 4.0)  # until measured
        lo = 0
        while lo < R:
            expected = np.cumsum(servers[self.job[lo:]] * per_server[self.job[lo:]])
            hi = lo + max(int(np.searchsorted(expected, _CHUNK_INCARNATIONS, side="right")), 1)
            self.rounds = 0
            rs = np.arange(lo, hi)
            a, span = np.zeros(rs.size), first_span[lo:hi]
            first = True
            while rs.size:
                b = np.minimum(a + span, self.horizon[rs])
                w = self._window(rs, a, b)
                if first:
                    K = len(self.jobs)
                    made = np.bincount(self.job[rs[w.inc.loc]], minlength=K)
                    had = np.bincount(self.job[rs], weights=servers[self.job[rs]], minlength=K)
                    seen = had > 0
                    per_server[seen] = np.maximum(made[seen] / had[seen], 1.0)
                    first = False
                later = self._play(w)
                if later.size == 0:
                    break
                self._retire(w, later)
                rs, a = rs[later], b[later]
                span = self._next_span(rs, a, span[later])
            lo = hi
        stats = []
        for k, job in enumerate(self.jobs):
            part = slice(int(self.first_run[k]), int(self.first_run[k + 1]))
            stats.append(
                RunStatistics(
                    duration_s=self.out_dur[part],
                    cost_usd=self.out_cost[part],
                    revocations=self.out_revs[part],
                    deadline_s=job.scenario.deadline_s,
                    fallbacks=self.out_fallbacks[part] if self.count_fallbacks[k] else None,
                    moves=self.out_moves[part] if self.count_moves[k] else None,
                    gpu_s=self.out_gpu_s[part],
                )
            )
        return stats

    def _first_span(self) -> FloatArray:
        """Each run's first window: 1.5x its time at full speed plus its start-up, at least
        an hour (a run past it goes on in a window twice as long)."""
        R = self.runs
        full = np.asarray(self._full_speed(), dtype=np.float64)
        slow = np.ones(R) if self.run_slowdown is None else self.run_slowdown
        with np.errstate(divide="ignore"):
            ideal = np.where(full > 0, self.steps * slow / full, np.inf)
        startup = np.max(self.up, axis=1)
        span = 1.5 * (ideal + startup) + 3600.0
        return np.where(np.isfinite(span), span, self.horizon)

    def _next_span(self, o: IntArray, now: FloatArray, span: FloatArray) -> FloatArray:
        """The next window of runs going on at ``now``: 1.3x the time their checkpointed
        pace so far leaves (between half and four times the last window), plus an hour."""
        s = self.state
        done = s.ckpt[o]
        with np.errstate(divide="ignore", invalid="ignore"):
            left = (self.steps[o] - done) * now / done
        guess = np.where(done > 0, 1.3 * left + 3600.0, 2.0 * span)
        return np.clip(guess, 0.5 * span, 4.0 * span)

    def _full_speed(self) -> FloatArray:
        """Each run's speed with every worker ready."""
        counts = self.n_workers_by_group[self.job]
        if self.speeds is None:
            return np.asarray(self.speed(counts), dtype=np.float64)
        return self.speeds(counts, self.job)
