"""What keeps `plan train` fast at thousands of GPUs changes no number: the PS networks solved
once across chunks, the kept rows pruned again over all chunks, the erfc tails filled in, the
lexicographic least found without a sort."""

from __future__ import annotations

import math

import numpy as np
import pytest
from plan_factories import context, request

from gpucast.domain.errors import NoFeasiblePlanError
from gpucast.plan import space, train
from gpucast.plan.pareto import first_least
from gpucast.plan.train import plan_training, search
from gpucast.plan.uncertainty import ndtr
from gpucast.predict import comm


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
        monkeypatch.setattr(space.space_chunks, "__kwdefaults__", {"rows": rows})
        monkeypatch.setattr(train, "REPRUNE_ROWS", reprune)
        try:
            return plan_training(request(**options), context()).to_dict()
        except NoFeasiblePlanError as exc:
            return str(exc)

    assert plan_with(37, 0) == plan_with(1 << 30, 1 << 30)


def test_repruning_keeps_fewer_rows_and_counts_every_one(monkeypatch: pytest.MonkeyPatch) -> None:
    req = request(max_gpus=64)
    monkeypatch.setattr(space.space_chunks, "__kwdefaults__", {"rows": 200})
    monkeypatch.setattr(train, "REPRUNE_ROWS", 1 << 30)
    chunked = search(req, context(), compact=True)
    monkeypatch.setattr(train, "REPRUNE_ROWS", 0)
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
