"""Hostile sample: a double-forked setsid daemon that outlives the script.

The daemon keeps the inherited stdout open (a grader reading until EOF would hang)
and touches ``daemon_heartbeat`` in cwd every 0.2 s; the test checks that it stops.
The script itself exits 0 at once, without training.
"""
import os
import time

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for _ in range(3000):  # ten minutes
            with open("daemon_heartbeat", "w") as f:
                f.write(str(time.time()))
            print("daemon alive", flush=True)
            time.sleep(0.2)
        os._exit(0)
    os._exit(0)
time.sleep(0.5)  # let the daemon start before the parent leaves
print("hostile setsid_daemon: parent exits, daemon stays")
