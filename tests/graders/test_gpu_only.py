"""A SyncBatchNorm conversion written to run only with a GPU is recognised from the source."""
from __future__ import annotations

import pytest

from graders.ddp_speedup.gpu_only import judge, syncbn_lines


@pytest.mark.parametrize("source, lines", [
    ("if torch.cuda.is_available():\n    m = nn.SyncBatchNorm.convert_sync_batchnorm(m)\n", [2]),
    ("if device.type == 'cuda':\n    pass\nelse:\n    pass\n", []),
    ("if device.type == 'cpu':\n    pass\nelse:\n    m = convert_sync_batchnorm(m)\n", [4]),
    ("norm = nn.SyncBatchNorm if use_gpu else nn.BatchNorm2d\n", [1]),
    # a GPU condition exempts a conversion only if, with the script's defaults, it would run on a GPU host
    ("if args.sync_bn and torch.cuda.is_available():\n    m = nn.SyncBatchNorm.convert_sync_batchnorm(m)\n", []),
    ("if args.sync_bn:\n    m = nn.SyncBatchNorm.convert_sync_batchnorm(m)\n", []),  # a flag, not a GPU: judged as run
    ("m = nn.SyncBatchNorm.convert_sync_batchnorm(m)\n", []),  # unconditional: it runs on the CPU grader
    ("if False:\n    m = nn.SyncBatchNorm.convert_sync_batchnorm(m)\n", []),
    ("if torch.cuda.is_available(:\n", []),  # does not parse: the run reports it
    # the condition computed into a variable first (blind set: an "auto" flag decided by the device)
    ("p.add_argument('--sync-bn', default='auto')\nargs = p.parse_args()\n"
     "convert = args.sync_bn == 'auto' and device.type == 'cuda'\nif convert:\n"
     "    m = nn.SyncBatchNorm.convert_sync_batchnorm(m)\n", [5]),
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


PARSER = "import argparse\np = argparse.ArgumentParser()\n"


@pytest.mark.parametrize("source, guarded, exempt", [
    # the flag off by default: a GPU host does not convert either
    (PARSER + "p.add_argument('--sync-bn', action='store_true')\nargs = p.parse_args()\nuse_cuda = torch.cuda.is_available()\n"
     "if args.sync_bn and use_cuda:\n    m = nn.SyncBatchNorm.convert_sync_batchnorm(m)\n", [7], []),
    (PARSER + "p.add_argument('--sync-bn', type=int, default=1)\nargs = p.parse_args()\n"
     "if args.sync_bn and torch.cuda.is_available():\n    m = nn.SyncBatchNorm.convert_sync_batchnorm(m)\n", [6], [6]),
    (PARSER + "p.add_argument('--no-sync-bn', dest='sync', action='store_false')\nargs = p.parse_args()\n"
     "if torch.cuda.is_available() and args.sync:\n    m = nn.SyncBatchNorm.convert_sync_batchnorm(m)\n", [6], [6]),
    (PARSER + "p.add_argument('--sync-bn', default='off', choices=['on', 'off'])\nargs = p.parse_args()\n"
     "if args.sync_bn == 'on' and torch.cuda.is_available():\n    m = nn.SyncBatchNorm.convert_sync_batchnorm(m)\n", [6], []),
    # the environment holds what torchrun sets, nothing else
    ("import os\nif os.environ.get('SYNC_BN') == '1' and torch.cuda.is_available():\n    m = convert_sync_batchnorm(m)\n", [3], []),
    ("import os\nif int(os.environ['WORLD_SIZE']) > 1 and torch.cuda.is_available():\n    m = convert_sync_batchnorm(m)\n", [3], [3]),
    # a helper converts only if something that runs calls it; a parameter takes what its callers pass
    ("def helper(m):\n    if torch.cuda.is_available():\n        return convert_sync_batchnorm(m)\n    return m\n", [3], []),
    ("def helper(m, gpu):\n    if gpu:\n        return convert_sync_batchnorm(m)\n    return m\n"
     "def main():\n    m = helper(m, torch.cuda.is_available())\nif __name__ == '__main__':\n    main()\n", [3], [3]),
    ("def helper(m, gpu):\n    if gpu:\n        return convert_sync_batchnorm(m)\n    return m\n"
     "def main():\n    m = helper(m, torch.cuda.is_available() and False)\nmain()\n", [3], []),
    ("def main():\n    if torch.cuda.is_available():\n        m = convert_sync_batchnorm(m)\nif False:\n    main()\n", [3], []),
    # the device a script builds: cuda on a GPU host
    ("use_cuda = torch.cuda.is_available()\ndevice = torch.device(f'cuda:{0}' if use_cuda else 'cpu')\n"
     "if device.type == 'cuda':\n    m = convert_sync_batchnorm(m)\n", [4], [4]),
    ("dev = torch.device('cpu')\nif dev.type == 'cuda':\n    m = convert_sync_batchnorm(m)\n", [3], []),
    # a value the grader cannot know fails closed
    ("cfg = load(path)\nif cfg.sync and torch.cuda.is_available():\n    m = convert_sync_batchnorm(m)\n", [3], []),
    ("flag = False\nflag = True\nif flag and torch.cuda.is_available():\n    m = convert_sync_batchnorm(m)\n", [4], []),
])
def test_would_run_on_a_gpu_host(source: str, guarded: list[int], exempt: list[int]) -> None:
    assert judge(source) == {"guarded": guarded, "exempt": exempt}


def test_a_hostile_source_ends() -> None:
    """Names that refer to each other in a long chain, and deep call chains, end within the budget."""
    chain = "".join(f"a{i} = a{i + 1} and a{(i * 7) % 300}\n" for i in range(300))
    calls = "".join(f"def f{i}(x):\n    return f{i + 1}(x)\n" for i in range(200))
    source = chain + calls + "if a0 and torch.cuda.is_available():\n    m = convert_sync_batchnorm(m)\n"
    assert judge(source)["exempt"] == []


def test_a_value_that_overflows_exempts_nothing() -> None:
    source = "big = int(1e999)\nif big and torch.cuda.is_available():\n    m = convert_sync_batchnorm(m)\n"
    assert judge(source) == {"guarded": [3], "exempt": []}
