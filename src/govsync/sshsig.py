"""SSH signatures (OpenSSH's PROTOCOL.sshsig), as ``ssh-keygen -Y sign`` makes
them and git verifies signed commits with: signing, verifying, armor.

A signature is an armored blob::

    -----BEGIN SSH SIGNATURE-----
    base64, 70 characters a line
    -----END SSH SIGNATURE-----

of ``"SSHSIG" uint32(1) string(public key) string(namespace) string(reserved)
string(hash_alg) string(signature)``, where the signature is the key's
signature over ``"SSHSIG" string(namespace) string(reserved) string(hash_alg)
string(H(message))``.  Keys: ssh-ed25519, ecdsa-sha2-nistp256/384/521 and
ssh-rsa (with rsa-sha2-256/512, never SHA-1).  Security keys (sk-*) and
certificates are refused as unsupported.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
import warnings
from dataclasses import dataclass
from typing import Any

MAGIC = b"SSHSIG"
VERSION = 1
BEGIN = "-----BEGIN SSH SIGNATURE-----"
END = "-----END SSH SIGNATURE-----"
HASHES = {"sha256": hashlib.sha256, "sha512": hashlib.sha512}
KEY_TYPES = ("ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
             "ssh-rsa")


class SshsigError(ValueError):
    """A signature, key or armor that is malformed or unsupported (the message says which)."""


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def u32(self) -> int:
        if self.at + 4 > len(self.data):
            raise SshsigError("truncated")
        (value,) = struct.unpack_from(">I", self.data, self.at)
        self.at += 4
        return int(value)

    def string(self) -> bytes:
        n = self.u32()
        if self.at + n > len(self.data):
            raise SshsigError("truncated")
        value = self.data[self.at:self.at + n]
        self.at += n
        return value

    def text(self) -> str:
        try:
            return self.string().decode("ascii")
        except UnicodeDecodeError as exc:
            raise SshsigError("a name that is not ASCII") from exc

    def done(self) -> bool:
        return self.at == len(self.data)


def key_type(blob: bytes) -> str:
    """The type named at the start of a public key blob (SshsigError if malformed)."""
    return _Reader(blob).text()


def fingerprint(blob: bytes) -> str:
    """``SHA256:...`` as ssh-keygen -l shows it."""
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return f"SHA256:{digest}"


def public_key(blob: bytes) -> Any:
    """A ``cryptography`` public key from an SSH public key blob."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.serialization import load_ssh_public_key

    kind = key_type(blob)
    if kind not in KEY_TYPES:
        raise SshsigError(f"key type {kind} is not supported (use ssh-ed25519, ecdsa-sha2-* "
                          "or ssh-rsa)")
    try:
        return load_ssh_public_key(kind.encode() + b" " + base64.b64encode(blob))
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise SshsigError(f"a malformed {kind} key") from exc


@dataclass(frozen=True)
class Signature:
    """One parsed SSH signature."""

    key: bytes          # the signer's public key blob
    namespace: str
    hash_alg: str
    algorithm: str      # the signature's own format: ssh-ed25519, rsa-sha2-512...
    value: bytes

    @property
    def key_type(self) -> str:
        return key_type(self.key)

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.key)


def parse(blob: bytes) -> Signature:
    """A signature from its binary blob; SshsigError when malformed."""
    r = _Reader(blob)
    if r.data[:6] != MAGIC:
        raise SshsigError("not an SSH signature (no SSHSIG magic)")
    r.at = 6
    version = r.u32()
    if version != VERSION:
        raise SshsigError(f"SSH signature version {version}: only version 1 exists")
    key = r.string()
    namespace = r.text()
    r.string()  # reserved
    hash_alg = r.text()
    inner = _Reader(r.string())
    if not r.done():
        raise SshsigError("trailing data after the signature")
    algorithm = inner.text()
    value = inner.string()
    if not inner.done():
        raise SshsigError("trailing data in the signature")
    if hash_alg not in HASHES:
        raise SshsigError(f"hash algorithm {hash_alg!r} is not sha256 or sha512")
    key_type(key)
    return Signature(key, namespace, hash_alg, algorithm, value)


