"""The light path's signer against botocore's: the same headers for every drawn request.

The oracle is botocore's own ``S3SigV4Auth`` (the signer the light path replaced for
speed): a difference in any header would be a request S3 refuses (SignatureDoesNotMatch)
or, worse, one it reads differently. moto does not check signatures, so this comparison,
not a server, is what holds the signer to SigV4. Budget: 150 examples in CI (~1 s).
"""

from __future__ import annotations

from urllib.parse import quote

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import ReadOnlyCredentials
from hypothesis import given
from hypothesis import strategies as st

from generative import budget
from outcommit_s3.lightsign import Signer, signed_host

HOSTS = ["bucket.s3.amazonaws.com", "s3.eu-west-1.amazonaws.com", "127.0.0.1", "LocalHost",
         "MinIO.Example.COM", "[::1]", "[2001:DB8::5]", "bucket.s3-accelerate.dualstack.amazonaws.com",
         # What botocore's endpoint checks let through: a trailing dot, userinfo, a zone id.
         "bucket.s3.amazonaws.com.", "User:Pw@MinIO.Example.COM", "[fe80::1%25en0]", "[::FFFF:10.0.0.1]"]
REGIONS = ["us-east-1", "eu-west-1", "ap-southeast-2", "us-gov-west-1"]
_printable = st.characters(min_codepoint=0x20, max_codepoint=0x7E)
#: Whitespace SigV4's trim must treat as Python's ``str.split`` does (tabs, a folded line,
#: the separators and no-break spaces it splits on), non-ASCII: a value trimmed otherwise
#: signs what botocore does not.
_spacing = st.lists(st.sampled_from([" ", "  ", "\t", "\n ", "\x0b", "\x1c", "\x85", "\xa0", "\u2028",
                                     "\u3000", "x", "é", "中"]), min_size=1, max_size=8).map("".join)
#: Keys of the pieces ``quote(key, safe='/~')`` leaves as they are: S3 does not normalise
#: them, so neither may the canonical URI (``.``/``..`` segments, empty ones, ``~``).
_segments = st.lists(st.sampled_from(["~", "/", "//", ".", "..", "a", "%", "+", " ", ";", "?", "#", "="]),
                     min_size=1, max_size=8).map("".join)


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, dict[str, str], bytes]:
    scheme = draw(st.sampled_from(["http", "https", "HTTPS"]))
    host = draw(st.sampled_from(HOSTS))
    port = draw(st.sampled_from(["", ":80", ":443", ":9000", ":5000"]))
    base = draw(st.sampled_from(["", "/bucket", "/prefix/bucket"]))
    key = draw(st.one_of(st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=40),
                         _segments))
    upload_id = draw(st.text(_printable, min_size=1, max_size=30))
    url = f"{scheme}://{host}{port}{base}/{quote(key, safe='/~')}?uploadId={quote(upload_id, safe='')}"
    headers = {"Content-Type": "application/xml"}
    # Runs of spaces inside and around a value: SigV4 trims and collapses them.
    spaced = st.one_of(st.text(_printable, min_size=1, max_size=20),
                       st.lists(st.sampled_from([" ", "  ", "x", "Y1", "-"]), min_size=1, max_size=8)
                       .map("".join), _spacing).filter(lambda v: v.strip() != "")
    for name, values in (("User-Agent", spaced), ("If-None-Match", st.one_of(st.just("*"), spaced)),
                         ("x-amz-request-payer", st.just("requester")), ("X-Amzn-Trace-Id", spaced),
                         ("x-amz-expected-bucket-owner", spaced)):
        if draw(st.booleans()):
            headers[name] = draw(values)
    return url, headers, draw(st.binary(max_size=300))


#: A secret beyond ASCII (its UTF-8 bytes derive the key), a token with runs of spaces.
credentials = st.builds(
    ReadOnlyCredentials,
    st.text(st.characters(min_codepoint=0x30, max_codepoint=0x5A), min_size=1, max_size=20),
    st.one_of(st.text(_printable, min_size=1, max_size=40),
              st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=40)),
    st.one_of(st.none(), st.text(_printable, min_size=1, max_size=60), _spacing))


#: One signer per region across examples: its kept keys meet many secrets.
SIGNERS: dict[str, Signer] = {}


def _lower(headers: object) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in headers.items()}  # type: ignore[attr-defined]


@pytest.mark.generative
@budget(150)
@given(request=requests(), creds=credentials, region=st.sampled_from(REGIONS))
def test_the_light_signer_signs_every_request_as_botocore_signs_it(
        request: tuple[str, dict[str, str], bytes], creds: ReadOnlyCredentials, region: str) -> None:
    url, headers, body = request
    theirs = AWSRequest(method="POST", url=url, data=body, headers=dict(headers))
    S3SigV4Auth(creds, "s3", region).add_auth(theirs)
    ours = SIGNERS.setdefault(region, Signer(region)).headers("POST", url, headers, body, creds,
                                  timestamp=theirs.context["timestamp"])
    assert _lower(ours) == _lower(theirs.headers)


def test_the_signed_host_is_botocores_for_ports_case_and_ipv6() -> None:
    from botocore.auth import _host_from_url  # the oracle (private: a test may read it)

    for url in ("http://Host.Example:80/b/k", "https://host:443/k", "http://host:443/k",
                "https://[::1]:9000/b/k", "https://[2001:db8::5]/k", "http://127.0.0.1:5000/b/k",
                "https://user@host/k"):
        assert signed_host(url) == _host_from_url(url), url


def test_a_kept_signing_key_serves_only_its_secret_and_its_day() -> None:
    """The key derived for one (secret, day) is kept: another day or a rotated secret must
    derive its own (a stale key is a refused request), as a fresh signer does."""
    kept = Signer("us-east-1")
    url, body = "https://bucket.s3.amazonaws.com/k?uploadId=u", b"<x/>"
    for secret, stamp in (("one", "20261128T235959Z"), ("one", "20261129T000001Z"),
                          ("two", "20261129T000002Z"), ("one", "20261128T120000Z")):
        creds = ReadOnlyCredentials("AKID", secret, None)
        fresh = Signer("us-east-1").headers("POST", url, {}, body, creds, timestamp=stamp)
        assert kept.headers("POST", url, {}, body, creds, timestamp=stamp) == fresh, (secret, stamp)
