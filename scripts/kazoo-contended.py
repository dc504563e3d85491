#!/usr/bin/env python3
"""The contended figure of `distlock bench`, measured with kazoo's own Lock, to compare.

Usage: scripts/kazoo-contended.py HOSTS [--processes 32] [--duration 3] [--runs 3]

PROCESSES worker processes each loop acquire/release of one kazoo Lock on one path for
DURATION seconds; prints the ownership transfers per second (acquisitions; every one is a
transfer when all contend), the median of RUNS runs, and the spread between processes.
"""
import argparse
import multiprocessing
import statistics
import time
import uuid

from kazoo.client import KazooClient


def worker(hosts, path, start, duration, counts, index):
    client = KazooClient(hosts=hosts, timeout=10)
    client.start(timeout=20)
    lock = client.Lock(path, f"worker-{index}")
    while time.time() < start:
        time.sleep(0.001)
    count = 0
    end = start + duration
    while time.time() < end:
        with lock:
            count += 1
    counts[index] = count
    client.stop()


def run(hosts, processes, duration):
    path = f"/kazoo-bench/{uuid.uuid4().hex}"
    counts = multiprocessing.Array("i", processes)
    start = time.time() + 3
    workers = [
        multiprocessing.Process(target=worker, args=(hosts, path, start, duration, counts, i))
        for i in range(processes)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join(duration + 60)
    return sum(counts) / duration, min(counts), max(counts)


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
        f"{min(r[1] for r in results)}..{max(r[2] for r in results)}"
    )


if __name__ == "__main__":
    main()
