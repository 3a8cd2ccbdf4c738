"""Hosts that share nothing, on one machine: a scheduler and two CPU workers, each in a network
namespace of its own (reached only over its veth link to a bridge in a namespace of the test's)
and a mount namespace of its own (its own temporary directory and /dev/shm: no run file, no shared
memory seen by another). Arrays and frames, in memory and external, and set_index, sorted there equal
NumPy's and pandas' stable sorts; a whole worker host lost (every process of its namespace
killed) while the merges of an external frame sort run still gives the right frame.

Needs root and iproute2 (``ip netns``), as the CI machine has; skipped elsewhere, saying why.
Everything the test makes (namespaces, links, processes) it removes itself, by name and by PID.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed")

HERE = Path(__file__).resolve().parent
SUBNET = "10.213.7"  # inside the test's own namespaces only: no other host sees these addresses
PORT = 8786


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def _can_make_namespaces() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if not shutil.which("ip") or not shutil.which("unshare"):
        return "needs iproute2's ip and util-linux's unshare"
    probe = f"dsort-probe-{os.getpid()}"
    if _ip("netns", "add", probe, check=False).returncode != 0:
        return "this machine refuses network namespaces"
    _ip("netns", "del", probe, check=False)
    return None


class Hosts:
    """A bridge namespace and one namespace a host, each host with address SUBNET.(i + 1)."""

    def __init__(self, names, scratch: Path):
        self.scratch = scratch  # every host's own temporary directory (an empty mount point here)
        scratch.mkdir(parents=True, exist_ok=True)
        self.tag = f"ds{os.getpid()}"
        self.bridge = f"{self.tag}-br"
        self.hosts = {name: f"{self.tag}-{name}" for name in names}
        self.procs: list[subprocess.Popen] = []
        try:
            self._link()
        except BaseException:
            self.close()  # what was made before the failure goes too
            raise

    def _link(self):
        _ip("netns", "add", self.bridge)
        _ip("-n", self.bridge, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.bridge, "link", "set", "br0", "up")
        for i, ns in enumerate(self.hosts.values()):
            _ip("netns", "add", ns)
            _ip("-n", self.bridge, "link", "add", f"v{i}", "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("-n", self.bridge, "link", "set", f"v{i}", "master", "br0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "addr", "add", f"{SUBNET}.{i + 1}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")

    def address(self, name) -> str:
        return f"{SUBNET}.{list(self.hosts).index(name) + 1}"

    def start(self, name, argv, log: Path, **popen) -> subprocess.Popen:
        """``argv`` on host ``name``: its network namespace, and a mount namespace of its own with
        a private /dev/shm and a private temporary directory: a tmpfs of its own at ``self.scratch``,
        the same path on every host (as /tmp is), ``TMPDIR`` there. Not /tmp itself: the
        project and its Python may lie under it (a clone in /tmp)."""
        private = 'mount -t tmpfs tmpfs "$TMPDIR" && mount -t tmpfs tmpfs /dev/shm && exec "$@"'
        cmd = ["ip", "netns", "exec", self.hosts[name], "unshare", "-m", "--propagation", "private", "sh", "-c", private, "sh", *argv]
        popen["env"] = dict(popen.get("env") or os.environ, TMPDIR=str(self.scratch))
        out = open(log, "w")
        p = subprocess.Popen(cmd, stdout=popen.pop("stdout", out), stderr=out, start_new_session=True, **popen)
        self.procs.append(p)
        return p

    def kill_host(self, name) -> list[int]:
        """SIGKILL every process in host ``name``'s network namespace: the host is gone."""
        pids = [int(p) for p in _ip("netns", "pids", self.hosts[name]).stdout.split()]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return pids

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            p.wait(10)
        for ns in self.hosts.values():
            self.kill_host_ns(ns)
            _ip("netns", "del", ns, check=False)
        _ip("netns", "del", self.bridge, check=False)

    @staticmethod
    def kill_host_ns(ns):
        for pid in _ip("netns", "pids", ns, check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass


def _wait_for_port(hosts, name, timeout=60):
    """Until something listens on host ``name``'s PORT, seen from inside that host."""
    probe = f"import socket; socket.create_connection(('{hosts.address(name)}', {PORT}), 1).close()"
    deadline = time.time() + timeout
    while time.time() < deadline:
        if subprocess.run(["ip", "netns", "exec", hosts.hosts[name], sys.executable, "-c", probe], capture_output=True).returncode == 0:
            return
        time.sleep(0.3)
    raise TimeoutError(f"no scheduler on {hosts.address(name)}:{PORT} after {timeout} s")


def test_sorts_across_hosts_that_share_nothing(tmp_path):
    why = _can_make_namespaces()
    if why:
        pytest.skip(why)
    hosts = Hosts(["sched", "w1", "w2"], tmp_path / "scratch")
    try:
        py = sys.executable
        env = dict(os.environ, PYTHONPATH=str(HERE.parent), DASK_DISTRIBUTED__WORKER__DAEMON="False")
        sched = hosts.address("sched")
        hosts.start(
            "sched",
            [py, "-m", "distributed.cli.dask_scheduler", "--host", sched, "--port", str(PORT), "--no-dashboard"],
            tmp_path / "scheduler.log",
            env=env,
        )
        _wait_for_port(hosts, "sched")
        for w in ("w1", "w2"):
            hosts.start(
                w,
                [
                    py,
                    "-m",
                    "distributed.cli.dask_worker",
                    f"tcp://{sched}:{PORT}",
                    "--host",
                    hosts.address(w),
                    "--nthreads",
                    "2",
                    "--no-nanny",
                    "--no-dashboard",
                    "--local-directory",
                    str(hosts.scratch),
                    "--memory-limit",
                    "3GB",
                ],
                tmp_path / f"{w}.log",
                env=env,
            )
        client = hosts.start(
            "sched",
            [py, str(HERE / "hosts_client.py"), f"tcp://{sched}:{PORT}"],
            tmp_path / "client.err",
            env=env,
            stdout=subprocess.PIPE,
            stdin=subprocess.PIPE,
            text=True,
        )
        lines, killed = [], []
        deadline = time.time() + 400
        for line in client.stdout:
            lines.append(line.strip())
            if line.strip() == "KILL":
                killed = hosts.kill_host("w2")
                client.stdin.write("killed\n")
                client.stdin.flush()
            if time.time() > deadline:
                break
        rc = client.wait(30)
    finally:
        hosts.close()
    said = "\n".join(lines) + "\n" + (tmp_path / "client.err").read_text()[-3000:]
    cases = dict(x.split(" ", 1) for x in lines if " " in x)
    assert set(cases) == {"array-multiway", "array-external", "frame-memory", "frame-external", "set_index", "host-lost"}, said
    assert killed, "no process of the lost host was killed"
    assert all(v == "ok" for v in cases.values()) and rc == 0, said
