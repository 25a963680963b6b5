"""Homework 2's grading core without a sandbox: parsing comments, judging annotations,
validating configs, upload rejection, the manual-score merge, and how an autograded
notebook cell is scored from the run's format check and the static answer."""
from __future__ import annotations

import ast
import json
import re

import pytest

from coursework import assignments
from coursework.config_annotation.parse import ConfigSyntaxError, parse, strip_json_comments
from coursework.exceptions import SubmissionRejected
from coursework.report import merge_manual_scores
from coursework.config_annotation import annotate, catalogue
from graders.config_annotation import answers, core, notebook, validate

CAT = catalogue.load()


def test_catalogue_is_consistent_and_bilingual() -> None:
    raw = CAT.raw
    assert catalogue.consistency_problems(raw) == []
    for dialect in raw["fields"]:
        for path, spec in raw["fields"][dialect].items():
            assert spec["concept"] in raw["concepts"], path


def test_json_comments_are_stripped_outside_strings_only() -> None:
    src = '{\n  "url": "http://x//y /* no */", // real\n  /* block\n     two lines */\n  "stage": 3\n}'
    clean, comments = strip_json_comments(src)
    assert json.loads(clean) == {"url": "http://x//y /* no */", "stage": 3}
    parsed = parse(src, "c.json")
    assert parsed.fields["url"].comment == "real"
    assert "block" in parsed.fields["stage"].comment and parsed.fields["stage"].line == 5


def test_yaml_comments_inline_and_above_but_not_inside_strings() -> None:
    src = ("# header\n\nfsdp: \"full_shard # not a comment\"  # inline\n"
           "fsdp_config:\n  # above\n  fsdp_offload_params: false  # off\n")
    parsed = parse(src, "c.yaml")
    assert parsed.fields["fsdp"].value == "full_shard # not a comment"
    assert parsed.fields["fsdp"].comment == "inline"
    assert parsed.fields["fsdp_config.fsdp_offload_params"].comment == "above off"


def test_syntax_errors_carry_the_line() -> None:
    with pytest.raises(ConfigSyntaxError) as e:
        parse("a: 1\nb: [1, 2\n", "c.yaml")
    assert e.value.line >= 2
    with pytest.raises(ConfigSyntaxError):
        parse('{"a": 1,}', "c.json")


STAGE3 = CAT.rule("deepspeed", "zero_optimization.stage", 3)
STAGE1 = CAT.rule("deepspeed", "zero_optimization.stage", 1)
ACCUM = CAT.rule("deepspeed", "gradient_accumulation_steps", 4)


@pytest.mark.parametrize("rule,note,verdict", [
    (STAGE3, "shards parameters, gradients and optimizer states across GPUs", "correct"),
    (STAGE3, "ZeRO-3：参数、梯度和优化器状态都切分到各卡", "correct"),
    (STAGE3, "ZeRO-3 shards optimizer states only", "contradiction"),
    (STAGE3, "只切分优化器状态", "contradiction"),
    (STAGE3, "shards gradients and optimizer states but not parameters", "contradiction"),
    (STAGE3, "不切分参数，只切梯度和优化器状态", "contradiction"),
    (STAGE3, "ZeRO-2: shards gradients and optimizer states", "contradiction"),
    (STAGE3, "shards the optimizer states and gradients", "partial"),
    (STAGE3, "accumulate gradients over 4 micro-batches", "wrong_concept"),
    (STAGE3, "", "missing"),
    (STAGE1, "shards optimizer states; gradients and parameters remain replicated", "correct"),
    (STAGE1, "shards optimizer states and gradients", "contradiction"),
    (ACCUM, "accumulate gradients over 4 micro-batches; no communication until the last one", "correct"),
    (ACCUM, "累积 4 个 micro-batch 的梯度，累积期间不需要通信", "correct"),
    (ACCUM, "梯度累积", "partial"),
    (ACCUM, "overlap communication with backward", "wrong_concept"),
])
def test_annotations_are_judged_by_meaning(rule, note: str, verdict: str) -> None:
    assert annotate.judge(note, rule, CAT).verdict.value == verdict


def test_offload_switch_off_accepts_negation_and_the_true_explanation() -> None:
    off = CAT.rule("llamafactory", "fsdp_config.fsdp_offload_params", False)
    for note in ("不把参数卸载到 CPU 内存，全部留在显存", "parameters stay on the GPU, no offload",
                 "true = offload parameters to CPU memory: saves memory, slower"):
        assert annotate.judge(note, off, CAT).verdict == annotate.Verdict.CORRECT, note


def _checks(src: str, name: str) -> dict:
    return {c.id: c for c in core.grade_config_text(src, name)}


def test_typo_gets_did_you_mean_and_rules_catch_deepspeed_errors() -> None:
    src = ('{"train_batch_size": 30, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,\n'
           ' "bf16": {"enabled": true}, "fp16": {"enabled": true},\n'
           ' "zero_optimisation": {"stage": 2}}')
    checks = _checks(src, "c.json")
    assert "did you mean `zero_optimization`" in checks["config.schema"].message["en"]
    rules = checks["config.rules"].message["en"]
    assert "not divisible by 8" in rules and "bf16 and fp16" in rules


