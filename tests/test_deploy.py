"""deploy/ without Docker: deploy/README.md's session (``docker compose ... run --rm``, ``up``,
``down``) carried out with the compose file's own commands as local processes, TLS included; the
TLS failures; ``dsort tls``; and the scripts in deploy/, as they are.

Mapped onto this machine: the compose volumes (``/data``, ``/spill``, ``/tls``) onto temporary
directories, the image's ``/src`` onto this checkout, the host ``scheduler``, ``0.0.0.0`` and the
ports onto free ports on 127.0.0.1, ``${VAR:-default}`` onto the default, ``dask cuda worker`` onto
``dask worker`` where no GPU is used, and the README's record count onto a small one. Every
process started here runs in its own process group and is stopped by it."""

import os
import re
import shlex
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import HAS_GPU

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
BIN = Path(sys.executable).parent


def _command(name):
    """The installed command ``name``, else its module (an install on PYTHONPATH, as on the device)."""
    script = BIN / name
    return [str(script)] if script.exists() else [sys.executable, "-m", name]


RECORDS = "20000"  # instead of the README's 1e8


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def readme_session():
    """deploy/README.md's first bash block as ``(verb, words)``: continuation lines joined, comments
    dropped, each ``docker compose -f FILE`` prefix removed."""
    block = (DEPLOY / "README.md").read_text().split("```bash\n", 1)[1].split("```", 1)[0].replace("\\\n", " ")
    steps = []
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            assert words[:4] == ["docker", "compose", "-f", "deploy/docker-compose.yml"], line
            steps.append((words[4], words[5:]))
    return steps


