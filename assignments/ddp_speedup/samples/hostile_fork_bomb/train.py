"""Hostile sample: a fork bomb. The job's pids limit must stop it and the run must fail."""
import os
import time

# Every child forks again; a refused fork is retried, as a real bomb would.
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    try:
        os.fork()
    except OSError:
        time.sleep(0.001)
