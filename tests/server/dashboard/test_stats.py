"""Class statistics: failures per check id over each student's latest submission, class
measurements, quiz facility / discrimination / wrong answers / missing rubric concepts, and
queue health from the database and a real Redis."""
from __future__ import annotations

import copy

import pytest

from server.dashboard import stats
from server.extensions import db
from server.models import User
from tests.server.conftest import PLACEHOLDER, SAMPLE_REPORT


def _report(failing: set[str], speedup: float = 1.5, peaks=(2 ** 30, 3 * 2 ** 30)) -> dict:
    report = copy.deepcopy(SAMPLE_REPORT)
    report["checks"] = [{"id": cid, "title": {"zh": cid, "en": cid}, "status": "fail" if cid in failing else "pass",
                         "points": 0, "max_points": 1, "evidence": {}}
                        for cid in ("sampler.disjoint", "sampler.reshuffle", "ddp.grad_sync")]
    report["plots"] = {"throughput": {"nproc": [1, 2], "samples_per_s": [100.0, 100.0 * speedup]},
                       "memory": {"ranks": [{"rank": r, "peak": p} for r, p in enumerate(peaks)]}}
    return report


def test_failures_count_each_students_latest_submission(app, make_sub):
    make_sub("alice", report_json=_report({"sampler.reshuffle", "sampler.disjoint"}))
    latest = make_sub("alice", report_json=_report({"sampler.reshuffle"}, speedup=1.9))
    make_sub("bob", report_json=_report(set(), speedup=1.1))
    with app.app_context():
        hs = stats.homework_stats(1, PLACEHOLDER)
    by_id = {c.check_id: c for c in hs.checks}
    assert hs.checks[0].check_id == "sampler.reshuffle"  # most failed first
    assert by_id["sampler.reshuffle"].failing == [latest] and by_id["sampler.reshuffle"].share == 0.5
    assert by_id["sampler.disjoint"].failing == [] and by_id["sampler.disjoint"].failing_all == 1
    assert (hs.latest, hs.submissions) == (2, 3)
    assert sorted(round(s, 2) for s in hs.speedups) == [1.1, 1.9]
    assert hs.rank_peaks == {"rank0": [2 ** 30] * 2, "rank1": [3 * 2 ** 30] * 2}


def test_homework_page_shows_share_links_and_charts(client, auth, make_sub):
    make_sub("alice", report_json=_report({"sampler.reshuffle"}))
    sid = make_sub("bob", report_json=_report({"sampler.reshuffle"}))
    auth.login("teacher", "teacher-pass")
    page = client.get(f"/dashboard/DIST101/homework/{PLACEHOLDER}?lang=en").get_data(as_text=True)
    assert "sampler.reshuffle" in page and "100%" in page and f"/submissions/{sid}" in page
    assert page.count("<svg") == 4  # scores, failures, speed-up, memory


@pytest.mark.parametrize("fractions, expected", [([0.0, 0.05, 0.95, 1.0], {"0–10%": 2.0, "90–100%": 2.0})])
def test_histogram_bins(fractions, expected):
    hist = stats.histogram(fractions)
    assert len(hist) == 10 and {k: v for k, v in hist.items() if v} == expected


def test_value_histogram_has_an_open_last_bin():
    assert stats.value_histogram([0.2, 1.6, 9.0], [0.0, 1.0, 2.0]) == {"0–1": 1.0, "1–2": 1.0, "≥2": 1.0}


def _answer(app, username, attempt_no, answers, total):
    """A finished attempt with the given (question_id, fraction, raw, details) answers."""
    from server.quiz.models import QuizAnswer, QuizAttempt

    with app.app_context():
        uid = db.session.scalar(db.select(User.id).where(User.username == username))
        att = QuizAttempt(user_id=uid, course_id=1, quiz_id="ch7_3_graded", attempt_no=attempt_no, mode="graded",
                          status="submitted", question_ids=[a[0] for a in answers], score=total, max_score=10.0)
        db.session.add(att)
        db.session.flush()
        for pos, (qid, frac, raw, details) in enumerate(answers):
            db.session.add(QuizAnswer(attempt_id=att.id, user_id=uid, quiz_id="ch7_3_graded", question_id=qid,
                                      position=pos, seed=1, raw_answer=raw, score=frac, max_score=1.0,
                                      fraction=frac, correct=frac == 1.0, details_json=details, feedback_json=[]))
        db.session.commit()


def test_quiz_statistics(app):
    text_q, choice_q = "ch7_3/selftest_6", "ch7_3/ddp/checklist"
    strong = [(text_q, 1.0, "DistributedSampler missing", {"missing": []}),
              (choice_q, 1.0, "sampler,rank0", {"chosen": ["sampler", "rank0"]})]
    weak = [(text_q, 0.0, "network", {"missing": ["no_sampler", "full_data"], "confused": []}),
            (choice_q, 0.5, "sampler", {"chosen": ["sampler"]})]
    for n, (user, answers, total) in enumerate([("alice", strong, 9.0), ("bob", weak, 2.0), ("alice", weak, 3.0),
                                                 ("bob", strong, 8.0)], start=1):
        _answer(app, user, n, answers, total)
    with app.app_context():
        qs = {q.question_id: q for q in stats.quiz_question_stats(1, "ch7_3_graded", [text_q, choice_q], "en")}
    t, c = qs[text_q], qs[choice_q]
    assert (t.answers, t.facility, t.discrimination) == (4, 0.5, 1.0)
    assert t.missing[:2] == [("The first suspect is a DataLoader without DistributedSampler.", 2), ("full_data", 2)]
    assert c.facility == 0.75 and c.wrong == [("DistributedSampler, with set_epoch every epoch", 2)]


