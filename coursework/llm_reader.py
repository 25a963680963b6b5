"""A language-model reader for courses that run one: an OpenAI chat-completions endpoint (vLLM,
SGLang, llama.cpp's server or a provider) reads a free-text answer against the question's rubric.

Configured from the environment only; with ``DISTGRADE_LLM_URL`` unset nothing changes:

- ``DISTGRADE_LLM_URL``: the API base, e.g. ``http://gpu-host:8000/v1`` (``/chat/completions`` is added)
- ``DISTGRADE_LLM_MODEL``: the served model's name; ``DISTGRADE_LLM_KEY``: a bearer key (optional)
- ``DISTGRADE_LLM_TIMEOUT_S`` (10): one call's limit; ``DISTGRADE_LLM_RPS`` (2): calls per second
  per process, at most (a call that would have to wait past its timeout is not made)

The prompt is built from the question folder's own data, the same the rule reader uses: prompt,
reference answer and rubric items (the subject each concept must be said of, the concept's
words, the claims that contradict it). The reply must be JSON against ``SCHEMA``: every rubric
item ``met`` / ``contradicted`` / ``absent``, with the student's words quoted for the first two.
A reply that does not parse, misses or repeats an item, or quotes words that are not in the
answer is no reading at all (``None``): the answer stays provisional, like on a timeout. Only the
answer text is sent, never who wrote it. Readings are cached per process by the SHA-256 of
(model, question, rubric, answer), so the same answer is never sent twice.

The share follows the rule reader's arithmetic: the points of the met items over all points; a
contradicted item earns nothing. Trust is earned exactly as for the rule reader
(``coursework.trust``), per question, from teachers' decisions.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
import time
import unicodedata
import urllib.error
import urllib.request
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

READER = "llm"
STATUSES = ("met", "contradicted", "absent")
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"items": {"type": "array", "items": {
        "type": "object",
        "properties": {"id": {"type": "string"}, "status": {"type": "string", "enum": list(STATUSES)},
                       "quote": {"type": "string"}},
        "required": ["id", "status", "quote"], "additionalProperties": False}}},
    "required": ["items"], "additionalProperties": False}
SYSTEM = (
    "You grade one short answer of a student against a rubric, in Chinese or English. For EVERY rubric item "
    "decide: 'met' (the answer states the concept about the item's subject, with the right polarity and "
    "direction), 'contradicted' (the answer states something the item lists as wrong, reverses roles, or "
    "negates the concept), or 'absent'. A keyword without a claim is absent. For met and contradicted, "
    "'quote' is the shortest exact substring of the answer that shows it; for absent, quote is \"\". "
    "Reply with JSON only: {\"items\": [{\"id\": ..., \"status\": ..., \"quote\": ...}, ...]}.")
CACHE_SIZE = 20_000


def _norm(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text or "").lower().split())


@dataclass
class Reading:
    """One model reading: per rubric item id, (status, quote)."""

    items: dict[str, tuple[str, str]]
    share: float


@dataclass
class LLMReader:
    url: str
    model: str
    key: str = ""
    timeout_s: float = 10.0
    rps: float = 2.0
    calls: int = 0  # requests sent (tests and the bench read it)
    last_error: str = ""
    _cache: OrderedDict = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _next_at: float = 0.0

    # -- what the grader asks -------------------------------------------------------------
    def share(self, question: Any, answer: str) -> float | None:
        """The share of the points the model's reading gives, or None (no reading: provisional)."""
        r = self.read(question, answer)
        return None if r is None else r.share

    def read(self, question: Any, answer: str) -> Reading | None:
        rubric = question.info.get("rubric") or {}
        items = rubric.get("items") or []
        if not items:
            return None
        key = hashlib.sha256(json.dumps([self.model, question.id, items, _norm(answer)], sort_keys=True,
                                        ensure_ascii=False).encode("utf-8")).hexdigest()
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        reading = self._ask(question, items, answer)
        if reading is not None:  # failures are not cached: the next answer post may try again
            with self._lock:
                self._cache[key] = reading
                while len(self._cache) > CACHE_SIZE:
                    self._cache.popitem(last=False)
        return reading

    # -- the protocol ---------------------------------------------------------------------
    def messages(self, question: Any, items: list[dict[str, Any]], answer: str) -> list[dict[str, str]]:
        """The chat messages for one answer: the rubric from the question folder, then the answer alone."""
        info = question.info
        rubric = [{"id": it["id"], "subject": it.get("subject", []), "concept": it.get("concept", []),
                   "wrong": it.get("wrong", []), "points": it.get("points", 1)} for it in items]
        task = {"question": info.get("prompt", {}), "reference_answer": info.get("reference", {}), "rubric": rubric}
        return [{"role": "system", "content": SYSTEM},
                {"role": "user", "content": "RUBRIC:\n" + json.dumps(task, ensure_ascii=False)
                 + "\n\nSTUDENT ANSWER:\n" + answer}]

    def _wait_turn(self) -> bool:
        """Rate limit: wait for this process's next free slot, unless that is past the timeout."""
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next_at)
            if start - now > self.timeout_s:
                return False
            self._next_at = start + 1.0 / self.rps if self.rps > 0 else start
        if start > now:
            time.sleep(start - now)
        return True

    def _ask(self, question: Any, items: list[dict[str, Any]], answer: str) -> Reading | None:
        if not self._wait_turn():
            self.last_error = "rate_limited"
            return None
        body = {"model": self.model, "temperature": 0, "max_tokens": 800,
                "messages": self.messages(question, items, answer),
                "response_format": {"type": "json_schema",
                                    "json_schema": {"name": "rubric_reading", "schema": SCHEMA, "strict": True}}}
        headers = {"Content-Type": "application/json"}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        req = urllib.request.Request(self.url.rstrip("/") + "/chat/completions",
                                     data=json.dumps(body).encode("utf-8"), headers=headers, method="POST")
        self.calls += 1
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:  # noqa: S310 (the course's own URL)
                raw = resp.read(1_000_000)
            content = json.loads(raw)["choices"][0]["message"]["content"]
        except (urllib.error.URLError, TimeoutError, OSError, ValueError, KeyError, IndexError, TypeError) as err:
            self.last_error = type(err).__name__
            return None
        return parse_reply(content, items, answer, self)


