"""distgrade_harness.trained: the harness judges the module that learned, not what torch.optim steps.

Each case runs in a subprocess: installing the observer patches torch for the whole interpreter."""
from __future__ import annotations

from tests.graders import observed

SCRIPT = r'''
import torch.distributed as dist
dist.init_process_group("gloo", init_method=f"file://{tempfile.mktemp()}", rank=0, world_size=1)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3072, 10), torch.nn.BatchNorm1d(10))
case = sys.argv[2]
if case == "shadow":  # the optimizer steps a tiny head fed the model's detached output; the model moves by hand
    head = torch.nn.Linear(10, 10)
    opt = torch.optim.SGD(head.parameters(), lr=0.1)
if case == "norms_second_optimizer":
    norms = list(model[2].parameters())
    opt = torch.optim.SGD(model[1].parameters(), lr=0.1)
    opt2 = torch.optim.SGD(norms, lr=0.1)
for _ in range(4):
    model.zero_grad(set_to_none=True)
    out = model(torch.randn(8, 3, 32, 32))
    out.sum().backward()
    if case == "norms_second_optimizer":
        opt.step(); opt2.step()
        continue
    with torch.no_grad():
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.sub_(0.1 * p.grad)
    if case == "shadow":
        opt.zero_grad()
        head(out.detach()).sum().backward()
        opt.step()
obs._witness_exit()
norms = next(r for r in stream.recs if r["type"] == "norms")
params = [r for r in stream.recs if r["type"] == "params"]
print(json.dumps({"steps": obs.step_count, "hand": [r[7] for r in obs.steps], "norms": norms,
                  "elements": params[-1]["elements"], "source": params[-1]["source"],
                  "digests": len({r[13] for r in obs.steps})}))
'''


def _observe(tmp_path, case: str) -> dict:
    return observed.last_json(tmp_path, SCRIPT, case)


def test_steps_by_hand_without_an_optimizer_are_steps(tmp_path):
    got = _observe(tmp_path, "hand")
    assert got["steps"] == 4 and got["hand"] == [1.0] * 4  # the last one seen at exit
    assert got["source"] == "trained" and got["elements"] == 3072 * 10 + 10 + 20 and got["digests"] == 4
    assert got["norms"]["batchnorm"] == 1


def test_a_shadow_head_stepped_by_the_optimizer_is_not_the_model(tmp_path):
    got = _observe(tmp_path, "shadow")
    assert got["source"] == "trained" and got["elements"] == 3072 * 10 + 10 + 20  # the model's, not the head's 110
    assert got["norms"]["batchnorm"] == 1 and got["digests"] == 4  # the model moved 4 times


def test_batchnorm_in_a_second_optimizer_is_counted(tmp_path):
    got = _observe(tmp_path, "norms_second_optimizer")
    assert got["norms"]["batchnorm"] == 1 and got["steps"] == 8
