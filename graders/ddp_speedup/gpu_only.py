"""Where a script converts to SyncBatchNorm only when a GPU is present, read from its source.

PyTorch's SyncBatchNorm refuses CPU tensors in training (``ValueError: SyncBatchNorm expected input
tensor to be on GPU``). The CPU grader supplies a CPU version (``distgrade_harness.syncbn``), so an
unconditional conversion is graded there, but a student who tested on a laptop writes
``if torch.cuda.is_available(): model = nn.SyncBatchNorm.convert_sync_batchnorm(model)``: correct
on every host, and on a CPU host the conversion never runs. A CPU run cannot judge that script's
``ddp.syncbn``; the check says so and costs nothing, and GPU hosts judge it.

A conversion counts as "only with a GPU" when a reference to ``convert_sync_batchnorm`` or
``SyncBatchNorm`` sits in a branch of an ``if`` (statement or expression) whose condition names
cuda, a GPU, an accelerator or a device, or names a variable assigned such a yes/no question
anywhere in the script (``convert = args.sync_bn == "auto" and device.type == "cuda"`` then ``if
convert:``; one step, not a chain; a dict or a call that merely mentions a device is not a
question). What the condition computes is not evaluated: ``if torch.cuda.is_available() and False``
passes the first test; the second (``graders.ddp_speedup.gpu_host``) then asks whether, with the script's
defaults, the conversion would run on a GPU host: every condition around it evaluated there, its
function called. ``if args.sync_bn and use_cuda:`` with the flag off by default, an opt-in environment
variable, a helper nothing calls, or a condition the grader cannot evaluate exempt nothing: the script
is judged as it ran, and the message names the line.
"""
from __future__ import annotations

import ast
import re

from graders.ddp_speedup.gpu_host import Script

_NAMES = {"convert_sync_batchnorm", "SyncBatchNorm"}
_GPU_WORDS = re.compile(r"cuda|gpu|accelerat|device", re.IGNORECASE)
_QUESTIONS = {"is_available", "device_count"}


def _mentions_syncbn(node: ast.AST) -> list[ast.AST]:
    return [n for n in ast.walk(node)
            if (isinstance(n, ast.Attribute) and n.attr in _NAMES) or (isinstance(n, ast.Name) and n.id in _NAMES)]


def judge(source: str, nproc: int = 2) -> dict[str, list[int]]:
    """``{"guarded": lines converting under a GPU condition, "exempt": those of them that would run on a
    GPU host with the script's defaults}`` (sorted, at most 5 each)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return {"guarded": [], "exempt": []}
    mentions: dict[int, ast.AST] = {}
    gpu_names = _gpu_variables(tree)
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.IfExp)) and _gpu_condition(node.test, gpu_names):
            branches = node.body + node.orelse if isinstance(node, ast.If) else [node.body, node.orelse]
            for branch in branches:
                for mention in _mentions_syncbn(branch):
                    mentions.setdefault(mention.lineno, mention)
    try:
        script = Script(tree, nproc) if mentions else None
        exempt = [line for line, m in sorted(mentions.items()) if script is not None and script.reached(m)]
    except Exception:  # a source the model host cannot evaluate (an overflow, say) exempts nothing
        exempt = []
    return {"guarded": sorted(mentions)[:5], "exempt": exempt[:5]}


def syncbn_lines(source: str, nproc: int = 2) -> list[int]:
    """Lines where the script converts to SyncBatchNorm under a GPU condition and, with its defaults,
    would convert on a GPU host (sorted, at most 5)."""
    return judge(source, nproc)["exempt"]


def _gpu_test(value: ast.AST) -> bool:
    """Is this a yes/no question about the GPU (a comparison, a boolean, ``cuda.is_available()``),
    not a value that merely mentions one (``cfg = {"device": "cuda", ...}``, ``model.to(device)``)?"""
    if isinstance(value, ast.Call):
        func = value.func
        asks = (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")) in _QUESTIONS
    else:
        asks = isinstance(value, (ast.Compare, ast.BoolOp, ast.UnaryOp, ast.Name, ast.Attribute))
    return asks and _names_gpu(value)


def _gpu_variables(tree: ast.AST) -> set[str]:
    """Names the script assigns a yes/no question about cuda, a GPU, an accelerator or a device."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and _gpu_test(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _gpu_condition(test: ast.AST, gpu_names: set[str]) -> bool:
    return _names_gpu(test) or any(isinstance(n, ast.Name) and n.id in gpu_names for n in ast.walk(test))


def _names_gpu(node: ast.AST) -> bool:
    """Does the expression's text name cuda, a GPU, an accelerator or a device?"""
    return bool(_GPU_WORDS.search(ast.unparse(node)))
