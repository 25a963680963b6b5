"""distgrade_harness.hooks: an optimizer step nested in another's is part of it, unless training ran inside.

A wrapper optimizer (``torch.distributed.optim.ZeroRedundancyOptimizer``) steps a shard with an inner
optimizer, then broadcasts it: the ranks match only once the outermost step returns, so the parameters
are digested there. A step can still not be used to hide steps from the comparison: a nested step after
a backward inside the outer span (a training loop inside a step, or an outer step that raised) is a step.
Each case runs in a subprocess: installing the observer patches torch for the whole interpreter."""
from __future__ import annotations

from tests.graders import observed

SCRIPT = r'''
from distgrade_harness import witness
torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
inner = torch.optim.SGD(model.parameters(), lr=0.1)
case = sys.argv[2]

def train_once():
    inner.zero_grad()
    model(torch.randn(3, 4)).sum().backward()

class Wrapper(torch.optim.Optimizer):  # steps the inner optimizer, then changes the parameters (a broadcast)
    def __init__(self):
        super().__init__(model.parameters(), {"lr": 0.1})
    def step(self, closure=None):
        if case == "loop_inside":
            for _ in range(4):
                train_once()
                inner.step()
            return None
        if case == "raises":
            raise RuntimeError("never returns")
        inner.step()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(1.0)

outer = Wrapper()
after = []
if case == "loop_inside":
    outer.step()
else:
    if case == "raises":
        try:
            outer.step()
        except RuntimeError:
            pass
        outer = None
    for _ in range(4):
        train_once()
        if outer is None:
            inner.step()
        else:
            outer.step()
        after.append(witness.short_digest(witness.param_rows(list(model.parameters()))))
obs._settle_step()  # a step's digest is taken when its span ends (the next forward, or the run's end)
print(json.dumps({"steps": obs.step_count, "digests": [r[13] for r in obs.steps], "after": after}))
'''


def _observe(tmp_path, case: str) -> dict:
    return observed.last_json(tmp_path, SCRIPT, case)


def test_a_wrappers_inner_step_is_digested_after_the_wrapper_returns(tmp_path):
    got = _observe(tmp_path, "wrapper")
    assert got["steps"] == 4 and got["digests"] == got["after"]


def test_a_training_loop_inside_one_step_is_still_every_step(tmp_path):
    assert _observe(tmp_path, "loop_inside")["steps"] >= 4


def test_a_step_that_raised_cannot_hide_the_steps_after_it(tmp_path):
    got = _observe(tmp_path, "raises")
    assert got["steps"] == 4 and got["digests"] == got["after"]
