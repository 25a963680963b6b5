"""Homework 1 (``assignments/ddp_speedup``): a DDP training script run with torchrun on 1 and N processes.

``grader`` is the entry point ``assignment.json`` names; ``checks`` is the registry of its check ids
over the shared DDP checks in ``graders.checks``; ``floor`` holds every check below the model floor;
``gpu_only`` and ``gpu_host`` read the script for a SyncBatchNorm conversion that only a GPU runs;
``job`` stages the script and the job's synthetic data; ``speed`` judges the speedup against
``calibration``, the reference solution measured on this host.
"""
