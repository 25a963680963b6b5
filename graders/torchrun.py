"""Run a student's script under ``torchrun`` in the sandbox and collect what each rank did.

Each rank reports through the harness (``graders/harness``) over a unix socket in
a grader-owned channel directory. A rank proves who it is with a one-time token
that its harness reads and deletes before student code runs; an unknown token or
a second stream for the same rank is recorded as tampering. Nothing the student
prints or writes in its working directory is read as a result.
"""
from __future__ import annotations

import dataclasses
import hmac
import json
import os
import re
import secrets
import signal
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from coursework.progress import report_progress
from graders import integrity, sandbox
from graders.sandbox import untrusted
from graders.exceptions import InfrastructureError
from graders.evidence import cards as evidence_cards
from graders.evidence import host as evidence_host

HARNESS_DIR = Path(__file__).resolve().parent / "harness"
MAX_STREAM_BYTES = 16 * 1024 * 1024  # per rank; an honest 12-epoch CIFAR run sends under 5 MiB
MAX_TOTAL_BYTES = 40 * 1024 * 1024  # all streams of one run together (parsed, JSON grows ~8x)
MAX_RECORD_BYTES = 9 * 1024 * 1024  # one line (the harness sends at most 8 MiB)
MAX_RECORDS = 200_000  # per stream
EXTRA_CONNECTIONS = 4  # beyond one per rank: a harness's alarm connections; more is a flood
HELLO_BYTES = 4096
HELLO_SECONDS = 5.0
LOG_TAIL = 4000
PROGRESS_EVERY_S = 2.0
PROGRESS_TAIL = 1500
SCAN_TAIL = 64 * 1024  # what checks may search (a spawn worker's traceback precedes the rank's own)
MAX_CHANNEL_ENTRIES = 4096  # names listed in the channel folder (students may create files there)
MAX_STACK_FILES = 8  # dumps kept per rank: the rank and a few of its children
NCCL_HEARTBEAT_S = 30  # see rank_env
JOB_USER = "student"  # the ranks' USER / LOGNAME
DIST_DEBUG_DEFAULT = "OFF"  # graded runs; the CPU pre-flight sets DETAIL (DISTGRADE_DIST_DEBUG)
_STACK_FILE = re.compile(r"stack-rank\d+(?:-child\d+)?\.txt")
# torchrun's failure summary (ChildFailedError): "rank : 1 (local_rank: 1)" then "exitcode : -6 (pid: 52)"
_FAILED_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)\s*\(local_rank:[^)]*\)\s*\n\s*exitcode\s*:\s*(-?\d+)", re.MULTILINE)


@dataclass
class RankStream:
    """Everything one rank's harness sent, by record type."""

    rank: int
    records: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False
    lines: int = 0  # records received between hello and seal
    unparsed: int = 0
    oversize: int = 0
    sealed: int | None = None  # the count in the harness's seal; None: no seal arrived
    after_seal: int = 0
    mac: Any = field(default=None, repr=False)  # HMAC (keyed by the rank's token) of every line received
    seal_ok: bool | None = None  # the seal's MAC matched what arrived

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("type") == kind]

    def first(self, kind: str) -> dict[str, Any] | None:
        return next((r for r in self.records if r.get("type") == kind), None)

    @property
    def finished(self) -> bool:
        return self.first("finished") is not None

    @property
    def exception(self) -> dict[str, Any] | None:
        return self.first("exception")


@dataclass
class TorchrunRun:
    """One torchrun job: how it ended and each rank's stream, stacks and log tail."""

    nproc: int
    result: sandbox.SandboxResult
    ranks: dict[int, RankStream]
    stacks: dict[str, str]
    logs: dict[str, str]
    tampering: list[str]
    scan_logs: dict[str, str] = field(default_factory=dict)  # longer tails for checks; never in the report
    integrity: list[dict[str, Any]] = field(default_factory=list)  # events; see graders.integrity
    stopped: str | None = None  # why the grader ended the run once its evidence was in (graders.early_stop)
    evidence: dict[str, Any] = field(default_factory=dict)  # gathered outside the ranks; see graders.evidence

    @property
    def all_finished(self) -> bool:
        """Did every rank send its end marker, or get as far as the grader needed (``stopped``)?"""
        if self.stopped:
            return True
        return all(self.ranks.get(r) is not None and self.ranks[r].finished for r in range(self.nproc))

    @property
    def exit_codes(self) -> dict[int, int]:
        """Exit code of each rank that torchrun reported as failed (negative: killed by that signal).

        Empty when every rank exited 0 or when the launcher printed no failure summary.
        """
        return failed_ranks(self.result.stderr)


