"""Compute-bound, one thread: count primes below N with trial division in pure Python.

python compute.py [N]     prints ``primes/s=<rate>``
"""

from __future__ import annotations

import sys
import time


def count_primes(limit: int) -> int:
    count = 0
    for n in range(2, limit):
        d = 2
        while d * d <= n:
            if n % d == 0:
                break
            d += 1
        else:
            count += 1
    return count


if __name__ == "__main__":
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else 350_000
    start = time.perf_counter()
    found = count_primes(limit)
    print(f"primes={found} primes/s={found / (time.perf_counter() - start):.1f}")
