"""The sandbox against the hostile sample submissions, run for real (no mocks).

Each hostile ``assignments/ddp_speedup/samples/hostile_*/train.py`` runs with the
venv's Python through ``graders.sandbox.run``; the test asserts the verdict and what
the host saw afterwards: no process left, no host file or socket reached, forged
files only inside the job. A 2-rank gloo torchrun job checks that honest distributed
code still works inside the sandbox.
"""
from __future__ import annotations

import ast
import contextlib
import json
import os
import resource
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from coursework import settings
from graders import sandbox, workspace
from graders.exceptions import SandboxSetupError
from graders.sandbox import Limits, SandboxResult
from graders.sandbox.watch import disk_usage

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "assignments" / "ddp_speedup" / "samples"
VENV_PY = str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv").is_dir() else sys.executable
ENV = {"PATH": f"{Path(VENV_PY).parent}:/usr/bin:/bin", "PYTHONUNBUFFERED": "1", "LC_ALL": "C.UTF-8"}
MiB = 1024 * 1024

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox drops to its uid only when started as root"),
    pytest.mark.skipif(sandbox.find_bwrap() is None, reason="bubblewrap is not installed"),
]


@pytest.fixture
def job() -> Iterator[Path]:
    """A real job folder from graders.workspace, with the run folder a grader would use."""
    with workspace.job_dir("test") as path:
        (path / "run").mkdir()
        yield path


def run_sample(job: Path, name: str, limits: Limits, **kwargs) -> SandboxResult:
    """Copy the hostile sample into the job and run it the way a grader would (minus torchrun)."""
    workdir = job / "run"
    shutil.copy(SAMPLES / f"hostile_{name}" / "train.py", workdir / "train.py")
    env = dict(ENV, **kwargs.pop("env", {}))
    return sandbox.run([VENV_PY, "train.py", "--data-dir", "/nonexistent", "--epochs", "1"],
                       workdir=workdir, limits=limits, env=env, **kwargs)


