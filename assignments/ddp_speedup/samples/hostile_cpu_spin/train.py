"""Hostile sample: a busy loop that never finishes; the wall-clock limit must end it."""
n = 0
while True:
    n += 1
