"""Runs ravel-load jobs on Ray: the binary plans, each step runs as a Ray task that calls
``ravel-load run-step``, and the driver commits the results as one version.

Tasks share nothing but the store: each gets the plan's text, runs the step in a temporary
directory of its own and returns the step's result. Ray retries a task whose worker died
(``max_retries``); a retried step writes the same objects, so the commit is the same.

The ``ravel-load`` binary must be on each node's PATH (install it there, or ship it with a
``runtime_env``), and the inputs of a load must be readable at the same paths on every node.
"""

from .driver import JobFailed, run_job

__all__ = ["JobFailed", "run_job"]
