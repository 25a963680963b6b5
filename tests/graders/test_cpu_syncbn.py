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