def root_cause(launcher_stderr: str) -> tuple[int, int] | None:
    """(rank, exit code) of torchrun's "Root Cause (first observed failure)", or None."""
    _, found, rest = _clean(launcher_stderr).partition("Root Cause")
    m = _FAILED_RANK.search(rest) if found else None
    return (int(m.group(1)), int(m.group(2))) if m else None


def killed_from_outside(result: sandbox.SandboxResult, streams: dict[int, RankStream]) -> str | None:
    """Why this run ended by a kill from outside the job (so it is no grade), or None.

    The first rank to fail died of SIGKILL, and nothing of the job's own explains it: none of
    its limits fired (time, memory, pids, disk, output), no rank sent a signal itself (the
    harness records every kill call and kill tool), or the host's OOM killer took a process
    while the job was under its own memory limit (the cgroup's counters, outside the job).
    """
    if result.host_oom:
        return "the host's OOM killer ended a process of the job while the job was under its own memory limit"
    cause = root_cause(result.stderr)
    if cause is None or cause[1] != -signal.SIGKILL or result.killed_reason is not None or result.timed_out:
        return None
    if any(stream.of("signal_sent") for stream in streams.values()):
        return None  # the script sent signals itself: its crash is its own
    return f"rank {cause[0]} was killed from outside the job by SIGKILL (no limit of the job fired, no rank sent a signal)"


def failed_ranks(launcher_stderr: str) -> dict[int, int]:
    """Parse torchrun's ChildFailedError summary into ``{rank: exitcode}``."""
    return {int(m.group(1)): int(m.group(2)) for m in _FAILED_RANK.finditer(_clean(launcher_stderr))}


