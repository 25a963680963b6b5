"""Similarity of a class of homework 1 on this machine: size, time, pairs, peak memory.

The class is made from the 38 homework-1 solutions in the repository (the 30 independent ones,
the copied ``original.py`` and the correct samples), each handed in by about 13 students who
renamed a random half of its names and inserted dead code. That is the worst case for the
comparison (every submission is in a cluster, so every candidate pair is scored exactly and its
regions computed); a real class has far fewer pairs. Wall time on a machine shared with other
jobs is noisy: the CPU seconds say what the run itself cost. Rows: the engine alone at 100, 250 and 500
submissions, then the worker's job at 500 reading the submissions one by one from a SQLite
database (what an instructor waits for). ``--copydetect`` adds copydetect 0.5's all-pairs
comparison of the same 500 files, if it is installed (it is not a dependency).

Run: ``.venv/bin/python -m bench.similarity`` (``--sizes 100,500``).
"""
from __future__ import annotations

import argparse
import io
import json
import random
import resource
import tempfile
import time
import tokenize
from pathlib import Path

from bench.common import print_table
from coursework.similarity import Doc, compare, load_spec
from coursework.similarity.fingerprint import bound_names

ROOT = Path(__file__).resolve().parents[1] / "assignments" / "ddp_speedup"


def bases() -> list[str]:
    files = sorted((ROOT / "similarity" / "independent").glob("*.py")) + [ROOT / "similarity" / "original.py"]
    files += sorted((ROOT / "samples").glob("correct_*/train.py"))
    return [p.read_text() for p in files]


def disguise(text: str, rng: random.Random) -> str:
    """Rename a random half of the names the file binds; insert one to three dead functions."""
    names = sorted(bound_names(text) or ())
    new = {n: f"{n}_{rng.randrange(10**6)}" for n in names if rng.random() < 0.5}
    out, prev = [], None
    toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    for i, t in enumerate(toks):
        s = t.string
        nxt = toks[i + 1].string if i + 1 < len(toks) else ""
        if t.type == tokenize.NAME and s in new and prev != "." and nxt != "=":
            s = new[s]
        out.append((t.type, s, t.start, t.end, t.line))
        prev = t.string
    lines = tokenize.untokenize(out).split("\n")
    for k in range(rng.randint(1, 3)):
        at = rng.choice([i for i, line in enumerate(lines) if line.startswith("def ")] or [0])
        lines[at:at] = [f"def _unused_{k}_{rng.randrange(999)}(value):", f"    return value * {k + 2}", "", ""]
    return "\n".join(lines)


def make_class(n: int, seed: int = 25) -> list[str]:
    rng = random.Random(seed)
    base = bases()
    return [disguise(base[i % len(base)], rng) for i in range(n)]


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def engine_row(texts: list[str]) -> list:
    a = json.loads((ROOT / "assignment.json").read_text())
    spec = load_spec(ROOT, a)
    t0, c0 = time.perf_counter(), time.process_time()
    result = compare((Doc(f"s{i}", t) for i, t in enumerate(texts)), spec.boilerplate, spec.kind, spec.settings,
                     reload=lambda key: texts[int(key[1:])])
    return ["engine", len(texts), sum(len(t) for t in texts) // 1024, result["stats"]["candidates"],
            len(result["pairs"]), len(result["clusters"]), round(time.perf_counter() - t0, 1),
            round(time.process_time() - c0, 1), round(peak_mib())]


def job_row(texts: list[str]) -> list:
    """The worker's job on a SQLite database holding the class (submissions read one at a time)."""
    from bench.seed_gradebook import make_app
    from server.extensions import db
    from server.models import Course, Membership, Submission, User
    from server.similarity import jobs

    with tempfile.TemporaryDirectory() as tmp:
        app = make_app(str(Path(tmp) / "sim.db"))
        with app.app_context():
            course = db.session.scalar(db.select(Course))
            for i, text in enumerate(texts):
                user = User(username=f"s{i:04d}", password_hash="-")
                db.session.add(user)
                db.session.flush()
                db.session.add(Membership(user_id=user.id, course_id=course.id, role="student"))
                data = text.encode()
                db.session.add(Submission(user_id=user.id, course_id=course.id, assignment_id="ddp_speedup",
                                          status="graded", score=5.0, max_score=10.0, filename="train.py",
                                          content=data, sha256=Submission.digest(data), size=len(data)))
            db.session.commit()
            run = jobs.SimilarityRun(course_id=course.id, assignment_id="ddp_speedup")
            db.session.add(run)
            db.session.commit()
            t0, c0 = time.perf_counter(), time.process_time()
            assert jobs.execute(run.id) == "done"
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            s = db.session.get(jobs.SimilarityRun, run.id).summary_json
    return ["job (SQLite)", len(texts), sum(len(t) for t in texts) // 1024, s["candidates"], s["pairs"],
            s["clusters"], round(wall, 1), round(cpu, 1), round(peak_mib())]


def copydetect_row(texts: list[str]) -> list:
    import numpy as np
    from copydetect import CodeFingerprint, compare_files

    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, t in enumerate(texts):
            p = Path(tmp) / f"s{i}.py"
            p.write_text(t)
            paths.append(str(p))
        boiler = np.unique(np.concatenate([np.array(list(CodeFingerprint(str(f), 25, 1).hashes))
                                           for f in (ROOT / "starter" / "train.py", ROOT / "solution" / "train.py")]))
        t0, c0 = time.perf_counter(), time.process_time()
        fps = [CodeFingerprint(p, 25, 1, boilerplate=boiler) for p in paths]
        flagged = 0
        for i in range(len(fps)):
            for j in range(i + 1, len(fps)):
                _, (sa, sb), _ = compare_files(fps[i], fps[j])
                flagged += max(sa, sb) >= 0.5
    return ["copydetect 0.5", len(texts), sum(len(t) for t in texts) // 1024, "all", flagged, "-",
            round(time.perf_counter() - t0, 1), round(time.process_time() - c0, 1), round(peak_mib())]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,250,500")
    parser.add_argument("--copydetect", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = [engine_row(make_class(n)) for n in sizes]
    rows.append(job_row(make_class(max(sizes))))
    if args.copydetect:
        rows.append(copydetect_row(make_class(max(sizes))))
    print_table("Similarity of homework 1 (every submission disguised from one of 38 solutions: the worst case)",
                ["what", "submissions", "KiB", "candidate pairs", "pairs reported", "clusters", "wall s",
                 "CPU s", "peak RSS MiB"], rows)


if __name__ == "__main__":
    main()