def test_offload_rules_follow_the_stage() -> None:
    parsed = parse('{"zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}}', "c.json")
    codes = [f.code for f in validate.rule_findings(parsed, "deepspeed")[0]]
    assert codes == ["offload_param_stage"]
    parsed = parse('{"zero_optimization": {"stage": 0, "offload_optimizer": {"device": "cpu"}}}', "c.json")
    assert [f.code for f in validate.rule_findings(parsed, "deepspeed")[0]] == ["offload_optimizer_stage"]


def test_memory_uses_the_shared_calculator() -> None:
    checks = _checks("fsdp: full_shard auto_wrap  # x\nbf16: true\n", "c.yaml")
    mem = checks["memory.per_card"]
    assert mem.evidence["total_gb"] == pytest.approx(14.0) and "7b model" in mem.message["en"].lower()


def test_max_score_is_fixed_whatever_the_fields() -> None:
    small = core.grade_config_text("deepspeed: ds_z3_config.json  # the DeepSpeed config file\n", "c.yaml")
    assert sum(c.max_points for c in small) == pytest.approx(100, abs=0.05)


def test_not_a_config_is_graded_as_parse_fail() -> None:
    checks = _checks("title: notes\ntopics: [ddp]\n", "c.yaml")
    assert checks["config.parse"].status.value == "fail" and checks["config.parse"].points == 0


@pytest.mark.parametrize("name,data,needle", [
    ("c.yaml", b"a: [1, 2\n", "YAML syntax error"),
    ("c.json", b'{"a": 1,,}', "JSON syntax error"),
    ("c.yaml", b"fsdp: x\x00\x01", "binary"),
    ("c.yaml", b"\xff\xfe bad", "UTF-8"),
    ("n.ipynb", b'{"cells": [', "not a valid Jupyter notebook"),
    ("n.ipynb", b'{"cells": 1}', "not a valid Jupyter notebook"),
    ("c.yaml", b"a: 1\n" * (2 * 1024 * 1024), "too large"),
])
def test_unreadable_uploads_are_rejected_before_storing(name: str, data: bytes, needle: str) -> None:
    a = assignments.load("config_annotation")
    with pytest.raises(SubmissionRejected) as e:
        a.validate_upload(name, data)
    assert needle in e.value.message["en"] and e.value.message["zh"]


def test_readable_non_config_passes_upload_validation() -> None:
    assignments.load("config_annotation").validate_upload("c.yaml", b"title: notes\n")


def test_ten_megabytes_are_rejected() -> None:
    a = assignments.load("config_annotation")
    with pytest.raises(SubmissionRejected, match="too large"):
        a.validate_upload("c.json", b"{" + b" " * (10 * 1024 * 1024) + b"}")


def _report_with_manual() -> dict:
    return {"score": 30.0, "max_score": 50.0, "checks": [
        {"id": "nb.test_mapping", "points": 10.0, "max_points": 10.0, "status": "pass"},
        {"id": "nb.test_annotated", "points": 20.0, "max_points": 20.0, "status": "pass"},
        {"id": "manual.explain_tradeoff", "points": 0.0, "max_points": 5.0, "status": "skip", "evidence": {}},
        {"id": "manual.explain_choice", "points": 0.0, "max_points": 5.0, "status": "skip", "evidence": {}}]}


def test_merge_manual_scores_is_pure_and_bounded() -> None:
    report = _report_with_manual()
    merged = merge_manual_scores(report, {"explain_tradeoff": {"score": 4, "comment": "ok"},
                                          "explain_choice": {"score": 5}})
    assert merged["score"] == 39.0 and report["score"] == 30.0
    assert {c["id"]: c["status"] for c in merged["checks"]}["manual.explain_choice"] == "pass"
    with pytest.raises(ValueError):
        merge_manual_scores(report, {"explain_choice": {"score": 6}})
    with pytest.raises(ValueError):
        merge_manual_scores(report, {"nope": {"score": 1}})


def test_static_answers_are_read_without_running_code() -> None:
    nb = {"cells": [
        {"cell_type": "code", "metadata": {"nbgrader": {"grade_id": "mapping"}}, "source": "import os\nFIELD_CONCEPTS = None\n"},
        {"cell_type": "code", "metadata": {}, "source": ["FIELD_CONCEPTS = {'fsdp': 'fsdp_strategy'}\n"]},
        {"cell_type": "code", "metadata": {"nbgrader": {"grade_id": "scenario"}}, "source": "SCENARIO_CONFIG = dict(a=open('/etc/x'))"},
    ]}
    got = notebook.static_answers(nb, {"mapping": "FIELD_CONCEPTS", "scenario": "SCENARIO_CONFIG"})
    assert got["mapping"] == (True, None)  # the answer cell's own literal wins
    assert got["scenario"] == (False, None)  # a call is never evaluated


SOURCE_CELLS = notebook._cells_by_id(json.loads((assignments.load("config_annotation").path / "source" / "config_annotation"
                                                 / "config_annotation.ipynb").read_text(encoding="utf-8")))
MENU = answers.literal_assignment(notebook._source(SOURCE_CELLS["concept_menu"]), "CONCEPT_MENU")[1]
KEY = json.loads(answers.ANSWER_KEY.read_text(encoding="utf-8"))
TEST_CELLS = {"mapping": ("test_mapping", "FIELD_CONCEPTS"), "scenario": ("test_scenario", "SCENARIO_CONFIG"),
              "annotated": ("test_annotated", "ANNOTATED_CONFIG")}