class ChannelServer:
    """Accepts one authenticated stream per rank on ``<dir>/sock``, within fixed bounds.

    At most ``nproc + EXTRA_CONNECTIONS`` connections are ever read; each must send a valid
    hello within ``HELLO_BYTES`` and ``HELLO_SECONDS``; a stream holds at most
    ``MAX_STREAM_BYTES`` and ``MAX_RECORDS``, all streams together ``MAX_TOTAL_BYTES``.
    Everything else is counted, never stored: an unknown token is quoted only as a short
    escaped prefix. Connections beyond a rank's own stream are integrity events (``events``);
    ``tampering`` keeps a few neutral sentences for the run check's message.
    """

    def __init__(self, directory: Path, nproc: int):
        self.dir = directory
        self.nproc = nproc
        directory.mkdir(parents=True)
        # Ranks (another uid) may create stack files but not list the folder; the sticky bit stops
        # them from deleting or replacing the grader's socket with one of their own.
        os.chmod(directory, 0o1733)
        self.tokens = {secrets.token_hex(16): r for r in range(nproc)}
        for token, rank in self.tokens.items():
            p = directory / f"token-{rank}"
            p.write_text(token)
            os.chmod(p, 0o600)
            if os.geteuid() == 0:  # the rank's harness must be able to read and then unlink it
                os.chown(p, sandbox.SANDBOX_UID, sandbox.SANDBOX_GID)
        self.used: set[str] = set()
        self.streams: dict[int, RankStream] = {}
        self.hellos: dict[int, dict[str, Any]] = {}
        self.tampering: list[str] = []
        self.events: list[dict[str, Any]] = []
        self.counts: dict[str, int] = {}  # unknown_token, second_stream, no_hello, refused, oversize ...
        self.first_unknown: str | None = None
        self.total_bytes = 0
        self.accepted = 0
        self.pids: dict[int, int] = {}  # rank -> its pid, from the kernel (SO_PEERCRED), for graders.evidence.host
        self.lock = threading.Lock()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(directory / "sock"))
        os.chmod(directory / "sock", 0o777)
        self.sock.listen(64)
        self.threads: list[threading.Thread] = []
        self.acceptor = threading.Thread(target=self._accept, daemon=True)
        self.acceptor.start()

    def _count(self, what: str, n: int = 1) -> None:
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + n

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            if self.accepted > self.nproc + EXTRA_CONNECTIONS:
                self._count("refused")
                conn.close()
                continue
            t = threading.Thread(target=self._read, args=(conn,), daemon=True)
            t.start()
            self.threads.append(t)

    def _read(self, conn: socket.socket) -> None:
        with conn:
            first = self._read_hello(conn)
            if first is None:
                return
            hello, buf = first
            stream = self._hello(hello)
            if stream is None:
                return
            pid = _peer_pid(conn)
            if pid:
                with self.lock:
                    self.pids.setdefault(stream.rank, pid)
            conn.settimeout(None)
            self._read_records(conn, stream, buf)

    def _read_hello(self, conn: socket.socket) -> tuple[Any, bytes] | None:
        """The first line (at most ``HELLO_BYTES``, within ``HELLO_SECONDS``) parsed, plus what followed."""
        deadline = time.monotonic() + HELLO_SECONDS
        buf = b""
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0 or len(buf) > HELLO_BYTES:
                self._count("no_hello")
                return None
            conn.settimeout(left)
            try:
                chunk = conn.recv(HELLO_BYTES + 1 - len(buf))
            except OSError:
                chunk = b""
            if not chunk:
                if buf:
                    self._count("no_hello")
                else:
                    self._count("empty")
                return None
            buf += chunk
        line, _, rest = buf.partition(b"\n")
        if len(line) > HELLO_BYTES:
            self._count("no_hello")
            return None
        try:
            return json.loads(line), rest
        except ValueError:
            self._count("no_hello")
            return None

    def _read_records(self, conn: socket.socket, stream: RankStream, buf: bytes) -> None:
        total = len(buf)
        while True:
            *lines, buf = buf.split(b"\n")
            for line in lines:
                self._take(stream, line)
            if len(buf) > MAX_RECORD_BYTES:
                stream.oversize += 1
                self._count("oversize")
                stream.truncated = True
                return
            if stream.truncated:
                return
            try:
                chunk = conn.recv(1 << 16)
            except OSError:
                return
            if not chunk:
                return
            total += len(chunk)
            with self.lock:
                self.total_bytes += len(chunk)
                over_total = self.total_bytes > MAX_TOTAL_BYTES
            if total > MAX_STREAM_BYTES or over_total:
                stream.truncated = True
                self._count("stream_bytes")
                return
            buf += chunk

    def _take(self, stream: RankStream, line: bytes) -> None:
        if not line.strip():
            return
        if stream.sealed is not None:
            stream.after_seal += 1
            return
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            record = None
        if isinstance(record, dict) and record.get("type") == "seal":
            count = record.get("records")
            stream.sealed = count if isinstance(count, int) and not isinstance(count, bool) else -1
            mac = record.get("mac")
            stream.seal_ok = (isinstance(mac, str) and stream.mac is not None
                              and hmac.compare_digest(mac, stream.mac.hexdigest()))
            return
        if stream.mac is not None:
            stream.mac.update(line + b"\n")
        stream.lines += 1
        if record is None:
            stream.unparsed += 1
            return
        if len(stream.records) >= MAX_RECORDS:
            stream.truncated = True
            return
        stream.records.append(record)

    def _hello(self, record: Any) -> RankStream | None:
        if not isinstance(record, dict):
            self._count("no_hello")
            return None
        token = record.get("token")
        alarm = record.get("integrity")
        with self.lock:
            rank = self.tokens.get(token) if isinstance(token, str) else None
            if alarm is not None and len(self.events) < integrity.MAX_EVENTS:  # a harness's alarm connection
                claimed = rank if rank is not None else record.get("rank")
                self.events.append(integrity.harness_event(claimed if isinstance(claimed, int) else None, alarm))
            if record.get("type") != "hello" or rank is None:
                self.counts["unknown_token"] = self.counts.get("unknown_token", 0) + 1
                if self.first_unknown is None:
                    self.first_unknown = integrity.safe_text(token, 24)
                return None
            if token in self.used:
                self.counts["second_stream"] = self.counts.get("second_stream", 0) + 1
                return None
            self.used.add(token)
            self.hellos[rank] = record
            stream = self.streams[rank] = RankStream(rank, mac=hmac.new(token.encode(), digestmod="sha256"))
            return stream

    def close(self) -> None:
        self.sock.close()
        for t in self.threads:
            t.join(timeout=2.0)
        self._summarise()

    def _summarise(self) -> None:
        """Turn the counters into tampering sentences (short, no student text) and integrity events."""
        c = self.counts
        texts = {
            "unknown_token": (f"{c.get('unknown_token', 0)} stream(s) with an unknown token"
                              + (f" (first: '{self.first_unknown}')" if self.first_unknown else "")),
            "second_stream": f"{c.get('second_stream', 0)} extra stream(s) for a rank",
            "no_hello": f"{c.get('no_hello', 0)} connection(s) without a valid hello",
            "refused": f"{c.get('refused', 0)} connection(s) over the limit of {self.nproc + EXTRA_CONNECTIONS}",
            "oversize": f"{c.get('oversize', 0)} record(s) over {MAX_RECORD_BYTES} bytes",
            "stream_bytes": f"{c.get('stream_bytes', 0)} stream(s) over the size limit",
        }
        for key, sentence in texts.items():
            if c.get(key):
                self.tampering.append(sentence)
                self.events.append(integrity.event("channel", key, sentence))
        if c.get("empty", 0) > EXTRA_CONNECTIONS:  # a few empty connections: a probe; many: a flood
            self.events.append(integrity.event("channel", "empty", f"{c['empty']} empty connection(s)"))


