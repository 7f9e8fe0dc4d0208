"""SSH signatures (PROTOCOL.sshsig) on real keys made with ``cryptography``: signing and
verifying for every supported key type, the armor, strict parsing, and loading private
keys (DSA refused, encrypted keys and their passphrase)."""

from __future__ import annotations

import base64
import hashlib
import shutil
import struct
import subprocess
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed25519, padding, rsa

from govsync import sshsig
from govsync.sshsig import PassphraseNeeded, SshsigError

MESSAGE = b"govsync-plan-review sha256:" + b"ab" * 32 + b"\n"
NAMESPACE = "govsync-plan"

# key name -> (its SSH type, the signature algorithm govsync signs with)
KINDS = {
    "ed25519": ("ssh-ed25519", "ssh-ed25519"),
    "ecdsa256": ("ecdsa-sha2-nistp256", "ecdsa-sha2-nistp256"),
    "ecdsa384": ("ecdsa-sha2-nistp384", "ecdsa-sha2-nistp384"),
    "ecdsa521": ("ecdsa-sha2-nistp521", "ecdsa-sha2-nistp521"),
    "rsa": ("ssh-rsa", "rsa-sha2-512"),
}


def generate(name: str) -> Any:
    if name == "ed25519":
        return ed25519.Ed25519PrivateKey.generate()
    if name.startswith("ecdsa"):
        curve = {"256": ec.SECP256R1(), "384": ec.SECP384R1(), "521": ec.SECP521R1()}[name[5:]]
        return ec.generate_private_key(curve)
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def keys() -> dict[str, Any]:
    return {name: generate(name) for name in KINDS}


def openssh(key: Any, passphrase: bytes | None = None) -> bytes:
    """The private key as ``ssh-keygen`` writes it (bcrypt with one round: fast)."""
    encryption: serialization.KeySerializationEncryption = serialization.NoEncryption()
    if passphrase is not None:
        encryption = (serialization.PrivateFormat.OpenSSH.encryption_builder()
                      .kdf_rounds(1).build(passphrase))
    data: bytes = key.private_bytes(serialization.Encoding.PEM,
                                    serialization.PrivateFormat.OpenSSH, encryption)
    return data


def string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def blob(*, magic: bytes = b"SSHSIG", version: int = 1, key: bytes, namespace: bytes = b"ns",
         hash_alg: bytes = b"sha512", algorithm: bytes = b"ssh-ed25519",
         value: bytes = b"\x01" * 64, inner_tail: bytes = b"", tail: bytes = b"") -> bytes:
    """A signature blob built field by field, to break one field at a time."""
    inner = string(algorithm) + string(value) + inner_tail
    return (magic + struct.pack(">I", version) + string(key) + string(namespace) + string(b"")
            + string(hash_alg) + string(inner) + tail)


# -- signing and verifying --------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(KINDS))
def test_sign_then_verify_round_trip(keys: dict[str, Any], name: str) -> None:
    key_type, algorithm = KINDS[name]
    armored = sshsig.sign(keys[name], MESSAGE, NAMESPACE)
    signature = sshsig.parse(sshsig.dearmor(armored))
    assert signature.key == sshsig.public_blob(keys[name])
    assert (signature.key_type, signature.algorithm) == (key_type, algorithm)
    assert (signature.namespace, signature.hash_alg) == (NAMESPACE, "sha512")
    assert sshsig.verify(signature, MESSAGE) is True


@pytest.mark.parametrize("name", sorted(KINDS))
def test_another_message_or_namespace_does_not_verify(keys: dict[str, Any], name: str) -> None:
    signature = sshsig.parse(sshsig.dearmor(sshsig.sign(keys[name], MESSAGE, NAMESPACE)))
    assert sshsig.verify(signature, MESSAGE + b"x") is False
    assert sshsig.verify(signature, MESSAGE[:-1]) is False
    assert sshsig.verify(replace(signature, namespace="git"), MESSAGE) is False
    assert sshsig.verify(replace(signature, hash_alg="sha256"), MESSAGE) is False


def test_sha256_signatures_verify(keys: dict[str, Any]) -> None:
    armored = sshsig.sign(keys["ed25519"], MESSAGE, NAMESPACE, hash_alg="sha256")
    signature = sshsig.parse(sshsig.dearmor(armored))
    assert signature.hash_alg == "sha256"
    assert sshsig.verify(signature, MESSAGE)
    assert not sshsig.verify(replace(signature, hash_alg="sha512"), MESSAGE)


