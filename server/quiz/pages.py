"""The attempt page, assembled from cached HTML pieces.

Every reload of the attempt page, and every answer posted without JavaScript, shows all 40
questions; rendering them from scratch each time was the quiz's bottleneck. Every piece of the
page is a pure function of a few keys, and each is rendered once per process:

* the page around the questions (header, navigation, language switch) per attempt, viewer,
  language, path and session CSRF secret, with the running score as a slot;
* an open question's card per attempt, position, language and CSRF secret (the attempt fixes
  the question and its variant);
* an answered card per stored answer (answers never change once stored) and language; the
  answer post renders it first and returns it to the page's script.

A page with a flashed message, or a card with a draft and its format error, is rendered
directly: those are one-off.
"""
from __future__ import annotations

import threading
from datetime import datetime
from functools import lru_cache
from typing import Any, Callable, Hashable

from flask import current_app, render_template, request, session
from flask_babel import get_translations
from flask_wtf.csrf import generate_csrf
from jinja2 import pass_context
from markupsafe import Markup

from coursework.quiz.bank import BankError, Quiz, load_question, load_quiz
from coursework.text import score_text
from server.scores import release
from server.quiz import attempts as rules
from server.quiz import reveal, store
from server.models import utcnow
from server.quiz.models import AttemptStatus

_SCORE_SLOT, _CARDS_SLOT = "\x00score\x00", "\x00cards\x00"


class FragmentCache:
    """A bounded map of rendered HTML; the oldest entries go first when it is full."""

    def __init__(self, size: int):
        self.size, self._items, self._lock = size, {}, threading.Lock()

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def get(self, key: Hashable, build: Callable[[], Any]) -> Any:
        hit = self._items.get(key)
        if hit is None:
            hit = build()
            with self._lock:
                while len(self._items) >= self.size:
                    self._items.pop(next(iter(self._items)))
                self._items[key] = hit
        return hit


def _caches() -> tuple[FragmentCache, FragmentCache]:
    """(cards, page shells) of this app: per app, so a fresh database never meets old pages."""
    caches = current_app.extensions.get("quiz_pages")
    if caches is None:
        # ~1-2 kB per card: 8192 cards are ~200 open 40-question attempts per process in ~16 MB.
        caches = current_app.extensions.setdefault("quiz_pages", (FragmentCache(8192), FragmentCache(1024)))
    return caches


def _ident(att: Any) -> tuple:
    """What fixes an attempt's questions and variants (its row id alone could be reused by a new database)."""
    return att.id, att.user_id, att.attempt_no, att.quiz_id, att.mode


def _fragments() -> Any:
    """The app's template environment with block-tag whitespace trimmed, for the cards: a page
    holds 40 of them and every byte is sent again on each reload."""
    env = current_app.extensions.get("quiz_fragments")
    if env is None:
        env = current_app.extensions.setdefault("quiz_fragments",
                                                current_app.jinja_env.overlay(trim_blocks=True, lstrip_blocks=True))
    return env


def csrf_secret() -> str:
    """The session's raw CSRF secret: any token signed from it stays valid, so it keys the cache."""
    if "csrf_token" not in session:
        generate_csrf()
    return session["csrf_token"]


def held_back(att: Any) -> bool:
    """True while the attempt's quiz keeps scores and feedback from its students (``server.scores.release``):
    its answered cards then say only that the answer was recorded."""
    return not release.mode_releases(att.release_mode, att.course_id, f"quiz:{att.quiz_id}")


