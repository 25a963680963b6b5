"""Make the synthetic CIFAR-10 acceptable to torchvision.

torchvision checks the md5 of the real files before loading them; the synthetic
set has the same layout but other bytes. When the grader marks the data as
synthetic, the integrity check of ``torchvision.datasets.cifar`` is replaced as
soon as that module is imported (nothing is imported eagerly).
"""
from __future__ import annotations

import importlib.abc
import os
import sys

_TARGET = "torchvision.datasets.cifar"


class _PatchOnImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != _TARGET:
            return None
        sys.meta_path.remove(self)
        try:
            import importlib.util
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        original_exec = spec.loader.exec_module

        def exec_module(module):
            original_exec(module)
            _patch(module)

        spec.loader.exec_module = exec_module
        return spec


def _patch(module) -> None:
    module.check_integrity = lambda *args, **kwargs: True
    if hasattr(module, "CIFAR10"):
        module.CIFAR10._check_integrity = lambda self: True


def install() -> None:
    """Register the import patch when the data set is the synthetic one."""
    if os.environ.get("DISTGRADE_SYNTHETIC_DATA") == "1":
        sys.meta_path.insert(0, _PatchOnImport())
