"""Multi-threaded (processes): a fixed pool of 4 workers shares 16 chunks of pure-Python
work (about 4 s of CPU), so it uses every core it is given up to 4.

    python threaded.py [CHUNK]   prints ``chunks/s=<rate>``
"""

from __future__ import annotations

import sys
import time
from multiprocessing import Pool


def work(n: int) -> int:
    total = 0
    for i in range(n):
        total = (total + i * i) % 1_000_003
    return total


if __name__ == "__main__":
    chunk = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000
    start = time.perf_counter()
    with Pool(4) as pool:
        results = pool.map(work, [chunk] * 16, chunksize=1)
    print(f"sum={sum(results)} chunks/s={16 / (time.perf_counter() - start):.2f}")
