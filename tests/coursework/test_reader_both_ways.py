"""Right notes the rule reader used to fail at full confidence, on examples written for
this test (not from the issue or the answer sets). Each class failed before its fix:

- a ``false`` / ``none`` value explained as what it means (no overlap, pageable memory);
- LLaMA-Factory's ``deepspeed:`` path in any folder, read as the ZeRO stage its file name names;
- "sharded across the GPUs": the cards are where the sharding happens, not a claim about their number;
- a number restated in another form ("5 x 10^8", "about 1 GB in fp16" for 5e8 fp16 elements);

and the rule where the reader is unsure: a right-looking note it cannot place is routed to a
teacher (low confidence), never failed at confidence 1.0.
"""
from __future__ import annotations

import pytest

from coursework.config_annotation import annotate, catalogue

CAT = catalogue.load()
FAILS = (annotate.Verdict.CONTRADICTION, annotate.Verdict.WRONG_CONCEPT, annotate.Verdict.UNRELATED)


def judge(dialect: str, path: str, value, text: str) -> annotate.Judgement:
    return annotate.judge(text, CAT.rule(dialect, path, CAT.field_value(dialect, path, value)), CAT)


def sure_fail(j: annotate.Judgement) -> bool:
    return j.verdict in FAILS and not j.needs_review


RIGHT = [
    ("deepspeed", "zero_optimization.overlap_comm", False,
     "the gradient reduction starts only after the backward pass has finished rather than running concurrently "
     "with it; no extra overlap buffers, but the communication time is not hidden"),
    ("deepspeed", "zero_optimization.overlap_comm", False,
     "关闭：梯度通信等反向算完才开始，不和计算同时进行，通信时间不能被掩盖，但省下重叠用的缓冲显存"),
    ("deepspeed", "zero_optimization.offload_optimizer.pin_memory", False,
     "the CPU buffers for offloaded optimizer states are ordinary pageable memory, not page-locked; copies to "
     "and from the GPU are a bit slower but no pinned RAM is reserved"),
    ("deepspeed", "zero_optimization.offload_param.pin_memory", False,
     "不用锁页内存：卸载的参数放在普通可分页内存里，CPU 和 GPU 之间拷贝慢一些，但不占用不可换出的内存"),
    ("llamafactory", "deepspeed", "configs/ds_z3_config.json",
     "uses DeepSpeed ZeRO-3 from this json: parameters, gradients and optimizer states are all sharded across the GPUs"),
    ("llamafactory", "deepspeed", "/home/me/LLaMA-Factory/examples/deepspeed/ds_z3_config.json",
     "DeepSpeed 的配置文件，z3 就是 ZeRO-3：参数、梯度、优化器状态都切分"),
    ("llamafactory", "deepspeed", "ds_z2_offload_config.json",
     "DeepSpeed ZeRO-2 json with optimizer offload: optimizer states and gradients are partitioned, parameters replicated"),
    ("deepspeed", "zero_optimization.reduce_bucket_size", 500000000,
     "5e8 = 500M elements per reduce bucket, about 1 GB in fp16; bigger buckets mean fewer reduce calls but more buffer memory"),
    ("deepspeed", "zero_optimization.allgather_bucket_size", 500000000,
     "5 x 10^8 elements gathered per all-gather call of the parameters; a larger bucket means fewer calls, more buffer memory"),
]


@pytest.mark.parametrize("dialect, path, value, text", RIGHT)
def test_a_right_note_is_not_failed_at_full_confidence(dialect: str, path: str, value, text: str) -> None:
    j = judge(dialect, path, value, text)
    assert not sure_fail(j), j
    assert j.verdict in (annotate.Verdict.CORRECT, annotate.Verdict.PARTIAL) or j.needs_review, j


@pytest.mark.parametrize("dialect, path, value, text", [
    ("deepspeed", "zero_optimization.overlap_comm", False,
     "the gradient all-reduce runs after the backward pass, communication is not overlapped with compute"),
    ("llamafactory", "deepspeed", "configs/ds_z3_config.json",
     "enables DeepSpeed with the ZeRO stage 3 json config: parameters are sharded too"),
    ("deepspeed", "zero_optimization.offload_param", {"device": "none"},
     "no parameter offload: the parameters stay in GPU memory"),
])
def test_right_notes_on_these_values_get_full_marks(dialect: str, path: str, value, text: str) -> None:
    j = judge(dialect, path, value, text)
    assert j.verdict == annotate.Verdict.CORRECT, j


@pytest.mark.parametrize("dialect, path, value, text", [
    ("deepspeed", "zero_optimization.overlap_comm", False, "overlaps the gradient communication with the backward computation"),
    ("deepspeed", "zero_optimization.offload_optimizer.pin_memory", False, "uses page-locked memory so CPU-GPU copies are faster"),
    ("llamafactory", "deepspeed", "configs/ds_z3_config.json", "ZeRO-2 config: only optimizer states and gradients are sharded"),
    ("llamafactory", "deepspeed", "configs/ds_z3_config.json", "number of GPUs DeepSpeed uses"),
])
def test_wrong_notes_on_these_values_are_not_full_marks(dialect: str, path: str, value, text: str) -> None:
    j = judge(dialect, path, value, text)
    assert j.verdict != annotate.Verdict.CORRECT or j.needs_review, j