def rank_env(*, channel: Path, mode: str, synthetic: bool) -> dict[str, str]:
    """The environment of the job: harness on PYTHONPATH, 1 thread per rank on CPU.

    In GPU mode CUDA_VISIBLE_DEVICES is left to ``graders.sandbox``, which alone knows
    whether the chosen GPUs are renumbered 0..n-1 inside (bwrap) or keep host numbers.
    """
    env = {
        "PATH": os.path.dirname(sys.executable) + ":/usr/local/bin:/usr/bin:/bin",
        "PYTHONPATH": str(HARNESS_DIR),
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "DISTGRADE_CHANNEL": str(channel),
        "DISTGRADE_MODE": mode,
        "DISTGRADE_SYNTHETIC_DATA": "1" if synthetic else "0",
        "LANG": "C.UTF-8",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    }
    # Desync diagnosis (graders.desync): DETAIL fingerprints every collective across ranks, so a
    # rank calling a collective its peers never call raises at once instead of hanging.
    debug = os.environ.get("DISTGRADE_DIST_DEBUG", DIST_DEBUG_DEFAULT)
    if debug in ("DETAIL", "INFO"):
        env["TORCH_DISTRIBUTED_DEBUG"] = debug
    if mode == "cpu":
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")
    else:  # NCCL: flight recorder dumped on a collective timeout; heartbeat kills a stuck watchdog
        # Seen on an H200 (torch 2.11): after a collective timed out and the trace was dumped, the rank
        # lived on until the heartbeat ran out, holding its GPU; 120 s there kept it 130 s, 30 s ends it
        # within ~45 s of the timeout. The TORCH_FR_* names replace TORCH_NCCL_TRACE_BUFFER_SIZE and
        # TORCH_NCCL_DEBUG_INFO_TEMP_FILE, which torch now warns about in every rank's log.
        env.update(TORCH_FR_BUFFER_SIZE="2000", TORCH_NCCL_DUMP_ON_TIMEOUT="1",
                   TORCH_FR_DUMP_TEMP_FILE=str(channel / "nccl_trace_rank_"),
                   TORCH_NCCL_ENABLE_MONITORING="1", TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=str(NCCL_HEARTBEAT_S))
    return env


def job_identity(work: Path) -> dict[str, str]:
    """Who the ranks are and where their caches go: the job's own folder, removed with it.

    The job's uid has no passwd entry, so ``getpass.getuser()`` (which torch's compile cache,
    imported by ``DDP`` and the optimizers since torch 2.11, names its folder after) must
    find ``USER`` in the environment instead of failing in ``pwd``.
    """
    cache = work / ".cache"
    return {"HOME": str(work), "TMPDIR": str(work), "USER": JOB_USER, "LOGNAME": JOB_USER,
            "XDG_CACHE_HOME": str(cache), "TORCHINDUCTOR_CACHE_DIR": str(cache / "torchinductor"),
            "TRITON_CACHE_DIR": str(cache / "triton")}


def make_limits(base: dict[str, Any], override: dict[str, Any] | None = None) -> sandbox.Limits:
    """Build sandbox limits from assignment data; unknown keys are ignored."""
    names = {f.name for f in dataclasses.fields(sandbox.Limits)}
    values = {k: v for k, v in {**base, **(override or {})}.items() if k in names}
    values.setdefault("dump_signal", signal.SIGUSR1)
    return sandbox.Limits(**values)