@pytest.mark.parametrize("answer_id,value,problem", [
    ("mapping", KEY["mapping"], None),
    ("mapping", {}, None),  # missing fields are wrong answers, not a malformed one
    ("mapping", {"fsdp": "fsdp_strategy", "bf16.enabled": None}, "not_in_menu"),
    ("mapping", {"fsdp": "no_such_concept"}, "not_in_menu"),
    ("mapping", {"fsdp": ["fsdp_strategy"]}, "not_in_menu"),
    ("mapping", {3: "zero_stage"}, "key_not_str"),
    ("mapping", [("fsdp", "fsdp_strategy")], "not_dict"),
    ("scenario", {"zero_optimization": {"stage": 3}}, None),
    ("scenario", {"train_batch_size": 64, "bf16": {"enabled": True}, "zero_optimization": {}}, None),
    ("scenario", {}, "no_zero_optimization"),
    ("scenario", {"zero_optimization": 3}, "no_zero_optimization"),
    ("scenario", {"zero_optimization": {"stage": 3}, "tags": {1, 2}}, "not_json"),
    ("scenario", {"zero_optimization": {}, "train_batch_size": "64"}, "batch_not_int"),
    ("scenario", {"zero_optimization": {}, "gradient_accumulation_steps": True}, "batch_not_int"),
    ("scenario", {"zero_optimization": {}, "train_micro_batch_size_per_gpu": 2.0}, "batch_not_int"),
    ("scenario", "stage 3", "not_dict"),
    ("annotated", "{}  // x", None),
    ("annotated", "  \n", "empty_text"),
    ("annotated", {"stage": 3}, "empty_text"),
])
def test_static_format_check_agrees_with_the_notebook_test_cell(answer_id: str, value, problem: str | None) -> None:
    # the test cell runs in the kernel and cannot import the grader: both copies must say the same
    test_id, var = TEST_CELLS[answer_id]
    got = answers.format_problem(answer_id, value, MENU)
    assert (got[0] if got else None) == problem
    try:
        exec(notebook._source(SOURCE_CELLS[test_id]), {"CONCEPT_MENU": dict(MENU), var: value})
        in_kernel = None
    except AssertionError as e:
        in_kernel = str(e)
    assert (in_kernel is None) == (problem is None), in_kernel


def test_the_test_cells_import_nothing_and_hide_nothing() -> None:
    for test_id, _ in TEST_CELLS.values():
        source = notebook._source(SOURCE_CELLS[test_id])
        tree = ast.parse(source)
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                    for a in n.names} | {n.module.split(".")[0] for n in ast.walk(tree)
                                         if isinstance(n, ast.ImportFrom) and n.module}
        assert imported <= {"json"}, (test_id, imported)
        assert "HIDDEN TESTS" not in source and "answer_key" not in source and "catalogue" not in source


NB_SPEC = assignments.load("config_annotation").raw["checks"]["nb"]


@pytest.mark.parametrize("nb_score,ran,problem,scored,status,points,words", [
    (10.0, True, None, (7.33, {"wrong": {"fsdp": {}}}), "fail", 7.33, "7.33/10 points. wrong fields: fsdp"),
    (10.0, True, None, (10.0, {}), "pass", 10.0, "10/10 points"),
    (0.0, True, ("not_in_menu", {"var": "FIELD_CONCEPTS", "unknown": {"fsdp": None}}), None, "fail", 0.0,
     "malformed, so this part gets 0 points: these concept ids are not in the menu: fsdp: none"),
    # well-formed as written, yet the run's check failed (the answer was changed at run time)
    (0.0, True, None, (10.0, {}), "fail", 0.0, "format check failed when the notebook ran (assertionerror: x)"),
    # the run's check passed for an answer malformed as written: the kernel was fooled
    (10.0, True, ("no_zero_optimization", {"var": "SCENARIO_CONFIG"}), None, "fail", 0.0,
     "passed when the notebook ran, yet the answer as written is malformed: scenario_config needs"),
    (None, True, None, (10.0, {}), "fail", 0.0, "no result from the run"),
    (10.0, False, None, (10.0, {}), "fail", 0.0, "no result from the run"),
])
def test_an_autograded_cell_counts_the_static_score_only_after_the_runs_format_check(
        nb_score, ran: bool, problem, scored, status: str, points: float, words: str) -> None:
    c = notebook._autograded_check(NB_SPEC, "test_mapping", 10.0, nb_score=nb_score, ran=ran, problem=problem,
                                   scored=scored, kernel_error="AssertionError: x")
    assert (c.status.value, c.points, c.max_points) == (status, points, 10.0)
    assert words in c.message["en"].lower() and c.message["zh"]
    assert not re.search(r"\{[a-z_]+\}", c.message["zh"] + c.message["en"])  # every placeholder filled