def render_card(att: Any, pos: int, lang: str, answer: Any = None, error: str | None = None,
                draft: str = "", hidden: bool = False) -> Markup:
    """One question card: its form while open, its feedback once answered.

    Rendered from the template itself rather than through ``render_template``: the context
    processors there would load the signed-in user for every card, and a card needs nothing
    from them (the filters and ``_``, ``url_for`` and ``csrf_token`` are template globals).
    """
    qid = att.question_ids[pos]
    stored = None if answer is None else (answer.get("seed") if isinstance(answer, dict) else getattr(answer, "seed", None))
    # an answer keeps the variant it was graded on, even after the secret (and so seed_for) changed
    variant = rules.cached_variant(qid, stored if stored is not None else rules.seed_for(att, qid))
    c = {"pos": pos, "q": variant.public(lang), "draft": draft, "lang": lang,
         "answer": answer, "error": error, "reveal": True, "held": ""}
    if answer is not None:
        c["chosen"] = chosen_texts(c["q"], answer)  # the student's own choice, as the options read
    if answer is not None and hidden:  # the quiz's results are held back (server.scores.release)
        c["hidden"] = True  # neither the verdict nor the reference answer goes into the card
        c["reveal"] = False
    elif answer is not None and (_details(answer) or {}).get("unjudged"):
        c["unjudged"] = True  # practice does not judge it while a graded quiz holds it (server.quiz.reveal)
        c["reveal"] = False
    elif answer is not None:
        c["held"] = _held(att, qid)
        c["reveal"] = not c["held"]
        # feedback ("Missed: ...") names the answer of a question whose text never changes; a
        # generated question's feedback is about its own numbers, which the next attempt changes
        c["feedback"] = c["reveal"] or not reveal.fixed_text(qid)
        lines = list(_field(answer, "feedback_json") or [])
        if not c["reveal"] and not _field(answer, "correct"):
            # the lead of a waiting answer is the note that it waits; the rest may name the answer
            lead = lines[:1] if _field(answer, "review_state") == "pending" else []
            lines = lead + reveal.without_answer(variant, lines[len(lead):])
        c["lines"] = lines
        if c["reveal"]:
            c.update(explanation=load_question(qid).text("explanation", lang), reference=variant.reference_text(lang))
    template = _fragments().get_template("quiz/_card.html")
    return Markup(template.render(c=c, attempt_id=att.id, is_open=att.status == AttemptStatus.OPEN.value,
                                  gettext=_card_gettext()))


def _field(answer: Any, name: str) -> Any:
    """One column of a stored answer, given as its row (a dict) or as the model."""
    return answer.get(name) if isinstance(answer, dict) else getattr(answer, name, None)


def _details(answer: Any) -> dict | None:
    return _field(answer, "details_json")


def chosen_texts(public: dict[str, Any], answer: Any) -> list[str] | None:
    """A choice answer as the options' texts, in the order chosen (the stored answer is option ids,
    which mean nothing to a student); None for other question types."""
    if public["type"] not in ("single", "multiple", "ordering"):
        return None
    raw = answer.get("raw_answer") if isinstance(answer, dict) else getattr(answer, "raw_answer", "")
    texts = {o["id"]: o["text"] for o in public["options"]}
    ids = [p.strip() for p in str(raw or "").replace("，", ",").split(",") if p.strip()]
    return [texts.get(i, i) for i in ids]


def _card_gettext() -> Callable[..., str]:
    """The templates' ``_`` for one card, bound to the request's catalogue once.

    Jinja's ``_`` calls whatever ``gettext`` the render context holds; Flask-Babel's looks up
    the request's locale and catalogue again for every string (a card has four to six). This
    one takes the catalogue once per card and otherwise does exactly what Jinja's new-style
    ``gettext`` does: escape the translation when autoescaping, then ``%`` the variables.
    """
    translate = get_translations().ugettext

    @pass_context
    def gettext(context: Any, string: str, **variables: Any) -> str:
        rv = translate(string)
        if context.eval_ctx.autoescape:
            rv = Markup(rv)
        return rv % variables

    return gettext


def _held(att: Any, qid: str, now: datetime | None = None) -> str:
    """Why an answered card keeps its reference to itself: "" (it does not), "never" (the quiz's
    setting), "graded" (until the quiz closes, or the last attempt) or "practice" (a graded quiz
    holds the question); ``now``: the caller's clock reading (the page takes one for all its cards)."""
    if reveal.reference_shown(att, qid, now):
        return ""
    if att.mode != "graded":
        return "practice"
    try:
        return "never" if load_quiz(att.quiz_id).reference_answers == "never" else "graded"
    except BankError:
        return "never"


def _answered_key(att: Any, pos: int, answer_id: int, lang: str, state: str = "", hidden: bool = False,
                  now: datetime | None = None, ident: tuple | None = None) -> tuple:
    # whether (and why not) the reference is shown is in the key: it changes when the quiz closes,
    # and so does whether the quiz's results are held back at all. ``now`` and ``ident`` (``_ident``):
    # the page's, taken once for its 40 cards
    return ("answered", ident or _ident(att), pos, answer_id, lang, state, _held(att, att.question_ids[pos], now),
            hidden)


@lru_cache(maxsize=4096)
def _is_text(qid: str) -> bool:
    """Free text (a question's type never changes while the process runs)."""
    return load_question(qid).type == "text"


