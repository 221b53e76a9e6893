"""The driver: plan with the binary, one Ray task per step, then one commit."""

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import ray

BINARY = "ravel-load"

# Seconds an unreachable --address is tried before the driver gives up.
CONNECT_TIMEOUT_S = 30.0

# Test switch: "STEP:MARKER[,STEP:MARKER...]" kills the worker running STEP on its first attempt
# (when MARKER, a file path, does not exist yet), after the step's process has started.
KILL_FIRST_ATTEMPT = "RAVEL_RAY_KILL_FIRST_ATTEMPT"


class JobFailed(Exception):
    """A ravel-load command failed: its exit code and message, as the CLI gave them."""

    def __init__(self, code, message):
        # Both in args: Ray sends a task's exception back pickled, rebuilt as cls(*args).
        super().__init__(code, message)
        self.code = code
        self.message = message

    def __str__(self):
        return self.message


def _run(args):
    """Runs the binary; returns its stdout, raises JobFailed with its exit code and its whole
    error: from its first `error:` line on (a usage error's cause, tip and usage included; log
    lines before it left out), or all it printed when no line starts so."""
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        raise JobFailed(done.returncode, _error_of(done.stderr) or f"error: {args[1]} failed")
    return done.stdout


def _error_of(stderr):
    lines = stderr.strip().splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith("error:")), 0)
    return "\n".join(lines[first:]).strip()


def _binary():
    found = shutil.which(BINARY)
    if found is None:
        raise JobFailed(2, f"error: {BINARY} is not on PATH")
    return found


@ray.remote
def _step(plan_text, index):
    """Runs step `index` of the plan; returns the step's result (JSON text)."""
    with tempfile.TemporaryDirectory(prefix="ravel-step-") as d:
        plan = os.path.join(d, "plan.json")
        out = os.path.join(d, "result.json")
        with open(plan, "w") as f:
            f.write(plan_text)
        args = [_binary(), "run-step", "--plan", plan, "--step", str(index), "--out", out]
        for kill in os.environ.get(KILL_FIRST_ATTEMPT, "").split(","):
            step, _, marker = kill.partition(":")
            if step == str(index) and marker and not os.path.exists(marker):
                open(marker, "w").close()
                subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                os.kill(os.getpid(), signal.SIGKILL)
        _run(args)
        with open(out) as f:
            return f.read()


def _host_port(address):
    """The host and port an address names (`host:port`, or `ray://host:port`), or None (such
    as `auto`, which Ray resolves itself)."""
    rest = address.split("://", 1)[-1]
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def _unreachable(address, timeout):
    return JobFailed(
        1,
        f"error: no Ray cluster answers at {address} within {timeout:g} s (--connect-timeout): "
        "check the address (the head node's host:port) and that the cluster is running",
    )


def _check_reachable(address, timeout):
    """Waits until something accepts a connection at `address`, for `timeout` seconds at most;
    raises JobFailed when nothing does (a wrong host or port, a cluster that is down)."""
    target = _host_port(address)
    if target is None:
        return
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _unreachable(address, timeout)
        try:
            socket.create_connection(target, timeout=min(left, 5.0)).close()
            return
        except OSError:
            time.sleep(min(0.5, max(deadline - time.monotonic(), 0)))


@contextlib.contextmanager
def _within(seconds, address):
    """Gives up on the block after `seconds`: something answers at the address but does not
    speak Ray's protocol, and ray.init would wait on it. Ray may be stuck in native code that
    no exception reaches, so the process exits (code 1) with the error."""

    def give_up():
        print(_unreachable(address, seconds).message, file=sys.stderr, flush=True)
        os._exit(1)

    timer = threading.Timer(seconds, give_up)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _init(address, env, connect_timeout=CONNECT_TIMEOUT_S):
    """Connects to the cluster at `address` (giving up after `connect_timeout` seconds), or
    starts a local one on loopback."""
    runtime_env = {"env_vars": env}
    if address:
        _check_reachable(address, connect_timeout)
        with _within(connect_timeout, address):
            ray.init(address=address, runtime_env=runtime_env, logging_level="ERROR")
    else:
        ray.init(
            _node_ip_address="127.0.0.1",
            include_dashboard=False,
            runtime_env=runtime_env,
            logging_level="ERROR",
        )


def _check_memory(budget):
    """Refuses a step budget that no node's Ray memory holds (its tasks would wait forever)."""
    nodes = [n["Resources"].get("memory", 0) for n in ray.nodes() if n.get("Alive")]
    if nodes and max(nodes) < budget:
        raise JobFailed(
            2,
            f"error: a step may hold {budget} bytes, more than Ray's memory on any node "
            f"({int(max(nodes))} bytes): plan with a smaller --load-budget",
        )


def run_job(
    operation,
    store,
    table,
    inputs=(),
    steps=4,
    address=None,
    max_retries=3,
    load_budget=None,
    connect_timeout=CONNECT_TIMEOUT_S,
    object_bytes=None,
):
    """Plans `operation` (load, compact or maintain), runs its steps as Ray tasks and commits
    them. Returns the commit's report (a dict). Raises JobFailed as the CLI fails, and when
    nothing answers at `address` within `connect_timeout` seconds.

    Each task asks Ray for the step's budget as its `memory` resource, so a node runs only as
    many steps at once as its memory holds."""
    binary = _binary()
    if address:
        # Before the plan: a wrong address fails fast, with nothing planned for it.
        _check_reachable(address, connect_timeout)
    with tempfile.TemporaryDirectory(prefix="ravel-job-") as d:
        plan = os.path.join(d, "plan.json")
        args = [binary, "plan", operation, "--store", store, "--table", table]
        # `--flag=value`: a value starting with '-' stays a value.
        args += [f"--steps={steps}", "--out", plan]
        if load_budget is not None:
            args += [f"--load-budget={load_budget}"]
        if object_bytes is not None:
            args += [f"--object-bytes={object_bytes}"]
        if inputs:
            args += ["--input", *inputs]
        _run(args)
        with open(plan) as f:
            plan_text = f.read()
        job = json.loads(plan_text)
        for note in job.get("notes", []):
            print(f"note: {note}", file=sys.stderr)
        env = {"PATH": os.environ.get("PATH", "")}
        for name in (KILL_FIRST_ATTEMPT, "RUST_LOG") + tuple(k for k in os.environ if k.startswith("AWS_")):
            if name in os.environ:
                env[name] = os.environ[name]
        budget = job["geometry"]["budget_bytes"]
        _init(address, env, connect_timeout)
        try:
            _check_memory(budget)
            results = []
            step = _step.options(max_retries=max_retries, memory=budget)
            # One copy of the plan in the object store, whatever the number of steps.
            plan_ref = ray.put(plan_text)
            for kind in ("split", "merge"):
                indices = [s["index"] for s in job["steps"] if s["kind"] == kind]
                try:
                    results += ray.get([step.remote(plan_ref, i) for i in indices])
                except ray.exceptions.RayTaskError as e:
                    cause = e.cause if isinstance(e.cause, JobFailed) else None
                    if cause is not None:
                        raise cause from None
                    raise JobFailed(1, f"error: a step failed: {e}") from None
                except ray.exceptions.RayError as e:
                    raise JobFailed(1, f"error: a step failed after {max_retries} retries: {e}") from None
        finally:
            ray.shutdown()
        paths = []
        for i, text in enumerate(results):
            path = os.path.join(d, f"result-{i:05}.json")
            with open(path, "w") as f:
                f.write(text)
            paths.append(path)
        out = _run([binary, "commit", "--plan", plan, "--json", *paths])
        return json.loads(out)