def test_annotation_answer_set_agreement_with_a_teacher() -> None:
    """Homework 2's graded annotations (assignments/config_annotation/annotation_examples.json):
    the tuning part meets the quiz's targets; the held-out parts are measured, never tuned
    one by one (held2 was written before held's failures were looked at, held3 before held2's;
    ``held`` also takes the hash-chosen half of every answer written without a split)."""
    from coursework.quiz import agreement

    tune = agreement.summary([o for o in agreement.annotation_outcomes("tune") if o.field not in UNWEIGHTED_GRADED_FIELDS])
    assert tune["fair_auto"] >= 0.97 and tune["wrong_full_auto"] == 0 and tune["review_share"] <= 0.15, tune
    for split in ("held", "held2", "held3"):
        # the fields graded at the default weight are measured on their own below
        outcomes = [o for o in agreement.annotation_outcomes(split) if o.field not in UNWEIGHTED_GRADED_FIELDS]
        s = agreement.summary(outcomes)
        unfair = [(o.source, o.answer, o.expect, o.got) for o in outcomes if not o.review and not o.fair]
        assert s["n"] >= 40 and s["review_share"] <= 0.15 and s["wrong_full_auto"] == 0, (s, unfair)
        # measured untouched: held 0.925, held2 0.897, held3 0.921; each batch's failures were then
        # fixed as classes (vocabulary, side remarks, verb-less clauses) and the next batch written.
        # The nine fields added in session 5 measured 0.667 (14 wrong answers at full marks) on
        # their held half before any change; tuning batches 2-5 (tune only) found the classes.
        assert s["fair_auto"] >= 0.97, (s, unfair)
    # held10 (session 6): 90 answers to 15 values of the weighted fields, most of them values held2
    # and held3 never covered (overlap_comm, bf16, fp16, the batch fields, the FSDP options), by a
    # writer who never ran the grader, measured once and not looked at: 0.675 fair among
    # auto-graded, 10 wrong answers at full marks, 11% to the teacher. The weighted fields' reading
    # is no more reliable on fresh answers than the default-weight fields' (see below); a ratchet
    # at that measurement, not the target.
    outcomes = [o for o in agreement.annotation_outcomes("held10") if o.field not in UNWEIGHTED_GRADED_FIELDS]
    s = agreement.summary(outcomes)
    assert s["n"] == 90 and s["fair_auto"] >= 0.67 and s["wrong_full_auto"] <= 10 and s["review_share"] <= 0.15, s


def test_unweighted_fields_answer_set_agreement_with_a_teacher() -> None:
    """The 28 fields graded at the default weight (UNWEIGHTED_GRADED_FIELDS), measured on every
    batch; the floors are today's numbers, a ratchet, not the target: raise them as the rules improve.

    The target (>= 97% fair among auto-graded, no wrong answer at full marks, <= 15% to the
    teacher) is met on the tuning half only. On answers nobody tuned on it is NOT met, and the blind
    batches say by how much. Each was written by someone who never ran the grader, measured once,
    and only then looked at and fixed as classes:

    =====  ====================================  ===========================  ===================
    batch  measured blind, with the rules of      fair auto / wrong at full   after its fixes
    =====  ====================================  ===========================  ===================
    held   session 4 (hash half of each field)   0.890 / 12                  0.920 / 5
    held4  session 4's main                      0.647 / 33                  0.824 / 12
    held5  after held4's classes                 0.734 / 15 (main: 0.702/17)  0.810 / 11
    held6  after held5's classes                 0.646 / 28 (main: 0.626/30)  0.702 / 19
    held7  after held6's classes                 0.669 / 26 (main: 0.617/31)  0.677 / 24 (restates_key)
    held8  session 5's final rules                0.640 / 21                  (not looked at)
    held9  session 5's final rules                0.615 / 29                  (not looked at)
    held11 session 6 (with restates_key)          0.613 / 26                  (not looked at)
    =====  ====================================  ===========================  ===================

    ("main" is session 4's rules on the same batch.) held8 and held9 were written in session 6 by two
    more writers who never ran the grader; the "restates the key" sign added after them (found on
    held4-held7) changes neither. So on fresh answers these fields' reading is
    right about two times in three, and three rounds of class fixes moved a fresh batch by about
    five points: the phrasings students use for 28 small fields are more varied than a word
    catalogue can follow. The review signs (one word,
    another number, ...) send 5-7% to the teacher; no sign found so far separates the wrong answers
    that use the right words."""
    from coursework.quiz import agreement

    tune = agreement.summary([o for o in agreement.annotation_outcomes("tune") if o.field in UNWEIGHTED_GRADED_FIELDS])
    assert tune["n"] >= 400 and tune["fair_auto"] >= 0.98 and tune["wrong_full_auto"] == 0, tune
    assert tune["review_share"] <= 0.15, tune
    floors = {"held": (250, 0.92, 5), "held4": (224, 0.82, 11), "held5": (168, 0.82, 8), "held6": (168, 0.70, 18),
              "held7": (168, 0.67, 24), "held8": (168, 0.63, 21), "held9": (168, 0.61, 29),
              "held11": (168, 0.61, 26)}
    for split, (n, fair, wrong_full) in floors.items():
        s = agreement.summary([o for o in agreement.annotation_outcomes(split) if o.field in UNWEIGHTED_GRADED_FIELDS])
        assert s["n"] >= n and s["review_share"] <= 0.15, (split, s)
        assert s["fair_auto"] >= fair and s["wrong_full_auto"] <= wrong_full, (split, s)


