"""What a script's own conditions come to with its defaults on a GPU host, read from its source.

``graders.ddp_speedup.gpu_only`` exempts a SyncBatchNorm conversion that sits under a GPU condition on a
CPU host, because there the branch cannot run. The exemption is fair only if, run as the grader runs
it (no extra flags, no extra environment) on a GPU host, the branch *would* run: ``if args.sync_bn
and use_cuda:`` with ``--sync-bn`` off by default converts on no host at all, and neither does a
guarded helper that nothing calls.

``Script.reached(node)`` answers that for one node: every ``if`` (statement or expression) around it
must take the branch that holds it, and the function around it must be called from a place that is
itself reached. Conditions are evaluated over a small model of a GPU host: ``torch.cuda.is_available()``
is true, ``device_count()`` and the world size are the job's process count, ``torch.device("cuda...")``
has type ``"cuda"``, argparse options take their defaults, ``os.environ`` holds what torchrun sets and
nothing else, ``__name__`` is ``"__main__"``. A name takes the value of its assignments in the nearest
scope that binds it (all of them must agree), a parameter the value its call sites pass. Anything else
(a value read from a file, a config object, a loop variable) is unknown, and an unknown condition is
not "would run": the exemption fails closed and the script is judged as it ran.
"""
from __future__ import annotations

import ast
import re
from typing import Any

_DEPTH = 12  # how deep one evaluation may follow names, calls and scopes
_DEVICE_WORDS = re.compile(r"cuda|gpu|device|accelerat", re.IGNORECASE)


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()
_UNBOUND = object()  # a name no assignment in this scope binds
_NAMESPACE = object()  # what parse_args() returns


class _Device:
    """``torch.device`` on the model host: only its type and index matter."""

    def __init__(self, spec: str):
        self.type, _, index = spec.partition(":")
        self.index = int(index) if index.isdigit() else None

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other: object) -> bool:
        return str(self) == (str(other) if isinstance(other, (str, _Device)) else object())

    __hash__ = None  # type: ignore[assignment]


def _truth(value: Any) -> Any:
    """``True``/``False``, or UNKNOWN."""
    if value is UNKNOWN:
        return UNKNOWN
    try:
        return bool(value)
    except Exception:  # a value whose truth we cannot take
        return UNKNOWN


