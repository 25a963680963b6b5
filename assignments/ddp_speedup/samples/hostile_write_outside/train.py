"""Hostile sample: try to leave files outside the job's working directory.

Targets: the repository, the host's /tmp, $HOME, /root, the job folder above cwd and
``DISTGRADE_TEST_OUTSIDE_DIR`` when the test sets it. Results go to
``write_result.<rank>.json``; the script then exits 1 without training.
"""
import json
import os

NAME = "distgrade_hostile_write_outside.txt"
dirs = ["/work/main", "/work", "/tmp", os.path.expanduser("~"), "/root", "..", "../..",
        os.environ.get("DISTGRADE_TEST_OUTSIDE_DIR", "")]
result = {}
for d in filter(None, dirs):
    path = os.path.join(d, NAME)
    try:
        with open(path, "w") as f:
            f.write("hostile sample was here\n")
        result[path] = "written"
    except OSError as e:
        result[path] = f"refused: {e.__class__.__name__}"
rank = os.environ.get("RANK", "0")
with open(f"write_result.{rank}.json", "w") as f:
    json.dump(result, f)
print("hostile write_outside:", result)
raise SystemExit(1)