def run(script: Path, nproc: int, *, root: Path, data_dir: Path, epochs: int, limits: sandbox.Limits,
        mode: str = "cpu", synthetic: bool = True, gpus: list[int] | None = None,
        script_args: list[str] | None = None, extra_env: dict[str, str] | None = None,
        progress: str | None = None,
        stop_when: Callable[[dict[int, RankStream]], str | None] | None = None) -> TorchrunRun:
    """Run ``torchrun --standalone --nproc_per_node=nproc script`` from an empty directory.

    ``root`` is a fresh folder of the job; the run uses ``root/work`` (cwd),
    ``root/logs`` (per-rank output) and ``root/chan`` (the record channel).
    ``script_args`` replaces the default ``--data-dir D --epochs E``; ``extra_env`` is
    added to the ranks' environment (e.g. ``DISTGRADE_FSDP=1``). With ``progress`` (a phase
    name), each rank's log tail is relayed to the status page every few seconds while it runs.
    ``stop_when`` is asked about the records received so far every half second; the first reason
    it returns ends the run at once and is kept as ``stopped`` (see ``graders.early_stop``).
    """
    work, logs = root / "work", root / "logs"
    for d in (root, work, logs):
        d.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o711)
    os.chmod(work, 0o777)
    os.chmod(logs, 0o777)
    server = ChannelServer(root / "chan", nproc)
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
            "--log-dir", str(logs), "--redirects", "3", str(script),
            *(script_args if script_args is not None else ["--data-dir", str(data_dir), "--epochs", str(epochs)])]
    env = {**rank_env(channel=server.dir, mode=mode, synthetic=synthetic),
           **(extra_env or {}), **job_identity(work)}
    relay = _ProgressRelay(progress, logs, nproc) if progress else None
    stopped: list[str] = []

    def should_stop() -> bool:
        why = stop_when(dict(server.streams)) if stop_when else None
        if why:
            stopped.append(why)
        return bool(why)

    sampler = evidence_host.Sampler(lambda: dict(server.pids), gpu=mode == "gpu",
                                    logs=os.path.realpath(logs))
    card_watch = evidence_cards.CardWatch(gpus) if mode == "gpu" and gpus else None  # before the launch: idle
    window_start = time.monotonic()
    try:
        result = sandbox.run(argv, workdir=work, limits=limits, env=env,
                             ro_binds=[(str(HARNESS_DIR), str(HARNESS_DIR)), (str(data_dir), str(data_dir)),
                                       (str(script.parent), str(script.parent))],
                             rw_binds=[(str(server.dir), str(server.dir)), (str(logs), str(logs))],
                             gpus=gpus if mode == "gpu" else None, stop=should_stop if stop_when else None)
    finally:
        window_end = time.monotonic()
        sampler.stop()
        if card_watch:
            card_watch.stop()
        server.close()
        if relay:
            relay.stop()
    events = validate(server, nproc, (window_start, window_end))
    integrity.append_events(root.parent, events, tag=f"n{nproc}")
    scan = read_logs(logs, nproc, result, SCAN_TAIL)
    outside = killed_from_outside(result, server.streams)
    if outside:  # the host's failure, not the student's: retried, no attempt used, staff told why
        raise InfrastructureError(f"{outside}; exit codes {failed_ranks(result.stderr)}; launcher: "
                                  f"{_clean(result.stderr)[-1500:]}")
    out = TorchrunRun(nproc=nproc, result=result, ranks=server.streams, stacks=read_stacks(server.dir, nproc),
                      logs={k: v[-LOG_TAIL:] for k, v in scan.items()}, tampering=server.tampering,
                      scan_logs=scan, integrity=events,
                      stopped=stopped[0] if stopped and result.killed_reason == sandbox.KilledReason.STOPPED else None)
    out.evidence = gather_evidence(out, root, sampler)
    if card_watch:
        out.evidence["cards"] = card_watch.evidence()
    return out


def gather_evidence(run: TorchrunRun, root: Path, sampler) -> dict[str, Any]:
    """What the grader saw of the run from outside the ranks (``graders.evidence``)."""
    from graders.evidence import dcp, files, model, outputs
    left = files.scan(root / "work")
    return {"host": sampler.evidence(run.result.wall_s), "outputs": outputs.rank_outputs(root / "logs", run.nproc),
            "files": files.created_files(run, root / "work"), "dcp": dcp.checkpoints(left, root / "work"),
            "_candidates": model.candidates(root / "chan", root / "work", left, run.ranks.get(0))}


def _peer_pid(conn: socket.socket) -> int | None:
    """The pid of the process at the other end of a unix socket, as the kernel knows it."""
    try:
        raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid = struct.unpack("3i", raw)[0]
    except OSError:
        return None
    return pid if pid > 0 else None