def review_form(att: Any, pos: int, state: str, lang: str, secret: str | None = None, hidden: bool = False,
                ident: tuple | None = None) -> str:
    """The "ask a teacher" form beside an auto-graded free-text answer of a graded attempt not yet
    sent for review and not already fully right (empty otherwise: ``state`` is then "full" or a
    review state; empty too while the quiz's results are held back). Kept apart from the answered
    card, which must not carry a CSRF token; cached per session secret and language like an open
    card (``secret``: the caller's, read once per page)."""
    if state or hidden or not _is_text(att.question_ids[pos]) or att.mode != "graded":
        return ""  # practice counts nothing: its answers never go to the teachers' queue

    def build() -> str:
        template = _fragments().get_template("quiz/_ask_review.html")
        return template.render(pos=pos, attempt_id=att.id, gettext=_card_gettext())

    return _caches()[0].get(("review", ident or _ident(att), pos, lang, secret or csrf_secret()), build)


def answered_card(att: Any, pos: int, lang: str, answer_id: int, answer: Callable[[], Any], state: str = "",
                  hidden: bool = False, key: tuple | None = None, cache: FragmentCache | None = None) -> str:
    """The card of a stored answer (it changes only by a review, whose state is in the key, or by
    its quiz's release, ``hidden``); ``answer`` reads it on a miss. ``key``: its ``_answered_key``
    if the caller has it already; ``cache``: the card cache, if the caller has it already."""
    return (cache or _caches()[0]).get(key or _answered_key(att, pos, answer_id, lang, state, hidden),
                                       lambda: render_card(att, pos, lang, answer=answer(), hidden=hidden))


def _open_card(att: Any, pos: int, lang: str, secret: str, ident: tuple | None = None,
               cache: FragmentCache | None = None) -> str:
    return (cache or _caches()[0]).get(("open", ident or _ident(att), att.status, pos, lang, secret),
                                       lambda: render_card(att, pos, lang))


def _page(att: Any, quiz: Quiz, score_html: str, cards_html: str, focus: int | None = None) -> str:
    return render_template("quiz/attempt.html", attempt=att, quiz=quiz, is_open=att.status == AttemptStatus.OPEN.value,
                           score_html=Markup(score_html), cards_html=Markup(cards_html), focus=focus)


def attempt_page(att: Any, quiz: Quiz, lang: str, override: tuple[int, str, str] | None = None) -> str:
    """The whole attempt page; ``override`` is (position, error, draft) after a format error."""
    secret = csrf_secret()
    hidden = held_back(att)
    score = "—" if hidden else score_text(att.score)
    states = store.answered_states(att)
    cached = _caches()[0]
    # What every card shares, taken once for the page's 40: the attempt's identity (five columns
    # of the row), the card cache and the clock reading that decides whether references show.
    ident, now = _ident(att), utcnow()
    # answers this process has not rendered yet (after a restart, or served by another worker)
    # are read in one query, not one per card
    keys = {pos: _answered_key(att, pos, i, lang, st, hidden, now, ident) for pos, (i, st) in states.items()}
    missing = store.answer_rows([i for pos, (i, st) in states.items() if keys[pos] not in cached])
    cards = []
    for pos in range(len(att.question_ids)):
        if override and override[0] == pos:
            cards.append(render_card(att, pos, lang, error=override[1], draft=override[2]))
        elif pos in states:
            answer_id, state = states[pos]
            # (read again only if its card was evicted since ``missing`` was taken)
            cards.append(answered_card(att, pos, lang, answer_id,
                                       lambda: missing.get(answer_id) or store.answer_rows([answer_id])[answer_id],
                                       state, hidden, key=keys[pos], cache=cached))
            cards.append(review_form(att, pos, state, lang, secret, hidden, ident))
        else:
            cards.append(_open_card(att, pos, lang, secret, ident, cached))
    if override or session.get("_flashes"):
        return _page(att, quiz, score, "".join(cards), override[0] if override else None)
    key = (att.id, att.attempt_no, att.quiz_id, att.status, att.max_score, att.user_id, att.username,
           att.display_name, att.is_instructor, lang, request.full_path, secret)
    head, middle, tail = _caches()[1].get(key, lambda: _split_shell(att, quiz))
    return "".join((head, score, middle, *cards, tail))


def _split_shell(att: Any, quiz: Quiz) -> tuple[str, str, str]:
    page = _page(att, quiz, _SCORE_SLOT, _CARDS_SLOT)
    head, rest = page.split(_SCORE_SLOT)
    middle, tail = rest.split(_CARDS_SLOT)
    return head, middle, tail
