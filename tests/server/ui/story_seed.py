"""A graded quiz attempt whose pages must tell one story (``tests/server/ui/test_one_story.py``):
bob's finished attempt of the graded 7.3 quiz, answered through the real grading code, with

* four written answers waiting for a teacher (nothing earned trust yet): three at the reference
  answer (the reading suggests full points), one half-right;
* a wrong answer to the generated ZeRO per-card question (its worked formula names the answer);
* a wrong choice among right ones, so the navigator has right and wrong answers to mark.

Run inside the service's environment: ``python -m tests.server.ui.story_seed`` (prints the ids as JSON).
"""
from __future__ import annotations

import json

HALF = "每张卡只看自己那份数据。"


def _raw(variant, qid: str, texts: list[str]) -> str:
    """The answer bob gives: right everywhere except the ZeRO number and the symptom's cause."""
    q = variant.question
    if q.type == "text":
        texts.append(qid)
        return HALF if len(texts) == 4 else variant.reference_text("zh")
    if qid.endswith("zero_per_card"):
        return "1 GB"
    if q.type == "numeric":
        return variant.reference("en")
    right = sorted(variant.correct_ids())
    if qid.endswith("symptom_cause"):
        return next(o["id"] for o in q.info["options"] if o["id"] not in right)
    return ",".join(right)


def seed_story() -> dict:
    """bob's finished graded attempt (see the module docstring); returns its id."""
    from coursework.quiz.bank import load_quiz
    from server.extensions import db
    from server.models import Course, User
    from server.quiz import attempts

    course = db.session.scalar(db.select(Course).where(Course.code == "DIST101"))
    bob = db.session.scalar(db.select(User).where(User.username == "bob"))
    att = attempts.start_attempt(load_quiz("ch7_3_graded"), bob.id, course.id)
    db.session.commit()
    texts: list[str] = []
    for qid in att.question_ids:
        variant = attempts.variant_for(att, qid)
        attempts.answer_question(att, qid, _raw(variant, qid, texts), "zh", variant)
        db.session.commit()
    attempts.finish_attempt(att)
    db.session.commit()
    return {"attempt": att.id, "course": course.id}


if __name__ == "__main__":
    from server import create_app

    with create_app().app_context():
        print(json.dumps(seed_story()))
