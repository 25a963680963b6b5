"""The graded quiz stays secret: no practice attempt and no earlier graded attempt
shows a graded attempt's variants, and no reference answer of a graded question is shown before
the quiz closes (``reference_answers`` in the quiz file: after_close / never / at_once)."""
from __future__ import annotations

import pytest

from coursework.quiz.bank import load_question, load_quiz
from server.extensions import db
from server.quiz.attempts import variant_for
from server.quiz.models import QuizAttempt

GRADED = "ch7_3_graded"


def _start(client, quiz_id: str) -> int:
    resp = client.post(f"/quiz/{quiz_id}/start")
    assert resp.status_code == 302 and "/attempt/" in resp.headers["Location"], resp.headers.get("Location")
    return int(resp.headers["Location"].rstrip("/").split("/")[-1])


def _form(variant) -> dict:
    """What a student types to give ``variant``'s reference answer."""
    ref, qtype = variant.reference("en"), variant.question.type
    if qtype in ("single", "multiple"):
        return {"choice": ref.split(",")}
    if qtype == "ordering":
        return {f"pos_{i}": str(n + 1) for n, i in enumerate(ref.split(","))}
    return {"answer": ref}


def _wrong(variant) -> dict:
    """A well-formed wrong answer for ``variant``."""
    qtype = variant.question.type
    if qtype in ("single", "multiple"):
        return {"choice": [i for i in variant.option_order if i not in variant.correct_ids()][:1]}
    if qtype == "numeric":
        number, _, unit = variant.reference("en").partition(" ")
        return {"answer": f"{float(number) * 3 + 1:g} {unit}".strip()}
    return {"answer": "不知道"}


def _answer(client, attempt_id: int, pos: int, form: dict, lang: str = "en") -> dict:
    resp = client.post(f"/quiz/attempt/{attempt_id}/answer/{pos}?lang={lang}", data=form,
                       headers={"Accept": "application/json"})
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()


def _variants(app, attempt_id: int) -> dict[str, object]:
    with app.app_context():
        att = db.session.get(QuizAttempt, attempt_id)
        return {q: variant_for(att, q) for q in att.question_ids}


def _shown(v) -> tuple:
    """What the page shows of a variant: its numbers and its option order."""
    return v.public("en")["prompt"], tuple(v.option_order)


@pytest.fixture
def quiz_setting(monkeypatch):
    """Change the graded quiz's settings for one test (the loaded quiz is cached per process)."""
    quiz = load_quiz(GRADED)

    def set_(**values):
        for k, v in values.items():
            monkeypatch.setattr(quiz, k, v)
    return set_


def test_practice_shows_neither_the_graded_variants_nor_their_answers(app, client, auth) -> None:
    """The attack: take practice attempts, read their reference answers, type them into the
    graded attempts. It scored 9/10: practice attempt n had graded attempt n's numbers and option
    order, and showed the reference answer of every graded question."""
    auth.login()
    graded = load_quiz(GRADED).question_ids
    practice_quiz = load_quiz("ch7_3_practice")
    copied: list[dict[str, dict]] = []  # per practice attempt: qid -> the form the revealed reference gives
    seen: list[dict] = []
    for _ in range(3):
        pid = _start(client, "ch7_3_practice")
        variants = _variants(app, pid)
        seen.append(variants)
        revealed = {}
        for qid in graded:
            pos = practice_quiz.question_ids.index(qid)
            body = _answer(client, pid, pos, _wrong(variants[qid]))
            ref = variants[qid].reference_text("en")
            assert "reference" not in body and "explanation" not in body, (qid, body)
            assert "Reference answer" not in body["card_html"] and ref not in body["card_html"], qid
            assert "once that quiz closes" in body["card_html"]
            if "reference" in body:
                revealed[qid] = _form(variants[qid])
        for lang in ("en", "zh_CN"):
            page = client.get(f"/quiz/attempt/{pid}?lang={lang}").get_data(as_text=True)
            assert ("Reference answer" if lang == "en" else "参考答案：") not in page or all(
                variants[q].reference_text("en") not in page for q in graded)
        copied.append(revealed)
        client.post(f"/quiz/attempt/{pid}/finish")
    scores = []
    earlier: list[dict] = []
    copied_graded: set[str] = set()  # questions whose reference an earlier graded attempt showed
    for n in range(3):
        gid = _start(client, GRADED)
        mine = _variants(app, gid)
        for qid in graded:
            # no practice attempt and no earlier graded attempt had this attempt's seed
            assert all(mine[qid].seed != s[qid].seed for s in seen + earlier), qid
        generated = [q for q in graded if load_question(q).generator is not None]
        same = [q for q in generated if any(_shown(mine[q]) == _shown(s[q]) for s in seen + earlier)]
        assert len(same) <= 1, same  # a chance coincidence at most, never the rule
        for pos, qid in enumerate(graded):
            # what the pages showed: a practice reference, else the previous graded variant's
            form = copied[n].get(qid) or (_form(earlier[-1][qid]) if earlier and qid in copied_graded
                                          else _wrong(mine[qid]))
            body = _answer(client, gid, pos, form)
            assert "reference" not in body and mine[qid].reference_text("en") not in body["card_html"]
            if "reference" in body:
                copied_graded.add(qid)
        client.post(f"/quiz/attempt/{gid}/finish")
        with app.app_context():
            scores.append(db.session.get(QuizAttempt, gid).score)
        earlier.append(mine)
    assert max(scores) <= 1, scores  # copying what the pages showed earns (at most) a lucky point