def _weighted_fields() -> list[str]:
    return sorted(core.load_config()["fields"]["weights"])


@pytest.mark.parametrize("field", _weighted_fields())
def test_every_weighted_field_has_a_bilingual_answer_set_with_a_held_out_half(field: str) -> None:
    """>= 20 graded answers per field the assignment weighs, in zh and en, right and wrong ones,
    with some of each language held out."""
    from coursework.quiz import agreement

    path = catalogue.DEFAULT_PATH.parent / "annotation_examples.json"
    examples = [e for e in json.loads(path.read_text("utf-8")) if e["field"] == field]
    assert len(examples) >= 20, f"{field}: {len(examples)} graded answers"
    assert {agreement.language_of(e["answer"]) for e in examples} == {"zh", "en"}
    assert {"correct", "wrong"} <= {e["expect"] for e in examples}
    held = [e for e in examples if agreement.split_of(e).startswith("held")]
    assert len(held) >= 5 and {agreement.language_of(e["answer"]) for e in held} == {"zh", "en"}, field


# the fields the catalogue grades without a weight in assignment.json (default weight 1): each has
# its own answer set too (>= 20 per homework-2 field, zh and en)
UNWEIGHTED_GRADED_FIELDS = [
    "train_micro_batch_size_per_gpu", "gradient_clipping", "zero_allow_untested_optimizer",
    "zero_optimization.offload_optimizer.pin_memory", "zero_optimization.offload_param.pin_memory",
    "zero_optimization.contiguous_gradients", "zero_optimization.reduce_bucket_size",
    "zero_optimization.allgather_bucket_size", "zero_optimization.reduce_scatter",
    "zero_optimization.allgather_partitions", "zero_optimization.round_robin_gradients",
    "zero_optimization.sub_group_size", "deepspeed", "fsdp_config.fsdp_transformer_layer_cls_to_wrap",
    "fsdp_config.fsdp_backward_prefetch", "fsdp_config.fsdp_forward_prefetch", "fsdp_config.fsdp_state_dict_type",
    "fsdp_config.fsdp_sync_module_states", "fsdp_config.fsdp_cpu_ram_efficient_loading",
    "fsdp_config.fsdp_use_orig_params", "mixed_precision", "per_device_train_batch_size", "learning_rate",
    "max_grad_norm", "ddp_timeout", "distributed_type", "num_processes", "num_machines",
]


@pytest.mark.parametrize("field", UNWEIGHTED_GRADED_FIELDS)
def test_every_unweighted_graded_field_has_a_bilingual_answer_set_with_a_held_out_half(field: str) -> None:
    """>= 20 graded answers for each field graded at the default weight, at least 8 in each of zh
    and en, right and wrong ones, and a hash-held half with both languages in it."""
    from coursework.quiz import agreement

    assert any(field in fields for fields in catalogue.load().raw["fields"].values()), field
    path = catalogue.DEFAULT_PATH.parent / "annotation_examples.json"
    examples = [e for e in json.loads(path.read_text("utf-8")) if e["field"] == field]
    langs = [agreement.language_of(e["answer"]) for e in examples]
    assert len(examples) >= 20 and langs.count("zh") >= 8 and langs.count("en") >= 8, (field, len(examples))
    assert {"correct", "wrong"} <= {e["expect"] for e in examples}, field
    held = [e for e in examples if agreement.split_of(e).startswith("held")]
    assert len(held) >= 4 and {agreement.language_of(e["answer"]) for e in held} == {"zh", "en"}, field


def test_an_unsplit_example_is_held_out_by_a_stable_hash() -> None:
    from coursework.quiz import agreement

    a = {"field": "bf16", "answer": "bf16 mixed precision"}
    assert agreement.split_of(a) == agreement.split_of(dict(a)) in ("tune", "held")
    assert agreement.split_of({**a, "split": "held3"}) == "held3"
    splits = {agreement.split_of({"field": "f", "answer": f"answer {i}"}) for i in range(40)}
    assert splits == {"tune", "held"}


