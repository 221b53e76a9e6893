"""ravel_ray on a real local Ray: one head node on 127.0.0.1 with 2 CPUs, no dashboard, no
usage stats. A distributed load of 4 shares and a distributed compaction give the rows and
checksum of the single-machine commands, one version each; a step whose worker is killed on
its first attempt is retried by Ray and every row is there once. Without a cluster: the
driver's errors are whole, and an address where no Ray answers is given up.

Needs `ravel-load` on PATH (`.ci/run` puts target/debug first)."""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest

# Token authentication off: the cluster listens on loopback only and lives for the test.
ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled"}
ROWS = 20_000


def sh(*args, check=True):
    done = subprocess.run(args, capture_output=True, text=True, env={**os.environ, **ENV})
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {done.returncode}: {done.stderr}")
    return done


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RayJobs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if shutil.which("ravel-load") is None:
            raise AssertionError("ravel-load is not on PATH: build it and put it there")
        cls.dir = tempfile.mkdtemp(prefix="ravel-ray-test-")
        cls.inputs = []
        for seed in range(1, 5):
            path = os.path.join(cls.dir, "in", f"part-{seed}.parquet")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            sh("ravel-load", "gen", "--rows", str(ROWS), "--seed", str(seed), "--out", path)
            cls.inputs.append(path)
        port = free_port()
        cls.address = f"127.0.0.1:{port}"
        sh(sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--node-ip-address", "127.0.0.1",
           "--port", str(port), "--num-cpus", "2", "--include-dashboard", "false", "--disable-usage-stats")

    @classmethod
    def tearDownClass(cls):
        sh(sys.executable, "-m", "ray.scripts.scripts", "stop", "--force", check=False)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def store(self, name):
        """A store with table hits: the hits layout and a first version of 1000 rows."""
        path = os.path.join(self.dir, name)
        sh("ravel-load", "demo", "--rows", "1000", "--dir", path + "-demo", "--store", path)
        return path

    def ravel_ray(self, *args, env=None):
        return subprocess.run(
            [sys.executable, "-m", "ravel_ray", *args, "--address", self.address, "--json"],
            capture_output=True, text=True, env={**os.environ, **ENV, **(env or {})},
        )

    def figures(self, store):
        q = 'SELECT count(*) AS n, sum("WatchID" % 1000003) AS s, count(distinct "WatchID") AS d FROM hits'
        out = sh("ravel-load", "query", "--store", store, "--table", "hits", "--format", "json", q).stdout
        return json.loads(out)

    def verified(self, store):
        out = sh("ravel-load", "verify", "--store", store, "--table", "hits", "--deep", "--json").stdout
        return json.loads(out)

    def version(self, store):
        entries = sorted(os.listdir(os.path.join(store, "hits", "_delta_log")))
        return max(int(e.split(".")[0]) for e in entries if e.endswith(".json"))

    def test_a_distributed_load_and_compaction_match_one_machine(self):
        single, spread = self.store("single"), self.store("spread")
        sh("ravel-load", "load", "--store", single, "--table", "hits", "--compact", "--no-maintain",
           "--input", *self.inputs)
        sh("ravel-load", "compact", "--store", single, "--table", "hits")
        before = self.version(spread)
        done = self.ravel_ray("load", "--store", spread, "--table", "hits", "--steps", "4", "--object-bytes", "200000", "--input", *self.inputs)
        self.assertEqual(done.returncode, 0, done.stderr)
        report = json.loads(done.stdout)
        self.assertEqual(report["rows"], 4 * ROWS)
        self.assertEqual(self.version(spread), before + 1, "one version for the load")
        done = self.ravel_ray("compact", "--store", spread, "--table", "hits", "--steps", "4", "--object-bytes", "200000")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(self.version(spread), before + 2, "one version for the compaction")
        self.assertEqual(self.figures(spread), self.figures(single))
        v = self.verified(spread)
        self.assertEqual(v["violations"], [], v)
        self.assertEqual(v["overlap"]["max_depth"], 1, "one sequence in clustering order")
        # The same load again: its inputs are consumed; nothing is published twice.
        done = self.ravel_ray("load", "--store", spread, "--table", "hits", "--steps", "4", "--object-bytes", "200000", "--input", *self.inputs)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertTrue(json.loads(done.stdout)["already_published"])
        self.assertEqual(self.figures(spread), self.figures(single))

    def test_steps_killed_on_their_first_attempt_are_retried_and_every_row_is_there_once(self):
        store = self.store("killed")
        # A split step (1 of 0-3) and a merge step past the first (5 of 4-7: the inputs fill
        # more than four 200 kB objects).
        markers = [os.path.join(self.dir, f"killed-{s}") for s in (1, 5)]
        kill = f"1:{markers[0]},5:{markers[1]}"
        done = self.ravel_ray("load", "--store", store, "--table", "hits", "--steps", "4", "--object-bytes", "200000", "--input", *self.inputs,
                              env={"RAVEL_RAY_KILL_FIRST_ATTEMPT": kill})
        self.assertEqual(done.returncode, 0, done.stderr)
        for m in markers:
            self.assertTrue(os.path.exists(m), f"the first attempt of {m} was killed")
        # Every row once: the figures of the same rows loaded on one machine.
        single = self.store("killed-single")
        sh("ravel-load", "load", "--store", single, "--table", "hits", "--no-maintain", "--input", *self.inputs)
        self.assertEqual(self.figures(store), self.figures(single))
        self.assertEqual(self.figures(store)[0]["n"], 4 * ROWS + 1000)
        self.assertEqual(self.verified(store)["violations"], [])

    def test_a_bad_table_fails_with_the_clis_exit_code_and_message(self):
        store = self.store("bad")
        done = self.ravel_ray("load", "--store", store, "--table", "nosuch", "--input", *self.inputs)
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("error:", done.stderr)


    def test_a_step_budget_no_node_holds_is_refused_before_any_step_runs(self):
        store = self.store("too-large")
        done = self.ravel_ray("load", "--store", store, "--table", "hits", "--steps", "4", "--object-bytes", "200000", "--input", *self.inputs,
                              "--load-budget", str(10**15))
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("more than Ray's memory on any node", done.stderr)
        self.assertEqual(self.version(store), 0, "nothing published")
        self.assertFalse(os.path.exists(os.path.join(store, "hits", "_ravel", "tmp")), "no step ran")


