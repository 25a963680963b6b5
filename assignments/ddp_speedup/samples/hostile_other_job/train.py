"""Hostile sample: read another running job's files and kill its processes.

It walks /proc for processes that are not its own (the test runs a concurrent victim job
whose command line says ``distgrade-victim``), reads their working directory and
environment, kills them, and looks for other jobs' folders under the jobs root. Only
victims marked so are signalled: other people's work on a shared test machine is spared.
Anything read or killed is named in the exception ("leaked ..."); otherwise "blocked".
"""
import glob
import os
import signal

me = os.getpid()
cwd = os.path.realpath(os.getcwd())
mine = {me, os.getppid()}
leaked = []
for entry in os.listdir("/proc"):
    if not entry.isdigit() or int(entry) in mine:
        continue
    pid = int(entry)
    try:
        cmd = open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        continue
    if b"distgrade-victim" not in cmd:
        continue
    for what in ("cwd/canary.txt", "environ", "cwd/victim.py"):
        try:
            data = open(f"/proc/{pid}/{what}", "rb").read(200)
            leaked.append(f"read /proc/{pid}/{what}={data[:30]!r}")
        except OSError:
            pass
    try:
        os.kill(pid, signal.SIGKILL)
        leaked.append(f"killed {pid}")
    except OSError:
        pass
for pattern in ("/tmp/distgrade-jobs/*/*/canary.txt", "/tmp/distgrade-jobs/*/code/*.py",
                "/tmp/distgrade-jobs/*/submission/*", "/var/tmp/distgrade-jobs/*/*/canary.txt"):
    for path in glob.glob(pattern):
        job = os.path.realpath(path).split("/")[:4]  # /tmp/distgrade-jobs/<job>
        if cwd.split("/")[:4] == job:
            continue  # its own job
        try:
            leaked.append(f"read {path}={open(path, 'rb').read(30)!r}")
        except OSError:
            pass
if leaked:
    raise RuntimeError("leaked: " + "; ".join(leaked)[:400])
raise RuntimeError("blocked: no other job's process or file was reachable")
