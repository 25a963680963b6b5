"""Hostile sample: thousands of hellos with made-up 1 KiB tokens.

The grader used to quote every unknown hello verbatim in its messages: a 2 MB flood
became a 15 MB stored report. Now they are counted, one short escaped prefix is kept,
and the job needs review. Exits 0 without training.
"""
import json
import os
import socket

path = os.path.join(os.environ.get("DISTGRADE_CHANNEL", "."), "sock")
for i in range(2000):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(0.5)
        s.connect(path)
        s.sendall(json.dumps({"type": "hello", "token": "\u202e" + "A" * 1000 + str(i),
                              "rank": "<script>" * 50}).encode() + b"\n")
        s.close()
    except OSError:
        pass
