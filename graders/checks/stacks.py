"""Where a hung or crashed process waited, read from its faulthandler stack dump (zh and en)."""
from __future__ import annotations

import re

from coursework.report import text

COLLECTIVES = {  # innermost torch frame -> what the rank waited in (zh, en)
    "init_process_group": ("init_process_group（建立进程组）", "init_process_group (rendezvous)"),
    "barrier": ("barrier", "barrier"), "all_reduce": ("all_reduce", "all_reduce"),
    "broadcast": ("broadcast", "broadcast"), "all_gather": ("all_gather", "all_gather"),
    "_verify_param_shape_across_processes": ("DDP() 构造（参数形状检查）", "DDP() construction (parameter check)"),
    "_sync_module_states": ("DDP() 构造（广播模型）", "DDP() construction (broadcast of the model)"),
    "_run_ddp_forward": ("DDP 前向（广播 buffer）", "DDP forward (buffer broadcast)"),
    "backward": ("backward() 中的梯度 all-reduce", "the gradient all-reduce in backward()"),
    "_engine_run_backward": ("backward() 中的梯度 all-reduce", "the gradient all-reduce in backward()"),
    "destroy_process_group": ("destroy_process_group", "destroy_process_group"),
}
_LOADER_WAIT = ("等待 DataLoader 工作进程送来 batch", "waiting for a batch from its DataLoader worker")


_FRAME = re.compile(r'File "([^"]+)", line \d+ in (\S+)')
_DATALOADER_WAIT = {"_try_get_data", "_get_data", "_next_data"}  # the main process waiting for a worker's batch
SPAWN_RERUN = "_fixup_main_from_path"  # multiprocessing's spawn child executing the main script again


def _main_thread(stack: str) -> list[tuple[str, str]]:
    """(file, function) frames of the dump's current thread, most recent call first."""
    blocks = re.split(r"\n(?=(?:Current thread|Thread) 0x)", stack)
    main = next((b for b in blocks if b.startswith("Current thread")), blocks[0] if blocks else "")
    return _FRAME.findall(main)


def stuck_in(stack: str) -> dict[str, str] | None:
    """What a faulthandler dump shows the process waiting in (zh and en), or None if nothing known.

    The innermost known frame wins: a collective (init_process_group, barrier, DDP's
    construction broadcasts, the backward all-reduce) or the DataLoader waiting for a
    worker's batch. A spawn child that re-ran the script's top level says so first.
    """
    frames = _main_thread(stack)
    what = None
    for path, func in frames:
        if func in COLLECTIVES and "torch" in path:
            what = COLLECTIVES[func]
            break
        if func in _DATALOADER_WAIT and "torch/utils/data" in path:
            what = _LOADER_WAIT
            break
    if any(func == SPAWN_RERUN for _, func in frames):
        zh, en = what or ("自身启动", "its own start-up")
        return text(f"spawn 出的子进程重新执行了脚本顶层代码，停在 {zh}",
                    f"a spawned worker re-running the script's top level, in {en}")
    return text(*what) if what else None


def where(stuck: dict[str, dict[str, str] | None]) -> dict[str, str]:
    """Each stuck process and where it waits, "rank1: barrier; ..." in both languages."""
    if not stuck:
        return text("没有栈信息", "no stack dump")
    return text("；".join(f"{name}：{what['zh'] if what else '未知'}" for name, what in stuck.items()),
                "; ".join(f"{name}: {what['en'] if what else 'unknown'}" for name, what in stuck.items()))


def helper_process(stack: str) -> bool:
    """multiprocessing's resource tracker: a child of every rank that uses spawn, never the culprit."""
    return any(path.endswith("multiprocessing/resource_tracker.py") for path, _ in _main_thread(stack))