def parse_reply(content: Any, items: list[dict[str, Any]], answer: str, reader: LLMReader | None = None) -> Reading | None:
    """The reading in a reply's content, or None when it breaks the schema or quotes words that are
    not in the answer (then ``reader.last_error`` says why)."""
    def fail(why: str) -> None:
        if reader is not None:
            reader.last_error = why
        return None

    try:
        data = json.loads(content) if isinstance(content, str) else None
    except ValueError:
        return fail("not_json")
    if not isinstance(data, dict) or not isinstance(data.get("items"), list):
        return fail("schema")
    wanted = {it["id"]: float(it.get("points", 1)) for it in items}
    got: dict[str, tuple[str, str]] = {}
    text = _norm(answer)
    for entry in data["items"]:
        if not isinstance(entry, dict) or set(entry) - {"id", "status", "quote"}:
            return fail("schema")
        iid, status, quote = entry.get("id"), entry.get("status"), entry.get("quote", "")
        if iid not in wanted or iid in got or status not in STATUSES or not isinstance(quote, str):
            return fail("schema")
        if status != "absent" and (not quote.strip() or _norm(quote) not in text):
            return fail("quote_not_in_answer")
        got[iid] = (status, quote)
    if set(got) != set(wanted):
        return fail("schema")
    total = sum(wanted.values()) or 1.0
    share = sum(p for iid, p in wanted.items() if got[iid][0] == "met") / total
    return Reading(got, round(share, 4))


_READERS: dict[tuple, LLMReader] = {}


def from_environment() -> LLMReader | None:
    """The course's model reader, or None when ``DISTGRADE_LLM_URL`` (or the model) is unset.
    One reader (and cache, and rate limit) per process and configuration."""
    url, model = os.environ.get("DISTGRADE_LLM_URL", "").strip(), os.environ.get("DISTGRADE_LLM_MODEL", "").strip()
    if not url or not model:
        return None
    conf = (url, model, os.environ.get("DISTGRADE_LLM_KEY", ""), float(os.environ.get("DISTGRADE_LLM_TIMEOUT_S", "10")),
            float(os.environ.get("DISTGRADE_LLM_RPS", "2")))
    reader = _READERS.get(conf)
    if reader is None:
        if len(_READERS) > 8:
            _READERS.clear()
        reader = _READERS[conf] = LLMReader(*conf)
    return reader