@pytest.mark.parametrize("dialect,field,value,note,verdict", [
    # a concept's own forbid: overlap costs memory; accumulation keeps one sync per step
    ("deepspeed", "zero_optimization.overlap_comm", True, "overlap comm with compute, which also reduces memory", "contradiction"),
    ("deepspeed", "gradient_accumulation_steps", 4, "累积 4 步梯度，之后各卡各自更新，不需要同步", "contradiction"),
    ("deepspeed", "gradient_accumulation_steps", 4, "4 次前向反向才通信一次", "correct"),
    # '~facet' in a forbid: a denial is the wrong claim (fp16 without loss scaling)
    ("deepspeed", "fp16", {"enabled": True}, "fp16 不需要损失缩放", "contradiction"),
    ("deepspeed", "fp16", {"enabled": True}, "fp16 + dynamic loss scale (skips steps on overflow)", "correct"),
    # '-facet': a lessening is wrong too ("skips the all-gather")
    ("llamafactory", "fsdp_config.fsdp_auto_wrap_policy", "TRANSFORMER_BASED_WRAP", "wrapping layers makes FSDP skip the all-gather", "contradiction"),
    ("llamafactory", "fsdp_config.fsdp_auto_wrap_policy", "TRANSFORMER_BASED_WRAP", "one FSDP unit per LlamaDecoderLayer", "correct"),
    # a comparison with the other value is about this one, not a side remark
    ("deepspeed", "fp16", {"enabled": True}, "fp16: wider dynamic range than bf16", "contradiction"),
    ("deepspeed", "bf16", {"enabled": True}, "bf16 mixed precision; unlike fp16 it needs no loss scaling", "correct"),
    # another member of the group named instead of the required one
    ("deepspeed", "zero_optimization.offload_param", {"device": "cpu"}, "moves gradients to the CPU", "contradiction"),
    ("deepspeed", "zero_optimization.stage", 2, "切分梯度", "partial"),
    # a sentence about the other setting of a switch claims nothing about this one
    ("llamafactory", "fsdp_config.fsdp_offload_params", False, "params stay in GPU memory (true would move them to CPU, slower)", "correct"),
    ("llamafactory", "fsdp_config.fsdp_offload_params", False, "offload enabled, params on cpu", "contradiction"),
    # a full-width question mark ends the sentence: "不太确定" after it negates nothing before it
    ("deepspeed", "zero_optimization.stage", 3, "三级：参数、梯度、优化器状态都切分？不太确定", "correct"),
    # spaces, hyphens and underscores inside a word are interchangeable
    ("deepspeed", "bf16", {"enabled": True}, "brain-float 16 compute", "correct"),
    ("deepspeed", "train_batch_size", 64, "train_batch_size = train_micro_batch_size_per_gpu * gradient_accumulation_steps * world size", "correct"),
    ("deepspeed", "train_batch_size", 64, "batch size of each GPU", "wrong_concept"),
    # session 5: classes found on the blind batches held4 and held5 (own wording, not their answers)
    ("deepspeed", "gradient_clipping", 1.0, "clips the gradient norm to 1.0 after the optimizer step", "contradiction"),
    ("llamafactory", "mixed_precision", "bf16", "bf16: 5 exponent bits and 10 mantissa bits", "contradiction"),
    ("llamafactory", "fsdp_config.fsdp_transformer_layer_cls_to_wrap", "LlamaDecoderLayer", "把解码层替换成 FSDP 自己的实现", "contradiction"),
    ("llamafactory", "fsdp_config.fsdp_use_orig_params", True, "the optimizer sees the original (not flattened) parameters, which LoRA's frozen weights need", "correct"),
    ("llamafactory", "num_machines", 2, "两台机器做流水线并行", "contradiction"),
    ("deepspeed", "zero_optimization.reduce_bucket_size", 500000000, "桶设大点反而更省显存", "contradiction"),
    ("deepspeed", "gradient_clipping", 1.0, "clips each gradient element into [-1, 1]", "contradiction"),
    ("deepspeed", "gradient_clipping", 1.0, "gradients whose norm is below 1.0 are thrown away", "contradiction"),
    ("deepspeed", "gradient_clipping", 1.0, "梯度总范数超过 1 就整体等比例缩到 1", "correct"),
    ("llamafactory", "mixed_precision", "bf16", "bf16 把权重量化成 16 位整数", "contradiction"),
    ("llamafactory", "mixed_precision", "bf16", "bf16 autocast; the 8-bit exponent matches fp32, so no loss scaling", "correct"),
    ("llamafactory", "ddp_timeout", 180000000, "how long a collective may wait, in milliseconds", "contradiction"),
    ("llamafactory", "per_device_train_batch_size", 2, "the batch size each device uses for evaluation", "contradiction"),
    ("deepspeed", "zero_optimization.offload_optimizer.pin_memory", True, "pinned pages can be swapped out to disk by the OS when RAM is short", "contradiction"),
    ("deepspeed", "zero_optimization.offload_optimizer.pin_memory", True, "page-locked host memory: it cannot be swapped out, so CPU-GPU copies are faster", "correct"),
    ("deepspeed", "zero_optimization.offload_optimizer.pin_memory", True, "锁页的意思是优化器状态留在 GPU 上不卸载", "contradiction"),
    ("deepspeed", "zero_optimization.contiguous_gradients", True, "contiguous gradient buffer, which increases fragmentation", "contradiction"),
    ("llamafactory", "learning_rate", 0.0001, "每一步参数更新的步长是 1e-4", "correct"),
    ("deepspeed", "zero_allow_untested_optimizer", True, "用第三方优化器时要打开，不然 DeepSpeed 会直接报错", "correct"),
    ("llamafactory", "fsdp_config.fsdp_state_dict_type", "FULL_STATE_DICT", "every rank writes the whole model into its own file", "contradiction"),
    ("llamafactory", "fsdp_config.fsdp_state_dict_type", "FULL_STATE_DICT", "FULL means the checkpoint is kept in full fp32 precision", "contradiction"),
])
def test_annotation_reading_classes_found_on_the_new_fields(dialect, field, value, note, verdict) -> None:
    rule = CAT.rule(dialect, field, CAT.field_value(dialect, field, value))
    assert annotate.judge(note, rule, CAT).verdict.value == verdict, note


