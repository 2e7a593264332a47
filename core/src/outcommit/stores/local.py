"""The local filesystem: real atomic file and directory rename, O_EXCL create."""

from __future__ import annotations

import errno
import os
import posixpath
import shutil
import uuid

import fsspec

from .. import capabilities as caps
from ..capabilities import Capabilities
from ..errors import ConfigError, RenameError
from ..store import Store

LOCAL_CAPABILITIES = Capabilities.of(
    caps.RENAME_FILE_ATOMIC,
    caps.RENAME_DIRECTORY_ATOMIC,
    caps.LISTING_CONSISTENT,
    caps.CREATE_EXCLUSIVE,
)


def canonical_file_url(url: str) -> str:
    """``url`` if it is a local ``file://`` URL, as ``file:///path``; RFC 8089 names the
    local host ``file://localhost/path``. Refused (:class:`ConfigError`): no path at all
    (``file://``: fsspec would take it for the current directory) and any other host
    (``file://tmp/x`` is host ``tmp``, not ``/tmp/x``). Anything else is returned as it is."""
    if url[:7].lower() != "file://":
        return url
    rest = url[7:]
    host, _, path = rest.partition("/")
    if not rest:
        raise ConfigError(f"{url!r} names no path: write file:///abs/path")
    if host.lower() == "localhost":
        return "file:///" + path
    if host.startswith("~"):  # a home directory, as in a shell: not a host
        raise ConfigError(f"{url!r}: a file URL names no host ({host!r} here): write the path "
                          f"{rest} itself, or file://{os.path.expanduser(rest)}")
    if host:
        raise ConfigError(f"{url!r}: a file URL names no host ({host!r} here): write "
                          f"file:///{rest} for an absolute path")
    return url


class LocalStore(Store):
    """``file://`` URLs and plain paths."""

    capabilities = LOCAL_CAPABILITIES
    default_committer = "v1"
    file_at_open = True

    def make_filesystem(self) -> fsspec.AbstractFileSystem:
        return fsspec.filesystem("file", auto_mkdir=True)

    def strip(self, url: str) -> str:
        if url in ("", "file:"):  # fsspec would take it for the current directory
            raise ConfigError(f"{url!r} names no path: write file:///abs/path")
        path = super().strip(canonical_file_url(url))
        return os.path.abspath(path) if not path.startswith("/") else path

    def url(self, path: str) -> str:
        return f"file://{path}"

    def rename_file(self, src: str, dst: str, overwrite: bool = False) -> None:
        os.makedirs(posixpath.dirname(dst), exist_ok=True)
        if overwrite:
            os.replace(src, dst)  # atomic, replaces a file
            return
        # link + unlink: atomic create-if-absent of dst, then the source goes away.
        try:
            os.link(src, dst)
        except FileExistsError:
            raise FileExistsError(f"rename destination exists: {dst}") from None
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EXDEV, errno.ENOTSUP):
                raise
            if os.path.lexists(dst):
                raise FileExistsError(f"rename destination exists: {dst}") from None
            os.rename(src, dst)
            return
        os.unlink(src)

    def rename_dir(self, src: str, dst: str) -> None:
        if os.path.lexists(dst):
            raise FileExistsError(f"rename destination exists: {dst}")
        os.makedirs(posixpath.dirname(dst), exist_ok=True)
        try:
            os.rename(src, dst)
        except OSError as exc:
            raise RenameError(f"rename {src} -> {dst} failed: {exc}") from exc

    def create_exclusive(self, path: str, data: bytes) -> None:
        os.makedirs(posixpath.dirname(path), exist_ok=True)
        tmp = f"{path}.tmp-{uuid.uuid4().hex}"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)  # fails if path exists: the content appears whole or not at all
        except FileExistsError:
            raise FileExistsError(f"already exists: {path}") from None
        finally:
            os.unlink(tmp)

    def delete_empty_dir(self, path: str) -> None:
        try:
            os.rmdir(path)  # fails, harmlessly, when another job has put something inside
        except OSError:
            pass

    def delete(self, path: str, recursive: bool = False) -> None:
        """``os.remove`` or ``shutil.rmtree`` of exactly ``path`` (a symbolic link is
        removed, never followed); a missing path is not an error."""
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                if not recursive:
                    raise IsADirectoryError(f"{self.url(path)} is a directory: delete it with "
                                            "recursive=True")
                shutil.rmtree(path)
            else:
                os.remove(path)
        except FileNotFoundError:  # gone already (or meanwhile: another cleanup)
            pass
