"""Right answers in words the questions' data did not list: synonyms (Adam's moments for optimizer
states, "total batch" for the global batch, a loader "not sharded per rank" for a missing
DistributedSampler) and Chinese paraphrases (阶段 for 级, 动量和方差, 总批量). The reading must
suggest the share a fair teacher gives, not less; the controls beside them, wrong in the same
words, must not rise to full marks. Written for this test, not taken from the chapter."""
from __future__ import annotations

import pytest

from coursework.quiz.bank import load_question
from coursework.quiz.grading import grade


def read(qid: str, text: str):
    return grade(load_question(qid), 1, text)


@pytest.mark.parametrize("qid, text", [
    ("ch7_3/selftest_2", "等价于单卡用总批量（每卡批量乘以卡数）训练；前提是每张卡拿到不重复的数据分片，"
                         "并且每步反向后把各卡梯度求平均同步。"),
    ("ch7_3/selftest_2", "就像一张卡用全局批量训练一样，只要各卡数据互不重叠、梯度每步 all-reduce 平均。"),
    ("ch7_3/selftest_3", "一级只分片优化器的动量和方差，二级再分梯度，三级连模型权重也分；FSDP 的 full_shard 就是三级。"),
    ("ch7_3/selftest_3", "第一阶段拆分优化器状态，第二阶段再拆分梯度，第三阶段把模型参数也拆开；FSDP full_shard 相当于第三阶段。"),
    ("ch7_3/selftest_3", "Stage 1 partitions only Adam's moment estimates, stage 2 adds the gradients, stage 3 adds "
                         "the weights themselves; FSDP full_shard is stage 3."),
    ("ch7_3/selftest_6", "The data loader isn't sharded per rank: each process reads all the samples, duplicating "
                         "work, so the epoch takes as long as on one GPU and the loss looks identical."),
    ("ch7_3/selftest_6", "数据没有按 rank 切分，两张卡各自处理全部数据，重复计算，所以总时间不变，loss 曲线也和单卡一样。"),
])
def test_a_right_paraphrase_is_suggested_full_marks(qid: str, text: str) -> None:
    r = read(qid, text)
    assert r.provisional_fraction >= 1, (r.provisional_fraction, r.details)


@pytest.mark.parametrize("qid, text", [
    ("ch7_3/selftest_2", "等价于单卡用同样的批量训练，前提是各卡数据互不重叠、梯度每步平均。"),
    ("ch7_3/selftest_3", "一级只分片梯度，二级再分优化器的动量和方差，三级连模型权重也分；FSDP 的 full_shard 就是三级。"),
    ("ch7_3/selftest_3", "第一阶段拆分优化器状态，第二阶段再拆分梯度，第三阶段把模型参数也拆开；FSDP full_shard 相当于第二阶段。"),
    ("ch7_3/selftest_6", "The data is already sharded per rank, so the sampler is fine; NCCL is just slow."),
    ("ch7_3/selftest_6", "数据已经按 rank 切分好了，采样器没问题，是通信太慢。"),
])
def test_a_wrong_answer_in_the_same_words_is_not_full(qid: str, text: str) -> None:
    r = read(qid, text)
    assert r.needs_review or r.provisional_fraction < 1, (r.provisional_fraction, r.details)
