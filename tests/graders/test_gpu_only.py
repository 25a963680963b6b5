"""A SyncBatchNorm conversion written to run only with a GPU is recognised from the source."""
from __future__ import annotations

import pytest

from graders.checks.gpu_only import syncbn_lines


@pytest.mark.parametrize("source, lines", [
    ("if torch.cuda.is_available():\n    m = nn.SyncBatchNorm.convert_sync_batchnorm(m)\n", [2]),
    ("if device.type == 'cuda':\n    pass\nelse:\n    pass\n", []),
    ("if device.type == 'cpu':\n    pass\nelse:\n    m = convert_sync_batchnorm(m)\n", [4]),
    ("norm = nn.SyncBatchNorm if use_gpu else nn.BatchNorm2d\n", [1]),
    ("if args.sync_bn and torch.cuda.is_available():\n    m = nn.SyncBatchNorm.convert_sync_batchnorm(m)\n", [2]),
    ("if args.sync_bn:\n    m = nn.SyncBatchNorm.convert_sync_batchnorm(m)\n", []),  # a flag, not a GPU: judged as run
    ("m = nn.SyncBatchNorm.convert_sync_batchnorm(m)\n", []),  # unconditional: it runs on the CPU grader
    ("if False:\n    m = nn.SyncBatchNorm.convert_sync_batchnorm(m)\n", []),
    ("if torch.cuda.is_available(:\n", []),  # does not parse: the run reports it
    # the condition computed into a variable first (blind set: an "auto" flag decided by the device)
    ("convert = args.sync_bn == 'auto' and device.type == 'cuda'\nif convert:\n"
     "    m = nn.SyncBatchNorm.convert_sync_batchnorm(m)\n", [3]),
    ("on_gpu: bool = torch.cuda.device_count() > 0\nm = convert_sync_batchnorm(m) if on_gpu else m\n", [2]),
    ("convert = args.sync_bn\nif convert:\n    m = nn.SyncBatchNorm.convert_sync_batchnorm(m)\n", []),  # a flag
    ("a = torch.cuda.is_available()\nb = a\nif b:\n    m = convert_sync_batchnorm(m)\n", []),  # one step, no chain
    ("use = torch.cuda.is_available()\nif use:\n    m = convert_sync_batchnorm(m)\n", [3]),
    # values that only mention a device are not questions about it: an opt-in flag stays a flag
    ("cfg = {'device': 'cuda', 'sync_bn': False}\nif cfg['sync_bn']:\n    m = convert_sync_batchnorm(m)\n", []),
    ("m = m.to(device)\nif isinstance(m, nn.Module) and args.sync:\n    m = convert_sync_batchnorm(m)\n", []),
])
def test_conversions_under_a_gpu_condition(source: str, lines: list[int]) -> None:
    assert syncbn_lines(source) == lines
