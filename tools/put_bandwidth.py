"""The put limit beside the exchange's numbers: NVSHMEM puts between all PEs at once.

Usage (one rank per PE; on the GPU node through tools/node-run.sh):
    tools/node-run.sh 4 python3 tools/put_bandwidth.py [--mib 512] [--repeat 5]

Every rank puts ``--mib`` MiB, split evenly over the other ranks, from a device buffer into
their symmetric buffers on the backend's comm stream, then ``quiet``; the time between two
barriers is the time of the slowest rank. Reported: per-rank rate (bytes a rank sent / time)
and aggregate (all bytes sent / time), median of ``--repeat`` rounds with [min, max]. These are
the numbers a redistribution moving the same bytes could reach at best (it also packs and
unpacks). On the CPU backend the same measures the MPI RMA transport.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import blasmp_array as bm


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    grid = bm.ProcessGrid(nprow=1)  # every rank of COMM_WORLD, one grid row
    be = grid.backend
    p, me = be.size, be.rank
    if p < 2:
        raise SystemExit("put_bandwidth.py needs at least 2 ranks")
    each = args.mib * 2**20 // 8 // (p - 1)  # float64 elements to each peer
    sym = be.alloc_symmetric(each * (p - 1), np.float64, name="put_bandwidth")
    src = be.xp.ones(each, dtype=np.float64)
    times = []
    for _ in range(args.repeat + 1):
        be.synchronize()
        be.barrier()
        t0 = time.perf_counter()
        for k in range(1, p):
            peer = (me + k) % p
            slot = (me - peer - 1) % p  # where my data lands among the peer's p - 1 senders
            be.put(sym, slot * each, src, peer, be.comm_stream)
        be.quiet(be.comm_stream)
        be.synchronize()
        be.barrier()
        times.append(time.perf_counter() - t0)
    times = np.array(times[1:])  # the first round warms the transport
    per_rank = each * (p - 1) * 8
    if me == 0:
        med = float(np.median(times))
        print(
            f"{p} ranks, backend {type(be).__name__}: {per_rank / 2**20:.0f} MiB per rank, "
            f"median {med * 1e3:.2f} ms [{times.min() * 1e3:.2f}, {times.max() * 1e3:.2f}]: "
            f"{per_rank / med / 1e9:.0f} GB/s per rank, {p * per_rank / med / 1e9:.0f} GB/s "
            "aggregate"
        )
    be.free(sym)


if __name__ == "__main__":
    main()