def test_reference_answers_follow_the_quizs_setting(app, client, auth, quiz_setting) -> None:
    auth.login()
    gid = _start(client, GRADED)
    pos = load_quiz(GRADED).question_ids.index("ch7_3/memory/full_training")
    v = _variants(app, gid)["ch7_3/memory/full_training"]
    body = _answer(client, gid, pos, _form(v))
    assert body["correct"] and "reference" not in body
    client.post(f"/quiz/attempt/{gid}/finish")
    for lang, held in (("en", "shown once the quiz closes"), ("zh_CN", "在测验截止后公布")):
        page = client.get(f"/quiz/attempt/{gid}?lang={lang}").get_data(as_text=True)
        assert held in page and v.reference_text("en" if lang == "en" else "zh") not in page
    quiz_setting(closes_at="2020-01-01T00:00:00")  # closed: the default (after_close) shows them
    page = client.get(f"/quiz/attempt/{gid}?lang=en").get_data(as_text=True)
    assert "Reference answer" in page and v.reference_text("en") in page
    quiz_setting(reference_answers="never")
    for lang, held in (("en", "does not show reference answers"), ("zh_CN", "不公布参考答案")):
        page = client.get(f"/quiz/attempt/{gid}?lang={lang}").get_data(as_text=True)
        assert held in page and v.reference_text("en") not in page


def test_at_once_shows_fixed_text_answers_only_in_the_last_attempt(app, client, auth, quiz_setting) -> None:
    """Shown at once, a question whose text never changes would hand attempt 1's answer to
    attempts 2 and 3; a generated one shows its own (the next attempt has other numbers)."""
    quiz_setting(reference_answers="at_once")
    auth.login()
    qids = load_quiz(GRADED).question_ids
    fixed, generated = qids.index("ch7_3/ddp/checklist"), qids.index("ch7_3/memory/full_training")
    for n in range(1, 4):
        gid = _start(client, GRADED)
        v = _variants(app, gid)
        assert "reference" in _answer(client, gid, generated, _form(v[qids[generated]]))
        body = _answer(client, gid, fixed, _wrong(v[qids[fixed]]))
        assert ("reference" in body) == (n == 3), n
        client.post(f"/quiz/attempt/{gid}/finish")


def test_no_practice_or_earlier_attempt_has_a_graded_attempts_variant(app, client, auth) -> None:
    """Practice attempt n had graded attempt n's seed (the seed left the quiz out)."""
    auth.login()
    graded = load_quiz(GRADED).question_ids
    seen = []
    for _ in range(3):
        pid = _start(client, "ch7_3_practice")
        seen.append(_variants(app, pid))
        client.post(f"/quiz/attempt/{pid}/finish")
    for _ in range(3):
        gid = _start(client, GRADED)
        mine = _variants(app, gid)
        assert [q for q in graded if any(mine[q].seed == s[q].seed for s in seen)] == []
        moved = [q for q in graded if load_question(q).generator is not None
                 and any(_shown(mine[q]) == _shown(s[q]) for s in seen)]
        assert len(moved) <= 1, moved
        seen.append(mine)
        client.post(f"/quiz/attempt/{gid}/finish")


def test_practice_does_not_judge_a_graded_fixed_choice_question_while_the_graded_quiz_holds_it(app, client, auth,
                                                                                             quiz_setting) -> None:
    """The trial attack: a fixed-text choice question of the graded quiz is also in practice, whose
    verdict ("correct" or not, and the attempt's total) told which option is right, one try per
    practice attempt; the graded attempt then chose it. Practice now records such an answer without
    judging it until the graded quiz shows its references (it closes, or its setting says at once)."""
    auth.login()
    graded = load_quiz(GRADED).question_ids
    practice_quiz = load_quiz("ch7_3_practice")
    fixed = [q for q in graded if load_question(q).generator is None and load_question(q).type in ("single", "multiple")
             and q in practice_quiz.question_ids]
    assert fixed, "the premise: the graded quiz has fixed-text choice questions that practice also holds"
    found: dict[str, dict] = {}
    for n in range(4):  # one option per question per practice attempt, as a student would try them
        pid = _start(client, "ch7_3_practice")
        variants = _variants(app, pid)
        for qid in fixed:
            if qid in found:
                continue
            options = sorted(variants[qid].option_order)
            option = options[n % len(options)]
            body = _answer(client, pid, practice_quiz.question_ids.index(qid), {"choice": [option]})
            if body.get("correct"):
                found[qid] = {"choice": [option]}
            assert body.get("correct") is None and body.get("score") in (None, 0), (qid, body)
            assert body["status"] == "recorded" and "judged in the graded quiz" in body["card_html"]
        client.post(f"/quiz/attempt/{pid}/finish")
        with app.app_context():
            assert db.session.get(QuizAttempt, pid).score == 0  # the total says nothing either
    assert not found
    quiz_setting(closes_at="2020-01-01T00:00:00")  # closed: practice judges these questions again
    pid = _start(client, "ch7_3_practice")
    v = _variants(app, pid)[fixed[0]]
    body = _answer(client, pid, practice_quiz.question_ids.index(fixed[0]), _form(v))
    assert body["correct"] is True and body["status"] != "recorded"
