"""Hostile sample: try to reach services the grading host listens on at 127.0.0.1.

The sandbox's network namespace has its own loopback, so every attempt must fail.
Results go to ``net_result.<rank>.json`` in the working directory for the tests;
the script then exits 1 without training.
"""
import json
import os
import socket

ports = [6379, 5432, 8000, 5000]
if os.environ.get("DISTGRADE_TEST_HOST_PORT"):
    ports.insert(0, int(os.environ["DISTGRADE_TEST_HOST_PORT"]))
reached = {}
for port in ports:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            s.sendall(b"hostile sample was here\n")
            reached[port] = "connected"
    except OSError as e:
        reached[port] = f"refused: {e.__class__.__name__}"
rank = os.environ.get("RANK", "0")
with open(f"net_result.{rank}.json", "w") as f:
    json.dump({str(k): v for k, v in reached.items()}, f)
print("hostile network_loopback:", reached)
raise SystemExit(1)
