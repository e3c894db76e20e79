"""An independent DSSE implementation (Python's securesystemslib) against lynx's envelopes.

    sslib_dsse.py verify ENVELOPE PUBKEY_PEM KEYID   exit 0 when the envelope verifies, else 1
    sslib_dsse.py sign PAYLOAD PRIVKEY_PEM OUT KEYID  sign PAYLOAD's bytes into the envelope OUT

Only securesystemslib (and pyca/cryptography under it) touches the bytes: PAE, base64 and
ECDSA are theirs, not lynx's.
"""

import json
import sys

from cryptography.hazmat.primitives.serialization import load_pem_private_key, load_pem_public_key
from securesystemslib.dsse import Envelope
from securesystemslib.signer import CryptoSigner, SSlibKey

PAYLOAD_TYPE = "application/vnd.in-toto+json"
SCHEME = "ecdsa-sha2-nistp256"


def public_key(pem_path, keyid):
    with open(pem_path, "rb") as f:
        return SSlibKey.from_crypto(load_pem_public_key(f.read()), keyid=keyid, scheme=SCHEME)


def verify(envelope_path, pem_path, keyid):
    with open(envelope_path) as f:
        envelope = Envelope.from_dict(json.load(f))
    if envelope.payload_type != PAYLOAD_TYPE:
        print(f"payload type {envelope.payload_type!r}", file=sys.stderr)
        return 1
    try:
        accepted = envelope.verify([public_key(pem_path, keyid)], 1)
    except Exception as e:  # securesystemslib's VerificationError and what it wraps
        print(f"not verified: {e}", file=sys.stderr)
        return 1
    print(f"verified by {sorted(accepted)}")
    return 0


def sign(payload_path, pem_path, out_path, keyid):
    with open(payload_path, "rb") as f:
        payload = f.read()
    with open(pem_path, "rb") as f:
        private = load_pem_private_key(f.read(), password=None)
    signer = CryptoSigner(private, SSlibKey.from_crypto(private.public_key(), keyid=keyid, scheme=SCHEME))
    envelope = Envelope(payload, PAYLOAD_TYPE, {})
    envelope.sign(signer)
    with open(out_path, "w") as f:
        json.dump(envelope.to_dict(), f)
    return 0


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    sys.exit({"verify": verify, "sign": sign}[command](*args))