def test_quiz_page_in_both_languages(app, client, auth):
    _answer(app, "alice", 1, [("ch7_3/selftest_6", 0.0, "x", {"missing": ["no_sampler"]})], 0.0)
    auth.login("teacher", "teacher-pass")
    assert "Discrimination" in client.get("/dashboard/DIST101/quiz/ch7_3_graded?lang=en").get_data(as_text=True)
    page = client.get("/dashboard/DIST101/quiz/ch7_3_graded?lang=zh_CN").get_data(as_text=True)
    assert "区分度" in page and "DistributedSampler" in page and "no_sampler" not in page


def test_queue_health_sees_real_workers_and_their_gpus(app, make_sub):
    from rq import Queue, Worker

    from server.dashboard.queue_health import gpus_of, queue_health
    from server.grading.queue import TASK, queue_name, queues_for_host, redis_conn

    assert gpus_of(queues_for_host(2)) == 2 and gpus_of(queues_for_host(0)) == 0
    make_sub(status="queued")
    make_sub(status="error")
    with app.app_context():
        conn = redis_conn()
        worker = Worker([Queue(n, connection=conn) for n in queues_for_host(2)], connection=conn, name="gpu-host-1")
        worker.register_birth()
        try:
            Queue(queue_name("cpu"), connection=conn).enqueue(TASK, 999)
            health = queue_health()
        finally:
            worker.register_death()
    assert health.by_status["queued"] == 1 and health.by_status["error"] == 1
    assert health.oldest_queued_s is not None and health.redis_error is None
    assert [(w.name, w.gpus) for w in health.workers] == [("gpu-host-1", 2)] and health.gpus == 2
    assert ("distgrade-cpu", 1, 0, 0) in health.queues


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_common_wrong_answers_read_as_words_not_ids(lang):
    """An ordering answer and a named numeric mistake showed their internal ids."""
    from coursework.quiz.bank import load_question
    from coursework.text import pick

    order = load_question("ch7_3/ddp/step_order").info["items"]
    labels = stats._option_labels("ch7_3/ddp/step_order", lang)
    shown = stats._wrong_label("ordering", "", {"chosen": [order[1]["id"], order[0]["id"]]}, labels)
    assert shown == f"{pick(order[1]['text'], lang)} → {pick(order[0]['text'], lang)}"
    labels = stats._option_labels("ch7_3/comm/allreduce_time", lang)
    shown = stats._wrong_label("numeric", "1.1 s", {"mistake": "fp32_grads"}, labels)
    assert "fp32_grads" not in shown and ("bf16" in shown)


@pytest.mark.parametrize("lang", ["zh_CN", "en"])
def test_quiz_statistics_read_as_one_story(app, client, auth, lang):
    """The page showed an unfilled "stage {stage} divides ..." for a named mistake, "mean 0.5"
    beside "facility 0.00" for the same question (a teacher's decision changes the score, not the
    stored fraction), and rubric keys (no_sampler) as the concepts most often missing."""
    text_q, zero_q = "ch7_3/selftest_6", "ch7_3/memory/zero_per_card"
    decided = (text_q, 0.0, "DDP 没有 sampler", {"missing": ["no_sampler"]})
    _answer(app, "alice", 1, [decided, (zero_q, 0.0, "112 GB", {"mistake": "no_shard"})], 0.0)
    _answer(app, "bob", 1, [(text_q, 0.0, "网络问题", {"missing": ["no_sampler", "full_data_each"]})], 0.0)
    from server.quiz.models import QuizAnswer

    with app.app_context():  # a teacher gave alice's answer full points: its score changes, its fraction stays
        db.session.execute(db.update(QuizAnswer).where(QuizAnswer.raw_answer == decided[2]).values(
            score=1.0, review_state="reviewed", correct=True))
        db.session.commit()
    auth.login("teacher", "teacher-pass")
    page = client.get(f"/dashboard/DIST101/quiz/ch7_3_graded?lang={lang}").get_data(as_text=True)
    assert "{stage}" not in page and "{" not in page.split("<main", 1)[1].split("</main>")[0]
    assert "no_sampler" not in page and "full_data_each" not in page
    assert ("DistributedSampler" in page) and ("分布式" in page or lang == "en" or "DistributedSampler" in page)
    with app.app_context():
        qs = {q.question_id: q for q in stats.quiz_question_stats(1, "ch7_3_graded", [text_q, zero_q], "en")}
    assert (qs[text_q].mean_score, qs[text_q].facility) == (0.5, 0.5)
