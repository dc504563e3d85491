"""redis-py's own Lock, taken over and over for a while on a key distlock contends for too.

Usage: redis_py_contend.py PORT NAME START END INSIDE_FILE
From START to END (seconds since the Unix epoch, the window every side of the test shares),
each round takes the lock (retrying every 1 ms, redis-py's `sleep`), creates INSIDE_FILE
exclusively (it exists only while someone is inside), holds for 1 ms, removes it and
releases. Prints the number of rounds; exits 3 if INSIDE_FILE was already there (two
holders at once).
"""
import os
import sys
import time

import redis


def main() -> None:
    port, name, inside = sys.argv[1], sys.argv[2], sys.argv[5]
    start, end = float(sys.argv[3]), float(sys.argv[4])
    client = redis.Redis(host="127.0.0.1", port=int(port), db=0)
    client.ping()
    time.sleep(max(0.0, start - time.time()))
    rounds = 0
    while time.time() < end:
        with client.lock(name, timeout=10, sleep=0.001, blocking_timeout=30):
            try:
                fd = os.open(inside, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                print("overlap", flush=True)
                sys.exit(3)
            os.close(fd)
            time.sleep(0.001)
            os.unlink(inside)
        rounds += 1
    print(rounds, flush=True)


if __name__ == "__main__":
    main()
