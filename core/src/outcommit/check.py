"""``outcommit check URL``: is this store ready for a job, before one runs?

One line per check, in the order a job meets them: the store's plugin, its endpoint
(reached, timed), the credentials and the bucket or container (one listing of the
destination), writing, each capability that decides the committer (probed where a few
requests prove it, under ``<URL>/_outcommit_check_<uuid>/``, which is removed after;
declared otherwise), and the committer a job would get. A capability the store declares
but the probe refutes fails the check: a server that ignores ``If-None-Match`` (an older
S3-compatible one, an emulator) would let two task attempts both publish.

``--full`` runs the store contract and the committer conformance suites
(``outcommit.testing``) against the real store, under such a prefix too, as Hadoop's cloud
integration tests run against a real bucket: what no emulator here has (HDFS, Azure HNS,
GCS ``objects.move``, real S3's conditional writes) is proven where it exists
(``checksuites.py``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

from . import capabilities as caps
from .errors import (
    OutcommitError,
    StoreCredentialsError,
    StoreNotFoundError,
    StorePermissionError,
    StoreUnreachableError,
)
from .factory import create_committer, normalise_url, open_store, scheme_of
from .plugins import get_registry
from .store import Store, connect_once

PREFIX = "_outcommit_check_"
CONNECT_TIMEOUT = 5.0


@dataclass
class Line:
    """One check: what was checked, its result, what was found."""

    check: str
    result: str
    detail: str = ""
    ok: bool = True
    ms: int | None = None

    def text(self, width: int = 12, result_width: int = 4) -> str:
        timing = f"  ({self.ms} ms)" if self.ms is not None else ""
        return f"{self.check:<{width}} {self.result:<{result_width}} {self.detail}{timing}".rstrip()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)


def check(url: str, config: Mapping[str, Any]) -> list[Line]:
    """Every check of ``url`` with ``config``; stops where the next could only fail too."""
    try:
        url = normalise_url(url, get_registry().stores())
        store = open_store(url, config)
    except OutcommitError as exc:
        return [Line("store", "failed", str(exc), ok=False)]
    spec = get_registry().store_spec(store.scheme)
    lines = [Line("store", "ok", f"{type(store).__name__} (plugin {spec.plugin})")]
    try:
        if not _reach(store, lines) or not _access(store, url, lines):
            return lines
        dest = store.strip(url)
        base = store.join(dest, f"{PREFIX}{uuid.uuid4().hex[:12]}")
        kept = first_existing(store, dest)
        try:
            lines += _probes(store, base)
        finally:
            remove(store, base)
            remove_made(store, dest, kept)
        lines.append(_committer(url, config, store))
        return lines
    finally:
        store.close()


def first_existing(store: Store, path: str) -> str:
    """``path`` or its nearest ancestor that exists (directories the probes make below it
    are removed after, where a store has directories)."""
    while path.strip("/") and not store.exists(path):
        path = path.rpartition("/")[0] or "/"
    return path


def remove_made(store: Store, path: str, kept: str) -> None:
    """Remove the empty directories the probes made, from ``path`` up to ``kept``."""
    try:
        while path != kept and path.strip("/"):
            store.delete_empty_dir(path)
            path = path.rpartition("/")[0] or "/"
    except OSError:
        pass  # not empty: something else is there now


def _reach(store: Store, lines: list[Line]) -> bool:
    """The endpoint line: one TCP connection, timed (a store with no service: nothing to reach)."""
    started = time.monotonic()
    try:
        endpoint = store.service_endpoint()
        if endpoint is None:
            lines.append(Line("endpoint", "n/a", "no network service (local)"))
            return True
        connect_once(endpoint, CONNECT_TIMEOUT)
    except StoreUnreachableError as exc:
        lines.append(Line("endpoint", "failed", str(exc), ok=False))
        return False
    except OSError as exc:
        lines.append(Line("endpoint", "failed", f"cannot reach {endpoint} ({type(exc).__name__}: "
                                                f"{exc}): check the store's endpoint setting", ok=False))
        return False
    lines.append(Line("endpoint", "ok", endpoint, ms=_ms(started)))
    return True


def _access(store: Store, url: str, lines: list[Line]) -> bool:
    """The credentials and bucket lines: a listing of the destination, then, on an object
    store (whose paths begin with the bucket), the bucket itself (a listing of a bucket that
    is not there answers nothing on some stores: GCS)."""
    authority = urlsplit(url).netloc
    what, where = ("bucket", f"{store.scheme}://{authority}") if authority else \
        ("destination", url)
    bucket = authority.split("@", 1)[0]
    started = time.monotonic()
    try:
        store.list_dir(store.strip(url))
        if bucket and store.strip(url).startswith(bucket) and store.info(bucket) is None:
            raise StoreNotFoundError(f"the bucket or container {where} does not exist: create it, "
                                     "or fix the destination URL")
    except StoreCredentialsError as exc:
        lines += [Line("credentials", "failed", str(exc), ok=False), Line(what, "skipped", where)]
        return False
    except StorePermissionError as exc:
        lines += [Line("credentials", "ok", "accepted"), Line(what, "denied", str(exc), ok=False)]
        return False
    except StoreNotFoundError as exc:
        lines += [Line("credentials", "unproven", "the service answered for a bucket that is not there"),
                  Line(what, "missing", str(exc), ok=False)]
        return False
    except StoreUnreachableError as exc:
        lines.append(Line("endpoint", "failed", str(exc), ok=False))
        return False
    except Exception as exc:  # another error of the store's: said as it is
        lines.append(Line(what, "failed", f"{where}: {type(exc).__name__}: {exc}", ok=False))
        return False
    lines += [Line("credentials", "ok", "accepted" if authority else "n/a (local)"),
              Line(what, "ok", where, ms=_ms(started))]
    return True


def _probe_exclusive(store: Store, base: str) -> tuple[bool, str]:
    exclusive = store.exclusive_create()
    if exclusive is None:
        return False, "the store gives no exclusive create"
    path = store.join(base, "exclusive")
    exclusive.create_exclusive(path, b"first")
    try:
        exclusive.create_exclusive(path, b"second")
    except FileExistsError:
        return store.read_bytes(path) == b"first", "the refused create replaced the file"
    return False, "a second exclusive create of one name succeeded: the server does not enforce it"


def _probe_listing(store: Store, base: str) -> tuple[bool, str]:
    path = store.join(base, "listed")
    store.write_bytes(path, b"x")
    listed = [info.path for info in store.list_files(base)]
    return path in listed, "a file just written was not listed"


def _probe_etags(store: Store, base: str) -> tuple[bool, str]:
    path = store.join(base, "etag")
    store.write_bytes(path, b"x")
    info = store.info(path)
    return bool(info and info.etag), "a file just written has no etag"


def _probe_multipart(store: Store, base: str) -> tuple[bool, str]:
    uploads = store.multipart()
    if uploads is None:
        return False, "the store gives no multipart operations"
    path = store.join(base, "upload")
    upload_id = uploads.initiate(path)
    try:
        listed = any(u.upload_id == upload_id for u in uploads.list_pending(base + "/"))
    finally:
        uploads.abort(path, upload_id)
    return listed, "an upload just initiated was not listed as pending"


#: Capabilities a few requests prove (the others are taken as declared).
PROBES: dict[str, Callable[[Store, str], tuple[bool, str]]] = {
    caps.CREATE_EXCLUSIVE: _probe_exclusive,
    caps.LISTING_CONSISTENT: _probe_listing,
    caps.ETAGS_AVAILABLE: _probe_etags,
    caps.MULTIPART_DELAYED_COMPLETION: _probe_multipart,
}


def _probes(store: Store, base: str) -> list[Line]:
    """A write, then each capability: probed where declared and provable, else as declared."""
    path = store.join(base, "written")
    started = time.monotonic()
    try:
        store.write_bytes(path, b"outcommit check")
    except Exception as exc:
        return [Line("write", "failed", f"{store.url(path)}: {type(exc).__name__}: {exc}", ok=False)]
    lines = [Line("write", "ok", f"{store.url(base)}/ (removed after)", ms=_ms(started))]
    names = [*caps.STORE_CAPABILITIES,
             *sorted(set(store.capabilities.names) - set(caps.STORE_CAPABILITIES))]
    for name in names:
        declared = store.has_capability(name)
        probe = PROBES.get(name)
        if probe is None or not declared:
            lines.append(Line(f"capability {name}", "yes" if declared else "no", "(declared)"))
            continue
        try:
            found, why = probe(store, base)
        except Exception as exc:
            found, why = False, f"{type(exc).__name__}: {exc}"
        lines.append(Line(f"capability {name}", "yes", "(probed)") if found else
                     Line(f"capability {name}", "NO", f"(declared, but the probe found otherwise: {why})",
                          ok=False))
    return lines


def _committer(url: str, config: Mapping[str, Any], store: Store) -> Line:
    registry = get_registry()
    safe = sorted(n for n, s in registry.committers().items()
                  if s.safe_on(store, scheme_of(url)))
    try:
        committer = create_committer(url, config)
    except OutcommitError as exc:
        return Line("committer", "failed", f"{exc}", ok=False)
    return Line("committer", committer.name, f"{committer.selection}; safe here: {', '.join(safe)}")


def remove(store: Store, path: str) -> None:
    """Delete ``path`` and abort the uploads pending under it (never raises: a check's
    outcome stands; what is left is said)."""
    from .testing.roots import remove_tree

    remove_tree(store, path)


__all__ = ["PREFIX", "Line", "check"]
