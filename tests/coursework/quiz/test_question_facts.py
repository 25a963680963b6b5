"""Questions whose facts or wording were wrong or ambiguous, checked against the
chapter digest and DeepSpeed's / PyTorch's documentation."""
from __future__ import annotations


from coursework.quiz.bank import load_question
from coursework.quiz.grading import grade, make_variant

SEEDS = range(300)


def _text(qid: str, *keys: str) -> str:
    info = load_question(qid).info
    out = []
    for k in keys:
        v = info
        for part in k.split("."):
            v = v[part] if not isinstance(v, list) else next(o for o in v if o["id"] == part)
        out.append(v if isinstance(v, str) else " ".join(v.values()))
    return " ".join(out)


def test_zero_offload_stage2_keeps_only_16bit_parameters_on_the_gpu() -> None:
    q = load_question("ch7_3/logs/zero_config")
    assert q.info["correct"] == ["params16"]
    assert "ZeRO-Offload" in q.info["title"]["en"]
    assert grade(q, 1, "params_gradshard").score == 0  # the gradient shard goes to the CPU too
    nothing = next(o for o in q.info["options"] if o["id"] == "nothing")
    assert "16-bit parameters" in nothing["feedback"]["en"]


def test_tree_scenario_has_margins_and_answers_3d_only_when_no_one_node_plan_fits() -> None:
    q = load_question("ch7_3/decision/tree_scenario")
    gen = q.generator
    assert gen.decide(34, 80, 8, 2, False) == "fsdp"  # 34B full training fits FSDP on one 8x80 GB node
    assert gen.decide(1, 16, 2, 1, False) is None  # 16.0 GB on a 16 GB card: never drawn
    seen = set()
    for seed in SEEDS:
        v = make_variant(q, seed)
        p = v.params
        mem, cards, machines = p["mem"], p["cards"], p["machines"]
        b = float(p["billions"])
        s = gen.sizes(b, mem, cards, machines)
        for ratio in (s["full"] / mem, s["qlora"] / mem, s["shard"] / mem, s["shard_all"] / mem, s["shard_offload"] / mem):
            assert abs(ratio - 1) >= 0.1, (seed, p)
        if v.answer == "3d":
            assert s["shard"] >= 2 * mem or s["shard_offload"] >= mem, (seed, p)  # nothing fits on one node
        if v.answer == "offload":
            assert mem < s["shard"] < 2 * mem, (seed, p)  # only "a little short"
        seen.add(v.answer)
        fb = grade(q, seed, v.answer).feedback[0]["en"]
        assert p["full_gb"] in fb and "GB" in fb  # the arithmetic is shown
    assert seen == {"ddp", "qlora", "fsdp", "offload", "3d"}
    assert "10⁹" in q.info["prompt"]["en"]


def test_lowest_stage_margins_gb_and_communication_facts() -> None:
    q = load_question("ch7_3/zero/lowest_stage")
    for seed in SEEDS:
        v = make_variant(q, seed)
        for s in range(4):
            assert abs(float(v.params[f"g{s}"]) / v.params["mem"] - 1) >= 0.09, (seed, v.params)
    en = q.info["prompt"]["en"] + q.info["explanation"]["en"]
    assert "10⁹" in en and "plain DDP" in en and "same volume as DDP" in en and "all-gather" in en
    assert "More sharding means more communication" not in en


def test_zero_per_card_feedback_names_the_model_size_readably() -> None:
    q = load_question("ch7_3/memory/zero_per_card")
    for seed in range(60):
        fb = " ".join(m["en"] + m["zh"] for m in grade(q, seed, "1 GB").feedback)
        assert "e+" not in fb, fb


def test_corrected_wordings() -> None:
    assert "ZeRO-3" in _text("ch7_3/zero/cost", "prompt") and "full_shard" in _text("ch7_3/zero/cost", "prompt")
    assert "no_sync()" in _text("ch7_3/comm/grad_accum", "explanation", "options.none.text")
    assert "gradients" in _text("ch7_3/offload/config_flag", "explanation") and "optimizer step runs on the CPU" in _text("ch7_3/offload/config_flag", "explanation")
    cf = load_question("ch7_3/deepspeed/choose_framework")
    assert any("even NVMe" in en for _, _, en in cf.generator.SCENARIOS)
    assert "CPU too" in cf.info["explanation"]["en"] or "to the CPU too" in cf.info["explanation"]["en"]
    lr = _text("ch7_3/comm/link_ratio", "prompt")
    assert lr.count("per direction") == 2 and "times as long" in lr
    assert "DataLoader's batch_size" in _text("ch7_3/ddp/global_batch", "prompt")
    assert "Adam" in _text("ch7_3/ddp/lr_scaling", "explanation") and "√N" in _text("ch7_3/ddp/lr_scaling", "explanation")
    assert "broadcasts rank 0's weights" in _text("ch7_3/ddp/checklist", "options.seed.feedback")
    sc = load_question("ch7_3/diagnosis/symptom_cause")
    assert all(o.get("feedback") for o in sc.info["options"])
    assert any("slower" in en for cause, _zh, en in sc.generator.SYMPTOMS if cause == "no_sampler")
    step = load_question("ch7_3/ddp/step_order").info["prompt"]
    assert "Tab" not in step["zh"] and "方向键" not in step["zh"] and "按钮" not in step["zh"]
    assert load_question("ch7_3/selftest_5").info["prompt"]["en"] == "Why do most students almost never need distributed training?"


def test_an_unchanged_ordering_is_a_format_error_not_an_answer() -> None:
    q = load_question("ch7_3/ddp/step_order")
    r = grade(q, 1, "")
    assert r.status.value == "format_error"

