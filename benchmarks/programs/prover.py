"""A proof-generation-like CPU workload: for each "proof", commit to a random polynomial with
a multi-scalar multiplication in a prime-order group (modular exponentiations of big
integers, as a Pedersen/KZG-style commitment does) and answer a few evaluation queries.

    python prover.py [PROOFS] [DEGREE]   prints ``proofs=<count>``

One thread, all big-integer arithmetic: the kind of job whose server cost decides whether
outsourcing verifiable computation pays.
"""

from __future__ import annotations

import random
import sys

#: 2**255 - 19 (prime) and a generator-like base
P = 2**255 - 19
G = 9


def prove(rng: random.Random, degree: int) -> int:
    coefficients = [rng.randrange(P) for _ in range(degree)]
    bases = [pow(G, i + 2, P) for i in range(degree)]
    commitment = 1
    for base, c in zip(bases, coefficients, strict=True):
        commitment = commitment * pow(base, c, P) % P
    for _ in range(4):  # evaluation queries (Horner)
        x = rng.randrange(P)
        value = 0
        for c in reversed(coefficients):
            value = (value * x + c) % P
        commitment = commitment * pow(G, value, P) % P
    return commitment


if __name__ == "__main__":
    proofs = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    degree = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
    rng = random.Random(1)
    digest = 0
    for _ in range(proofs):
        digest ^= prove(rng, degree)
    print(f"digest={digest % 1000} proofs={proofs}")
