"""GCS's bucket naming rules, checked before any request (a name GCS would never serve
was answered as a bucket that does not exist).

https://cloud.google.com/storage/docs/buckets#naming: lowercase letters, digits, ``-``,
``_`` and ``.``, beginning and ending with a letter or digit; 3-63 characters, or up to 222
with dots (each dot-separated part at most 63); not an IP address; not beginning with
``goog`` nor containing ``google``.
"""

from __future__ import annotations

import re

from outcommit.errors import ConfigError
from outcommit.paths import characters_not_allowed

_ALLOWED = re.compile(r"^[a-z0-9._-]+$")
_IP_ADDRESS = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")
RULES = ("GCS bucket names are 3-63 characters (222 with dots) of a-z, 0-9, '-', '_' and '.', "
         "beginning and ending with a letter or digit")


def bucket_name_problem(name: str) -> str | None:
    """What breaks GCS's naming rules in ``name``, or None."""
    bad = characters_not_allowed(name, _ALLOWED.match)
    if bad:
        return bad
    longest = 222 if "." in name else 63
    if not 3 <= len(name) <= longest or any(len(part) > 63 for part in name.split(".")):
        return f"it has {len(name)} characters"
    if not (name[0].isalnum() and name[-1].isalnum()):
        return "it must begin and end with a letter or digit"
    if _IP_ADDRESS.match(name):
        return "it is formatted as an IP address"
    if name.startswith("goog") or "google" in name:
        return "names beginning with 'goog' or containing 'google' are reserved"
    return None


def check_bucket_name(name: str, url: str) -> None:
    problem = bucket_name_problem(name)
    if problem is not None:
        raise ConfigError(f"{url}: {name!r} is not a valid GCS bucket name: {problem} ({RULES}); "
                          "fix the destination URL")


def check_endpoint(key: str, endpoint: str) -> None:
    """An endpoint without a scheme: refused at once, rather than failing per request."""
    if "://" not in endpoint:
        raise ConfigError(f"{key}={endpoint!r} has no scheme: add http:// or https:// "
                          f"(http://{endpoint} for an emulator)")
