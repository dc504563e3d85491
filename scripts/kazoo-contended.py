#!/usr/bin/env python3
"""The contended figure of `distlock bench`, measured with kazoo's own Lock, to compare.

Usage: scripts/kazoo-contended.py HOSTS [--processes 32] [--duration 3] [--runs 3]

PROCESSES worker processes each loop acquire/release of one kazoo Lock on one path for
DURATION seconds; prints the ownership transfers per second (acquisitions; every one is a
transfer when all contend), the median of RUNS runs, and the spread between processes; and
the waits for the lock, p50 and p99, against the ideal FIFO wait (PROCESSES - 1 transfers
at the measured rate), as `distlock bench` reports them.
"""
import argparse
import multiprocessing
import statistics
import time
import uuid

from kazoo.client import KazooClient


def worker(hosts, path, start, duration, counts, waits, index):
    client = KazooClient(hosts=hosts, timeout=10)
    client.start(timeout=20)
    lock = client.Lock(path, f"worker-{index}")
    while time.time() < start:
        time.sleep(0.001)
    count = 0
    end = start + duration
    waited = []
    while time.time() < end:
        asked = time.monotonic()
        with lock:
            waited.append(time.monotonic() - asked)
            count += 1
    counts[index] = count
    waits.put(waited)
    client.stop()


def run(hosts, processes, duration):
    path = f"/kazoo-bench/{uuid.uuid4().hex}"
    counts = multiprocessing.Array("i", processes)
    waits = multiprocessing.Queue()
    start = time.time() + 3
    workers = [
        multiprocessing.Process(
            target=worker, args=(hosts, path, start, duration, counts, waits, i)
        )
        for i in range(processes)
    ]
    for w in workers:
        w.start()
    waited = sorted(w for _ in workers for w in waits.get(timeout=duration + 60))
    for w in workers:
        w.join(duration + 60)
    if not waited:
        raise SystemExit("no process acquired the lock: is ZooKeeper at " + hosts + "?")
    rate = sum(counts) / duration
    p50, p99 = (waited[int(q * (len(waited) - 1))] for q in (0.5, 0.99))
    ideal = (processes - 1) / rate
    return rate, min(counts), max(counts), p50, p99, ideal


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("hosts")
    parser.add_argument("--processes", type=int, default=32)
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    results = [run(args.hosts, args.processes, args.duration) for _ in range(args.runs)]
    rates = [r[0] for r in results]
    print(
        f"kazoo Lock, {args.processes} processes on one name: "
        f"{statistics.median(rates):.0f} transfers/s (median of {args.runs}: "
        f"{', '.join(f'{r:.0f}' for r in rates)}), per process "
        f"{min(r[1] for r in results)}..{max(r[2] for r in results)}; wait p50 "
        f"{statistics.median(r[3] for r in results) * 1e3:.1f} ms, p99 "
        f"{statistics.median(r[4] for r in results) * 1e3:.1f} ms, p99 / ideal FIFO wait "
        f"{statistics.median(r[4] / r[5] for r in results):.2f}"
    )


if __name__ == "__main__":
    main()
