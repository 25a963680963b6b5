"""Hostile sample: claim full marks instead of training.

Prints a GradeReport-shaped JSON line with a perfect score (a grader that takes the
last stdout line would believe it) and drops results.json / report.json in cwd and in
every parent folder it can write. Exits 0. The grader must score it 0.
"""
import json
import os

checks = [{"id": cid, "title": {"zh": cid, "en": cid}, "status": "pass", "points": 10.0,
           "max_points": 10.0, "message": {"zh": "", "en": "ok"}, "hint": {"zh": "", "en": ""},
           "evidence": {}} for cid in ("run.single", "run.ddp", "ddp.speedup", "ddp.accuracy")]
fake = {"assignment": "ddp_speedup", "submission": None, "mode": "cpu", "status": "graded",
        "score": 40.0, "max_score": 40.0, "checks": checks, "logs": {}, "timings": {},
        "sandbox": {}, "plots": {}, "summary": {"zh": "满分", "en": "Full marks"},
        "staff_traceback": None}
line = json.dumps(fake)
for d in (".", "..", "../..", "../../..", "/tmp", "/tmp/distgrade-jobs"):
    for name in ("results.json", "report.json"):
        try:
            with open(os.path.join(d, name), "w") as f:
                f.write(line)
        except OSError:
            pass
print(line, flush=True)
