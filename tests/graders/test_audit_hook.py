"""The harness's audit hook in a real interpreter: what honest code does raises nothing, each
route to the harness's stream raises an integrity event. One small subprocess per case (no
torch), so the hook sees exactly one script; the torchrun samples cover the whole harness."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parents[2] / "graders" / "harness"

DRIVER = """
import json, os, sys
sys.path.insert(0, {harness!r})
import distgrade_harness
from distgrade_harness import audit
events = []
audit.install({chan!r}, events.append)
distgrade_harness._forget_modules()  # as in a rank: the package is only reachable by importing it again
del distgrade_harness
import atexit
atexit.register(lambda: print("EVENTS=" + json.dumps([e["event"] for e in events])))
del audit
exec(compile({code!r}, {script!r}, "exec"))
"""


def _events(tmp_path: Path, code: str) -> list[str]:
    chan = tmp_path / "chan"
    chan.mkdir(exist_ok=True)
    (chan / "sock").write_text("")
    script = tmp_path / "train.py"
    src = DRIVER.format(harness=str(HARNESS), chan=str(chan), code=textwrap.dedent(code), script=str(script))
    proc = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("EVENTS=")), None)
    assert line is not None, proc.stderr[-2000:]
    return json.loads(line.removeprefix("EVENTS="))


HONEST = {
    "logging": "import logging\nlogging.basicConfig()\nlogging.getLogger('x').warning('epoch %d', 1)\n",
    "inspect_signature": "import inspect\ninspect.signature(print)\n",
    "namedtuple_enum_dataclass": ("import collections, enum, dataclasses\nP = collections.namedtuple('P', 'a b')\n"
                                  "class C(enum.Enum):\n    A = 1\n@dataclasses.dataclass\nclass D:\n    x: int = 0\n"),
    "traceback_print": "import traceback\ntry:\n    1 / 0\nexcept ZeroDivisionError:\n    traceback.format_exc()\n",
    "files_and_sockets": ("import os, socket, tempfile, json\nopen('ckpt.bin', 'wb').write(b'x')\nos.listdir('.')\n"
                          "s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\ns.bind(('127.0.0.1', 0))\ns.close()\n"),
    "threads_and_subprocess": ("import threading, subprocess, sys\nt = threading.Thread(target=print)\nt.start()\nt.join()\n"
                               "subprocess.run([sys.executable, '-c', 'pass'])\n"),
    "multiprocessing_pool": ("import multiprocessing as mp\nif __name__ == '__main__':\n"
                             "    with mp.get_context('fork').Pool(2) as p:\n        p.map(abs, [1, -2])\n"),
    "warnings": "import warnings\nwarnings.warn('deprecated')\n",
    # the honest idioms that need no torch (the corpus samples run the rest under the whole harness)
    "gc_collect_freeze": "import gc\ngc.collect()\ngc.freeze()\ngc.unfreeze()\ngc.disable()\ngc.enable()\n",
    "faulthandler_signal_atexit": ("import atexit, faulthandler, signal\nfaulthandler.enable()\n"
                                   "signal.signal(signal.SIGTERM, lambda s, f: None)\natexit.register(print, 'bye')\n"),
    "caller_name_helper": ("import inspect, sys\ndef where():\n    return sys._getframe(1).f_code.co_name, "
                           "inspect.currentframe().f_back.f_lineno\ndef train():\n    return where()\ntrain()\n"
                           "for fr in inspect.stack():\n    pass\n"),
    "traceback_of_own_error": ("import traceback, logging\ntry:\n    open('/nonexistent/x')\nexcept OSError:\n"
                               "    traceback.print_exc()\n    logging.exception('no file')\n"),
}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_code_raises_no_event(tmp_path: Path, name: str) -> None:
    assert _events(tmp_path, HONEST[name]) == []


ATTACKS = {
    "gc.get_objects": "import gc\ngc.get_objects()\n",
    "gc.get_referrers": "import gc\ngc.get_referrers(sys)\n",
    "sys._current_frames": "sys._current_frames()\n",
    "ctypes": "import ctypes\nctypes.string_at(id(1), 8)\n",
    "import": "import importlib\nimportlib.import_module('distgrade_harness')\n",
    "channel.open": "open(os.path.join({chan!r}, 'token-0'), 'w')\n",
    "channel.os.listdir": "os.listdir({chan!r})\n",
    "procfd.os.listdir": "os.listdir('/proc/self/fd')\n",
    "socket.fromfd": "import socket\nsocket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n",
    "sys.settrace": "sys.settrace(lambda *a: None)\nsys.settrace(None)\n",
    "compile.disguised": "exec(compile('x = 1', os.__file__, 'exec'))\n",
    "compile.disguised ": "f = lambda: 1\nf.__code__ = f.__code__.replace(co_filename=os.__file__)\n",
}


@pytest.mark.parametrize("kind", sorted(ATTACKS))
def test_each_route_raises_its_event(tmp_path: Path, kind: str) -> None:
    code = ATTACKS[kind].replace("{chan!r}", repr(str(tmp_path / "chan")))
    events = _events(tmp_path, code)
    assert any(e.startswith(kind.strip()) for e in events), events
