"""I/O-bound: write a file in 1 MiB blocks with fsync every 16 MiB, read it back, delete it.

python disk_io.py FOLDER [MIB]   prints ``MB/s=<bytes written and read per second>``
"""

from __future__ import annotations

import os
import sys
import time

if __name__ == "__main__":
    folder = sys.argv[1]
    mib = int(sys.argv[2]) if len(sys.argv) > 2 else 512
    path = os.path.join(folder, f"gpucast-io-{os.getpid()}.bin")
    block = os.urandom(2**20)
    start = time.perf_counter()
    with open(path, "wb") as out:
        for i in range(mib):
            out.write(block)
            if i % 16 == 15:
                out.flush()
                os.fsync(out.fileno())
        out.flush()
        os.fsync(out.fileno())
    with open(path, "rb") as back:
        while back.read(2**20):
            pass
    os.remove(path)
    print(f"MB/s={2 * mib * 1.048576 / (time.perf_counter() - start):.1f}")
