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

The first table measures what is found: the disguise corpus of ``assignments/ddp_speedup/similarity``
(each file of ``copies/`` against its source, and the sample made from another), the false pairs
among the independent solutions alone, and the same in a class that also holds every copy and
two crowds of twelve disguised copies (whether an honest pair shows must not depend on who else
is in the class).

Run: ``.venv/bin/python -m bench.similarity`` (``--sizes 100,500``; ``--quality`` for the first table only).
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
from coursework.similarity import Doc, compare, excluded, extract, load_spec
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


SIM = ROOT / "similarity"
DERIVED = ("correct_flat_buffer_async_allreduce", "correct_partition_hand_allreduce")  # one made from the other


def _doc(path: Path) -> Doc:
    return Doc(str(path.relative_to(ROOT)), extract(path.name, path.read_bytes()))


def honest_docs() -> list[Doc]:
    files = sorted((SIM / "independent").glob("*.py"))
    files += [p for p in sorted((ROOT / "samples").glob("correct_*/train.py")) if p.parent.name != DERIVED[0]]
    return [_doc(p) for p in files]


def planted_copies() -> tuple[list[Doc], list[tuple[str, str, str]]]:
    """Every copy of the corpus and the pair each must form: (copy, source, disguise)."""
    docs = [_doc(SIM / "original.py"), _doc(ROOT / "samples" / DERIVED[0] / "train.py")]
    expected = [(docs[1].key, str(Path("samples") / DERIVED[1] / "train.py"), "sample made from another")]
    for folder in sorted(p for p in (SIM / "copies").iterdir() if p.is_dir()):
        files = [_doc(p) for p in sorted(folder.glob("*.py"))]
        docs += files
        source = files[0].key if folder.name == "public_ddp_tutorial" else docs[0].key
        expected += [(f.key, source, folder.name) for f in files if f.key != source]
    return docs, expected


def _run(docs: list[Doc]) -> tuple[dict, float]:
    spec = load_spec(ROOT, json.loads((ROOT / "assignment.json").read_text()))
    spec.settings.max_pairs = 100_000  # every pair, so no false pair hides below the page's cut
    t0 = time.perf_counter()
    result = compare(docs, excluded(spec), spec.kind, spec.settings)
    return result, time.perf_counter() - t0


def quality_rows() -> list[list]:
    """Copies flagged / total and false pairs among honest solutions, alone and in a class."""
    honest = honest_docs()
    keys = {d.key for d in honest}
    copies, expected = planted_copies()
    crowd = [Doc(f"crowd{n}:{i}", disguise(text, random.Random(n * 100 + i)))
             for n, text in enumerate([(SIM / "original.py").read_text(),
                                       (SIM / "independent" / "p01_imagenet_meters.py").read_text()])
             for i in range(12)]
    rows = []
    for what, docs in (("honest alone", honest), ("class: honest + copies", honest + copies),
                       ("class: + 24 disguised", honest + copies + crowd)):
        result, wall = _run(docs)
        pairs = {frozenset((p["a"], p["b"])): p for p in result["pairs"]}
        false = [p for p in pairs if p <= keys]
        # a copy is found when it shares a cluster with its source (the pair list keeps only the
        # strongest max_pairs; a cluster names every member)
        together = {frozenset((a, b)) for g in result["clusters"] for a in g["members"] for b in g["members"]}
        found = [e for e in expected if frozenset(e[:2]) in together] if len(docs) > len(honest) else []
        why = sorted({r for e in found for r in pairs.get(frozenset(e[:2]), {}).get("reasons", [])})
        missed = sorted({e[2] for e in expected if e not in found}) if len(docs) > len(honest) else []
        rows.append([what, len(docs), f"{len(found)}/{len(expected)}" if len(docs) > len(honest) else "-",
                     ", ".join(why) or "-", ", ".join(missed) or "-", len(false), round(wall, 1)])
    return rows


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def engine_row(texts: list[str]) -> list:
    a = json.loads((ROOT / "assignment.json").read_text())
    spec = load_spec(ROOT, a)
    t0, c0 = time.perf_counter(), time.process_time()
    result = compare((Doc(f"s{i}", t) for i, t in enumerate(texts)), excluded(spec), spec.kind, spec.settings,
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
    parser.add_argument("--quality", action="store_true", help="only the table of what is found")
    args = parser.parse_args()
    print_table("What is found (homework 1's disguise corpus; false pairs: among honest solutions only)",
                ["class", "documents", "copies flagged", "reasons", "missed", "false pairs", "wall s"], quality_rows())
    if args.quality:
        return
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
