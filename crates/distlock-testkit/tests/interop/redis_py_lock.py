"""redis-py's own Lock, contending with distlock on the same key.

Usage: redis_py_lock.py PORT NAME ITERATIONS COUNTER_FILE
Each iteration takes the lock, reads the counter file, pauses, and writes it back plus one.
"""
import sys
import time

import redis


def main() -> None:
    port, name, iterations, counter = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    client = redis.Redis(host="127.0.0.1", port=int(port), db=0)
    for _ in range(iterations):
        with client.lock(name, timeout=10, sleep=0.001, blocking_timeout=60):
            with open(counter) as f:
                value = int(f.read().strip() or 0)
            time.sleep(0.001)
            with open(counter, "w") as f:
                f.write(str(value + 1))
    print("done")


if __name__ == "__main__":
    main()
