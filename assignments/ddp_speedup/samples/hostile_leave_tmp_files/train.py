"""Hostile sample: leave 32 MiB in /dev/shm and 2,000 inodes in /tmp, plus a detached sleeper.

Names start with ``distgrade-hostile-leftover``; after grading, the test looks for them on
the host, where none may remain (a private /tmp and /dev/shm, or the per-uid cleanup when
the run has no private ones). The script then raises, so the run fails.
"""
import os
import subprocess

tag = f"distgrade-hostile-leftover-{os.getpid()}"
made = []
try:
    with open(f"/dev/shm/{tag}", "wb") as f:
        f.write(b"\0" * (32 << 20))
    made.append("/dev/shm")
except OSError as e:
    made.append(f"/dev/shm refused {e.__class__.__name__}")
try:
    os.makedirs(f"/tmp/{tag}", exist_ok=True)
    for i in range(2000):
        open(f"/tmp/{tag}/{i}", "w").close()
    made.append("/tmp")
except OSError as e:
    made.append(f"/tmp refused {e.__class__.__name__}")
try:  # a detached sleeper that would keep its uid busy if nothing killed it
    subprocess.Popen(["sleep", "600"], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
except OSError:
    pass
raise RuntimeError("left files in " + ", ".join(made))
