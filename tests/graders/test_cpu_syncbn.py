"""The harness's SyncBatchNorm for CPU tensors takes its input as torch's own does."""
from __future__ import annotations

from tests.graders import observed


def test_a_syncbatchnorm_called_by_keyword_runs_as_on_a_gpu(tmp_path):
    """torch names SyncBatchNorm.forward's argument ``input``: a script calling ``layer(input=x)`` runs on a GPU host,
    so it must run under the CPU grader too (round 6: it raised TypeError, a correct script's crash)."""
    body = r'''
import torch.distributed as dist
dist.init_process_group("gloo", init_method="file://" + os.path.join(os.getcwd(), "store"), rank=0, world_size=1)
layer = torch.nn.SyncBatchNorm(3)
layer.train()
y = layer(input=torch.randn(4, 3, 2, 2))
print(json.dumps({"shape": list(y.shape), "tracked": int(layer.num_batches_tracked)}))
'''
    assert observed.last_json(tmp_path, body) == {"shape": [4, 3, 2, 2], "tracked": 1}


def test_a_batchnorm_model_scripts_and_saves_under_the_harness(tmp_path):
    """The harness counts ``torch.batch_norm`` (what ``F.batch_norm`` calls) through a wrapper of its own; TorchScript
    resolves ``torch.batch_norm`` by name when it scripts a BatchNorm layer, so the wrapper must script as the aten op
    it wraps. A correct script that saves a ``torch.jit.script`` copy of its model (sample
    correct_tqdm_rank0_jit_save) crashed with "TypeError: module, class, method, function, traceback, frame, or code
    object was expected, got builtin_function_or_method"."""
    body = r'''
import io
model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
scripted = torch.jit.script(model.eval())
buf = io.BytesIO()
torch.jit.save(scripted, buf)
x = torch.randn(2, 3, 8, 8)
print(json.dumps({"same": bool(torch.allclose(scripted(x), model(x))), "saved": len(buf.getvalue()) > 0}))
'''
    assert observed.last_json(tmp_path, body) == {"same": True, "saved": True}