def pids_in(workdir: Path) -> list[int]:
    """Processes whose current directory is ``workdir`` (how a leftover daemon is found)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "cwd") == str(workdir):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def assert_clean(result: SandboxResult, workdir: Path) -> None:
    """Nothing of the job runs any more and the sandbox layers were all in force."""
    assert result.leftover_pids == 0
    assert pids_in(workdir) == []
    from graders.sandbox import credentials
    uids = [int(x[4:]) for x in result.layers if x.startswith("uid:")]
    assert "bwrap" in result.layers and len(uids) == 1 and uids[0] in credentials.uid_range()
    assert not [d for d in result.degraded if d.startswith("bwrap")], result.degraded


def test_runs_unprivileged_and_cannot_read_root_only_files(job: Path, tmp_path: Path) -> None:
    secret_dir = Path(tempfile.mkdtemp(dir="/var/tmp"))
    try:
        os.chmod(secret_dir, 0o755)
        (secret_dir / "root_only").write_text("ROOT-ONLY")
        os.chmod(secret_dir / "root_only", 0o600)
        probe = job / "run" / "probe.py"
        probe.write_text(
            "import os\n"
            "def readable(p):\n"
            "    try:\n        open(p).read(); return True\n"
            "    except OSError:\n        return False\n"
            "print(os.getuid(), os.geteuid(), os.getgid())\n"
            f"print('secret', readable('{secret_dir}/root_only'))\n"
            "print('root', os.access('/root', os.R_OK) and bool(os.listdir('/root')))\n"
            "print('env', os.environ.get('SECRET_KEY'))\n"
            "print('pids', len([p for p in os.listdir('/proc') if p.isdigit()]))\n")
        r = sandbox.run([VENV_PY, "probe.py"], workdir=job / "run", limits=Limits(wall_s=20),
                        env=dict(ENV, SECRET_KEY="service-secret"), ro_binds=[(str(secret_dir), "/data")])
    finally:
        shutil.rmtree(secret_dir)
    assert r.returncode == 0, r.stderr
    uid, euid, gid = map(int, r.stdout.splitlines()[0].split())
    assert uid == euid == sandbox.SANDBOX_UID != 0 and gid == sandbox.SANDBOX_GID
    assert "secret False" in r.stdout and "root False" in r.stdout
    assert "env None" in r.stdout and "env-scrub" in r.layers
    assert int(r.stdout.split("pids ")[1].split()[0]) <= 3  # own pid namespace: no host process
    assert_clean(r, job / "run")


def test_a_hidden_file_shows_no_data(job: Path) -> None:
    data_dir = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="dg-db-"))
    try:
        os.chmod(data_dir, 0o755)
        db = data_dir / "distgrade.db"
        db.write_text("STUDENT GRADES")
        os.chmod(db, 0o644)
        code = f"try:\n    print(repr(open('{db}').read()))\nexcept OSError as e:\n    print(type(e).__name__)"
        r = sandbox.run([VENV_PY, "-c", code], workdir=job / "run",
                        limits=Limits(wall_s=20), env=ENV, hide_paths=[str(db)])
    finally:
        shutil.rmtree(data_dir)
    # /dev/null bound on a nodev mount: the file is there but empty or unreadable, never the data
    assert r.returncode == 0 and r.stdout.strip() in ("''", "PermissionError"), r.stderr


def test_only_the_allow_list_is_visible(job: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Solutions, samples, answer keys, quizzes, tests, .git, var/ and grader code: none of it is bound.
    assignments_elsewhere = tmp_path / "assignments"
    assignments_elsewhere.mkdir()
    monkeypatch.setenv("DISTGRADE_ASSIGNMENTS_DIR", str(assignments_elsewhere))
    harness = settings.repo_root() / "graders" / "harness"
    code = ("import os, sys\n"
            f"print(sorted(os.listdir('{settings.repo_root()}')), os.listdir('{harness.parent}'))\n"
            f"print('sitecustomize.py' in os.listdir('{harness}'))\n"
            f"print([p for p in ('/var', '/root', '/home', '/opt', '/srv', '/run', '{assignments_elsewhere}')"
            " if os.path.exists(p)], [os.listdir(p) for p in ('/', '/work') if os.path.isdir(p)])\n"
            "import torch; print(torch.__version__ is not None)\n")
    r = sandbox.run([VENV_PY, "-c", code], workdir=job / "run", limits=Limits(wall_s=60, address_space=False),
                    env=ENV, ro_binds=[(str(harness), str(harness))])
    assert r.returncode == 0, r.stdout + r.stderr
    listed, harness_seen, others, torch_ok = r.stdout.strip().splitlines()
    # only the mount points of the venv and the harness; /work holds nothing but the path to them
    assert listed == "['.venv', 'graders'] ['harness']" and harness_seen == "True", listed
    roots = sorted(os.listdir("/"))  # what the allow-list and the bind targets create, nothing more
    assert others.startswith("[] "), others
    assert set(ast.literal_eval(others[3:])[0]) <= {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "proc",
                                         "dev", "tmp", REPO.parts[1]}, (others, roots)
    assert torch_ok == "True"
    assert "allow-list" in r.layers and "private-shm" in r.layers


def test_a_checkout_under_tmp_keeps_its_venv_visible() -> None:
    # A CI clone under /tmp: the private /tmp must not swallow the interpreter; the repo stays unbound.
    cmd = sandbox.bwrap_argv(["python"], bwrap="bwrap", workdir=None, hide=["/tmp/ci/.venv/secret"],
                             runtime=["/tmp/ci/.venv"], system=[])
    tmpfs_tmp = cmd.index("/tmp", cmd.index("--tmpfs"))
    bind_venv = cmd.index("/tmp/ci/.venv")
    hide = cmd.index("/tmp/ci/.venv/secret")
    assert tmpfs_tmp < bind_venv < hide
    assert cmd[bind_venv - 1] == "--ro-bind" and "/tmp/ci" not in cmd


def test_the_system_binds_are_an_allow_list() -> None:
    args = sandbox.bwrap.system_binds()
    bound = {args[i + 2] for i in range(0, len(args), 3)}
    assert bound <= set(sandbox.bwrap.SYSTEM_DIRS) and "/usr" in bound and "/etc" in bound
    assert not bound & {"/work", "/root", "/home", "/var", "/run", "/srv", "/opt"}


@pytest.mark.parametrize("name, limits, reason", [
    ("fork_bomb", Limits(wall_s=20, nproc=128), "pids"),
    ("memory_bomb", Limits(wall_s=20, memory_bytes=256 * MiB), "memory"),
    ("cpu_spin", Limits(wall_s=2), "timeout"),
    ("sleep_forever", Limits(wall_s=2), "timeout"),
    ("stdout_flood", Limits(wall_s=20, output_kill_bytes=4 * MiB, output_bytes=4096), "output"),
    ("fill_disk", Limits(wall_s=20, disk_bytes=64 * MiB), "disk"),
])
def test_resource_bombs_are_killed(job: Path, name: str, limits: Limits, reason: str) -> None:
    r = run_sample(job, name, limits)
    assert r.killed_reason == reason, (r.killed_reason, r.stderr[-500:])
    assert r.returncode != 0
    assert r.wall_s < limits.wall_s + 5
    assert r.timed_out == (reason == "timeout")
    assert_clean(r, job / "run")
    if name == "memory_bomb":
        assert r.oom_killed and r.peak_memory_bytes is not None
        assert 0.8 * limits.memory_bytes <= r.peak_memory_bytes <= limits.memory_bytes
    if name == "stdout_flood":
        assert r.output_total_bytes >= limits.output_kill_bytes
        assert len(r.stdout) <= limits.output_bytes + 100
    if name == "fill_disk":  # the watcher polls twice a second; the overshoot must stay small
        assert disk_usage([job / "run"]) < 1024 * MiB


def test_dump_signal_reaches_ranks_before_the_kill(job: Path) -> None:
    (job / "run" / "ranks.py").write_text(
        "import signal, sys, time, os\n"
        "signal.signal(signal.SIGUSR1, lambda *a: (sys.stderr.write(f'STACK DUMP {os.getpid()}\\n'),"
        " sys.stderr.flush()))\n"
        "if os.fork() == 0:\n    os.setsid()\n"
        "while True:\n    time.sleep(1)\n")
    r = sandbox.run([VENV_PY, "ranks.py"], workdir=job / "run", env=ENV,
                    limits=Limits(wall_s=2, dump_signal=signal.SIGUSR1, dump_grace_s=1.0))
    assert r.killed_reason == "timeout" and r.timed_out
    assert r.stderr.count("STACK DUMP") == 2  # parent and its setsid child both dumped
    assert 3.0 <= r.wall_s < 8.0
    assert_clean(r, job / "run")


def test_network_is_loopback_only(job: Path) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    seen: list[bytes] = []
    done = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not done.is_set():
            try:
                conn, _ = server.accept()
                seen.append(conn.recv(100) or b"connected")
            except OSError:
                pass
    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        r = run_sample(job, "network_loopback", Limits(wall_s=30),
                       env={"DISTGRADE_TEST_HOST_PORT": str(port)})
    finally:
        done.set()
        t.join(timeout=2)
        server.close()
    assert r.returncode == 1 and r.killed_reason is None
    result = json.loads((job / "run" / "net_result.0.json").read_text())
    assert result[str(port)].startswith("refused") and "connected" not in result.values()
    assert seen == []
    assert "netns:loopback" in r.layers
    assert_clean(r, job / "run")


def test_other_jobs_and_the_database_are_hidden(job: Path) -> None:
    data_dir = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="dg-data-"))
    try:
        os.chmod(data_dir, 0o755)
        db = data_dir / "distgrade.db"
        db.write_text("STUDENT GRADES")
        os.chmod(db, 0o644)  # world-readable: only the hiding can stop the read
        with workspace.job_dir("other") as other:
            (other / "submission").mkdir()
            (other / "submission" / "train.py").write_text("OTHER STUDENT'S CODE")
            os.chmod(other, 0o755)  # even a careless job folder mode must not expose it
            hide = sandbox.default_hide_paths() + [str(data_dir)]
            r = run_sample(job, "read_other_job", Limits(wall_s=30), hide_paths=hide,
                           env={"DISTGRADE_TEST_SECRET_FILE": str(db)})
    finally:
        shutil.rmtree(data_dir)
    found = json.loads((job / "run" / "read_result.0.json").read_text())
    assert r.returncode == 1
    others = [p for p in found if not p.startswith(str(job))]  # its own job folder is fine
    assert not [p for p in others if "distgrade-jobs" in p or "distgrade.db" in p or p.startswith("/root")]
    assert "OTHER STUDENT" not in json.dumps(found) and "STUDENT GRADES" not in json.dumps(found)
    assert f"hide:{data_dir}" in r.layers
    assert_clean(r, job / "run")


def test_writes_outside_the_job_do_not_reach_the_host(job: Path) -> None:
    outside = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="dg-outside-"))
    os.chmod(outside, 0o777)  # writable by anyone on the host: only the sandbox protects it
    name = "distgrade_hostile_write_outside.txt"
    targets = [REPO, REPO.parent, Path("/tmp"), Path("/root"), job, job.parent, outside]
    for t in targets:
        (t / name).unlink(missing_ok=True)
    try:
        r = run_sample(job, "write_outside", Limits(wall_s=30),
                       env={"DISTGRADE_TEST_OUTSIDE_DIR": str(outside), "HOME": "/root"})
        leaked = [str(t) for t in targets if (t / name).exists()]
    finally:
        shutil.rmtree(outside)
    assert r.returncode == 1
    assert leaked == []
    result = json.loads((job / "run" / "write_result.0.json").read_text())
    assert result[f"/work/main/{name}"].startswith("refused") or REPO != Path("/work/main")
    assert_clean(r, job / "run")


def test_forged_results_stay_inside_the_job_and_belong_to_the_student(job: Path) -> None:
    r = run_sample(job, "forge_result", Limits(wall_s=30))
    assert r.returncode == 0
    assert '"score": 40.0' in r.stdout  # the sandbox passes it on; the grader must not trust it
    forged = job / "run" / "results.json"
    assert forged.exists() and forged.stat().st_uid == sandbox.SANDBOX_UID
    for d in (job, job.parent, Path("/tmp")):
        for n in ("results.json", "report.json"):
            assert not (d / n).exists() or (d / n).stat().st_uid != sandbox.SANDBOX_UID, d / n
    assert_clean(r, job / "run")


def test_setsid_daemon_is_killed_and_does_not_hang_the_reader(job: Path) -> None:
    r = run_sample(job, "setsid_daemon", Limits(wall_s=30))
    assert r.returncode == 0 and r.killed_reason is None
    assert r.wall_s < 5  # did not wait for the daemon's copy of stdout to close
    assert_clean(r, job / "run")
    beat = job / "run" / "daemon_heartbeat"
    before = beat.stat().st_mtime_ns if beat.exists() else None
    time.sleep(0.6)
    assert (beat.stat().st_mtime_ns if beat.exists() else None) == before


def test_without_bwrap_the_cgroup_still_catches_daemons(job: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTGRADE_SANDBOX", "none")
    r = run_sample(job, "setsid_daemon", Limits(wall_s=30))
    assert "bwrap" not in r.layers and any(d.startswith("bwrap: disabled") for d in r.degraded)
    assert r.returncode == 0 and r.leftover_pids == 0 and pids_in(job / "run") == []


def test_address_space_limit_never_with_gpus(job: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTGRADE_CGROUP", "none")  # RLIMIT_AS is the fallback without a memory cgroup
    code = "import os, resource; print(resource.getrlimit(resource.RLIMIT_AS)[0], os.environ.get('CUDA_VISIBLE_DEVICES'))"
    limits = Limits(wall_s=20, memory_bytes=2048 * MiB)
    cpu = sandbox.run([VENV_PY, "-c", code], workdir=job / "run", limits=limits, env=ENV)
    assert cpu.stdout.split() == [str(2048 * MiB), "None"] and "rlimit-as" in cpu.layers
    with pytest.raises(SandboxSetupError, match="memory limit"):  # no cgroup and no RLIMIT_AS: refused
        sandbox.run([VENV_PY, "-c", code], workdir=job / "run", limits=limits, env=ENV, gpus=[0, 1])
    monkeypatch.setenv("DISTGRADE_SANDBOX", "none")  # the operator's explicit choice: runs, says what is off
    gpu = sandbox.run([VENV_PY, "-c", code], workdir=job / "run", limits=limits, env=ENV, gpus=[0, 1])
    assert gpu.stdout.split() == [str(resource.RLIM_INFINITY), "0,1"] and "rlimit-as" not in gpu.layers
    assert any(d.startswith("bwrap: disabled") for d in gpu.degraded)


@pytest.mark.parametrize("mode, visible", [("bwrap", "0,1"), ("none", "2,3")])
def test_the_sandbox_owns_cuda_visible_devices(job: Path, monkeypatch: pytest.MonkeyPatch, mode: str,
                                               visible: str) -> None:
    """Inside bwrap only the chosen device nodes exist (renumbered 0..n-1); without it, host numbers."""
    monkeypatch.setenv("DISTGRADE_SANDBOX", mode)
    code = "import os; print(os.environ['CUDA_VISIBLE_DEVICES'], os.environ['DISTGRADE_HOST_GPUS'])"
    r = sandbox.run([VENV_PY, "-c", code], workdir=job / "run", limits=Limits(wall_s=20),
                    env=dict(ENV, CUDA_VISIBLE_DEVICES="7"), gpus=[2, 3])
    assert r.stdout.split() == [visible, "2,3"]


def test_gpu_arguments_bind_only_the_chosen_devices(tmp_path: Path) -> None:
    for n in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "nvidia0", "nvidia1", "nvidia2"):
        (tmp_path / n).touch()
    args, env = sandbox.gpu_setup([0, 2], dev_dir=str(tmp_path))
    bound = [args[i + 2] for i in range(0, len(args), 3)]
    assert args[0::3] == ["--dev-bind"] * len(bound)
    assert bound == ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia0", "/dev/nvidia2"]
    # only two device nodes exist inside, so CUDA numbers them 0 and 1
    assert env == {"CUDA_VISIBLE_DEVICES": "0,1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "DISTGRADE_HOST_GPUS": "0,2"}
    cmd = sandbox.bwrap_argv(["python", "t.py"], bwrap="bwrap", workdir=Path("/jobs/x/run"),
                             hide=["/jobs"], gpu_args=args)
    for flag in ("--unshare-all", "--die-with-parent", "--disable-userns", "--new-session"):
        assert flag in cmd
    assert cmd.index("--dev") < cmd.index("--dev-bind")  # devices go on top of the private /dev
    assert cmd.index("/jobs") < cmd.index("/jobs/x/run")  # hidden first, then the job's own bind
    assert cmd[-2:] == ["python", "t.py"]


def test_a_bind_that_cannot_be_set_up_is_an_infrastructure_error(job: Path) -> None:
    with pytest.raises(SandboxSetupError):
        sandbox.run(["true"], workdir=job / "run", limits=Limits(wall_s=10), env=ENV,
                    ro_binds=[("/nonexistent-distgrade-path", "/data")])


GLOO_SCRIPT = """
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
x = torch.randn(256, 256)
for _ in range(10):
    y = x @ x
    dist.all_reduce(y)