class Deployment:
    """The compose file's services as local processes under ``tmp``."""

    def __init__(self, tmp: Path, gpu: bool):
        self.tmp, self.gpu = tmp, gpu
        self.services = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())["services"]
        workdir = re.search(r"^WORKDIR (\S+)", (DEPLOY / "Dockerfile").read_text(), re.M).group(1)  # where the image has the source
        self.paths = {workdir: ROOT}
        for service in self.services.values():
            for volume in service.get("volumes", []):
                name, inside = volume.split(":")[:2]
                self.paths[inside] = tmp / name
                (tmp / name).mkdir(exist_ok=True)
        self.port, self.dashboard = _free_port(), _free_port()
        self.address = f"tls://127.0.0.1:{self.port}"
        self.procs = []

    def word(self, w: str) -> str:
        w = re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", w)
        w = {"0.0.0.0": "127.0.0.1", "8786": self.port, ":8787": f"127.0.0.1:{self.dashboard}"}.get(w, w)
        w = w.replace("scheduler:8786", f"127.0.0.1:{self.port}")
        for inside, here in self.paths.items():
            if w == inside or w.startswith(inside + "/"):
                return str(here) + w[len(inside) :]
        return w

    def argv(self, service: str, args=()) -> list:
        words = [self.word(w) for w in (list(args) or self.services[service]["command"])]
        if words[:3] == ["dask", "cuda", "worker"] and not self.gpu:
            words = ["dask", "worker"] + words[3:]
            i = words.index("--device-memory-limit")
            del words[i : i + 2]
        if words[:3] == ["dsort", "gen", "records"]:
            words[3] = RECORDS
        if words[0] == "python":
            return [sys.executable, *words[1:]]
        if words[0] in ("dask", "dsort"):
            return [*_command(words[0]), *words[1:]]
        return words

    def run(self, service: str, args=(), timeout=120):
        """``docker compose run --rm SERVICE [ARGS]``: the command to completion."""
        return subprocess.run(self.argv(service, args), cwd=self.tmp, capture_output=True, text=True, timeout=timeout)

    def up(self, *words):
        """``docker compose up -d [--scale NAME=N] NAMES``: each service's command in the background
        (N of them where scaled), its output in ``tmp/NAME-I.log``; then wait (bounded) for the
        workers to join."""
        from distributed import Client

        from dsort.tls import security

        scale = {}
        for a, b in zip(words, words[1:]):
            if a == "--scale":
                name, n = b.split("=")
                scale[name] = int(n)
        names = [w for i, w in enumerate(words) if not w.startswith("-") and (i == 0 or words[i - 1] != "--scale")]
        for name in names:
            for i in range(scale.get(name, 1)):
                log = open(self.tmp / f"{name}-{i}.log", "w")
                self.procs.append(
                    subprocess.Popen(self.argv(name), cwd=self.tmp, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
                )
                log.close()
        self.workers = scale.get("worker", 1)
        if self.gpu:  # each worker service is one dask-cuda worker per visible GPU
            from dsort.engine.device import gpu_count

            self.workers *= gpu_count()
        try:
            with Client(self.address, security=security(self.paths["/tls"]), timeout="60s") as c:
                c.wait_for_workers(self.workers, timeout=60)
        except Exception as e:
            logs = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(self.tmp.glob("*.log")))
            raise AssertionError(f"the deployment did not come up ({e!r}):\n{logs}") from None

    def down(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
        self.procs = []


def _gpu_param():
    import importlib.util

    no = not HAS_GPU or importlib.util.find_spec("dask_cuda") is None
    return pytest.param("gpu", marks=[pytest.mark.gpu, pytest.mark.skipif(no, reason="no CUDA device or no dask-cuda")])


@pytest.fixture(scope="module", params=[pytest.param("cpu"), _gpu_param()])
def deployment(request, tmp_path_factory):
    """The README's session up to the cluster running (certificates, scheduler, worker); the rest
    of it is the test's. ``down`` however the tests end."""
    d = Deployment(tmp_path_factory.mktemp(f"deploy-{request.param}"), gpu=request.param == "gpu")
    steps = readme_session()
    try:
        up = next(i for i, (verb, _) in enumerate(steps) if verb == "up")
        for verb, words in steps[:up]:
            assert verb == "run" and words[0] == "--rm", words
            done = d.run(words[1], words[2:])
            assert done.returncode == 0, done.stdout + done.stderr
        d.up(*steps[up][1])
        d.rest = steps[up + 1 :]
        yield d
    finally:
        d.down()


def test_the_readme_session_on_local_processes(deployment):
    """gen, sort and check (the command line) and file_sort.py (the Python API) on the TLS
    cluster, as deploy/README.md has them; then ``down`` stops every process."""
    ran = []
    for verb, words in deployment.rest:
        if verb == "down":
            continue  # the fixture's teardown
        assert verb == "run" and words[:2] == ["--rm", "client"], words
        done = deployment.run("client", words[2:])
        out = done.stdout + done.stderr
        assert done.returncode == 0, f"{shlex.join(words)}:\n{out}"
        ran.append(words[2:4])
        if words[3] == "sort":
            assert f"the cluster at {deployment.address}: {deployment.workers} workers" in out and "OK: wrote" in out, out
            ins, outs = (line.split() for line in out.splitlines() if line.startswith(("input ", "output ")))
            assert ins[1:] == outs[1:] and ins[1] == f"{int(RECORDS):,}", out
        if words[3] == "check":
            assert "SUCCESS - all records are in order" in out and f"Records: {int(RECORDS):,}" in out, out
        if words[2] == "python":
            assert "OK: " in out and "sorted and checked" in out, out
    assert ran == [["dsort", "gen"], ["dsort", "sort"], ["dsort", "check"], ["python", "/src/deploy/file_sort.py"]]
    assert "down" in [v for v, _ in deployment.rest]


def test_tls_without_the_right_certificates_fails_in_one_line(deployment, tmp_path):
    """No certificates: one line, exit 2 (the real command, so a traceback would show). Another
    deployment's set: refused by TLS, one line. Nothing is written at OUTPUT either way."""
    src, out = deployment.tmp / "tls-in.bin", tmp_path / "out.bin"  # its own input: tests may run apart (xdist)
    src.write_bytes(os.urandom(100 * 1000))
    dsort = _command("dsort")
    done = subprocess.run([*dsort, "sort", src, out, "--scheduler", deployment.address], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "--tls-ca-file" in done.stderr and "Traceback" not in done.stderr, done.stderr
    subprocess.run([*dsort, "tls", tmp_path / "other"], check=True, capture_output=True, timeout=60)
    other = [f"--tls-ca-file={tmp_path}/other/ca.pem", f"--tls-cert={tmp_path}/other/cert.pem", f"--tls-key={tmp_path}/other/key.pem"]
    for command in (["sort", src, out], ["check", src]):
        done = subprocess.run([*dsort, *command, "--scheduler", deployment.address, *other], capture_output=True, text=True, timeout=90)
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.count("\n") == 1 and "TLS certificate does not match" in done.stderr, done.stderr
    assert not out.exists() and os.listdir(tmp_path) == ["other"]


def test_tls_options_are_checked_before_any_work(tmp_path, capsys):
    from dsort.cli import main

    (tmp_path / "in.bin").write_bytes(bytes(1000))
    src, out, ca = str(tmp_path / "in.bin"), str(tmp_path / "out.bin"), str(tmp_path / "in.bin")
    cases = [
        (["--scheduler", "tcp://127.0.0.1:1", "--tls-ca-file", ca, "--tls-cert", ca], "for a tls:// scheduler"),
        (["--tls-ca-file", ca, "--tls-cert", ca], "give its tls:// address with --scheduler"),
        (["--scheduler", "tls://127.0.0.1:1", "--tls-ca-file", ca], "and --tls-cert"),
        (["--scheduler", "tls://127.0.0.1:1", "--tls-ca-file", ca, "--tls-cert", str(tmp_path / "none.pem")], "--tls-cert"),
    ]
    for flags, words in cases:
        assert main(["sort", src, out, *flags]) == 2
        err = capsys.readouterr().err
        assert words in err and err.count("\n") == 1, err
    assert os.listdir(tmp_path) == ["in.bin"]


def test_dsort_tls_makes_one_deployments_set(tmp_path, capsys):
    """A CA, and one certificate signed by it for both ends of a connection, its key 0600 and
    matching it; existing files are refused without --overwrite, replaced with it; the CA's key
    is not kept."""
    import ssl

    from dsort.cli import main

    d = tmp_path / "certs"
    assert main(["tls", str(d)]) == 0
    assert sorted(os.listdir(d)) == ["ca.pem", "cert.pem", "key.pem"]
    assert stat.S_IMODE((d / "key.pem").stat().st_mode) == 0o600
    verify = subprocess.run(
        ["openssl", "verify", "-purpose", "sslclient", "-CAfile", d / "ca.pem", d / "cert.pem"], capture_output=True, text=True
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    ssl.create_default_context(cafile=d / "ca.pem").load_cert_chain(d / "cert.pem", d / "key.pem")  # the key is the certificate's
    ca = (d / "ca.pem").read_bytes()
    capsys.readouterr()
    assert main(["tls", str(d)]) == 2
    assert "--overwrite" in capsys.readouterr().err and (d / "ca.pem").read_bytes() == ca
    assert main(["tls", str(d), "--overwrite"]) == 0 and (d / "ca.pem").read_bytes() != ca
    assert sorted(os.listdir(d)) == ["ca.pem", "cert.pem", "key.pem"]


def test_the_compose_file_keeps_the_scheduler_private_and_on_tls():
    """Only the dashboard is published, on loopback; the scheduler and the workers speak TLS with
    the set on the tls volume, which only the certs service may write; the workers get the GPUs and
    see /data like the client."""
    services = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())["services"]
    published = [p for s in services.values() for p in s.get("ports", [])]
    assert published and all(p.startswith("127.0.0.1:") for p in published) and not any("8786" in p for p in published)
    for name in ("scheduler", "worker"):
        command = services[name]["command"]
        assert [command[command.index(o) + 1] for o in ("--tls-ca-file", "--tls-cert", "--tls-key")] == [
            "/tls/ca.pem",
            "/tls/cert.pem",
            "/tls/key.pem",
        ]
    assert services["scheduler"]["command"][services["scheduler"]["command"].index("--protocol") + 1] == "tls"
    assert services["worker"]["command"][:4] == ["dask", "cuda", "worker", "tls://scheduler:8786"]
    assert services["worker"]["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]
    assert services["certs"]["command"] == ["dsort", "tls", "/tls"] and "tls:/tls" in services["certs"]["volumes"]
    for name in ("scheduler", "worker", "client"):
        assert "data:/data" in services[name]["volumes"] and "tls:/tls:ro" in services[name]["volumes"], name


def test_the_image_installs_with_the_readmes_line():
    line = re.search(r'pip install (-e "\.\[gpu[^"]*\]")', (ROOT / "README.md").read_text()).group(1)
    assert f"RUN pip install {line}\n" in (DEPLOY / "Dockerfile").read_text()


@pytest.mark.parametrize("script,args", [("array_sort.py", ["300000"]), ("dataframe_sort.py", ["100000"]), ("file_sort.py", ["-n", "1e5"])])
def test_the_scripts_run_as_they_are(script, args, tmp_path):
    done = subprocess.run([sys.executable, DEPLOY / script, *args], cwd=tmp_path, capture_output=True, text=True, timeout=180)
    out = done.stdout + done.stderr
    assert done.returncode == 0 and "\nOK: " in done.stdout, out
    if not HAS_GPU:
        assert "a LocalCluster of CPU workers instead of LocalCUDACluster" in done.stdout, out
    assert os.listdir(tmp_path) == [], "the script left files behind"
