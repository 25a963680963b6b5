"""Hostile sample: write files into the job folder until something stops it."""
import os

block = b"\0" * (1024 * 1024)
i = 0
try:
    while True:
        # many medium files: a per-file size limit alone would not stop this
        with open(f"fill_{i:05d}.bin", "wb") as f:
            for _ in range(16):
                f.write(block)
        i += 1
except OSError as e:
    print("hostile fill_disk stopped by", e)
    raise SystemExit(1)
