"""The driver: plan with the binary, one Ray task per step, then one commit."""

import json
import os
import shutil
import signal
import subprocess
import tempfile

import ray

BINARY = "ravel-load"

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
    """Runs the binary; returns its stdout, raises JobFailed with its exit code."""
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        message = done.stderr.strip().splitlines()
        raise JobFailed(done.returncode, message[-1] if message else f"{args[1]} failed")
    return done.stdout


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


def _init(address, env):
    """Connects to the cluster at `address`, or starts a local one on loopback."""
    runtime_env = {"env_vars": env}
    if address:
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


def run_job(operation, store, table, inputs=(), steps=4, address=None, max_retries=3, load_budget=None):
    """Plans `operation` (load, compact or maintain), runs its steps as Ray tasks and commits
    them. Returns the commit's report (a dict). Raises JobFailed as the CLI fails.

    Each task asks Ray for the step's budget as its `memory` resource, so a node runs only as
    many steps at once as its memory holds."""
    binary = _binary()
    with tempfile.TemporaryDirectory(prefix="ravel-job-") as d:
        plan = os.path.join(d, "plan.json")
        args = [binary, "plan", operation, "--store", store, "--table", table]
        args += ["--steps", str(steps), "--out", plan]
        if load_budget is not None:
            args += ["--load-budget", str(load_budget)]
        if inputs:
            args += ["--input", *inputs]
        _run(args)
        with open(plan) as f:
            plan_text = f.read()
        job = json.loads(plan_text)
        env = {"PATH": os.environ.get("PATH", "")}
        for name in (KILL_FIRST_ATTEMPT, "RUST_LOG") + tuple(k for k in os.environ if k.startswith("AWS_")):
            if name in os.environ:
                env[name] = os.environ[name]
        budget = job["geometry"]["budget_bytes"]
        _init(address, env)
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
