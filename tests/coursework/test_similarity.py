"""Similarity (issue 25): disguised copies are found, independent solutions raise nothing."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from coursework.similarity import Doc, compare, corpus_docs, extract, load_spec
from coursework.similarity.fingerprint import code_tokens

ROOT = Path(__file__).resolve().parents[2] / "assignments"
HW1 = ROOT / "ddp_speedup"
SIM = HW1 / "similarity"
DERIVED = "correct_flat_buffer_async_allreduce"  # made from correct_partition_hand_allreduce (git log)


def spec(assignment: str):
    folder = ROOT / assignment
    return load_spec(folder, json.loads((folder / "assignment.json").read_text()))


def doc(path: Path) -> Doc:
    return Doc(str(path.relative_to(ROOT)), extract(path.name, path.read_bytes()))


def independents() -> list[Doc]:
    files = sorted((SIM / "independent").glob("*.py"))
    files += [p for p in sorted((HW1 / "samples").glob("correct_*/train.py")) if p.parent.name != DERIVED]
    return [doc(p) for p in files]


def run(docs: list[Doc], assignment: str = "ddp_speedup") -> dict:
    s = spec(assignment)
    return compare(docs, s.boilerplate, s.kind, s.settings)


def test_thirty_independent_solutions_raise_no_pair():
    docs = independents()
    assert len(docs) >= 30  # the 30 written for this check, plus every correct sample of homework 1
    result = run(docs)
    assert result["pairs"] == [], [(p["a"], p["b"], p["score"]) for p in result["pairs"]]


@pytest.mark.parametrize("folder", sorted(p.name for p in (SIM / "copies").iterdir()))
def test_disguised_copy_is_one_cluster_among_the_independents(folder):
    files = sorted((SIM / "copies" / folder).glob("*.py"))
    group = [doc(p) for p in files] if folder == "public_ddp_tutorial" else [doc(SIM / "original.py")] + [doc(p) for p in files]
    result = run(independents() + group)
    keys = {d.key for d in group}
    assert [set(c["members"]) for c in result["clusters"]] == [keys]
    assert all(p["score"] >= result["settings"]["threshold"] for p in result["pairs"])


def test_a_sample_made_from_another_is_found():
    """Not planted: the repository's own sample derived from another one is reported."""
    a, b = (doc(HW1 / "samples" / n / "train.py") for n in (DERIVED, "correct_partition_hand_allreduce"))
    result = run(independents() + [a])
    assert {(p["a"], p["b"]) for p in result["pairs"]} in ({(a.key, b.key)}, {(b.key, a.key)})


def test_regions_point_at_the_shared_code():
    a, b = doc(SIM / "original.py"), doc(SIM / "copies" / "renamed_variables" / "renamed.py")
    pair = run([a, b])["pairs"][0]
    assert pair["shared_tokens"] > 500 and pair["segments"]
    ta, tb = code_tokens(a.text), code_tokens(b.text)
    for a0, a1, b0, b1 in pair["segments"]:
        left = [t.norm for t in ta if a0 <= t.start < a1]
        right = [t.norm for t in tb if b0 <= t.start < b1]
        assert left == right and len(left) >= 12


def test_annotations_compare_comments_not_the_copied_keys():
    folder = ROOT / "config_annotation" / "similarity"
    docs = [doc(p) for p in sorted(folder.glob("*/*.yaml"))]
    result = run(docs, "config_annotation")
    assert [(Path(p["a"]).name, Path(p["b"]).name) for p in result["pairs"]] == [("first.yaml", "second.yaml")]


def notebook(cells: list[tuple[str, str]]) -> bytes:
    return json.dumps({"cells": [{"cell_type": t, "source": s, "metadata": {}, "outputs": []} for t, s in cells],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).encode()


def test_notebooks_compare_code_cells_only():
    code = (SIM / "original.py").read_text()
    copied = notebook([("markdown", "# my own words"), ("code", code)])
    own_code = notebook([("markdown", "# my own words"), ("code", (SIM / "independent" / "f02_dataclass_experiment.py").read_text())])
    original = notebook([("markdown", "completely different prose"), ("code", code[:2000]), ("code", code[2000:])])
    docs = [Doc("a", extract("a.ipynb", copied)), Doc("b", extract("b.ipynb", own_code)), Doc("c", extract("c.ipynb", original))]
    result = run(docs)
    assert [(p["a"], p["b"]) for p in result["pairs"]] == [("a", "c")]


def test_earlier_term_corpus_pairs_with_students_only(tmp_path):
    corpus = tmp_path / "ddp_speedup" / "2025"
    corpus.mkdir(parents=True)
    (corpus / "old_a.py").write_bytes((SIM / "original.py").read_bytes())
    (corpus / "old_b.py").write_bytes((SIM / "copies" / "dead_code" / "padded.py").read_bytes())
    refs = corpus_docs(tmp_path, "ddp_speedup")
    result = run(independents()[:5] + refs + [doc(SIM / "copies" / "renamed_variables" / "renamed.py")])
    pairs = {frozenset((p["a"], p["b"])) for p in result["pairs"]}
    assert frozenset(("ref:2025/old_a.py", "ref:2025/old_b.py")) not in pairs
    assert len(pairs) == 2 and all(any(k.startswith("ddp_speedup/") for k in p) for p in pairs)


def test_unparsable_code_is_still_compared():
    text = (SIM / "original.py").read_text()
    broken = text.replace("def main():", "def main(:")
    result = run([Doc("a", text), Doc("b", broken)])
    assert result["pairs"] and result["pairs"][0]["score"] > 0.8


def test_annotations_in_a_notebook_are_compared_with_a_config_file():
    folder = ROOT / "config_annotation"
    release = json.loads((folder / "release" / "config_annotation.ipynb").read_text())
    for cell in release["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "annotated":
            cell["source"] = "ANNOTATED_CONFIG = r'''\n" + (folder / "similarity" / "copied" / "first.yaml").read_text() + "'''\n"
    nb = Doc("nb", extract("a.ipynb", json.dumps(release).encode()))
    yaml = doc(folder / "similarity" / "copied" / "second.yaml")
    own = doc(folder / "similarity" / "independent" / "own_words_2.yaml")
    result = run([nb, yaml, own], "config_annotation")
    assert [{p["a"], p["b"]} for p in result["pairs"]] == [{"nb", yaml.key}]
