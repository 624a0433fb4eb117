"""Peak memory of the running benchmark process."""


def peak_rss_mb():
    """Peak resident memory of this process in MB.

    Read from VmHWM in /proc/self/status: unlike ``ru_maxrss``, it is not inherited across
    exec from the parent (a benchmark that generated large data before starting a fresh
    process for a fit would otherwise charge that data to the fit).
    """
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")
