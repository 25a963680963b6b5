"""Checks over what the harness saw, shared by the homeworks that train with torchrun.

``ddp`` judges a run (finished, distributed, data split, gradient sync, rank-0 output, SyncBatchNorm,
no_sync, batch); ``registry`` maps an assignment's check ids to code; ``render`` turns a finding into a
bilingual result. Which checks a homework asks for lives in its own package (``graders.ddp_speedup.checks``,
``graders.fsdp_fit.checks``).
"""
