"""Peak memory of the running benchmark process."""


def _status_mb(key):
    """A memory line of /proc/self/status (``VmHWM``, ``VmRSS``...) in MB; NaN if absent."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def peak_rss_mb():
    """Peak resident memory of this process in MB.

    Read from VmHWM in /proc/self/status: unlike ``ru_maxrss``, it is not inherited across
    exec from the parent (a benchmark that generated large data before starting a fresh
    process for a fit would otherwise charge that data to the fit).
    """
    return _status_mb("VmHWM")


def rss_mb():
    """Resident memory of this process now, in MB (VmRSS)."""
    return _status_mb("VmRSS")


def reset_peak():
    """Reset VmHWM to the current resident memory (writing 5 to /proc/self/clear_refs), so
    that a later :func:`peak_rss_mb` measures what happened since. Returns the resident
    memory at the reset in MB; NaN where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return float("nan")
    return rss_mb()


class AnonymousPeak:
    """The largest anonymous resident memory (RssAnon: without the pages of mapped files,
    which the system can write out and reclaim) while the block runs, sampled every 0.1 s
    by a thread; ``base`` is its value at the start, in MB."""

    def __enter__(self):
        import threading

        self.base = self.peak = _status_mb("RssAnon")
        self._stop = threading.Event()

        def sample():
            while not self._stop.wait(0.1):
                self.peak = max(self.peak, _status_mb("RssAnon"))

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _status_mb("RssAnon"))
        return False