def validate(server: ChannelServer, nproc: int, window: tuple[float, float]) -> list[dict[str, Any]]:
    """Validate every rank's records in place (out-of-schema ones are dropped, so no check ever
    reads them) and return the run's integrity events: the channel's, the harnesses' own
    reports, schema violations and cross-checks against the measured wall-clock window."""
    events = list(server.events)
    for rank, stream in sorted(server.streams.items()):
        events += integrity.check_hello(rank, server.hellos.get(rank, {}), nproc)
        if not any(isinstance(r, dict) and r.get("type") == "audit" for r in stream.records[:8]):
            events.append(integrity.event("grader", "audit_missing", "the rank's audit hook did not report in", rank))
        for rec in stream.records:
            if isinstance(rec, dict) and rec.get("type") == "integrity":
                events.append(integrity.harness_event(rank, rec))
        if stream.seal_ok is False and not stream.truncated:
            events.append(integrity.event("records", "seal_mac", "the stream's seal does not match its records", rank))
        good, found = integrity.validate_stream(rank, stream.records, window=window, sealed=stream.sealed,
                                                lines=stream.lines, after_seal=stream.after_seal,
                                                truncated=stream.truncated)
        if stream.unparsed:
            found.append(integrity.event("records", "unparsed", f"{stream.unparsed} lines that are not JSON", rank))
        stream.records = [r for r in good if r.get("type") != "integrity"]
        events += found
    return events[:integrity.MAX_EVENTS]


def read_stacks(chan: Path, nproc: int) -> dict[str, str]:
    """The head of each rank's (and rank child's) faulthandler dump in the channel folder.

    Student processes create these files, so they are read through ``graders.sandbox.untrusted``:
    no symlinks, FIFOs or hard links, a bounded size, a bounded number of files.
    """
    stacks = {}
    with untrusted.open_dir(chan) as fd:
        if fd is None:
            return stacks
        names = [n for n in untrusted.list_names(fd, MAX_CHANNEL_ENTRIES) if _STACK_FILE.fullmatch(n)]
        names.sort(key=lambda n: ("-child" in n, n))  # the ranks' own dumps before their children's
        for name in names[:MAX_STACK_FILES * nproc]:
            txt = untrusted.read_text(name, LOG_TAIL * 4, dir_fd=fd)  # the current thread comes first
            if txt and txt.strip():
                stacks[name.removeprefix("stack-").removesuffix(".txt")] = txt
    return stacks


def read_logs(logs: Path, nproc: int, result: sandbox.SandboxResult, tail: int = LOG_TAIL) -> dict[str, str]:
    """Per-rank tails of stdout + stderr from torchrun's ``--log-dir``, plus the launcher's.

    The layout is ``<run id>/attempt_0/<rank>/{stdout,stderr}.log``; every part of it is
    student-writable, so it is walked without following symlinks and read with a cap.
    """
    out = _rank_log_tails(logs, nproc, tail)
    out["launcher"] = _clean(result.stderr)[-tail:]
    return out


def _rank_log_tails(logs: Path, nproc: int, tail: int) -> dict[str, str]:
    """``rank<N>`` -> the tail of that rank's stdout + stderr so far (read as untrusted files)."""
    out = {}
    with untrusted.open_dir(logs) as fd:
        run_ids = untrusted.list_names(fd, 8) if fd is not None else []
    for rank in range(nproc):
        parts = []
        for run_id in run_ids:
            for name in ("stdout.log", "stderr.log"):
                txt = untrusted.read_under(logs, [run_id, "attempt_0", str(rank), name], tail, tail=True)
                parts.append(txt or "")
        out[f"rank{rank}"] = _clean("".join(parts))[-tail:]
    return out


class _ProgressRelay(threading.Thread):
    """While the ranks run, send their log tails to the status page every ``PROGRESS_EVERY_S``."""

    def __init__(self, phase: str, logs: Path, nproc: int):
        super().__init__(daemon=True)
        self.phase, self.logs, self.nproc = phase, logs, nproc
        self._done = threading.Event()
        self.start()

    def run(self) -> None:
        while not self._done.wait(PROGRESS_EVERY_S):
            try:
                tails = _rank_log_tails(self.logs, self.nproc, PROGRESS_TAIL)
            except OSError:  # the job folder is being torn down
                return
            report_progress(self.phase, logs={f"n{self.nproc}.{k}": v for k, v in tails.items()})

    def stop(self) -> None:
        self._done.set()
        self.join(timeout=5)


def _clean(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)
