"""Cold start of large models: ``predict coldstart`` against published loader benchmarks
(issue #19's second half: within 25% of published figures for models above 2 GB).

Each row of ``catalog/data/coldstart_published.csv`` is a published load time with its
testbed (model, GPU, instance type, storage class, instance network, loader and its
concurrency). The prediction is the one a user gets from ``gpucast predict coldstart MODEL
--gpu GPU --instance TYPE --storage CLASS [--network-gbps N]``: its weight-load phase
(``bytes / min(storage, the instance's EBS link, network, PCIe)``; no loader term on a GPU).
The published figures only check the model; nothing is fitted to them. Rows the model
cannot express (parallel S3 streams, a serving engine's start-up) are listed with the reason
and left out of the count.

    .venv/bin/python benchmarks/coldstart_published.py
"""

from __future__ import annotations

import statistics
from typing import Any

import gpucast
from gpucast.catalog.coldstart import load_published_coldstarts

TARGET = 0.25


def rows() -> list[dict[str, Any]]:
    """One dict per published figure: the testbed, published and predicted seconds, error."""
    out: list[dict[str, Any]] = []
    for pub in load_published_coldstarts():
        row: dict[str, Any] = {
            "source": pub.source,
            "model": pub.model,
            "instance": pub.instance,
            "storage": pub.storage,
            "loader": pub.loader,
            "concurrency": pub.concurrency,
            "measured": pub.measured,
            "published_s": pub.published_s,
            "expressible": pub.expressible,
            "note": pub.note,
        }
        result = gpucast.predict_coldstart(
            workload=pub.model,
            gpu=pub.gpu,
            instance=pub.instance,
            storage=pub.storage,
            network_gbps=pub.network_gbps,
        )
        row["weight_bytes"] = result.prediction.weight_bytes
        if pub.expressible:
            predicted = result.prediction.weight_load_s
            row["predicted_s"] = predicted
            row["bound_by"] = result.prediction.bound_by
            row["error"] = predicted / pub.published_s - 1
            row["within"] = abs(row["error"]) <= TARGET
        out.append(row)
    return out


def summary(table: list[dict[str, Any]]) -> str:
    checked = [r for r in table if r["expressible"]]
    within = sum(r["within"] for r in checked)
    errors = [abs(r["error"]) * 100 for r in checked]
    return (
        f"{within}/{len(checked)} expressible figures within 25% (median |error| "
        f"{statistics.median(errors):.0f}%); {len(table) - len(checked)} not expressible"
    )


def main() -> None:
    table = rows()
    print(
        "| source | model | GB | instance | storage | loader (concurrency) | measured "
        "| published s | predicted s | bound by | error | within 25% |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in table:
        loader = r["loader"] + (f" ({r['concurrency']})" if r["concurrency"] else "")
        if r["expressible"]:
            tail = (
                f"{r['predicted_s']:.2f} | {r['bound_by']} | {r['error']:+.0%} "
                f"| {'yes' if r['within'] else 'no'}"
            )
        else:
            tail = "- | - | - | not expressible"
        print(
            f"| {r['source']} | {r['model']} | {r['weight_bytes'] / 1e9:.1f} "
            f"| {r['instance'] or '-'} | {r['storage']} "
            f"| {loader} | {r['measured']} | {r['published_s']:.2f} | {tail} |"
        )
    print(summary(table))


if __name__ == "__main__":
    main()
