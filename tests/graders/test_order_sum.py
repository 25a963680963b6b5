"""The signed sum by position: the harness's, on each rank's shard, adds up to the sandboxed reader's on the file.

``distgrade_harness.order`` (in the student's process) and ``graders/evidence/checkpoint_sums.py`` (standalone, in
the grader's sandbox) each keep a copy of the sign function; a difference between them would fail every honest
full checkpoint, so the two are compared here on the ways the shards of a tensor are cut.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "graders/harness"))
from distgrade_harness import order  # noqa: E402

_spec = importlib.util.spec_from_file_location("checkpoint_sums", ROOT / "graders/evidence/checkpoint_sums.py")
reader = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reader)


def test_the_two_copies_of_the_signs_agree():
    assert (order.ROW_SALT, order.COL_SALT) == (reader.ROW_SALT, reader.COL_SALT)
    for salt in (order.ROW_SALT, order.COL_SALT):
        assert torch.equal(order.signs(0, 5000, salt), reader.signs(0, 5000, salt))
        assert torch.equal(order.signs(4000, 5000, salt), reader.signs(0, 5000, salt)[4000:])
    rows, cols = order.signs(0, 100_000, order.ROW_SALT), order.signs(0, 100_000, order.COL_SALT)
    assert set(rows.unique().tolist()) == {-1.0, 1.0}
    for k in range(order.PATTERNS):  # balanced, and no pattern follows its neighbour, another, or the columns'
        assert abs(float(rows[:, k].mean())) < 0.02 and abs(float((rows[1:, k] * rows[:-1, k]).mean())) < 0.02
        assert abs(float((rows[:, k] * cols[:, k]).mean())) < 0.02
        assert abs(float((rows[:, k] * rows[:, (k + 1) % order.PATTERNS]).mean())) < 0.02


@pytest.mark.parametrize("shape", [(300, 70), (7, 5, 3), (1000,), (1,), ()])
@pytest.mark.parametrize("world", [1, 2, 3])
def test_shards_add_up_to_the_whole(shape, world):
    """FSDP2's row chunks (torch.chunk on dimension 0) and FSDP1's flat slices cut anywhere, rows split."""
    torch.manual_seed(0)
    t = torch.randn(shape)
    whole = reader.order_sum(t)
    rest = order.rest_of(t.shape)
    if t.dim():
        starts = [0]
        for chunk in torch.chunk(t, world, dim=0)[:-1]:
            starts.append(starts[-1] + chunk.shape[0])
        rows = [sum(x) for x in zip(*(order.order_sum(c, s * rest, rest)
                                      for c, s in zip(torch.chunk(t, world, dim=0), starts)))]
        assert rows == pytest.approx(whole, abs=1e-5 * float(t.norm()))
    flat = t.reshape(-1)
    cuts = sorted({0, flat.numel(), *[(i * 37 + 11) % max(flat.numel(), 1) for i in range(world)]})
    pieces = [sum(x) for x in zip(*(order.order_sum(flat[a:b], a, rest) for a, b in zip(cuts, cuts[1:])))]
    assert pieces == pytest.approx(whole, abs=1e-5 * float(t.norm()))


def test_rows_out_of_place_move_the_sums_by_about_the_norm_and_rounding_does_not():
    """The hand-made gather joined on the last dimension interleaves the rows; a transposed square matrix and a
    row rolled by one are out of place too: each moves some pattern's sum far beyond the grader's tolerance
    (graders.evidence.weights.ORDER_TOLERANCE of the L2 norm). bf16 rounding of the same values stays within it."""
    from graders.evidence.weights import ORDER_TOLERANCE

    def moved(a, b):
        return max(abs(x - y) for x, y in zip(reader.order_sum(a), reader.order_sum(b))) / float(b.norm())
    for seed in range(5):
        torch.manual_seed(seed)
        t = torch.randn(512, 128)
        interleaved = torch.cat(list(torch.chunk(t, 2, dim=0)), dim=-1).reshape(t.shape)
        assert moved(interleaved, t) > 5 * ORDER_TOLERANCE
        assert moved(t[:128].t().contiguous(), t[:128]) > 5 * ORDER_TOLERANCE
        assert moved(t.roll(1, 0), t) > 5 * ORDER_TOLERANCE and moved(t.roll(1, 1), t) > 5 * ORDER_TOLERANCE
        assert moved(t.bfloat16(), t) < ORDER_TOLERANCE / 5


def test_a_model_on_one_rank_sums_its_parameters():
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.LayerNorm(8))
    got = order.model_order(model)
    want = [sum(x) for x in zip(*(reader.order_sum(p) for p in model.parameters()))]
    assert got["order"] == pytest.approx(want, abs=1e-6)
    assert got["squares"] == pytest.approx(sum(float(p.detach().pow(2).sum()) for p in model.parameters()), rel=1e-5)
