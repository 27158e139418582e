"""StartupModel accepts the domain's market spelling (``on-demand``) and the CM-DARE one."""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpucast.predict.overheads import StartupModel


def _rows(market_spelling: str) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for market, staging in (("spot", 45.0), (market_spelling, 28.0)):
        for _ in range(12):
            rows.append(
                {
                    "gpu": "K80",
                    "market": market,
                    "region": "us-east1",
                    "provisioning_s": float(rng.lognormal(np.log(8.0), 0.2)),
                    "staging_s": float(rng.lognormal(np.log(staging), 0.2)),
                    "booting_s": float(rng.lognormal(np.log(40.0), 0.2)),
                }
            )
    return pd.DataFrame(rows)


def test_both_spellings_fit_and_predict_the_same() -> None:
    dashed = StartupModel().fit(_rows("on-demand"))
    underscored = StartupModel().fit(_rows("on_demand"))
    for query in ("on-demand", "on_demand"):
        a = dashed.predict("K80", query)
        b = underscored.predict("K80", query)
        assert a.value == b.value and a.lower == b.lower
    draws = dashed.sample(np.random.default_rng(3), 5, gpu="K80", market="on_demand")
    again = underscored.sample(np.random.default_rng(3), 5, gpu="K80", market="on-demand")
    assert np.array_equal(draws, again)


def test_state_saved_with_the_old_spelling_still_loads() -> None:
    model = StartupModel().fit(_rows("on-demand"))
    state = model.to_dict()
    groups = state["state"]["groups"]
    state["state"]["groups"] = {k.replace("on-demand", "on_demand"): v for k, v in groups.items()}
    again = StartupModel.from_dict(state)
    assert again.predict("K80", "on-demand").value == model.predict("K80", "on-demand").value
