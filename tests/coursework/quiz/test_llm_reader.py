"""The language-model reader against a real local server speaking the chat-completions protocol:
schema-valid replies are read, malformed replies, quotes not in the answer, server
errors and timeouts are no reading (the answer stays provisional), readings are cached by answer,
only the answer text is sent, and nothing changes when the reader is not configured."""
from __future__ import annotations

import time

import pytest

from coursework import llm_reader
from coursework.quiz.bank import load_question
from tests.coursework.quiz.llm_server import ProtocolServer

Q = "ch7_3/selftest_1"  # two rubric items, a point each


@pytest.fixture
def server():
    with ProtocolServer(slow_s=1.0) as s:
        yield s


def _reader(server, **kw) -> llm_reader.LLMReader:
    return llm_reader.LLMReader(server.url, "served-model", key="k-123", timeout_s=kw.pop("timeout_s", 5.0),
                                rps=kw.pop("rps", 1000.0))


def test_a_schema_valid_reply_is_read_and_cached(server) -> None:
    r = _reader(server)
    q = load_question(Q)
    assert r.share(q, "throughput for data parallel, capacity for model parallel") == 1.0
    assert r.share(q, "throughput for data parallel, capacity for model parallel") == 1.0
    assert r.calls == 1 and len(server.requests) == 1  # the second read came from the cache
    assert r.share(q, "HALF throughput only") == 0.5
    assert r.share(q, "WRONG capacity for data parallel") == 0.0
    sent = server.requests[0]
    assert sent["model"] == "served-model" and sent["temperature"] == 0
    assert sent["response_format"]["json_schema"]["schema"] == llm_reader.SCHEMA
    user = sent["messages"][-1]["content"]
    assert "dp_throughput" in user and "吞吐" in user  # the rubric comes from the question folder
    assert server.headers[0]["Authorization"] == "Bearer k-123"


@pytest.mark.parametrize("answer, why", [("GARBLED answer", "not_json"), ("BADQUOTE throughput", "quote_not_in_answer"),
                                         ("MISSING throughput", "schema"), ("HTTP500 throughput", "HTTPError")])
def test_a_bad_reply_is_no_reading(server, answer: str, why: str) -> None:
    r = _reader(server)
    assert r.share(load_question(Q), answer) is None and r.last_error == why
    assert r.share(load_question(Q), answer) is None and r.calls == 2  # failures are not cached


def test_a_timeout_is_no_reading(server) -> None:
    r = _reader(server, timeout_s=0.3)
    t0 = time.monotonic()
    assert r.share(load_question(Q), "SLOW throughput") is None
    assert time.monotonic() - t0 < 0.9 and r.last_error in ("TimeoutError", "URLError", "timeout")


def test_the_rate_limit_refuses_a_call_that_would_wait_past_its_timeout(server) -> None:
    r = _reader(server, rps=0.5, timeout_s=1.0)  # one call per 2 s
    assert r.share(load_question(Q), "throughput one") == 1.0
    assert r.share(load_question(Q), "throughput two") is None and r.last_error == "rate_limited"
    assert len(server.requests) == 1


def test_unconfigured_means_no_reader(monkeypatch) -> None:
    monkeypatch.delenv("DISTGRADE_LLM_URL", raising=False)
    assert llm_reader.from_environment() is None
    monkeypatch.setenv("DISTGRADE_LLM_URL", "http://127.0.0.1:9/v1")
    monkeypatch.delenv("DISTGRADE_LLM_MODEL", raising=False)
    assert llm_reader.from_environment() is None  # a URL without a model is not a reader
    monkeypatch.setenv("DISTGRADE_LLM_MODEL", "m")
    assert llm_reader.from_environment() is llm_reader.from_environment()


def test_the_agreement_bench_measures_a_configured_model(server, monkeypatch, capsys) -> None:
    from bench import reader_agreement

    monkeypatch.setenv("DISTGRADE_LLM_URL", server.url)
    monkeypatch.setenv("DISTGRADE_LLM_MODEL", "served-model")
    monkeypatch.setenv("DISTGRADE_LLM_RPS", "1000")
    table = reader_agreement.measure([Q], "blind6", 4)
    rule, model = table[Q]["rule"], table[Q]["llm"]
    assert rule.decided == 4 and model.decided + model.no_reading == 4
    assert reader_agreement.main(["--questions", Q, "--limit", "2"]) == 0
    assert "language model served-model" in capsys.readouterr().out
