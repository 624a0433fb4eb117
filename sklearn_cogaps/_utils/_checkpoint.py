"""Checkpoints of a long fit: its complete state in a file, written atomically, read back to
resume.

A checkpoint is written to a temporary file in the same directory, flushed to the disk and
then renamed over the previous one (``os.replace``, atomic on POSIX and Windows): a crash or
a ``kill -9`` while writing leaves the previous checkpoint whole. What the state holds, and
how a fit resumes from it, is the estimator's (the hooks ``_checkpoint_payload`` and its
``fit``); this module only decides when to write and how.
"""

import contextlib
import contextvars
import glob
import hashlib
import os
import pickle
import socket
import tempfile
import time
import uuid

from ._warnings import warn

__all__ = ["Checkpoint", "CHECKPOINT_FORMAT", "defer_removal"]

# The checkpoints that fits completed inside :func:`defer_removal` leave for it to remove.
_DEFERRED = contextvars.ContextVar("deferred_checkpoint_removals", default=None)


@contextlib.contextmanager
def defer_removal():
    """Keep the checkpoint files of the fits completed inside the block until the block
    ends without an exception (the command line writes its results first): a run killed
    before its results are on disk can still resume from its checkpoint."""
    pending = []
    token = _DEFERRED.set(pending)
    try:
        yield pending
    finally:
        _DEFERRED.reset(token)
    for path in pending:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


#: Version of the file's layout; a file of another version is refused with advice.
CHECKPOINT_FORMAT = 2

# The file: this line, the pickled payload, and the BLAKE2b digest of the pickle. A file
# damaged on the disk or in a copy, or edited, but still a readable pickle would otherwise
# resume a chain from a state no fit had (a flipped byte in a residual moves the result
# without a word).
_MAGIC = b"sklearn_cogaps checkpoint 2\n"
_DIGEST_SIZE = 32
_CHUNK = 1 << 20


class _Hashing:
    """A file's ``write`` that also feeds the bytes to a digest."""

    def __init__(self, f, digest):
        self.f, self.digest = f, digest

    def write(self, data):
        self.digest.update(data)
        return self.f.write(data)


def _digest():
    return hashlib.blake2b(digest_size=_DIGEST_SIZE)


