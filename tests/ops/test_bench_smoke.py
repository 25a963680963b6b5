"""The benchmarks run: a tiny size of each in-process one, so that a change elsewhere (a sign-in
rule, a seed) cannot leave a benchmark silently measuring error pages. The gradebook bench did:
seed-demo began giving the teacher a random password and every page it timed was a 302."""
from __future__ import annotations


def test_gradebook_bench_measures_real_pages(tmp_path) -> None:
    from bench import gradebook

    row = gradebook.measure(30, tmp_path)  # asserts every page it times answered 200
    students, items = row[0], row[1]
    assert students == 30 and items >= 10, row