def test_full_marks_on_one_word_go_to_the_teacher() -> None:
    """A bare word that only restates the key ("machines" for num_machines) is no explanation a
    teacher would give full marks for, yet it satisfies the rule: it waits for the teacher. The same
    facet named by more words than the key ("clip the total gradient norm to 1.0", the reference
    notebook's own note) is graded at once."""
    machines = annotate.judge("machines", CAT.rule("llamafactory", "num_machines", 2), CAT)
    assert machines.verdict == annotate.Verdict.CORRECT and machines.needs_review and "one_word" in machines.signs
    fsdp = annotate.judge("分布式类型为 FSDP", CAT.rule("llamafactory", "distributed_type", "FSDP"), CAT)
    assert fsdp.needs_review, fsdp
    clip = annotate.judge("clip the total gradient norm to 1.0", CAT.rule("deepspeed", "gradient_clipping", 1.0), CAT)
    assert clip.verdict == annotate.Verdict.CORRECT and not clip.needs_review, clip


@pytest.mark.parametrize("dialect,field,value,note,doubt", [
    ("llamafactory", "learning_rate", 0.0001, "学习率 1e-3，控制每步更新的步长", True),  # another rate
    ("llamafactory", "learning_rate", 0.0001, "lr 1e-4: the step size of each update", False),
    ("llamafactory", "ddp_timeout", 180000000, "collective timeout; at 50 hours nothing ever times out", True),
    ("llamafactory", "ddp_timeout", 180000000, "1.8e8 s before a collective gives up: never, in practice", False),
    ("deepspeed", "zero_optimization.reduce_bucket_size", 500000000, "500M elements per reduce bucket: bigger means fewer calls, more memory", False),
    ("deepspeed", "zero_optimization.reduce_bucket_size", 500000000, "5e8 elements per bucket; bigger means fewer calls, more memory", False),
    ("deepspeed", "zero_optimization.reduce_bucket_size", 500000000, "每个桶 2 亿个元素，桶大通信少、显存多", True),
    ("deepspeed", "zero_optimization.stage", 3, "ZeRO-3 shards parameters, gradients and optimizer states over 8 GPUs", False),  # a small count
    ("llamafactory", "learning_rate", 0.0001, "step size 1e999999999, 1e-999999999 " + "9" * 1900, True),  # hostile: read as floats
])
def test_a_number_that_is_not_the_fields_value_goes_to_the_teacher(dialect, field, value, note, doubt) -> None:
    """A rate, size or time written as another number may be a slip or a misreading the words do
    not show ("1e-3" for 1e-4); the reading cannot tell which, so the teacher decides."""
    j = annotate.judge(note, CAT.rule(dialect, field, CAT.field_value(dialect, field, value)), CAT)
    assert ("other_number" in j.signs) is doubt and (j.needs_review if doubt else True), (j, note)


def test_a_verbless_mention_of_parameters_is_doubtful_only_where_states_are_judged() -> None:
    """"参数每卡一份" next to a sharding stage may hide a wrong claim (review); the same words in a
    wrapping note ("gathers this layer's parameters") judge no state, so no doubt."""
    wrap = CAT.rule("llamafactory", "fsdp_config.fsdp_auto_wrap_policy", "TRANSFORMER_BASED_WRAP")
    sure = annotate.judge("每个解码层包成一个单元，前向时才聚合这一层的参数，用完释放", wrap, CAT)
    assert sure.verdict == annotate.Verdict.CORRECT and not sure.needs_review, sure
    stage3 = CAT.rule("deepspeed", "zero_optimization.stage", 3)
    assert "unbound_object" in annotate.judge("3 级切优化器状态和梯度，参数每卡一份", stage3, CAT).signs


def test_annotation_reading_fixes_the_issue_12_classes() -> None:
    stage2 = CAT.rule("deepspeed", "zero_optimization.stage", 2)
    for note in ("ZeRO-2: shards optimizer states + gradients (parameters not sharded)",
                 "ZeRO-2：切分优化器状态和梯度，参数不切", "Z2: shards optimizer states and grads",
                 "shards gradients and optimizer states; paramters are not sharded"):
        assert annotate.judge(note, stage2, CAT).verdict == annotate.Verdict.CORRECT, note
    assert annotate.judge("参数、梯度、优化器状态全部切分", stage2, CAT).verdict == annotate.Verdict.CONTRADICTION
    full = CAT.rule("llamafactory", "fsdp", "full_shard auto_wrap")
    assert annotate.judge("full_shard = ZeRO-2, auto_wrap per layer", full, CAT).verdict == annotate.Verdict.CONTRADICTION


def test_each_field_check_carries_the_readings_confidence() -> None:
    src = '{\n  "zero_optimization": {\n    // shards optimizer states and gradients, maybe params? not sure\n    "stage": 2\n  }\n}\n'
    check = _checks(src, "c.json")["field.zero_optimization.stage"]
    assert check.evidence["confidence"] < 1 and check.evidence["needs_review"] is False
    unsure = annotate.judge("full_shard：切梯度和优化器状态，参数每卡一份？可能吧", CAT.rule("llamafactory", "fsdp", "full_shard"), CAT)
    assert unsure.needs_review and unsure.confidence < annotate.REVIEW_BELOW, unsure


