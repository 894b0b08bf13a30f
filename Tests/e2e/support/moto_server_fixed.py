"""`moto_server`, with its SigV4 check fixed for query values that hold '/'.

moto 5.x checks a signature by rebuilding the canonical request from the URL it was
served, whose query string it has already decoded (getmoto/moto#5948): a signed
`ListObjectsV2` with `prefix=photos%2FU%2F` (SigV4 encodes every '/' in a query value)
is checked as `prefix=photos/U/` and refused with SignatureDoesNotMatch. Every real S3
accepts it; boto3 gets through only because it sends `encoding-type=url` listings with
the same decoded form it signs.

This launcher patches moto in its own process only: before the check, each query key and
value is percent-encoded again exactly as SigV4 asks (RFC 3986 unreserved characters
left alone), then moto's own check runs unchanged. The daemon's signer is not weakened;
nothing else in moto changes. Used by the e2e stack (support/stack.py) and the Swift S3
tests (Tests/S3Tests).

Usage: python3 moto_server_fixed.py [moto_server arguments...]
"""
from __future__ import annotations

import sys
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from moto.iam import access_control

_UNRESERVED = "-_.~"
_original_init = access_control.IAMRequestBase.__init__


def reencode_query(path: str) -> str:
    """`path` with its query re-encoded as SigV4's canonical form expects it."""
    parts = urlsplit(path)
    if not parts.query:
        return path
    pairs = []
    for pair in parts.query.split("&"):
        key, sep, value = pair.partition("=")
        # unquote first: a value moto left encoded must not be encoded twice. Not
        # unquote_plus: '+' in a decoded value is a literal plus.
        pairs.append(quote(unquote(key), safe=_UNRESERVED) + sep + quote(unquote(value), safe=_UNRESERVED))
    return urlunsplit(parts._replace(query="&".join(pairs)))


def _init(self, account_id, method, path, data, body, headers, action):  # noqa: PLR0913 (moto's signature)
    _original_init(self, account_id, method, reencode_query(path), data, body, headers, action)


access_control.IAMRequestBase.__init__ = _init

if __name__ == "__main__":
    from moto.server import main

    sys.exit(main(sys.argv[1:]))
