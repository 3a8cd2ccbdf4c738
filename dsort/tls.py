"""TLS for one deployment: the certificate set (:func:`make`, the ``dsort tls DIR`` command) and
the :class:`distributed.security.Security` a client connects with (:func:`security`).

dask's TLS: every process (scheduler, workers, clients) presents a certificate, and accepts a
peer only if the peer's certificate is signed by the CA it was given; host names are not checked.
:func:`make` writes a fresh CA certificate (``ca.pem``) and one certificate (``cert.pem``) with
its key (``key.pem``, mode 0600) signed by it, which every process of the deployment uses. The
CA's own key is thrown away once it has signed, so nothing else can ever join: a new deployment
gets a new set. Made by the ``openssl`` command: the ``cryptography`` package is not among
distributed's dependencies.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path

from .core.errors import InputError

FILES = ("ca.pem", "cert.pem", "key.pem")
_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
_LEAF = (
    "basicConstraints=CA:FALSE\n"
    "keyUsage=digitalSignature,keyEncipherment\n"
    "extendedKeyUsage=serverAuth,clientAuth\n"
)


def make(directory, *, days: int = 365, overwrite: bool = False) -> list[Path]:
    """Write ``ca.pem``, ``cert.pem`` and ``key.pem`` for one deployment into ``directory`` (made
    if missing), valid for ``days``; existing files are refused unless ``overwrite``. Returns the
    paths."""
    d = Path(directory)
    paths = [d / name for name in FILES]
    there = [str(p) for p in paths if os.path.lexists(p)]
    if there and not overwrite:
        raise InputError(
            f"{', '.join(there)} already there; pass --overwrite to replace this deployment's "
            "certificates"
        )
    if days < 1:
        raise InputError(f"--days must be at least 1, got {days}")
    openssl = shutil.which("openssl")
    if openssl is None:
        raise InputError(
            "making certificates needs the openssl command (e.g. apt-get install openssl)"
        )
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"{d} cannot be made: {e.strerror}") from None
    # 0700; beside DIR, so the files move in by rename
    tmp = Path(tempfile.mkdtemp(prefix=".dsort-tls-", dir=d))
    try:
        (tmp / "leaf.cnf").write_text(_LEAF)
        for cmd in (
            [
                "req",
                "-x509",
                *_EC,
                "-keyout",
                "ca-key.pem",
                "-out",
                "ca.pem",
                "-days",
                str(days),
                "-subj",
                "/CN=dsort deployment CA",
            ],
            ["req", *_EC, "-keyout", "key.pem", "-out", "cert.csr", "-subj", "/CN=dsort"],
            [
                "x509",
                "-req",
                "-in",
                "cert.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca-key.pem",
                "-set_serial",
                f"0x{secrets.token_hex(16)}",
                "-days",
                str(days),
                "-extfile",
                "leaf.cnf",
                "-out",
                "cert.pem",
            ],
        ):
            done = subprocess.run([openssl, *cmd], cwd=tmp, capture_output=True, text=True)
            if done.returncode:
                raise InputError(
                    f"openssl {cmd[0]} failed: "
                    f"{(done.stderr.strip().splitlines() or ['no message'])[-1]}"
                )
        for name, p in zip(FILES, paths):
            os.chmod(tmp / name, 0o600 if name == "key.pem" else 0o644)
            os.replace(tmp / name, p)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # the CA's key with it
    return paths


def security(value=None, *, tls_ca_file=None, tls_cert=None, tls_key=None):
    """The :class:`distributed.security.Security` for a client of a TLS cluster, or None (dask's
    configuration decides). ``value``: a ``Security`` (returned as is) or a directory holding the
    files :func:`make` writes; or else dask's options by name: ``tls_ca_file`` (the deployment's
    CA), ``tls_cert`` and ``tls_key`` (this process's certificate and key; the key may be inside
    the certificate's file). Missing files are an :class:`InputError`."""
    if value is None and not (tls_ca_file or tls_cert or tls_key):
        return None  # (without importing distributed: the embedded sort never needs it)
    from distributed.security import Security

    if isinstance(value, Security):
        return value
    if value is not None:
        d = Path(value)
        if not d.is_dir():
            raise InputError(
                f"security={value!r}: give a distributed Security or a directory made by dsort tls"
            )
        tls_ca_file, tls_cert, tls_key = (d / name for name in FILES)
    given = {"--tls-ca-file": tls_ca_file, "--tls-cert": tls_cert, "--tls-key": tls_key}
    if not any(given.values()):
        return None
    if not (tls_ca_file and tls_cert):
        raise InputError(
            "TLS needs --tls-ca-file (the deployment's CA) and --tls-cert (with --tls-key unless "
            "the key is in it)"
        )
    for option, path in given.items():
        if path and not os.path.isfile(path):
            raise InputError(f"{option} {path}: no such file")
    return Security(
        tls_ca_file=str(tls_ca_file),
        tls_client_cert=str(tls_cert),
        tls_client_key=str(tls_key) if tls_key else None,
        require_encryption=True,
    )