class Checkpoint:
    """When and where a run writes its state.

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    every : int or None
        Write after every ``every`` complete iterations (None: not by count).
    minutes : float or None
        Write when this many minutes have passed since the last write (None: not by time).
    """

    def __init__(self, path, every=None, minutes=None):
        self.path = os.path.expanduser(os.fspath(path))
        self.every = every
        self.seconds = None if minutes is None else 60.0 * minutes
        self.last = time.monotonic()
        self.n_written = 0
        self.failed = False
        directory = os.path.dirname(os.path.abspath(self.path)) if self.path else ""
        # before any work: a file that cannot be written would otherwise be found at the
        # first checkpoint, after hours of iterations
        if not self.path or os.path.isdir(self.path):
            raise ValueError(
                f"checkpoint_path={self.path!r} is a directory, not a file: name the file "
                "the fit keeps its state in (for example 'run.ckpt' in that directory)."
            )
        if not os.path.isdir(directory):
            raise ValueError(
                f"The directory of checkpoint_path={self.path!r} does not exist: create "
                f"{directory!r} first, or choose a checkpoint file in an existing directory."
            )
        if not os.access(directory, os.W_OK | os.X_OK):
            raise ValueError(
                f"The directory {directory!r} of checkpoint_path={self.path!r} cannot be "
                "written: choose a checkpoint file in a directory you can write to."
            )

    # -- one fit per file: a lock file beside it ----------------------------------------------

    @property
    def lock_path(self):
        return self.path + ".lock"

    def acquire(self):
        """Take the file for this fit, or refuse if another fit holds it.

        The lock file holds the host, the process and a token of the fit. A lock of a process
        of this host that no longer runs (a fit killed with ``kill -9``) is taken over; a
        live one, this process's included (a search's threads), or one of another host is
        refused with what to do.
        """
        self._token = f"{socket.gethostname()} {os.getpid()} {uuid.uuid4().hex}"
        for _ in range(2):
            try:
                fd = os.open(self.lock_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if not self._stale():
                    raise ValueError(self._in_use()) from None
                try:
                    os.unlink(self.lock_path)
                except FileNotFoundError:
                    pass
                continue
            with os.fdopen(fd, "w") as f:
                f.write(self._token)
            self._remove_orphans()
            return
        raise ValueError(self._in_use())

    def _temporary_prefix(self):
        # named after the checkpoint, so that what a write left is known to be its own
        return f".{os.path.basename(self.path)}."

    def _remove_orphans(self):
        """Delete the temporary files that writes of this checkpoint killed midway left
        (``kill -9``): with the lock held, no other fit writes them."""
        directory = os.path.dirname(os.path.abspath(self.path))
        pattern = os.path.join(glob.escape(directory), glob.escape(self._temporary_prefix()))
        # exactly the 8 characters mkstemp draws: "run"'s pattern must not take the files
        # of a fit of "run.ckpt" in the same directory
        for orphan in glob.glob(pattern + "[a-z0-9_]" * 8 + ".tmp", include_hidden=True):
            with contextlib.suppress(OSError):
                os.unlink(orphan)

    def _holder(self):
        try:
            with open(self.lock_path) as f:
                host, pid, _ = f.read().split(" ", 2)
            return host, int(pid)
        except (OSError, ValueError):
            return None, None

    def _stale(self):
        """Whether the lock is left by a process of this host that has ended."""
        host, pid = self._holder()
        if host != socket.gethostname() or pid is None or pid == os.getpid():
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except OSError:
            return False
        return False

    def _in_use(self):
        host, pid = self._holder()
        who = "this process" if (host, pid) == (socket.gethostname(), os.getpid()) else (
            f"process {pid} on {host}")  # fmt: skip
        return (
            f"checkpoint_path={self.path!r} is in use by another fit ({who}): two fits "
            "writing one file would resume from each other's state. Give each fit its own "
            "file (in a search, one per parameter setting and fold). If no fit is running, "
            f"delete {self.lock_path!r}."
        )

    def release(self):
        """Give the file back (only this fit's own lock is removed)."""
        try:
            with open(self.lock_path) as f:
                mine = f.read() == getattr(self, "_token", None)
            if mine:
                os.unlink(self.lock_path)
        except OSError:
            pass

    def due(self, iteration, previous=None):
        """Whether to write after complete iteration ``iteration`` (counted over the fit),
        the last look having been after ``previous`` (default ``iteration - 1``): a multiple
        of ``every`` passed since, or the minutes."""
        previous = iteration - 1 if previous is None else previous
        if self.every is not None and iteration // self.every > previous // self.every:
            return True
        return self.seconds is not None and time.monotonic() - self.last >= self.seconds

    def write(self, payload):
        """Write ``payload`` (a dict) atomically in place of the previous checkpoint.

        A write that fails on the system's side (a full disk, a directory removed or made
        read-only during the fit) warns and leaves the previous checkpoint: the fit goes on
        and tries again at the next checkpoint."""
        try:
            self._write(payload)
        except OSError as exc:
            warn(
                f"The checkpoint could not be written to {self.path!r} ({exc}); the fit goes "
                "on, and the file keeps the previous checkpoint, if any.",
                RuntimeWarning,
            )
            self.failed = True
            self.last = time.monotonic()

    def _write(self, payload):
        directory = os.path.dirname(os.path.abspath(self.path))
        fd, tmp = tempfile.mkstemp(prefix=self._temporary_prefix(), suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_MAGIC)
                digest = _digest()
                pickle.dump({"format": CHECKPOINT_FORMAT, **payload}, _Hashing(f, digest),
                            protocol=pickle.HIGHEST_PROTOCOL)  # fmt: skip
                f.write(digest.digest())
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        _sync_directory(directory)
        self.last = time.monotonic()
        self.n_written += 1

    def read(self):
        """The payload of the file, or None when there is no file yet."""
        if not os.path.exists(self.path):
            return None
        try:
            with open(self.path, "rb") as f:
                self._check_digest(f)
                payload = _ArraysOnly(f).load()
        except _NotThisVersion:
            payload = None
        except OSError as exc:
            raise ValueError(
                f"The checkpoint file {self.path!r} cannot be opened ({type(exc).__name__}: "
                f"{exc}). Give the fit read access to it, or pass another checkpoint file."
            ) from exc
        except _Changed:
            raise ValueError(
                f"The checkpoint file {self.path!r} has changed since it was written (its "
                "content does not match its checksum): it was damaged, on the disk or in a "
                "copy, or edited. Resuming from it would not continue the fit. Delete it to "
                "start the fit from the beginning, or pass another checkpoint_path."
            ) from None
        except Exception as exc:
            raise ValueError(
                f"The checkpoint file {self.path!r} cannot be read ({type(exc).__name__}: "
                f"{exc}): it was not written by this package, or was changed since. If it is "
                "a file of yours, pass another checkpoint_path; if it is an old checkpoint, "
                "delete it to start the fit from the beginning."
            ) from exc
        if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(
                f"The checkpoint file {self.path!r} is not a checkpoint of this version of "
                "the package. Delete it, or pass another checkpoint file, to start the fit "
                "from the beginning."
            )
        return payload

    def _check_digest(self, f):
        """Leave ``f`` at the start of the pickle whose digest the file's end holds;
        :class:`_NotThisVersion` for a file of another layout (an older checkpoint, a bare
        pickle), :class:`_Changed` when the digest differs."""
        head = f.read(len(_MAGIC))
        if not head:
            raise pickle.UnpicklingError("it is empty")
        if head != _MAGIC:
            if head[:1] == b"\x80":  # a bare pickle: the layout of format 1
                raise _NotThisVersion
            raise pickle.UnpicklingError("it does not start as a checkpoint of this package")
        end = os.fstat(f.fileno()).st_size - _DIGEST_SIZE
        if end < len(_MAGIC):
            raise _Changed
        digest = _digest()
        left = end - len(_MAGIC)
        while left > 0:
            chunk = f.read(min(_CHUNK, left))
            if not chunk:
                raise _Changed
            digest.update(chunk)
            left -= len(chunk)
        if f.read(_DIGEST_SIZE) != digest.digest():
            raise _Changed
        f.seek(len(_MAGIC))

    def remove(self):
        """Delete the file (a fit that ran to its end has nothing to resume), or leave it
        to :func:`defer_removal` when a block of it is running."""
        pending = _DEFERRED.get()
        if pending is not None:
            pending.append(self.path)
        elif os.path.exists(self.path):
            os.unlink(self.path)


# The only callables a checkpoint's pickle may name: numpy's reconstructors of arrays, their
# dtypes and scalars (under numpy 2's module names and numpy 1's). A pickle runs whatever
# callable it names while it loads; a checkpoint file is data, and one that names anything
# else (a file planted under the checkpoint's name) is refused before it runs.
_ALLOWED_GLOBALS = {
    (module, name)
    for prefix in ("numpy._core", "numpy.core")
    for module, name in (
        (f"{prefix}.numeric", "_frombuffer"),
        (f"{prefix}.multiarray", "_reconstruct"),
        (f"{prefix}.multiarray", "scalar"),
    )
} | {("numpy", "dtype"), ("numpy", "ndarray")}


class _NotThisVersion(Exception):
    pass


class _Changed(Exception):
    pass


class _ArraysOnly(pickle.Unpickler):
    """An unpickler of dicts, lists, numbers, strings and numpy arrays, nothing callable
    besides numpy's array reconstructors."""

    def find_class(self, module, name):
        if (module, name) in _ALLOWED_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"it names {module}.{name}, which a checkpoint never holds")


def _sync_directory(directory):
    """Flush the rename to the disk where the system allows it (POSIX)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