class Script:
    """One parsed script with the indexes the evaluation needs."""

    def __init__(self, tree: ast.Module, nproc: int = 2):
        self.tree, self.nproc = tree, nproc
        self.env = {"WORLD_SIZE": str(nproc), "LOCAL_WORLD_SIZE": str(nproc), "MASTER_ADDR": "127.0.0.1"}
        self.parent: dict[ast.AST, ast.AST] = {}
        self.binds: dict[tuple[ast.AST, str], list[ast.AST | None]] = {}  # (scope, name) -> values (None: unknown)
        self.calls: dict[str, list[ast.Call]] = {}
        self.options: dict[str, Any] = {}  # argparse dest -> default
        self.refs: dict[str, list[ast.Name]] = {}  # functions named without being called (Thread(target=f))
        self.budget = 20000  # evaluation steps for the whole script: a hostile source gets UNKNOWN, not a hang
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
        for node in ast.walk(tree):
            self._index(node)

    # -- indexes ------------------------------------------------------------------
    def scope_of(self, node: ast.AST) -> ast.AST:
        """The function (or the module) whose local names ``node`` sees first."""
        p = self.parent.get(node)
        while p is not None and not isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            p = self.parent.get(p)
        return p if p is not None else self.tree

    def _bind(self, scope: ast.AST, target: ast.AST, value: ast.AST | None) -> None:
        if isinstance(target, (ast.Name, ast.Attribute)):
            key = ast.unparse(target)
            where = self.tree if isinstance(target, ast.Attribute) else scope  # self.x: one slot per script
            self.binds.setdefault((where, key), []).append(value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._bind(scope, elt, None)
        elif isinstance(target, ast.Starred):
            self._bind(scope, target.value, None)

    def _index(self, node: ast.AST) -> None:
        if isinstance(node, ast.Assign):
            for t in node.targets:
                self._bind(self.scope_of(node), t, node.value)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
            value = node.value if isinstance(node, (ast.AnnAssign, ast.NamedExpr)) else None
            if value is not None or isinstance(node, ast.AugAssign):
                self._bind(self.scope_of(node), node.target, value)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            self._bind(self.scope_of(node), node.target, None)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            self._bind(self.scope_of(node), node.optional_vars, None)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                self._bind(self.scope_of(node), ast.Name((alias.asname or alias.name).split(".")[0]), None)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if not (isinstance(self.parent.get(node), ast.Call) and self.parent[node].func is node):
                self.refs.setdefault(node.id, []).append(node)
        elif isinstance(node, ast.Call):
            name = _called_name(node.func)
            if name:
                self.calls.setdefault(name, []).append(node)
            if name == "add_argument":
                self._option(node)
            elif name == "set_defaults":
                for kw in node.keywords:
                    if kw.arg:
                        self.options[kw.arg] = self._literal(kw.value)

    def _option(self, call: ast.Call) -> None:
        flags = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        kw = {k.arg: k.value for k in call.keywords if k.arg}
        dest = self._literal(kw["dest"]) if "dest" in kw else None
        if not isinstance(dest, str):
            longs = [f for f in flags if f.startswith("--")]
            name = longs[0] if longs else (flags[0] if flags else "")
            dest = name.lstrip("-").replace("-", "_")
        if not dest:
            return
        action = self._literal(kw["action"]) if "action" in kw else None
        if "default" in kw:
            default = self._literal(kw["default"])
        else:
            default = {"store_true": False, "store_false": True}.get(action) if isinstance(action, str) else None
        kind = kw.get("type")
        if isinstance(default, str) and isinstance(kind, ast.Name) and kind.id in ("int", "float"):
            try:  # argparse applies type= to a string default
                default = int(default) if kind.id == "int" else float(default)
            except ValueError:
                default = UNKNOWN
        self.options[dest] = default

    def _literal(self, node: ast.AST) -> Any:
        try:
            return ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return UNKNOWN

    # -- reaching a node ------------------------------------------------------------
    def reached(self, node: ast.AST, depth: int = 0) -> bool:
        """Would ``node`` run on a GPU host with the script's defaults? Unknown counts as no."""
        self.budget -= 1
        if depth > _DEPTH or self.budget < 0:
            return False
        child, p = node, self.parent.get(node)
        while p is not None:
            if isinstance(p, (ast.If, ast.IfExp)):
                in_body = child in p.body if isinstance(p, ast.If) else child is p.body
                in_else = child in p.orelse if isinstance(p, ast.If) else child is p.orelse
                if in_body or in_else:
                    if _truth(self.value(p.test, depth + 1)) is not in_body:
                        return False
            elif isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if not (p.name.startswith("__") or p.name == "forward"):  # these run when their object is used
                    sites = self.calls.get(p.name, [])[:16] + self.refs.get(p.name, [])[:4]
                    return any(self.reached(c, depth + 1) for c in sites)
            elif isinstance(p, ast.Lambda):
                return False  # where a lambda is called is not followed
            child, p = p, self.parent.get(p)
        return True

    # -- values ----------------------------------------------------------------------
    def value(self, node: ast.AST, depth: int = 0) -> Any:
        """The value of an expression on the model host, or UNKNOWN."""
        self.budget -= 1
        if depth > _DEPTH or self.budget < 0:
            return UNKNOWN
        try:
            return self._value(node, depth)
        except RecursionError:
            return UNKNOWN

    def _value(self, node: ast.AST, depth: int) -> Any:
        d = depth + 1
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self._name(node, d)
        if isinstance(node, ast.Attribute):
            return self._attribute(node, d)
        if isinstance(node, ast.BoolOp):
            return _bool_op(node, [self.value(v, d) for v in node.values])
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            t = _truth(self.value(node.operand, d))
            return UNKNOWN if t is UNKNOWN else not t
        if isinstance(node, ast.Compare):
            return self._compare(node, d)
        if isinstance(node, ast.IfExp):
            t = _truth(self.value(node.test, d))
            if t is UNKNOWN:
                a, b = self.value(node.body, d), self.value(node.orelse, d)
                return a if a is not UNKNOWN and _same(a, b) else UNKNOWN
            return self.value(node.body if t else node.orelse, d)
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                x = self.value(v.value, d) if isinstance(v, ast.FormattedValue) else self.value(v, d)
                if x is UNKNOWN or (isinstance(v, ast.FormattedValue) and v.format_spec is not None):
                    return UNKNOWN
                parts.append(str(x))
            return "".join(parts)
        if isinstance(node, ast.Subscript):
            return self._subscript(node, d)
        if isinstance(node, ast.Call):
            return self._call(node, d)
        if isinstance(node, ast.Dict):
            keys = [self.value(k, d) if k is not None else UNKNOWN for k in node.keys]
            if any(k is UNKNOWN or isinstance(k, (dict, list, _Device)) for k in keys):
                return UNKNOWN
            return {k: (lambda v=v: self.value(v, d)) for k, v in zip(keys, node.values)}
        return UNKNOWN

    def _assigned(self, scope: ast.AST, key: str, depth: int) -> Any:
        values = self.binds.get((scope, key))
        if values is None:
            return _UNBOUND  # look further out
        found = [self.value(v, depth) if v is not None else UNKNOWN for v in values[:8]]
        first = found[0]
        return first if all(f is not UNKNOWN and _same(f, first) for f in found) else UNKNOWN

    def _name(self, node: ast.Name, depth: int) -> Any:
        if node.id == "__name__":
            return "__main__"
        scope = self.scope_of(node)
        while True:
            if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.id in _params(scope):
                    return self._argument(scope, node.id, depth)
            v = self._assigned(scope, node.id, depth)
            if v is not _UNBOUND:
                return v
            if scope is self.tree:  # bound nowhere (imports bind as unknown): a GPU-named flag is the question
                return True if _DEVICE_WORDS.search(node.id) else UNKNOWN
            scope = self.scope_of(scope)

    def _argument(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str, depth: int) -> Any:
        """What every reached call of ``fn`` passes for parameter ``name`` (all must agree)."""
        args = fn.args
        positional = [a.arg for a in args.posonlyargs + args.args]
        defaults = dict(zip(positional[len(positional) - len(args.defaults):], args.defaults))
        defaults.update({a.arg: dv for a, dv in zip(args.kwonlyargs, args.kw_defaults) if dv is not None})
        seen = []
        for call in self.calls.get(fn.name, [])[:16]:
            if not self.reached(call, depth):
                continue
            if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
                return UNKNOWN
            offset = 1 if positional and positional[0] in ("self", "cls") and isinstance(call.func, ast.Attribute) else 0
            passed = dict(zip(positional[offset:], call.args))
            passed.update({k.arg: k.value for k in call.keywords})
            expr = passed.get(name, defaults.get(name))
            seen.append(self.value(expr, depth) if expr is not None else UNKNOWN)
        if not seen or any(v is UNKNOWN or not _same(v, seen[0]) for v in seen):
            return UNKNOWN
        return seen[0]

    def _attribute(self, node: ast.Attribute, depth: int) -> Any:
        v = self._assigned(self.tree, ast.unparse(node), depth)
        if v is not _UNBOUND:
            return v
        base = self.value(node.value, depth)
        if base is _NAMESPACE or (base is UNKNOWN and isinstance(node.value, ast.Name)):
            return self.options.get(node.attr, UNKNOWN)  # args.x (a parameter named args too)
        if isinstance(base, _Device) and node.attr in ("type", "index"):
            return getattr(base, node.attr)
        return UNKNOWN

    def _subscript(self, node: ast.Subscript, depth: int) -> Any:
        key = self.value(node.slice, depth)
        if ast.unparse(node.value) == "os.environ":
            return self.env.get(key, UNKNOWN) if isinstance(key, str) else UNKNOWN
        base = self.value(node.value, depth)
        if isinstance(base, dict) and not isinstance(key, (dict, list, _Device)) and key is not UNKNOWN:
            item = base.get(key)
            return item() if item is not None else UNKNOWN
        return UNKNOWN

    def _call(self, node: ast.Call, depth: int) -> Any:
        name, text = _called_name(node.func), ast.unparse(node.func)
        args = [self.value(a, depth) for a in node.args[:3]]
        if name == "is_available":
            return not re.search(r"mps|xpu|mlu|npu", text)  # the course's GPU hosts are CUDA hosts
        if name in ("device_count", "get_world_size"):
            return self.nproc
        if name in ("is_initialized", "is_nccl_available"):
            return True
        if name == "parse_args":
            return _NAMESPACE
        if name == "device" and args and isinstance(args[0], str):
            if len(args) > 1 and isinstance(args[1], int):
                return _Device(f"{args[0]}:{args[1]}")
            return _Device(args[0])
        if text in ("os.environ.get", "os.getenv", "environ.get", "getenv") and args and isinstance(args[0], str):
            default = args[1] if len(args) > 1 else (self.value(node.keywords[0].value, depth) if node.keywords else None)
            return self.env.get(args[0], default)
        if text in ("int", "float", "str", "bool") and len(args) == 1 and args[0] is not UNKNOWN:
            try:
                return {"int": int, "float": float, "str": str, "bool": bool}[text](args[0])
            except (TypeError, ValueError):
                return UNKNOWN
        if text == "getattr" and len(node.args) >= 2 and isinstance(args[1], str):
            got = self._attribute(ast.Attribute(node.args[0], args[1], ast.Load()), depth)
            if got is UNKNOWN and len(args) > 2 and args[0] is _NAMESPACE and args[1] not in self.options:
                return args[2]  # getattr(args, "absent", default)
            return got
        if name in ("startswith", "endswith") and isinstance(node.func, ast.Attribute) and args:
            base = self.value(node.func.value, depth)
            if isinstance(base, str) and isinstance(args[0], (str, tuple)):
                return getattr(base, name)(args[0])
        return UNKNOWN

    def _compare(self, node: ast.Compare, depth: int) -> Any:
        left_node, left = node.left, self.value(node.left, depth)
        for op, right_node in zip(node.ops, node.comparators):
            right = self.value(right_node, depth)
            lv, rv = _device_side(left_node, left), _device_side(right_node, right)
            if lv is UNKNOWN or rv is UNKNOWN:
                return UNKNOWN
            try:
                ok = _compare(op, lv, rv)
            except Exception:  # e.g. None < 1: not a question this model answers
                return UNKNOWN
            if ok is UNKNOWN or not ok:
                return ok
            left_node, left = right_node, right
        return True


def _compare(op: ast.cmpop, a: Any, b: Any) -> Any:
    if isinstance(a, _Device) or isinstance(b, _Device):
        a, b = str(a), str(b)
    table = {ast.Eq: lambda: a == b, ast.NotEq: lambda: a != b, ast.Lt: lambda: a < b, ast.LtE: lambda: a <= b,
             ast.Gt: lambda: a > b, ast.GtE: lambda: a >= b, ast.Is: lambda: a is b, ast.IsNot: lambda: a is not b,
             ast.In: lambda: a in b, ast.NotIn: lambda: a not in b}
    fn = table.get(type(op))
    return fn() if fn else UNKNOWN


def _device_side(node: ast.AST, value: Any) -> Any:
    """An operand we cannot evaluate whose text names a device (``dev.type``, ``cfg.device``) is the GPU
    host's device: the comparison is the GPU question the script asks."""
    if value is UNKNOWN and _DEVICE_WORDS.search(ast.unparse(node)):
        return "cuda"
    return value


def _bool_op(node: ast.BoolOp, values: list) -> Any:
    """``and``/``or`` with Python's result where every operand is known, else only the truth where
    the known operands decide it."""
    want = isinstance(node.op, ast.Or)  # the truth value that decides the result
    undecided = False
    for v in values:
        t = _truth(v)
        if t is UNKNOWN:
            undecided = True
        elif t is want:
            return v if not undecided else want
    return UNKNOWN if undecided else values[-1]


def _same(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:
        return False


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    a = fn.args
    names = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
    names |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
    return names


def _called_name(func: ast.AST) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""
