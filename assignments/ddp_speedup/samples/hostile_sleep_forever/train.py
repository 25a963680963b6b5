"""Hostile sample: idles forever (uses no CPU, so only a wall-clock limit catches it)."""
import time

while True:
    time.sleep(3600)
