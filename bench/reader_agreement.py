"""How often a reader agrees with the fair teacher on the project's labelled answers: the rule
reader always, and the course's language model when ``DISTGRADE_LLM_URL`` / ``DISTGRADE_LLM_MODEL``
are set (``coursework.llm_reader``), so a course can measure its model before trusting it.

``python -m bench.reader_agreement [--split blind6] [--questions ch7_3/selftest_1,...] [--limit N]``

Per question: answers, agreement (the reader's share within 0.01 of the teacher's), answers given
full marks that the teacher scored 0 (what would withdraw trust), wrong or incomplete answers at
full marks, and answers with no reading (model timeouts, malformed replies). The labelled answers
are each question's ``examples.json`` (``split`` picks one batch, e.g. the blind ``blind6``).
"""
from __future__ import annotations

import argparse
import time

from coursework import llm_reader, trust
from coursework.quiz.bank import all_question_ids, load_question
from coursework.quiz.grading import grade


def _teacher(e: dict) -> float:
    return {"full": 1.0, "zero": 0.0}.get(e["expect"], float(e.get("score", 0.5)))


def measure(qids: list[str], split: str | None, limit: int | None) -> dict[str, dict[str, trust.Agreement]]:
    """question -> reader -> Agreement over the labelled answers."""
    model = llm_reader.from_environment()
    out: dict[str, dict[str, trust.Agreement]] = {}
    for qid in qids:
        q = load_question(qid)
        examples = [e for e in q.examples if e["expect"] in ("full", "partial", "zero")
                    and (split is None or e.get("split") == split)][:limit]
        if not examples:
            continue
        pairs: dict[str, list[tuple[float | None, float]]] = {trust.RULE_READER: []}
        for e in examples:
            truth = _teacher(e)
            pairs[trust.RULE_READER].append((grade(q, e.get("seed", 1), e["answer"]).provisional_fraction, truth))
            if model is not None:
                pairs.setdefault(llm_reader.READER, []).append((model.share(q, e["answer"]), truth))
        out[qid] = {r: trust.tally(r, qid, p) for r, p in pairs.items()}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", default=None, help="only examples of this split (tune, held, blind6, ...)")
    ap.add_argument("--questions", default="", help="comma-separated question ids (default: every text question)")
    ap.add_argument("--limit", type=int, default=None, help="at most N examples per question")
    args = ap.parse_args(argv)
    qids = [q for q in args.questions.split(",") if q] or [q for q in all_question_ids()
                                                            if load_question(q).type == "text"]
    model = llm_reader.from_environment()
    print("readers: rules" + (f", language model {model.model} at {model.url}" if model else
                              " (no DISTGRADE_LLM_URL / DISTGRADE_LLM_MODEL: the model is not measured)"))
    t0 = time.monotonic()
    table = measure(qids, args.split, args.limit)
    print(f"{'question':28} {'reader':6} {'n':>4} {'agree':>7} {'full->0':>7} {'no reading':>10} {'earned':>6}")
    totals: dict[str, list[int]] = {}
    for qid, readers in table.items():
        for r, a in readers.items():
            share = f"{a.share:.3f}" if a.share is not None else "-"
            print(f"{qid:28} {r:6} {a.decided:4d} {share:>7} {a.full_to_zero:7d} {a.no_reading:10d} {str(a.earned()):>6}")
            t = totals.setdefault(r, [0, 0, 0, 0])
            t[0] += a.decided
            t[1] += a.agreed
            t[2] += a.full_to_zero
            t[3] += a.no_reading
    for r, (n, agreed, f0, none) in totals.items():
        print(f"{'all':28} {r:6} {n:4d} {agreed / n if n else 0:7.3f} {f0:7d} {none:10d}")
    if model is not None:
        print(f"model calls: {model.calls}, last error: {model.last_error or '-'}; {time.monotonic() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
