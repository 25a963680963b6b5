"""distgrade_harness.hooks: a training epoch's step records leave the rank when the epoch ends.

Step rows (with the samples the model read, from the marks) went out every 25 steps and at exit. A rank
killed from outside has no exit: torchrun SIGTERMs rank 0 when rank 1 crashes in epoch 1, and rank 0's
epoch 0 (fewer than 25 steps) was lost, so the sample that proves epoch 0's split read no marks under load.
The step still open when the epoch ends is kept back: it settles at the next forward, as before."""
from __future__ import annotations

from tests.graders import observed

SCRIPT = r'''
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(40, 4), torch.randint(0, 2, (40,))), batch_size=4)
val = DataLoader(TensorDataset(torch.randn(8, 4)), batch_size=4)
for x, y in loader:
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    if sys.argv[2] == "val_inside":  # a validation pass inside the step span: the open step must not settle
        with torch.no_grad():
            for (v,) in val:
                model(v)
sent = [len(r["t"]) for r in stream.recs if r.get("type") == "steps"]
print(json.dumps({"steps": obs.step_count, "sent": sent, "kept": len(obs.steps),
                  "open": obs.open_row is not None}))
'''


def _observe(tmp_path, case: str) -> dict:
    return observed.last_json(tmp_path, SCRIPT, case)


def test_a_finished_training_epoch_sends_its_settled_steps(tmp_path):
    got = _observe(tmp_path, "plain")
    assert got["steps"] == 10
    assert sum(got["sent"]) == 9 and got["kept"] == 1 and got["open"], got  # the last step settles later


def test_a_validation_loader_inside_a_step_does_not_settle_it(tmp_path):
    got = _observe(tmp_path, "val_inside")
    assert got["steps"] == 10 and got["open"], got  # the open step waits for the next forward of the model
