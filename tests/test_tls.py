"""dsort.tls: one deployment's certificate set, and the client Security made from it."""

import shutil
import ssl

import pytest

from dsort import tls
from dsort.io import InputError

needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl command")


@needs_openssl
def test_a_set_is_made_once_and_its_certificate_verifies_against_its_ca(tmp_path):
    ca, cert, key = tls.make(tmp_path / "tls", days=2)
    assert [p.name for p in (ca, cert, key)] == list(tls.FILES)
    assert key.stat().st_mode & 0o077 == 0  # the private key: its owner's only
    ctx = ssl.create_default_context(cafile=str(ca))  # the CA loads and the pair matches
    ctx.load_cert_chain(str(cert), str(key))
    with pytest.raises(InputError, match="already there"):
        tls.make(tmp_path / "tls")
    assert tls.make(tmp_path / "tls", overwrite=True)[0] == ca
    sec = tls.security(tmp_path / "tls")
    assert sec.tls_ca_file == str(ca) and sec.tls_client_cert == str(cert) and sec.require_encryption
    assert tls.security(sec) is sec


def test_security_options_are_checked(tmp_path):
    assert tls.security() is None
    with pytest.raises(InputError, match="--days must be at least 1"):
        tls.make(tmp_path / "x", days=0)
    with pytest.raises(InputError, match="a directory made by dsort tls"):
        tls.security(tmp_path / "missing")
    with pytest.raises(InputError, match="needs --tls-ca-file"):
        tls.security(tls_cert=str(tmp_path / "c.pem"))
    (tmp_path / "ca.pem").write_text("x")
    with pytest.raises(InputError, match="--tls-cert .*no such file"):
        tls.security(tls_ca_file=str(tmp_path / "ca.pem"), tls_cert=str(tmp_path / "nope.pem"))
