"""What the answer post no longer repeats, and that the output is the same without it:

* the variant is built (and its seed derived) once per process, not again to grade each answer;
* a card's ``_`` strings come from the request's catalogue taken once per card; the card is
  byte-for-byte what Flask-Babel's own ``gettext`` renders, in both languages.
"""
from __future__ import annotations

from coursework.quiz import grading
from coursework.quiz.bank import load_question, load_quiz
from server.quiz import attempts, pages
from server.quiz.models import QuizAttempt


def _start(client, quiz_id: str) -> str:
    resp = client.post(f"/quiz/{quiz_id}/start")
    assert resp.status_code == 302
    return resp.headers["Location"]


def test_an_answer_post_runs_no_generator_for_a_variant_already_built(app, client, auth, monkeypatch) -> None:
    auth.login()
    path = _start(client, "ch7_3_practice")
    client.get(path)  # the page builds every variant of the attempt
    runs: list[str] = []
    real = grading.make_variant

    def counting(q, seed):
        runs.append(q.id)
        return real(q, seed)

    monkeypatch.setattr(grading, "make_variant", counting)
    monkeypatch.setattr(attempts, "make_variant", counting)
    qids = load_quiz("ch7_3_practice").question_ids
    generated = [n for n, q in enumerate(qids) if load_question(q).generator][:3]
    assert generated
    for pos in generated:
        resp = client.post(f"{path}/answer/{pos}", data={"answer": "1", "choice": "a"},
                           headers={"Accept": "application/json"})
        assert resp.status_code in (200, 422), resp.data[:300]
    assert runs == []


def test_answer_question_grades_the_variant_of_its_question_only(app, client, auth) -> None:
    """A variant passed for another question is not used: the answer is graded on its own."""
    auth.login()
    path = _start(client, "ch7_3_selftest")
    attempt_id = int(path.rstrip("/").split("/")[-1])
    with app.test_request_context("/?lang=en"):
        from server.extensions import db
        att = db.session.get(QuizAttempt, attempt_id)
        first, second = att.question_ids[0], att.question_ids[1]
        wrong = attempts.variant_for(att, second)
        outcome = attempts.answer_question(att, first, "数据并行解决吞吐，模型并行解决容量", "en", wrong)
        assert outcome.answer["question_id"] == first and outcome.result.correct
        assert outcome.answer["seed"] == attempts.seed_for(att, first)


def _render_both(app, client, auth, lang: str) -> tuple[list[str], list[str]]:
    auth.login()
    path = _start(client, "ch7_3_practice")
    attempt_id = int(path.rstrip("/").split("/")[-1])
    resp = client.post(f"{path}/answer/0?lang={lang}", data={"choice": "a", "answer": "x"},
                       headers={"Accept": "application/json"})
    assert resp.status_code in (200, 422)
    fast, babel = [], []
    with app.test_request_context(f"/?lang={lang}"):
        from server.extensions import db
        from server.quiz import store

        att = db.session.get(QuizAttempt, attempt_id)
        answer = next(iter(store.answer_rows([a.id for a in att.answers]).values()), None)
        template = pages._fragments().get_template("quiz/_card.html")
        for pos, ans in ((0, answer), (1, None), (2, None)):
            fast.append(str(pages.render_card(att, pos, lang[:2], answer=ans)))
            variant = attempts.cached_variant(att.question_ids[pos], attempts.seed_for(att, att.question_ids[pos]))
            c = {"pos": pos, "q": variant.public(lang[:2]), "draft": "", "answer": ans, "error": None}
            if ans is not None:
                c.update(explanation=variant.question.text("explanation", lang[:2]),
                         reference=variant.reference_text(lang[:2]))
            babel.append(template.render(c=c, attempt_id=att.id, is_open=True))  # Flask-Babel's gettext
    return fast, babel


def test_cards_with_the_per_card_gettext_are_what_flask_babel_renders_in_english(app, client, auth) -> None:
    fast, babel = _render_both(app, client, auth, "en")
    assert fast == babel and "Check answer" in fast[1]


def test_cards_with_the_per_card_gettext_are_what_flask_babel_renders_in_chinese(app, client, auth) -> None:
    fast, babel = _render_both(app, client, auth, "zh_CN")
    assert fast == babel and "Check answer" not in fast[1]


def test_the_review_form_with_the_per_card_gettext_is_what_flask_babel_renders(app, client, auth) -> None:
    auth.login()
    path = _start(client, "ch7_3_graded")  # practice answers are not asked about
    attempt_id = int(path.rstrip("/").split("/")[-1])
    for lang, word in (("en", "ask a teacher"), ("zh_CN", "")):
        with app.test_request_context(f"/?lang={lang}"):
            from server.extensions import db

            att = db.session.get(QuizAttempt, attempt_id)
            fast = pages.review_form(att, 0, "", lang[:2])
            babel = pages._fragments().get_template("quiz/_ask_review.html").render(pos=0, attempt_id=att.id)
            assert fast == babel and word in fast and ("ask a teacher" in fast) == (lang == "en")
