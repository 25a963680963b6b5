"""Hostile sample: look for other students' jobs and the service database.

Everything found is listed in ``read_result.<rank>.json``; the sandbox must make the
list empty. The script then exits 1 without training.
"""
import glob
import json
import os

targets = ["/tmp/distgrade-jobs/*", "/tmp/distgrade-jobs/*/*", "/tmp/distgrade-jobs/*/submission/*",
           "/tmp/distgrade-sub*/in/*", "/work/main/var/*", "/work/main/instance/*",
           "/root/*", "/run/*", "/etc/shadow"]
if os.environ.get("DISTGRADE_TEST_SECRET_FILE"):
    targets.append(os.environ["DISTGRADE_TEST_SECRET_FILE"])
found = {}
for pattern in targets:
    for path in glob.glob(pattern) or [pattern]:
        try:
            with open(path, "rb") as f:
                found[path] = f.read(64).decode("latin-1")
        except OSError:
            if os.path.isdir(path) and os.access(path, os.R_OK):
                found[path] = "listable: " + ",".join(os.listdir(path)[:5])
rank = os.environ.get("RANK", "0")
with open(f"read_result.{rank}.json", "w") as f:
    json.dump(found, f)
print("hostile read_other_job found:", sorted(found))
raise SystemExit(1)