print(f"rank {rank}/{world} sum={t.item():g}", flush=True)
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_two_rank_gloo_torchrun_runs_inside_the_sandbox(job: Path) -> None:
    (job / "run" / "allreduce.py").write_text(GLOO_SCRIPT)
    r = sandbox.run([VENV_PY, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                     "allreduce.py"], workdir=job / "run", limits=Limits(wall_s=120, address_space=False),
                    env=dict(ENV, OMP_NUM_THREADS="1"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "rank 0/2 sum=3" in r.stdout and "rank 1/2 sum=3" in r.stdout
    assert "hostname of the client socket cannot be retrieved" not in r.stderr  # ::1 resolves
    assert_clean(r, job / "run")


@pytest.mark.parametrize("layers, missing", [
    (["bwrap", "netns:loopback", "pidns", "allow-list", "uid:60100", "cgroup-v1:memory"], []),
    (["bwrap", "netns:loopback", "pidns", "allow-list", "uid:60100", "rlimit-as"], []),
    (["uid:60100", "cgroup-v1:memory", "cgroup-v1:pids"],
     ["network namespace", "mount namespace with the allow-list"]),
    (["bwrap", "netns:loopback", "pidns", "allow-list", "killpg"], ["unprivileged uid", "memory limit (cgroup or RLIMIT_AS)"]),
    (["netns:loopback", "allow-list", "uid:1", "rlimit-as", "killpg"], ["process-tree kill (pid namespace or cgroup)"]),
])
def test_required_layers(layers: list[str], missing: list[str]) -> None:
    assert sandbox.missing_layers(layers) == missing


def test_a_missing_layer_refuses_the_run_unless_the_operator_said_none(job: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTGRADE_CGROUP", "none")
    no_memory_limit = Limits(wall_s=20, address_space=False)
    marker = job / "run" / "ran"
    with pytest.raises(SandboxSetupError, match=r"memory limit .*DISTGRADE_SANDBOX=none"):
        sandbox.run(["/bin/touch", str(marker)], workdir=job / "run", limits=no_memory_limit, env=ENV)
    assert not marker.exists()  # refused before anything of the student's started
    monkeypatch.setenv("DISTGRADE_SANDBOX", "none")
    r = sandbox.run(["/bin/touch", str(marker)], workdir=job / "run", limits=no_memory_limit, env=ENV)
    assert r.returncode == 0 and marker.exists()
    assert "bwrap: disabled by DISTGRADE_SANDBOX=none" in r.degraded


def test_the_cli_reports_a_sandbox_it_cannot_build_as_infrastructure(tmp_path: Path) -> None:
    """Exit 4 and the reason on stderr (the worker retries it), never a crashed report or a score."""
    sample = SAMPLES / "correct_argparse_sgd" / "train.py"
    env = {**os.environ, "DISTGRADE_CGROUP": "none", "DISTGRADE_SANDBOX": "required", "DISTGRADE_FAST": "1",
           "DISTGRADE_LIMITS": json.dumps({"address_space": False}), "DISTGRADE_VAR_DIR": str(tmp_path)}
    import subprocess
    proc = subprocess.run([sys.executable, "-m", "graders", "grade", "ddp_speedup", str(sample), "--json"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 4 and proc.stdout == "", proc.stdout[-500:] + proc.stderr[-2000:]
    assert "sandbox unavailable" in proc.stderr and "memory limit" in proc.stderr


def test_each_job_gets_its_own_uid_and_a_killed_holder_frees_it(tmp_path: Path) -> None:
    import subprocess
    from graders.sandbox import credentials

    with credentials.lease() as a, credentials.lease() as b:
        assert a is not None and b is not None and a.uid != b.uid and {a.locked, b.locked} == {True}
    # a holder SIGKILLed mid-job (a lost worker): the kernel drops its flock; the next job reaps the uid
    holder = subprocess.Popen([sys.executable, "-c",
                               "import sys, time; from graders.sandbox import credentials\n"
                               "with credentials.lease() as s:\n"
                               "    print(s.uid, flush=True); time.sleep(300)"],
                              cwd=REPO, stdout=subprocess.PIPE, text=True)
    uid = int(holder.stdout.readline())
    leftover = subprocess.Popen(["sleep", "300"], user=uid, group=uid)  # a process of that job
    holder.kill()
    holder.wait()
    try:
        taken = []
        with contextlib.ExitStack() as stack:
            while True:
                slot = stack.enter_context(credentials.lease())
                taken.append(slot.uid)
                if slot.uid == uid or len(taken) > 64:
                    break
        assert uid in taken
        assert leftover.wait(timeout=10) == -signal.SIGKILL  # reaped when the uid was taken again
    finally:
        leftover.kill()


def test_leftovers_in_host_tmp_and_shm_are_removed_without_a_private_tmp(job: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTGRADE_SANDBOX", "none")  # no private /tmp: only the per-uid reaping can clean up
    r = run_sample(job, "leave_tmp_files", Limits(wall_s=30))
    assert "left files in /dev/shm, /tmp" in r.stderr
    assert [p for pattern in ("/tmp/distgrade-hostile-leftover*", "/dev/shm/distgrade-hostile-leftover*")
            for p in Path("/").glob(pattern.lstrip("/"))] == []
    assert credentials_processes(sandbox.SANDBOX_UID) == []


def credentials_processes(uid: int) -> list[int]:
    from graders.sandbox import credentials
    return credentials.processes_of(uid)


def test_concurrent_jobs_cannot_see_or_kill_each_other(job: Path) -> None:
    """A victim job runs while the hostile one looks for it in /proc and the jobs root."""
    with workspace.job_dir("victim") as other:
        (other / "run").mkdir()
        victim_code = ("import os, time\nopen('canary.txt', 'w').write('VICTIM')\n"
                       "while not os.path.exists('stop'):\n    time.sleep(0.1)\n")
        box: dict[str, SandboxResult] = {}
        t = threading.Thread(target=lambda: box.setdefault("r", sandbox.run(
            [VENV_PY, "-c", victim_code, "distgrade-victim"], workdir=other / "run", limits=Limits(wall_s=120),
            env=ENV)))
        t.start()
        deadline = time.monotonic() + 30
        while not (other / "run" / "canary.txt").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        r = run_sample(job, "other_job", Limits(wall_s=30))
        (other / "run" / "stop").touch()
        t.join(timeout=60)
    assert "blocked" in r.stderr, r.stderr[-1000:]
    victim = box["r"]
    assert victim.returncode == 0 and victim.killed_reason is None
    uids = {x for x in victim.layers + r.layers if x.startswith("uid:")}
    assert len(uids) == 2  # two jobs, two uids


def test_concurrent_jobs_get_disjoint_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: nothing to split")
    monkeypatch.setenv("DISTGRADE_JOB_CPUS", "1")
    code = "import os, time; print(sorted(os.sched_getaffinity(0))); time.sleep(2)"
    seen: dict[str, SandboxResult] = {}

    def job(name: str) -> None:  # two jobs at once, each in its own thread as in two workers
        with workspace.job_dir(name) as root:
            seen[name] = sandbox.run([VENV_PY, "-c", code], workdir=root / "run", limits=Limits(wall_s=30), env=ENV)
    threads = [threading.Thread(target=job, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    a, b = seen["a"], seen["b"]
    assert a.returncode == b.returncode == 0, a.stderr + b.stderr
    cpus_a, cpus_b = ast.literal_eval(a.stdout.strip()), ast.literal_eval(b.stdout.strip())
    assert len(cpus_a) == len(cpus_b) == 1 and cpus_a != cpus_b, (a.layers, b.layers, a.degraded, b.degraded)
    assert "cgroup-v1:cpuset" in a.layers + b.layers or "cgroup-v2:cpuset" in a.layers + b.layers


def test_reaping_removes_only_the_uids_files_and_spares_the_jobs_root(tmp_path: Path) -> None:
    from graders.sandbox import credentials

    uid = 60163
    shared = tmp_path / "shared"  # world-writable, like /tmp: a foreign uid may write inside
    private = tmp_path / "private"  # someone else's folder: never descended into, never touched
    jobs = tmp_path / "jobs"
    for d, mode in ((shared, 0o1777), (private, 0o755), (jobs, 0o711)):
        d.mkdir()
        os.chmod(d, mode)
    os.chmod(tmp_path, 0o1777)
    mine = [shared / "left.bin", tmp_path / "dir-of-mine", jobs / "job-output"]
    mine[0].write_bytes(b"x")
    mine[1].mkdir()
    (mine[1] / "many").write_text("y")
    mine[2].write_text("the grader reads this")
    theirs = private / "keep.txt"
    theirs.write_text("z")
    for p in (*mine, mine[1] / "many", theirs):
        os.chown(p, uid, uid)
    assert credentials.remove_files_of(uid, roots=[str(tmp_path)], keep=[jobs]) == 2
    assert not mine[0].exists() and not mine[1].exists()
    assert mine[2].exists() and theirs.exists()


@pytest.fixture
def laptop_home() -> Iterator[Path]:
    """A folder another user can reach (pytest's own tmp_path sits under a 0700 folder)."""
    path = Path(tempfile.mkdtemp(prefix="distgrade-laptop-"))
    os.chmod(path, 0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_students_laptop_run_works_and_says_what_is_off(laptop_home: Path) -> None:
    """Not root, no writable cgroup: best effort, every missing protection named (the CLI prints them)."""
    import subprocess
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is needed to run as another user")
    tmp_path = laptop_home
    code = ("import json; from pathlib import Path; from graders import sandbox, workspace\n"
            "with workspace.job_dir() as job:\n"
            "    r = sandbox.run(['/bin/true'], workdir=job / 'run', env={'PATH': '/usr/bin:/bin'},\n"
            "                    limits=sandbox.Limits(wall_s=20))\n"
            "print(json.dumps([sandbox.enforcement(), r.returncode, r.degraded, r.layers]))\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "DISTGRADE_JOBS_DIR": str(tmp_path)}
    proc = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", VENV_PY, "-c", code],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    enforcement, rc, degraded, layers = json.loads(proc.stdout.strip().splitlines()[-1])
    assert enforcement == "best-effort" and rc == 0
    assert any(d.startswith("uid: the grader is not root") for d in degraded)
    assert not any(x.startswith("uid:") for x in layers)