def test_a_signature_moved_onto_another_key_does_not_verify(keys: dict[str, Any]) -> None:
    mine = sshsig.parse(sshsig.dearmor(sshsig.sign(keys["ed25519"], MESSAGE, NAMESPACE)))
    other = ed25519.Ed25519PrivateKey.generate()
    assert not sshsig.verify(replace(mine, key=sshsig.public_blob(other)), MESSAGE)


def test_a_signature_algorithm_that_is_not_the_keys_does_not_verify(
        keys: dict[str, Any]) -> None:
    ed = sshsig.parse(sshsig.dearmor(sshsig.sign(keys["ed25519"], MESSAGE, NAMESPACE)))
    assert not sshsig.verify(replace(ed, algorithm="ssh-rsa"), MESSAGE)
    ec256 = sshsig.parse(sshsig.dearmor(sshsig.sign(keys["ecdsa256"], MESSAGE, NAMESPACE)))
    assert not sshsig.verify(replace(ec256, algorithm="ecdsa-sha2-nistp384"), MESSAGE)


def mpints(value: bytes) -> list[bytes]:
    """The SSH strings an ECDSA signature value holds (r and s)."""
    out, at = [], 0
    while at < len(value):
        (size,) = struct.unpack_from(">I", value, at)
        out.append(value[at + 4:at + 4 + size])
        at += 4 + size
    return out


def test_ecdsa_values_are_ssh_mpints(keys: dict[str, Any]) -> None:
    # r and s are positive: a leading zero byte exactly when the top bit is set (ssh-keygen
    # refuses anything else); about one signature in two has such a value
    padded = 0
    for _ in range(40):
        signature = sshsig.parse(sshsig.dearmor(sshsig.sign(keys["ecdsa256"], MESSAGE,
                                                            NAMESPACE)))
        values = mpints(signature.value)
        assert len(values) == 2
        for value in values:
            assert not value[0] & 0x80
            if value[0] == 0:
                assert value[1] & 0x80
                padded += 1
    assert padded > 0


def test_rsa_sha1_signatures_are_refused_not_verified(keys: dict[str, Any]) -> None:
    key = keys["rsa"]
    value = key.sign(sshsig.signed_data(NAMESPACE, "sha512", MESSAGE), padding.PKCS1v15(),
                     hashes.SHA1())  # the point: SHA-1 is refused
    signature = sshsig.parse(blob(key=sshsig.public_blob(key), namespace=NAMESPACE.encode(),
                                  algorithm=b"ssh-rsa", value=value))
    with pytest.raises(SshsigError, match=r"RSA signature algorithm ssh-rsa is not supported "
                                          r"\(SHA-1\): sign with rsa-sha2-512"):
        sshsig.verify(signature, MESSAGE)


def test_rsa_sha2_256_signatures_verify(keys: dict[str, Any]) -> None:
    key = keys["rsa"]
    value = key.sign(sshsig.signed_data(NAMESPACE, "sha512", MESSAGE), padding.PKCS1v15(),
                     hashes.SHA256())
    signature = sshsig.parse(blob(key=sshsig.public_blob(key), namespace=NAMESPACE.encode(),
                                  algorithm=b"rsa-sha2-256", value=value))
    assert sshsig.verify(signature, MESSAGE)
    assert not sshsig.verify(signature, MESSAGE + b"x")


def test_fingerprint_is_ssh_keygens(keys: dict[str, Any]) -> None:
    public = sshsig.public_blob(keys["ed25519"])
    expected = base64.b64encode(hashlib.sha256(public).digest()).decode().rstrip("=")
    assert sshsig.fingerprint(public) == "SHA256:" + expected
    assert len(expected) == 43


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen is not installed")
def test_ssh_keygens_ed25519_signatures_verify(tmp_path: Path) -> None:
    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    made = subprocess.run(["ssh-keygen", "-Y", "sign", "-n", NAMESPACE, "-f", str(key)],
                          input=MESSAGE, capture_output=True, check=True).stdout.decode()
    signature = sshsig.parse(sshsig.dearmor(made))
    kind, b64 = (tmp_path / "key.pub").read_text().split()[:2]
    assert (signature.key_type, signature.key) == (kind, base64.b64decode(b64))
    assert sshsig.verify(signature, MESSAGE)
    assert not sshsig.verify(signature, MESSAGE + b"x")


