"""Similarity: disguised copies are found (a shared block, a padded copy, a partial copy too),
independent solutions raise nothing, alone or in any class."""
from __future__ import annotations

import json
import random
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


def run(docs: list[Doc], assignment: str = "ddp_speedup", public: bool = True) -> dict:
    s = spec(assignment)
    return compare(docs, s.boilerplate + (s.public if public else []), s.kind, s.settings)


def group_of(folder: str) -> list[Doc]:
    """The documents of one folder of ``copies/`` (with ``original.py`` unless it is the tutorial pair)."""
    files = sorted((SIM / "copies" / folder).glob("*.py"))
    return [doc(p) for p in files] if folder == "public_ddp_tutorial" else [doc(SIM / "original.py")] + [doc(p) for p in files]


def disguised(path: Path, n: int, seed: int) -> list[Doc]:
    """``n`` students who each handed in ``path`` renamed and padded with dead code (the bench's way)."""
    from bench.similarity import disguise

    rng = random.Random(seed)
    text = path.read_text()
    return [Doc(f"copy{seed}-{i}:{path.name}", disguise(text, rng)) for i in range(n)]


def among(result: dict, keys: set[str]) -> set[frozenset]:
    return {frozenset((p["a"], p["b"])) for p in result["pairs"] if p["a"] in keys and p["b"] in keys}


def test_thirty_independent_solutions_raise_no_pair():
    docs = independents()
    assert len(docs) >= 30  # the 30 written for this check, plus every correct sample of homework 1
    result = run(docs)
    assert result["pairs"] == [], [(p["a"], p["b"], p["score"]) for p in result["pairs"]]


@pytest.mark.parametrize("folder", sorted(p.name for p in (SIM / "copies").iterdir()))
def test_disguised_copy_is_one_cluster_among_the_independents(folder):
    group = group_of(folder)
    result = run(independents() + group)
    keys = {d.key for d in group}
    assert [set(c["members"]) for c in result["clusters"]] == [keys]
    assert all(p["reasons"] for p in result["pairs"])
    assert all(p["score"] >= result["settings"]["threshold"] for p in result["pairs"] if "fraction" in p["reasons"])


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


PATTERN_USERS = ("p01_imagenet_meters", "p02_tutorial_setup_meters", "p03_starter_with_meter",
                 "p04_starter_meter_best_checkpoint")


def test_honest_solutions_sharing_public_helpers_are_no_pair_alone():
    """Four honest solutions that each paste the meter, top-k accuracy or checkpoint helpers of
    pytorch/examples: in a class of four nothing is common, yet they are not copies of each other."""
    docs = [doc(SIM / "independent" / f"{n}.py") for n in PATTERN_USERS]
    assert run(docs)["pairs"] == []


def test_pairs_among_honest_solutions_do_not_depend_on_the_copies_in_the_class():
    """The class-wide cut must not hide (or show) a pair of honest students because other students
    copied: here 12 copies of one solution and 12 of another, plus every copy of the corpus."""
    honest = independents()
    keys = {d.key for d in honest}
    copies = [d for folder in sorted(p.name for p in (SIM / "copies").iterdir()) for d in group_of(folder)]
    copies += disguised(SIM / "original.py", 12, 1) + disguised(SIM / "independent" / "p01_imagenet_meters.py", 12, 2)
    unique = {d.key: d for d in copies}
    alone = among(run(honest), keys)
    in_class = among(run(honest + list(unique.values())), keys)
    assert alone == in_class == set()


def test_the_common_cut_counts_a_cluster_of_copies_once():
    """Without the public helpers as boilerplate, the pair of two starter-based solutions that
    share them is what it is whether or not twelve copies of a third user of the helpers join."""
    pair = [doc(SIM / "independent" / f"{n}.py") for n in PATTERN_USERS[2:]]
    keys = {d.key for d in pair}
    alone = among(run(pair, public=False), keys)
    crowd = disguised(SIM / "independent" / "p01_imagenet_meters.py", 12, 3)
    assert among(run(pair + crowd, public=False), keys) == alone


@pytest.mark.parametrize("folder, reason, pasted", [
    ("training_loop_only", "block", "self.opt.step()\n            summed += loss.detach() * targets.numel()"),
    ("sampler_ddp_part", "block", "eval_sampler = DistributedSampler(held_out, shuffle=False)"),
    ("padded_with_other_code", "contained", "def should_stop(self, val_loss):")])
def test_a_flagged_pair_says_why_and_where(folder, reason, pasted):
    """The pair names its reason and its largest shared region, which holds the pasted lines on both sides."""
    group = group_of(folder)
    result = run(independents() + group)
    pair = next(p for p in result["pairs"] if {p["a"], p["b"]} == {d.key for d in group})
    assert reason in pair["reasons"]
    assert pair["block"]["tokens"] >= result["settings"]["min_block"] or reason != "block"
    a0, a1, b0, b1 = pair["block"]["region"]
    text = {d.key: d.text for d in group}
    assert pasted in text[pair["a"]][a0:a1] and pasted in text[pair["b"]][b0:b1]