@pytest.mark.parametrize("dialect, field, value, note", [
    ("llamafactory", "distributed_type", "FSDP", "the distributed type, set to FSDP"),
    ("deepspeed", "zero_optimization.allgather_bucket_size", 500000000, "bucket size for allgather"),
    ("llamafactory", "max_grad_norm", 1.0, "the max grad norm (1.0)"),
    ("deepspeed", "zero_allow_untested_optimizer", True, "zero 允许 untested optimizer = true"),
    ("llamafactory", "fsdp_config.fsdp_transformer_layer_cls_to_wrap", "LlamaDecoderLayer",
     "the transformer layer class name for FSDP"),
])
def test_full_marks_that_only_restate_the_key_go_to_the_teacher(dialect, field, value, note) -> None:
    """Several words, every one of them taken from the key and its value ("bucket size for
    allgather"), explain nothing the key does not already say: a teacher gives half a point, the
    reading gives full marks. It waits for the teacher. One more word the key lacks is an
    explanation to grade ("clip the total gradient norm to 1.0" for gradient_clipping)."""
    j = annotate.judge(note, CAT.rule(dialect, field, CAT.field_value(dialect, field, value)), CAT)
    assert j.needs_review and "restates_key" in j.signs, (note, j)


def test_an_explanation_in_the_keys_words_plus_more_is_graded_at_once() -> None:
    for dialect, field, value, note in [
        ("deepspeed", "gradient_clipping", 1.0, "clip the total gradient norm to 1.0"),
        ("llamafactory", "num_machines", 2, "2 machines (nodes), 4 GPUs each, so 8 processes in all"),
        ("deepspeed", "zero_optimization.reduce_bucket_size", 500000000,
         "gradients are reduced in buckets of 5e8 elements: bigger buckets, fewer calls but more memory"),
    ]:
        j = annotate.judge(note, CAT.rule(dialect, field, CAT.field_value(dialect, field, value)), CAT)
        assert "restates_key" not in j.signs, (note, j)


_CONFIRM_SRC = ('zero_optimization:\n'
                '  stage: 3  # ZeRO-3: parameters, gradients and optimizer states are all sharded across the cards\n'
                '  reduce_bucket_size: 500000000  # gradients are reduced in buckets of 5e8 elements: fewer calls, more buffer memory\n')


def _with_confirm(policy: str | None) -> dict:
    cfg = core.load_config()
    cfg["fields"] = {k: v for k, v in cfg["fields"].items() if k != "confirm_full_marks"}
    if policy is not None:
        cfg["fields"]["confirm_full_marks"] = policy
    return cfg


def test_full_marks_on_an_unweighted_field_wait_for_the_teacher_when_the_course_asks() -> None:
    """On fresh answers the reading gives full marks to three in ten of the wrong or half-right
    default-weight annotations it grades (held7-held9: 74 of 244); a course that wants no wrong full
    marks has a teacher confirm them."""
    checks = {c.id: c for c in core.grade_config_text(_CONFIRM_SRC, "c.yaml", _with_confirm("unweighted"))}
    bucket, stage = checks["field.zero_optimization.reduce_bucket_size"], checks["field.zero_optimization.stage"]
    assert bucket.evidence["review"] == "pending" and bucket.evidence["review_reason"] == "confirm", bucket
    assert bucket.points == 0 and bucket.evidence["provisional_points"] == bucket.max_points > 0
    assert "confirm" in bucket.message["en"] and "not sure" not in bucket.message["en"], bucket.message
    assert "确认" in bucket.message["zh"]
    # a weighted field the reading is sure of is graded at once
    assert stage.points == stage.max_points > 0 and "review" not in stage.evidence, stage


def test_confirm_policy_none_grades_at_once_and_all_confirms_weighted_fields_too() -> None:
    none = {c.id: c for c in core.grade_config_text(_CONFIRM_SRC, "c.yaml", _with_confirm("none"))}
    assert all("review" not in c.evidence for cid, c in none.items() if cid.startswith("field.")), none
    absent = {c.id: c for c in core.grade_config_text(_CONFIRM_SRC, "c.yaml", _with_confirm(None))}
    assert [c.points for c in absent.values()] == [c.points for c in none.values()]
    every = {c.id: c for c in core.grade_config_text(_CONFIRM_SRC, "c.yaml", _with_confirm("all"))}
    assert all(c.evidence.get("review_reason") == "confirm" for cid, c in every.items() if cid.startswith("field.")), every


def test_an_unknown_confirm_policy_is_an_error_not_a_silent_default() -> None:
    with pytest.raises(ValueError, match="confirm_full_marks"):
        core.grade_config_text(_CONFIRM_SRC, "c.yaml", _with_confirm("sometimes"))


def test_a_wrong_reading_is_not_held_for_confirmation() -> None:
    """Only full marks wait: a wrong or partial reading is graded at once (the student may ask)."""
    src = 'zero_optimization:\n  stage: 3  # x\n  reduce_bucket_size: 500000000  # bigger buckets save memory\n'
    checks = {c.id: c for c in core.grade_config_text(src, "c.yaml", _with_confirm("unweighted"))}
    bucket = checks["field.zero_optimization.reduce_bucket_size"]
    assert bucket.evidence["verdict"] != "correct" and bucket.evidence.get("review") != "pending", bucket
