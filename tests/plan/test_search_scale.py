"""What keeps `plan train` fast at thousands of GPUs changes no number: the PS networks solved
once across chunks, the kept rows pruned again over all chunks, the erfc tails filled in, the
lexicographic least found without a sort."""

from __future__ import annotations

import math
from dataclasses import fields, replace

import numpy as np
import pytest
from plan_factories import context, power_model, request

from gpucast.domain.errors import NoFeasiblePlanError
from gpucast.plan import _train_search, space
from gpucast.plan.energy import PowerSetting
from gpucast.plan.evaluate import EvalMemo, Evaluation, evaluate
from gpucast.plan.pareto import first_least
from gpucast.plan.train import PlanContext, plan_training, search
from gpucast.plan.uncertainty import ndtr
from gpucast.predict import comm
from gpucast.predict.power import BoardPower


def _with_power(ctx: PlanContext) -> PlanContext:
    """``ctx`` with a power model and facts for the FAST boards (the memo keeps its answers)."""
    model = power_model()
    board = BoardPower(name="FAST", max_power_limit_w=300.0, min_power_limit_w=100.0)
    setting = PowerSetting(model=model, boards={"FAST": board}, mode="auto")
    return replace(ctx, perf=replace(ctx.perf, power=setting))


def _same(a: Evaluation, b: Evaluation) -> None:
    for f in fields(Evaluation):
        np.testing.assert_array_equal(getattr(a, f.name), getattr(b, f.name), err_msg=f.name)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"max_gpus": 64},
        {"allow_mixed": True, "max_gpus": 32},
        {"deadline_s": 3 * 3600.0, "budget_usd": 40.0},
        {"objective": "goodput"},
        {"objective": "fastest", "max_gpus": 48},
        {"deadline_s": 600.0},  # nothing feasible: the error must not move either
    ],
)
def test_repruned_search_gives_the_same_plan(
    options: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks of 37 rows, pruned again over everything kept after every chunk, give the plan
    (or the error) of one chunk of the whole space that is never pruned again."""

    def plan_with(rows: int, reprune: int) -> object:
        monkeypatch.setattr(space, "CHUNK_ROWS", rows)
        monkeypatch.setattr(
            space.space_chunks,
            "__kwdefaults__",
            {**space.space_chunks.__kwdefaults__, "rows": rows},
        )
        monkeypatch.setattr(_train_search, "REPRUNE_ROWS", reprune)
        try:
            return plan_training(request(**options), context()).to_dict()
        except NoFeasiblePlanError as exc:
            return str(exc)

    assert plan_with(37, 0) == plan_with(1 << 30, 1 << 30)


def test_repruning_keeps_fewer_rows_and_counts_every_one(monkeypatch: pytest.MonkeyPatch) -> None:
    req = request(max_gpus=64)
    monkeypatch.setattr(
        space.space_chunks, "__kwdefaults__", {**space.space_chunks.__kwdefaults__, "rows": 200}
    )
    monkeypatch.setattr(_train_search, "REPRUNE_ROWS", 1 << 30)
    chunked = search(req, context(), compact=True)
    monkeypatch.setattr(_train_search, "REPRUNE_ROWS", 0)
    pruned = search(req, context(), compact=True)
    assert len(pruned.space) < len(chunked.space)
    assert pruned.evaluated == chunked.evaluated
    assert pruned.marked == chunked.marked
    assert (pruned.passed_on_demand, pruned.passed_spot) == (
        chunked.passed_on_demand,
        chunked.passed_spot,
    )
    assert pruned.unkept == chunked.unkept  # what the error message says: the same extremes
    # every row kept after re-pruning is a row the chunks kept, with the same numbers
    key = {
        (int(o), int(n), bool(s), int(t), int(k), int(b)): i
        for i, (o, n, s, t, k, b) in enumerate(
            zip(
                chunked.space.offer, chunked.space.nodes, chunked.space.spot,
                chunked.space.strategy, chunked.space.shards, chunked.space.batch,
                strict=True,
            )
        )
    }  # fmt: skip
    rows = [
        key[(int(o), int(n), bool(s), int(t), int(k), int(b))]
        for o, n, s, t, k, b in zip(
            pruned.space.offer, pruned.space.nodes, pruned.space.spot,
            pruned.space.strategy, pruned.space.shards, pruned.space.batch,
            strict=True,
        )
    ]  # fmt: skip
    np.testing.assert_array_equal(pruned.evaluation.time_s, chunked.evaluation.time_s[rows])
    np.testing.assert_array_equal(pruned.reason, chunked.reason[rows])


def test_async_memo_gives_the_table_bit_for_bit() -> None:
    rng = np.random.default_rng(3)
    think = rng.uniform(0.01, 0.5, 40)
    push = rng.uniform(0.001, 0.05, 40)
    pull = push * rng.uniform(0.2, 1.0, 40)
    memo = comm.AsyncTableMemo(16)
    first = memo.table(think[:25], push[:25], pull[:25], 9)
    np.testing.assert_array_equal(first, comm.ps_async_table(think[:25], push[:25], pull[:25], 9))
    # overlapping rows, in another order, and a wider table than the memo was sized for
    rows = np.r_[np.arange(30, 10, -1), np.arange(30, 40)]
    again = memo.table(think[rows], push[rows], pull[rows], 24)
    np.testing.assert_array_equal(
        again, comm.ps_async_table(think[rows], push[rows], pull[rows], 24)
    )
    assert len(memo) == 40
    assert memo.table(think[:0], push[:0], pull[:0], 5).shape == (0, 5)


def test_ndtr_tails_are_erfc_bit_for_bit() -> None:
    z = np.r_[np.linspace(-80.0, 80.0, 40_001), -0.0, np.inf, -np.inf, np.nan]
    plain = np.array([0.5 * math.erfc(-v / math.sqrt(2.0)) for v in z])
    np.testing.assert_array_equal(ndtr(z), plain)
    assert float(ndtr(3.0)) == 0.5 * math.erfc(-3.0 / math.sqrt(2.0))


def test_first_least_is_lexsorts_first() -> None:
    rng = np.random.default_rng(0)
    values = np.array([0.0, -0.0, 1.0, 2.0, np.nan, np.inf, -np.inf])
    for _ in range(2000):
        n = int(rng.integers(1, 25))
        keys = [rng.choice(values, size=n) for _ in range(int(rng.integers(1, 4)))]
        assert first_least(*keys) == int(np.lexsort(keys[::-1])[0])


@pytest.mark.parametrize("options", [{}, {"allow_mixed": True, "max_gpus": 32}])
def test_chunks_with_twins_and_memo_evaluate_as_one_plain_call(options: dict[str, object]) -> None:
    """A search's way -- PS networks solved up front from the prototypes, a memo shared by the
    chunks, spot rows priced on their on-demand twins' numbers -- gives every row's numbers
    bit for bit as one plain :func:`evaluate` of the whole space."""
    ctx = _with_power(context())
    req = request(**options)
    res = search(req, ctx)  # the whole space, evaluated in one call (the twins' way)
    kw = {
        "facts": ctx.facts, "gpus": res.gpus, "params": ctx.perf, "work": res.work,
        "startup_s": ctx.risk.startup_mean_s,
    }  # fmt: skip
    plain = evaluate(res.space, **kw)  # type: ignore[arg-type]
    _same(res.evaluation, plain)
    assert np.isfinite(plain.gpu_power_w).any()  # the power model answered
    memo = EvalMemo(req.max_gpus)
    warm = space.ps_prototypes(req, res.space.offers)
    assert warm is not None and set(warm.strategy.tolist()) == {space.PS}
    assert not warm.spot.any() and (warm.nodes == 1).all()
    evaluate(warm, memo=memo, **kw)  # type: ignore[arg-type]
    solved = len(memo.ps)
    chunks, _ = space.space_chunks(req, res.space.offers, rows=50)
    parts = [
        evaluate(c, twin=space.market_twins(c), memo=memo, **kw)  # type: ignore[arg-type]
        for c in chunks
    ]
    assert len(memo.ps) == solved  # the prototypes met every PS network of the space
    joined = {
        f.name: np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(Evaluation)
    }
    _same(Evaluation(**joined), plain)


def test_no_prototypes_without_ps_or_with_a_global_batch() -> None:
    offers = search(request(), context()).space.offers
    assert space.ps_prototypes(request(strategies=("ddp",)), offers) is None
    assert space.ps_prototypes(request(global_batch=256), offers) is None
