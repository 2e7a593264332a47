"""Azure's container naming rules, checked before any request (a name Azure would never
serve was answered as a container that does not exist).

https://learn.microsoft.com/rest/api/storageservices/naming-and-referencing-containers--blobs--and-metadata:
3-63 characters of lowercase letters, digits and ``-``, beginning with a letter or digit,
every ``-`` between letters or digits; ``$root``, ``$web`` and ``$logs`` are Azure's own.
"""

from __future__ import annotations

import re

from outcommit.errors import ConfigError
from outcommit.paths import characters_not_allowed

_NAME = re.compile(r"^[a-z0-9](-?[a-z0-9])*$")
SPECIAL = ("$root", "$web", "$logs")
RULES = ("Azure container names are 3-63 characters of a-z, 0-9 and '-', beginning and ending "
         "with a letter or digit, without '--'")


def container_name_problem(name: str) -> str | None:
    """What breaks Azure's naming rules in ``name``, or None."""
    if name in SPECIAL:
        return None
    bad = characters_not_allowed(name, lambda c: c.isascii() and (c.isdigit() or c.islower() or c == "-"))
    if bad:
        return bad
    if not 3 <= len(name) <= 63:
        return f"it has {len(name)} characters"
    if not _NAME.match(name):
        return "it must begin and end with a letter or digit, and have no '--'"
    return None


def check_container_name(name: str, url: str) -> None:
    problem = container_name_problem(name)
    if problem is not None:
        raise ConfigError(f"{url}: {name!r} is not a valid Azure container name: {problem} ({RULES}); "
                          "fix the destination URL")
