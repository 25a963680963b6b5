"""Homework 3 (``assignments/fsdp_fit``): an FSDP script that must fit the simulated card.

``grader`` is the entry point ``assignment.json`` names; ``checks`` judges sharding, wrap units,
memory fit and training progress from what the harness's FSDP observer saw, over the shared run
checks in ``graders.checks``; ``checkpoint`` judges the checkpoint by what the run left.
"""
