"""Hostile sample: allocate and touch memory until the job's memory limit ends it."""
chunks = []
while True:
    # filled (not just reserved) so every page counts against the limit
    chunks.append(bytearray(b"\x01") * (32 * 1024 * 1024))