def dearmor(text: str) -> bytes:
    """The blob of one armored signature (BEGIN and END lines included)."""
    lines = [ln.strip() for ln in text.strip().splitlines()]
    if not lines or lines[0] != BEGIN:
        raise SshsigError(f"does not start with {BEGIN}")
    if lines[-1] != END:
        raise SshsigError(f"has no {END} line (truncated)")
    try:
        return base64.b64decode("".join(lines[1:-1]), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise SshsigError("its base64 is malformed") from exc


def armor(blob: bytes) -> str:
    body = base64.b64encode(blob).decode()
    lines = [body[i:i + 70] for i in range(0, len(body), 70)]
    return "\n".join([BEGIN, *lines, END]) + "\n"


def signed_data(namespace: str, hash_alg: str, message: bytes) -> bytes:
    digest = HASHES[hash_alg](message).digest()
    return (MAGIC + _string(namespace.encode()) + _string(b"") + _string(hash_alg.encode())
            + _string(digest))


def verify(signature: Signature, message: bytes) -> bool:
    """Whether ``signature`` is its key's signature over ``message`` (in its own namespace).

    SshsigError for a key or signature algorithm that is not supported."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

    key = public_key(signature.key)
    data = signed_data(signature.namespace, signature.hash_alg, message)
    kind = signature.key_type
    try:
        if isinstance(key, ed25519.Ed25519PublicKey):
            if signature.algorithm != "ssh-ed25519":
                return False
            key.verify(signature.value, data)
        elif isinstance(key, ec.EllipticCurvePublicKey):
            if signature.algorithm != kind:
                return False
            curve_hash = {256: hashes.SHA256(), 384: hashes.SHA384(), 521: hashes.SHA512()}
            r = _Reader(signature.value)
            point_r = int.from_bytes(r.string(), "big")
            point_s = int.from_bytes(r.string(), "big")
            key.verify(encode_dss_signature(point_r, point_s), data,
                       ec.ECDSA(curve_hash[key.curve.key_size]))
        elif isinstance(key, rsa.RSAPublicKey):
            rsa_hash = {"rsa-sha2-512": hashes.SHA512(), "rsa-sha2-256": hashes.SHA256()}
            if signature.algorithm not in rsa_hash:
                raise SshsigError(f"RSA signature algorithm {signature.algorithm} is not "
                                  "supported (SHA-1): sign with rsa-sha2-512")
            key.verify(signature.value, data, padding.PKCS1v15(), rsa_hash[signature.algorithm])
        else:  # pragma: no cover - public_key() admits no other type
            raise SshsigError(f"key type {kind} is not supported")
    except InvalidSignature:
        return False
    return True


def load_private_key(data: bytes, passphrase: bytes | None = None) -> Any:
    """An OpenSSH private key (``ssh-keygen`` writes them).

    SshsigError for a malformed or unsupported key; ``PassphraseNeeded`` when
    the key is encrypted and no (or a wrong) passphrase was given."""

    header = _private_header(data)
    kind = header[1] if header else None
    encrypted = header is not None and header[0] != "none"
    if kind is not None and kind not in KEY_TYPES:
        raise SshsigError(f"key type {kind[:40]} is not supported"
                          + (" (DSA keys are deprecated)" if kind == "ssh-dss" else "")
                          + ": use an ed25519, ecdsa or rsa key")
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
    from cryptography.hazmat.primitives.serialization import load_ssh_private_key

    try:
        with warnings.catch_warnings():
            # DSA keys load with a deprecation warning (printed with source paths):
            # they are refused below, in govsync's words.
            warnings.simplefilter("ignore")
            key = load_ssh_private_key(data, password=passphrase)
        if not isinstance(key, ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey
                          | rsa.RSAPrivateKey):
            raise SshsigError(f"{type(key).__name__.removesuffix('PrivateKey').lstrip('_')} "
                              "keys are not supported (ssh-dss is deprecated): use an "
                              "ed25519, ecdsa or rsa key")
        return key
    except TypeError as exc:  # encrypted, no passphrase (or one given to a plain key)
        if passphrase is None:
            raise PassphraseNeeded(str(exc)) from exc
        raise SshsigError("the key is not encrypted: give no passphrase") from exc
    except ValueError as exc:
        # An encrypted key that does not decrypt: the passphrase is wrong (the
        # library's words for it differ from release to release).
        if passphrase is not None and (encrypted or "password" in str(exc).lower()):
            raise PassphraseNeeded("wrong passphrase") from exc
        raise SshsigError("not an OpenSSH private key (as ssh-keygen writes them)") from exc
    except UnsupportedAlgorithm as exc:
        raise SshsigError(f"unsupported key type ({exc})") from exc


_PRIVATE_BEGIN = b"-----BEGIN OPENSSH PRIVATE KEY-----"
_PRIVATE_END = b"-----END OPENSSH PRIVATE KEY-----"


def private_key_type(data: bytes) -> str | None:
    """The type of an OpenSSH private key, read from its public part (readable without
    the passphrase); None when it is not in that format."""
    header = _private_header(data)
    return header[1] if header else None


def _private_header(data: bytes) -> tuple[str, str] | None:
    """(cipher, key type) of an OpenSSH private key: both readable without the
    passphrase (cipher ``none`` when the key is not encrypted); None when the data is
    not in that format."""
    start, end = data.find(_PRIVATE_BEGIN), data.find(_PRIVATE_END)
    if start < 0 or end < start:
        return None
    try:
        blob = base64.b64decode(b"".join(data[start + len(_PRIVATE_BEGIN):end].split()))
        magic = b"openssh-key-v1\x00"
        if not blob.startswith(magic):
            return None
        r = _Reader(blob[len(magic):])
        cipher = r.string().decode("ascii", "replace")
        r.string()  # kdf
        r.string()  # kdf options
        if r.u32() < 1:
            return None
        return cipher, key_type(r.string())
    except (binascii.Error, ValueError):
        return None


class PassphraseNeeded(SshsigError):
    """The private key is encrypted: a passphrase is needed (or was wrong)."""


def public_blob(private_key: Any) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    line = private_key.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH)
    return base64.b64decode(line.split()[1])


def sign(private_key: Any, message: bytes, namespace: str, hash_alg: str = "sha512") -> str:
    """An armored signature of ``message`` by ``private_key`` (as ssh-keygen -Y sign)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

    blob = public_blob(private_key)
    kind = key_type(blob)
    data = signed_data(namespace, hash_alg, message)
    if isinstance(private_key, ed25519.Ed25519PrivateKey):
        algorithm, value = kind, private_key.sign(data)
    elif isinstance(private_key, ec.EllipticCurvePrivateKey):
        curve_hash = {256: hashes.SHA256(), 384: hashes.SHA384(), 521: hashes.SHA512()}
        der = private_key.sign(data, ec.ECDSA(curve_hash[private_key.curve.key_size]))
        r, s = decode_dss_signature(der)
        algorithm, value = kind, _string(_mpint(r)) + _string(_mpint(s))
    elif isinstance(private_key, rsa.RSAPrivateKey):
        algorithm = "rsa-sha2-512"
        value = private_key.sign(data, padding.PKCS1v15(), hashes.SHA512())
    else:
        raise SshsigError(f"key type {kind} is not supported for signing (use ssh-ed25519)")
    inner = _string(algorithm.encode()) + _string(value)
    out = (MAGIC + struct.pack(">I", VERSION) + _string(blob) + _string(namespace.encode())
           + _string(b"") + _string(hash_alg.encode()) + _string(inner))
    return armor(out)


def _mpint(n: int) -> bytes:
    raw = n.to_bytes((n.bit_length() + 7) // 8 or 1, "big")
    return b"\x00" + raw if raw[0] & 0x80 else raw
