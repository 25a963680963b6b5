"""The memory calculator page: the chapter's numbers, input errors named, both languages."""
from __future__ import annotations

import pytest

from server.calculator.views import parse_params


@pytest.mark.parametrize("text, value", [
    ("7B", 7e9), ("1.3b", 1.3e9), ("350M", 350e6), ("7e9", 7e9), ("7,000,000,000", 7e9), (" 70 B ", 70e9),
])
def test_parse_params(text, value):
    assert parse_params(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["", "seven", "7X", "-7B", "0", "1e99", "7B; DROP TABLE"])
def test_parse_params_rejects(text):
    with pytest.raises(ValueError):
        parse_params(text)


def test_chapter_7b_needs_112_gb_on_one_card(client, auth):
    auth.login()
    page = client.get("/calculator/?params=7B&cards=1&strategy=zero0&precision=bf16&optimizer=adam"
                      "&card_gb=24&lang=en").get_data(as_text=True)
    assert "Per card: 112.0 GB" in page and "does not fit" in page


def test_full_shard_on_8_cards_fits_a_24_gb_card(client, auth):
    auth.login()
    page = client.get("/calculator/?params=7B&cards=8&strategy=FULL_SHARD&optimizer=adamw&card_gb=24&lang=en")
    text = page.get_data(as_text=True)
    assert "Per card: 14.0 GB" in text and "badge-pass\">fits<" in text
    assert "<svg" in text and "ZeRO-3 = FSDP FULL_SHARD" in text


@pytest.mark.parametrize("query, field, message", [
    ("params=seven", "params", "Write a parameter count"),
    ("cards=0", "cards", "whole number from 1"),
    ("strategy=zero9", "strategy", "Choose one of the listed options"),
    ("strategy=zero2&offload_params=1", "offload_params", "needs ZeRO-3"),
    ("card_gb=-1", "card_gb", "positive number of GB"),
])
def test_bad_input_is_named_not_a_500(client, auth, query, field, message):
    auth.login()
    resp = client.get(f"/calculator/?{query}&lang=en")
    assert resp.status_code == 200 and message in resp.get_data(as_text=True)


def test_page_in_chinese(client, auth):
    auth.login()
    text = client.get("/calculator/?lang=zh_CN").get_data(as_text=True)
    assert "显存计算器" in text and "每卡" in text and "装得下" in text


def test_anonymous_is_sent_to_login(client):
    assert client.get("/calculator/").status_code == 302


@pytest.mark.parametrize("text, value", [("70亿", 7e9), ("13亿", 1.3e9), ("3.5亿", 3.5e8), ("1.2万亿", 1.2e12),
                                         ("350万", 3.5e6)])
def test_parse_params_in_chinese_units(text, value):
    assert parse_params(text) == pytest.approx(value)


def test_every_invalid_field_is_named_at_once_and_options_are_words(client, auth):
    auth.login()
    text = client.get("/calculator/?params=seven&cards=0&card_gb=-1&lang=en").get_data(as_text=True)
    assert "Write a parameter count" in text and "whole number from 1" in text and "positive number of GB" in text
    zh = client.get("/calculator/?lang=zh_CN").get_data(as_text=True)
    assert ">带动量的 SGD<" in zh and ">sgd_momentum<" not in zh
    assert 'action="/calculator/#result"' in zh  # the result is scrolled into view after "Calculate"
