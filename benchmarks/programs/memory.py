"""Memory-bound, one thread: stream two large float64 arrays (a += b) with numpy; the working
set (2 x 640 MB) is far beyond any cache, so the loop runs at memory bandwidth.

    python memory.py [PASSES] [MIB]   prints ``GB/s=<bytes moved per second>``
"""

from __future__ import annotations

import sys
import time

import numpy as np

if __name__ == "__main__":
    passes = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    mib = int(sys.argv[2]) if len(sys.argv) > 2 else 640
    n = mib * 2**20 // 8
    a = np.ones(n)
    b = np.full(n, 0.5)
    start = time.perf_counter()
    for _ in range(passes):
        np.add(a, b, out=a)
    elapsed = time.perf_counter() - start
    moved = passes * 3 * n * 8  # read a, read b, write a
    print(f"check={a[0]:.1f} GB/s={moved / elapsed / 1e9:.2f}")
