"""Secrets kept out of every output: what a secret looks like, in one place.

A credential reaches outcommit as a configuration value (``fs.s3a.secret.key``, a GCS
service account's PEM key under ``fs.gs.auth.service.account.private.key``, an Azure
connection string...) and could leave it through any text the process writes: a log
record (ours, or an SDK's at DEBUG), an exception message, a ``_SUCCESS`` field, a
summary report, the CLI's JSON. Each of those goes through :func:`scrub`, which hides

* every secret value this process has met in a configuration (:class:`outcommit.Config`
  remembers them), also JSON-, repr- or URL-escaped;
* whatever looks like a secret by itself: a PEM block; a value named like a secret
  (``secret_key='…'``, ``"SessionToken": "…"``, ``x-amz-security-token:…``,
  ``<SecretAccessKey>…</SecretAccessKey>``, ``Authorization: Bearer …``); a connection
  string's ``AccountKey=``/``SharedAccessSignature=``/``Password=``; a SAS ``sig=``.

A configuration value is secret (:func:`is_secret_key`, :func:`looks_secret`) by its
key's name (secret, password, token, private key, API key, access/account/encryption
key, credential, SAS, signature, connection string, key file), by a plugin's declaration
(``register(key, description, secret=True)``), or by its value (a PEM block, a JSON key
file, a connection string with a key, a long base64 or hex string).

Log records are scrubbed when they are made: importing outcommit installs a log record
factory (:func:`install_log_redaction`), so records of every logger in the process --
botocore's, adlfs', gcsfs' -- pass, whatever handlers the application configured.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

REDACTED = "<redacted>"

#: Words in a key's name that say its value is a credential. ``sas`` matches Hadoop's
#: ``fs.azure.sas.<container>.<account>``; ``private.key`` the GCS connector's PEM key.
_SECRET_WORDS = (r"secret|passw(?:or)?d|pwd|token|credential|signature|private[._-]?key|"
                 r"api[._-]?key|access[._-]?key|account[._-]?key|encryption[._-]?key|"
                 r"connection[._-]?string|conn[._-]?str|key[._-]?file|(?<![a-z])sas|auth[._-]?key")
_SECRET_KEY = re.compile(rf"(?:{_SECRET_WORDS})", re.IGNORECASE)

#: A canonical UUID: a job id, never a secret (it has the shape of a long token).
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.IGNORECASE)
_TOKEN_CHARS = re.compile(r"^[A-Za-z0-9+/_\-]{32,}={0,2}$")
_ALNUM_RUN = re.compile(r"[A-Za-z0-9]+")
_HEX = re.compile(r"^[0-9a-fA-F]+$")
#: Fields of Azure connection strings and SAS URLs whose values are the secret itself.
_SECRET_FIELDS = re.compile(r"(?i)(?:^|[;&?\s'\"])(?:AccountKey|SharedAccessSignature|"
                            r"SharedAccessKey|Password|Pwd|sig)=")

#: Text patterns, each a secret whatever the process knows.
#: A PEM block, or a truncated one up to the end of its line or string (JSON-escaped
#: too: an escape pair is part of it, an escaped quote ends it, so the JSON stays valid).
_PEM = re.compile(r"-----BEGIN [A-Z0-9 ]*-----(?:.*?-----END [A-Z0-9 ]*-----|"
                  r"(?:[^\"'\n\\]|\\[^\"'])*)", re.DOTALL)
_FIELD_VALUE = re.compile(r"(?i)((?:^|(?<=[;&?\s'\"\\]))(?:AccountKey|SharedAccessSignature|"
                          r"SharedAccessKey|Password|Pwd|sig)=)[^;&\s'\"\\]+")
#: Names that say a value in free text is a secret. Narrower than the key words: prose
#: such as "credentials: the AccountKey in ..." or "session name" is not a secret.
_TEXT_WORDS = (r"secret|passw(?:or)?d|token|signature|private[._-]?key|api[._-]?key|"
               r"account[._-]?key|encryption[._-]?key|connection[._-]?string|authorization")
_XML_ELEMENT = re.compile(r"(?i)(<([\w:]*(?:secret|token|password|signature)[\w:]*)>)"
                          r"[^<]+(?=</\2>)")
_AUTHORIZATION = re.compile(r"(?i)(authorization['\"]?\s*[:=]\s*b?['\"]?(?:bearer|basic|"
                            r"sharedkey|token|sharedaccesssignature)\s+)[^\s'\",]+")
#: ``'name': b'value'``, ``"name" = "value"`` (any spacing), ``name:value``, ``name=value``
#: (none): the name saying it is a secret (``x-amz-security-token:…`` in a signed request).
_NAMED_VALUE = re.compile(
    rf"(?i)((?:{_TEXT_WORDS})[\w.\-]*(?:['\"]\s*[:=]\s*b?(?=['\"])|\s*[:=]\s*b?(?=['\"])|[:=]))"
    r"(?:(['\"])((?:\\.|(?!\2).)*)\2|([^\s'\",;&}<>\\]+))")
_NAMED_GATE = re.compile(rf"(?i)(?:{_TEXT_WORDS})")


def _named_value(match: re.Match[str]) -> str:
    head, quote_char, quoted, bare = match.group(1), match.group(2), match.group(3), match.group(4)
    value = quoted if quote_char else bare
    if value == REDACTED or not value:
        return match.group(0)
    return f"{head}{quote_char}{REDACTED}{quote_char}" if quote_char else f"{head}{REDACTED}"


# -- which configuration values are secret ---------------------------------------------
_declared: set[str] = set()
_declared_lock = threading.Lock()


def declare_secret_keys(keys: Iterable[str]) -> None:
    """The keys whose values are secret whatever their names say: plugins declare them
    with ``register(key, description, secret=True)``, and the registry passes them (and
    their aliases) down here each time it loads: this module never asks the registry."""
    global _declared
    with _declared_lock:
        _declared = set(keys)


def is_secret_key(key: str) -> bool:
    """Does the key's name say its value is a credential (or a plugin declared so)?
    Any prefix counts: ``spark.hadoop.fs.s3a.bucket.b.secret.key`` is one."""
    if _SECRET_KEY.search(key):
        return True
    return any(key == d or key.endswith("." + d) for d in _declared)


def looks_secret(value: Any) -> bool:
    """Does the value look like a credential whatever its key (a PEM block, a JSON
    service account key, a connection string with a key or signature, a long base64
    string, 64 hex digits or more)? Paths, URLs, ARNs, names, UUIDs (also as 32 hex
    digits) and digests do not."""
    text = str(value).strip()
    if "-----BEGIN" in text or '"private_key' in text or _SECRET_FIELDS.search(text):
        return True
    if not _TOKEN_CHARS.match(text) or _UUID.match(text) or text.startswith("/"):
        return False
    if _HEX.match(text):  # ids are hex too (a UUID's 32 digits, a digest's 40): keys are longer
        return len(text) >= 64
    # A random token is nearly all letters and digits, in long runs, of both cases; a
    # dashed or underscored name (bucket-owner-full-control) is not.
    runs = _ALNUM_RUN.findall(text)
    separators = len(text) - sum(len(run) for run in runs)
    return (separators * 10 <= len(text) and max(map(len, runs)) >= 12
            and any(c.isdigit() for c in text) and any(c.isupper() for c in text)
            and any(c.islower() for c in text))


def is_secret(key: str, value: Any) -> bool:
    return is_secret_key(key) or looks_secret(value)


def redact(values: Mapping[str, Any]) -> dict[str, Any]:
    """A copy safe to show: secret values (by key or by value) replaced by ``<redacted>``,
    and remembered, so that :func:`scrub` hides them wherever else they appear."""
    shown: dict[str, Any] = {}
    for key, value in values.items():
        if value is not None and is_secret(str(key), value):
            remember(str(value))
            shown[key] = REDACTED
        else:
            shown[key] = value
    return shown


# -- the secrets this process has met ---------------------------------------------------
#: Shorter values are not remembered: scrubbing every "testing" or "anon" from every log
#: line would hide paths and names, not secrets (a credential is longer).
MIN_REMEMBERED = 8
_MAX_REMEMBERED = 256  # values; the oldest are forgotten first
_known: OrderedDict[str, tuple[str, ...]] = OrderedDict()
_fragments: tuple[str, ...] = ()
_known_lock = threading.Lock()


def remember(value: str) -> None:
    """Hide ``value`` (and its escaped forms) in every text :func:`scrub` sees from now on."""
    value = value.strip()
    if len(value) < MIN_REMEMBERED:
        return
    global _fragments
    with _known_lock:
        if value in _known:
            _known.move_to_end(value)
            return
        forms = {value, json.dumps(value)[1:-1], repr(value)[1:-1], quote(value, safe=""),
                 quote_plus(value)}
        _known[value] = tuple(f for f in forms if len(f) >= MIN_REMEMBERED)
        while len(_known) > _MAX_REMEMBERED:
            _known.popitem(last=False)
        # Longest first: a value that contains another is hidden whole.
        _fragments = tuple(sorted({f for forms in _known.values() for f in forms}, key=len,
                                  reverse=True))


def remember_config(items: Iterable[tuple[str, Any]]) -> None:
    """Remember the secret values of a configuration (by key or by value)."""
    for key, value in items:
        if value is not None and is_secret(str(key), value):
            remember(str(value))


def forget_all() -> None:
    """Forget every remembered value (tests that count what is hidden)."""
    global _fragments
    with _known_lock:
        _known.clear()
        _fragments = ()


# -- scrubbing text ---------------------------------------------------------------------
def scrub(text: str) -> str:
    """``text`` with every secret replaced by ``<redacted>``: the values remembered, and
    whatever looks like a secret by itself (see the module's docstring)."""
    if not text:
        return text
    for fragment in _fragments:
        if fragment in text:
            text = text.replace(fragment, REDACTED)
    if "-----BEGIN" in text:
        text = _PEM.sub(REDACTED, text)
    if "=" in text:
        text = _FIELD_VALUE.sub(rf"\1{REDACTED}", text)
    if "<" in text:
        text = _XML_ELEMENT.sub(rf"\1{REDACTED}", text)
    if _NAMED_GATE.search(text):
        text = _AUTHORIZATION.sub(rf"\1{REDACTED}", text)
        text = _NAMED_VALUE.sub(_named_value, text)
    return text


def scrub_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """A mapping's string values scrubbed (``_SUCCESS`` diagnostics...)."""
    return {k: scrub(v) if isinstance(v, str) else v for k, v in values.items()}


# -- every log record -------------------------------------------------------------------
_installed_lock = threading.Lock()


def _scrub_record(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a bad format string: logging reports it when the record is emitted
        return
    clean = scrub(message)
    if clean != message:
        record.msg, record.args = clean, None
    if record.exc_info and not record.exc_text:
        text = logging.Formatter().formatException(record.exc_info)
        clean = scrub(text)
        if clean != text:
            record.exc_text = clean  # formatters use it instead of formatting the traceback
    if record.stack_info:
        record.stack_info = scrub(record.stack_info)


def install_log_redaction() -> None:
    """Scrub every log record the process makes, whichever logger and handler
    (idempotent): a filter on a logger would miss its children's records, and the
    handlers belong to the application."""
    with _installed_lock:
        previous = logging.getLogRecordFactory()
        if getattr(previous, "outcommit_redaction", False):
            return

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            _scrub_record(record)
            return record

        factory.outcommit_redaction = True  # type: ignore[attr-defined]
        logging.setLogRecordFactory(factory)


__all__ = ["REDACTED", "declare_secret_keys", "forget_all", "install_log_redaction", "is_secret",
           "is_secret_key", "looks_secret", "redact", "remember", "remember_config", "scrub",
           "scrub_values"]
