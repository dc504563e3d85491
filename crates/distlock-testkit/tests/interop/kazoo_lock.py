"""kazoo's own Lock, contending with distlock on the same ZooKeeper path.

Usage: kazoo_lock.py HOSTS PATH ITERATIONS COUNTER_FILE INSIDE_FILE
Each iteration takes the lock (counting Curator's and distlock's "-lock-" nodes as
contenders), creates INSIDE_FILE (which must not exist), reads the counter file, pauses,
writes it back plus one and removes INSIDE_FILE. Exits 3 on an overlap.
"""
import os
import sys
import time

from kazoo.client import KazooClient


def main() -> None:
    hosts, path, iterations = sys.argv[1], sys.argv[2], int(sys.argv[3])
    counter, inside = sys.argv[4], sys.argv[5]
    client = KazooClient(hosts=hosts, timeout=10)
    client.start(timeout=20)
    lock = client.Lock(path, "kazoo", extra_lock_patterns=["-lock-"])
    for _ in range(iterations):
        if not lock.acquire(timeout=60):
            sys.exit(2)
        try:
            try:
                fd = os.open(inside, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                os.close(fd)
            except FileExistsError:
                print("someone else is inside", file=sys.stderr)
                sys.exit(3)
            with open(counter) as f:
                value = int(f.read().strip() or 0)
            time.sleep(0.001)
            with open(counter, "w") as f:
                f.write(str(value + 1))
            os.remove(inside)
        finally:
            lock.release()
    client.stop()
    print("done")


if __name__ == "__main__":
    main()