class Failures(unittest.TestCase):
    def ravel_ray(self, *args):
        # A guard, not a figure: a driver that waits on forever fails here instead of hanging.
        return subprocess.run([sys.executable, "-m", "ravel_ray", *args], capture_output=True, text=True,
                              env={**os.environ, **ENV}, timeout=300)

    def test_a_bad_flag_prints_its_whole_error(self):
        done = self.ravel_ray("load", "--store", "s", "--table", "t", "--input", "x.parquet", "--steps", "-3")
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("argument --steps: must be at least 1, not -3", done.stderr)

    def test_a_commands_error_is_kept_whole(self):
        from ravel_ray.driver import JobFailed, _run

        error = "error: unexpected argument '-3' found\n\n  tip: to pass '-3' as a value, use '-- -3'\n\n" \
                "For more information, try '--help'."
        script = f"import sys; sys.stderr.write('a log line\\n' + {error!r}); sys.exit(2)"
        with self.assertRaises(JobFailed) as e:
            _run([sys.executable, "-c", script])
        self.assertEqual((e.exception.code, str(e.exception)), (2, error))

    def test_an_address_nothing_answers_at_is_given_up(self):
        address = f"127.0.0.1:{free_port()}"
        done = self.ravel_ray("compact", "--store", "s", "--table", "t", "--address", address, "--connect-timeout", "2")
        self.assertEqual(done.returncode, 1, done.stderr)
        self.assertIn(f"error: no Ray cluster answers at {address} within 2 s (--connect-timeout)", done.stderr)

    def test_an_address_that_answers_but_is_not_ray_is_given_up(self):
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        with tempfile.TemporaryDirectory(prefix="ravel-ray-test-") as d:
            store = os.path.join(d, "store")
            sh("ravel-load", "demo", "--rows", "1000", "--dir", os.path.join(d, "demo"), "--store", store)
            try:
                done = self.ravel_ray("compact", "--store", store, "--table", "hits", "--address", address,
                                      "--connect-timeout", "3")
            finally:
                listener.close()
        self.assertEqual(done.returncode, 1, done.stderr)
        self.assertIn(f"error: no Ray cluster answers at {address} within 3 s (--connect-timeout)", done.stderr)

    def test_a_steps_failure_survives_the_trip_back_from_its_task(self):
        import pickle

        from ravel_ray import JobFailed

        e = pickle.loads(pickle.dumps(JobFailed(2, "error: table \"t\" has no clustering key")))
        self.assertEqual((e.code, str(e)), (2, 'error: table "t" has no clustering key'))


if __name__ == "__main__":
    unittest.main()
