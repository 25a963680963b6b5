"""Hostile sample: print without end; output must stay bounded and the run must fail."""
import sys

line = "flood " * 20 + "\n"
while True:
    sys.stdout.write(line * 100)