# -- armor ----------------------------------------------------------------------------


def test_armor_is_ssh_keygens_layout_and_round_trips() -> None:
    data = bytes(range(256)) * 2
    text = sshsig.armor(data)
    lines = text.splitlines()
    assert lines[0] == "-----BEGIN SSH SIGNATURE-----"
    assert lines[-1] == "-----END SSH SIGNATURE-----"
    assert text.endswith("-----\n")
    assert all(len(line) == 70 for line in lines[1:-2]) and 0 < len(lines[-2]) <= 70
    assert sshsig.dearmor(text) == data
    # surrounding blank lines and indentation are tolerated
    assert sshsig.dearmor("\n\n" + text.replace("\n", "\n  ") + "\n") == data


@pytest.mark.parametrize(("text", "why"), [
    ("", "does not start with -----BEGIN SSH SIGNATURE-----"),
    ("AAAA\n-----END SSH SIGNATURE-----\n", "does not start with"),
    ("-----BEGIN SSH SIGNATURE-----\nAAAA\n", r"has no -----END SSH SIGNATURE----- line \(truncated\)"),
    ("-----BEGIN SSH SIGNATURE-----\nAA*A\n-----END SSH SIGNATURE-----\n", "base64 is malformed"),
    ("-----BEGIN SSH SIGNATURE-----\nAAA\n-----END SSH SIGNATURE-----\n", "base64 is malformed"),
])
def test_dearmor_errors(text: str, why: str) -> None:
    with pytest.raises(SshsigError, match=why):
        sshsig.dearmor(text)


# -- parsing ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def public(keys: dict[str, Any]) -> bytes:
    return sshsig.public_blob(keys["ed25519"])


def test_parse_reads_every_field(public: bytes) -> None:
    signature = sshsig.parse(blob(key=public, namespace=b"git", hash_alg=b"sha256",
                                  value=b"v" * 64))
    assert signature == sshsig.Signature(public, "git", "sha256", "ssh-ed25519", b"v" * 64)
    assert signature.fingerprint == sshsig.fingerprint(public)


@pytest.mark.parametrize(("fields", "why"), [
    ({"magic": b"SSHSIH"}, r"not an SSH signature \(no SSHSIG magic\)"),
    ({"version": 2}, "SSH signature version 2: only version 1 exists"),
    ({"tail": b"\x00"}, "trailing data after the signature"),
    ({"inner_tail": b"\x00"}, "trailing data in the signature"),
    ({"hash_alg": b"sha1"}, "hash algorithm 'sha1' is not sha256 or sha512"),
    ({"namespace": "prüfung".encode()}, "a name that is not ASCII"),
    ({"key": b"\x00\x00"}, "truncated"),
])
def test_parse_errors(public: bytes, fields: dict[str, Any], why: str) -> None:
    with pytest.raises(SshsigError, match=why):
        sshsig.parse(blob(**{"key": public, **fields}))


@pytest.mark.parametrize("cut", [0, 5, 6, 9, 20, 60])
def test_a_truncated_blob_is_refused(public: bytes, cut: int) -> None:
    with pytest.raises(SshsigError, match="truncated|no SSHSIG magic"):
        sshsig.parse(blob(key=public)[:cut])


def test_key_type_and_public_key_errors(public: bytes) -> None:
    assert sshsig.key_type(public) == "ssh-ed25519"
    with pytest.raises(SshsigError, match="truncated"):
        sshsig.key_type(b"\x00\x00\x00\x09ssh")
    with pytest.raises(SshsigError, match="key type ssh-dss is not supported"):
        sshsig.public_key(string(b"ssh-dss") + string(b"\x01"))
    with pytest.raises(SshsigError, match="a malformed ssh-ed25519 key"):
        sshsig.public_key(string(b"ssh-ed25519") + string(b"short"))


# -- private keys -------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(KINDS))
def test_private_keys_load_and_name_their_type(keys: dict[str, Any], name: str) -> None:
    data = openssh(keys[name])
    assert sshsig.private_key_type(data) == KINDS[name][0]
    loaded = sshsig.load_private_key(data)
    assert sshsig.public_blob(loaded) == sshsig.public_blob(keys[name])


