"""What a ``torch.load`` of a state dict costs beyond reading its file, on this machine: the
path ``measure coldstart`` times against the path ``measure_host_rates`` calibrates (issue #19).

    .venv/bin/python benchmarks/coldstart_load_path.py [--mib 512] [--rounds 3]

Per round, with one torch thread: ``raw`` -- a raw file of ``--mib`` MiB read into freshly
allocated memory in one read call, page cache dropped (the calibration's read rate);
``load`` -- ``torch.load`` of a state dict of the same bytes (4 tensors), page cache dropped
(what ``measure coldstart`` times; ``load_state_dict(assign=True)`` after it copies nothing);
``load mmap`` -- ``torch.load(mmap=True)`` and a sum over every tensor (the pages faulted in
from the file); ``load warm`` -- ``torch.load`` with the file in the page cache (no disk: the
unpickling, allocation and copy alone); ``fresh fill`` -- filling that many bytes of freshly
allocated memory (its page faults); ``copy`` -- copying them into fresh memory.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import torch

from gpucast.measure.coldstart import drop_from_page_cache


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    n = args.mib * 2**20
    folder = Path(tempfile.mkdtemp())
    try:
        state = {f"w{i}": torch.randn(n // 16) for i in range(4)}  # 4 fp32 tensors, n bytes
        weights = folder / "weights.pt"
        torch.save(state, weights)
        del state
        raw = folder / "raw.bin"
        with raw.open("wb") as handle:
            block = os.urandom(2**20)
            for _ in range(args.mib):
                handle.write(block)
        os.sync()

        def read_raw() -> None:
            drop_from_page_cache(raw)
            target = memoryview(torch.empty(n, dtype=torch.uint8).numpy())
            offset = 0
            with raw.open("rb", buffering=0) as handle:
                while got := handle.readinto(target[offset:]):
                    offset += got

        def load(mmap: bool = False, cold: bool = True) -> None:
            if cold:
                drop_from_page_cache(weights)
            loaded = torch.load(weights, map_location="cpu", weights_only=True, mmap=mmap)
            if mmap:
                for v in loaded.values():
                    v.sum()

        def fresh_fill() -> None:
            torch.empty(n, dtype=torch.uint8).fill_(1)

        source = torch.ones(n, dtype=torch.uint8)

        def copy() -> None:
            torch.empty_like(source).copy_(source)

        cases = {
            "raw": read_raw,
            "load": load,
            "load mmap": lambda: load(mmap=True),
            "load warm": lambda: load(cold=False),
            "fresh fill": fresh_fill,
            "copy": copy,
        }
        print(f"{args.mib} MiB, seconds per round (GB/s of the best round)")
        times: dict[str, list[float]] = {k: [] for k in cases}
        for _ in range(args.rounds):
            for name, fn in cases.items():
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
        for name, values in times.items():
            rounds = "  ".join(f"{v:.3f}" for v in values)
            print(f"  {name:<11}{rounds}   ({n / min(values) / 1e9:.2f} GB/s)")
    finally:
        shutil.rmtree(folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
