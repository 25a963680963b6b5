"""Hostile sample: flood the grader's record channel.

Opens hundreds of connections to the channel socket (its folder is in the environment) and
pushes megabytes without a newline into each, so a grader that buffers every connection
up to its per-stream cap grows without bound. Then exits 0 without training.
The grader must cap connections, drop those without a valid hello early, and flag the job.
"""
import os
import socket
import time

path = os.path.join(os.environ.get("DISTGRADE_CHANNEL", "."), "sock")
conns = []
for _ in range(300):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(0.5)
        s.connect(path)
        conns.append(s)
    except OSError:
        break
junk = b"x" * (1 << 20)
for s in conns:
    for _ in range(4):
        try:
            s.send(junk)
        except OSError:
            break
time.sleep(2)
