"""Reading student-writable folders as root: graders.sandbox.untrusted and the torchrun runner's readers."""
from __future__ import annotations

import os
from pathlib import Path

from graders.sandbox import untrusted
from graders.sandbox import SandboxResult
from graders.torchrun import LOG_TAIL, read_logs, read_stacks


def _secret(tmp_path: Path) -> Path:
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$secret-hash:19000::::::\n")
    os.chmod(secret, 0o600)
    return secret


def test_a_planted_symlink_fifo_or_hard_link_is_not_read(tmp_path: Path) -> None:
    secret = _secret(tmp_path)
    chan = tmp_path / "chan"
    chan.mkdir()
    (chan / "stack-rank0.txt").symlink_to(secret)
    os.mkfifo(chan / "stack-rank1.txt")  # an open without O_NONBLOCK would wait for a writer forever
    os.link(secret, chan / "stack-rank2.txt")
    (chan / "stack-rank3.txt").write_text('Current thread 0x1 (most recent call first):\n  File "t.py", line 1 in f\n')
    stacks = read_stacks(chan, nproc=4)
    assert list(stacks) == ["rank3"]
    assert "secret" not in "".join(stacks.values())


def test_a_symlinked_folder_in_the_log_path_is_not_followed(tmp_path: Path) -> None:
    secret_dir = tmp_path / "elsewhere" / "attempt_0" / "0"
    secret_dir.mkdir(parents=True)
    (secret_dir / "stdout.log").write_text("root:$6$secret-hash\n")
    logs = tmp_path / "logs"
    (logs / "real_run" / "attempt_0" / "1").mkdir(parents=True)
    (logs / "real_run" / "attempt_0" / "1" / "stdout.log").write_text("epoch 0 loss 2.3\n")
    (logs / "evil_run").symlink_to(tmp_path / "elsewhere")  # a whole run folder pointing outside
    (logs / "real_run" / "attempt_0" / "0").symlink_to(secret_dir)  # or one rank's folder
    out = read_logs(logs, 2, SandboxResult(returncode=0, timed_out=False, wall_s=1.0, stderr="launcher\n"))
    assert out == {"rank0": "", "rank1": "epoch 0 loss 2.3\n", "launcher": "launcher\n"}


def test_reads_are_capped_head_or_tail(tmp_path: Path) -> None:
    big = tmp_path / "big.log"
    big.write_bytes(b"a" * 100 + b"b" * (10 * LOG_TAIL))
    assert untrusted.read_text(big, 50) == "a" * 50
    assert untrusted.read_text(big, 50, tail=True) == "b" * 50
    assert untrusted.read_text(tmp_path / "missing", 50) is None
    assert untrusted.read_text(tmp_path, 50) is None  # a directory