def test_private_key_type_of_other_formats_is_none(keys: dict[str, Any]) -> None:
    pkcs8 = keys["ed25519"].private_bytes(serialization.Encoding.PEM,
                                          serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption())
    assert sshsig.private_key_type(pkcs8) is None
    assert sshsig.private_key_type(b"") is None
    begin, end = b"-----BEGIN OPENSSH PRIVATE KEY-----", b"-----END OPENSSH PRIVATE KEY-----"
    assert sshsig.private_key_type(begin + b"\n" + base64.b64encode(b"x" * 40) + b"\n"
                                   + end) is None
    with pytest.raises(SshsigError, match=r"not an OpenSSH private key \(as ssh-keygen writes"):
        sshsig.load_private_key(pkcs8)
    with pytest.raises(SshsigError, match="not an OpenSSH private key"):
        sshsig.load_private_key(b"ssh-ed25519 AAAA me@host\n")


@pytest.fixture(scope="module")
def dsa_key() -> bytes:
    with warnings.catch_warnings():  # cryptography warns that DSA is deprecated
        warnings.simplefilter("ignore")
        key = dsa.generate_private_key(key_size=1024)
        data: bytes = key.private_bytes(serialization.Encoding.PEM,
                                        serialization.PrivateFormat.OpenSSH,
                                        serialization.NoEncryption())
    return data


def test_a_dsa_key_is_refused_in_govsyncs_words(dsa_key: bytes) -> None:
    assert sshsig.private_key_type(dsa_key) == "ssh-dss"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and no library warning escapes
        with pytest.raises(SshsigError) as info:
            sshsig.load_private_key(dsa_key)
    assert str(info.value) == ("key type ssh-dss is not supported (DSA keys are deprecated): "
                               "use an ed25519, ecdsa or rsa key")
    assert not isinstance(info.value, PassphraseNeeded)


def test_an_encrypted_key_needs_its_passphrase(keys: dict[str, Any]) -> None:
    data = openssh(keys["ed25519"], b"correct horse")
    assert sshsig.private_key_type(data) == "ssh-ed25519"  # readable without it
    with pytest.raises(PassphraseNeeded):
        sshsig.load_private_key(data)
    loaded = sshsig.load_private_key(data, b"correct horse")
    assert sshsig.public_blob(loaded) == sshsig.public_blob(keys["ed25519"])
    armored = sshsig.sign(loaded, MESSAGE, NAMESPACE)
    assert sshsig.verify(sshsig.parse(sshsig.dearmor(armored)), MESSAGE)


@pytest.mark.parametrize("name", ["ed25519", "rsa"])
def test_a_wrong_passphrase_is_passphrase_needed(keys: dict[str, Any], name: str) -> None:
    data = openssh(keys[name], b"correct horse")
    with pytest.raises(PassphraseNeeded, match="wrong passphrase"):
        sshsig.load_private_key(data, b"battery staple")


def test_a_passphrase_for_a_plain_key_is_refused(keys: dict[str, Any]) -> None:
    with pytest.raises(SshsigError) as info:
        sshsig.load_private_key(openssh(keys["ed25519"]), b"unneeded")
    assert str(info.value) == "the key is not encrypted: give no passphrase"
    assert not isinstance(info.value, PassphraseNeeded)


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen is not installed")
def test_an_encrypted_key_of_ssh_keygen_loads(tmp_path: Path) -> None:
    path = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ecdsa", "-a", "1", "-N", "pass phrase", "-f",
                    str(path)], check=True)
    data = path.read_bytes()
    assert sshsig.private_key_type(data) == "ecdsa-sha2-nistp256"
    with pytest.raises(PassphraseNeeded):
        sshsig.load_private_key(data)
    loaded = sshsig.load_private_key(data, b"pass phrase")
    kind, b64 = (tmp_path / "key.pub").read_text().split()[:2]
    assert sshsig.public_blob(loaded) == base64.b64decode(b64)


def test_signing_with_a_dsa_key_is_refused() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        key = dsa.generate_private_key(key_size=1024)
        with pytest.raises(SshsigError, match="key type ssh-dss is not supported for signing"):
            sshsig.sign(key, MESSAGE, NAMESPACE)
