"""S3's bucket naming rules, checked before any request.

S3 answers a request for ``Bad_Bucket`` as it answers one for a bucket that does not
exist (``NoSuchBucket``, or a 400 without a reason to a HEAD), so the user was told to
create a bucket that S3 would refuse to create. The rules of general purpose buckets
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html) that a
request can break: 3-63 characters of ``a-z``, ``0-9``, ``.`` and ``-``, beginning and
ending with a letter or digit, no ``..``, not an IP address. Names reserved for other
kinds of bucket (``--x-s3`` directory buckets, ``-s3alias`` access point aliases) are
valid in requests and pass.
"""

from __future__ import annotations

import re

from outcommit import ConfigError
from outcommit.paths import characters_not_allowed

_ALLOWED = re.compile(r"^[a-z0-9.-]+$")
_IP_ADDRESS = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")
RULES = ("S3 bucket names are 3-63 characters of a-z, 0-9, '.' and '-', beginning and ending "
         "with a letter or digit")


def bucket_name_problem(name: str) -> str | None:
    """What breaks S3's naming rules in ``name``, or None."""
    bad = characters_not_allowed(name, _ALLOWED.match)
    if bad:
        return bad
    if not 3 <= len(name) <= 63:
        return f"it has {len(name)} characters"
    if not (name[0].isalnum() and name[-1].isalnum()):
        return "it must begin and end with a letter or digit"
    if ".." in name:
        return "it has two adjacent dots"
    if _IP_ADDRESS.match(name):
        return "it is formatted as an IP address"
    return None


def check_bucket_name(name: str, url: str) -> None:
    """Refuse a bucket name S3 would never serve, naming the rule, before any request."""
    problem = bucket_name_problem(name)
    if problem is not None:
        raise ConfigError(f"{url}: {name!r} is not a valid S3 bucket name: {problem} ({RULES}); "
                          "fix the destination URL")
