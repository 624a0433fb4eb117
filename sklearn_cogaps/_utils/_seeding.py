"""Seeds of the compiled generators, and digests of the data a chain sampled."""

import hashlib

import numpy as np

__all__ = ["check_seed", "draw_seeds", "fingerprint", "keyed_digest_seeds", "stream_seeds"]


def draw_seeds(rng, size=None):
    """Draw 64-bit seeds for the nogil generators from a numpy ``RandomState``.

    Parameters
    ----------
    rng : numpy.random.RandomState
        The generator made once per fit by ``check_random_state(random_state)``.
    size : int or None, default=None
        Number of seeds; None gives one Python int.

    Returns
    -------
    seeds : int or ndarray of uint64
        Uniform over the 64-bit integers.
    """
    n = 1 if size is None else size
    hi = rng.randint(0, 2**32, size=n, dtype=np.uint64)
    lo = rng.randint(0, 2**32, size=n, dtype=np.uint64)
    seeds = (hi << np.uint64(32)) | lo
    return int(seeds[0]) if size is None else seeds


def fingerprint(*parts):
    """A short digest of strings and arrays (their dtypes, shapes and values).

    A warm start keeps one of the data its chain sampled, and continues the chain only on
    data with the same fingerprint.

    Parameters
    ----------
    *parts : str or array-like
        What to digest, in order.

    Returns
    -------
    digest : str
        32 hexadecimal digits.
    """
    digest = hashlib.blake2b(digest_size=16)
    for part in parts:
        if isinstance(part, str):
            digest.update(part.encode())
            continue
        array = np.ascontiguousarray(part)
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def keyed_digest_seeds(seed, parts):
    """One 64-bit seed per item, a digest of the item's bytes keyed by ``seed``.

    A per-row chain seeded so depends on ``random_state`` and on the row itself, never on
    the other rows or on the row's position: ``transform`` gives a row the same result in
    any batch.

    Parameters
    ----------
    seed : int
        A 64-bit seed drawn from ``random_state`` at fit time.
    parts : iterable of bytes or of tuple of bytes
        The bytes of each item (several pieces are digested in order).

    Returns
    -------
    seeds : ndarray of uint64
    """
    key = int(seed).to_bytes(8, "little")
    seeds = []
    for item in parts:
        digest = hashlib.blake2b(digest_size=8, key=key)
        for piece in (item,) if isinstance(item, bytes) else item:
            digest.update(piece)
        seeds.append(int.from_bytes(digest.digest(), "little"))
    return np.array(seeds, dtype=np.uint64)


def stream_seeds(seeds, stream):
    """Seeds of stream ``stream`` (0, 1, ...) of each item from the items' ``seeds``: the
    splitmix64 finaliser of ``seed + (stream + 1) * golden``, so that every stream of every
    item gets an unrelated generator (the folds of ``score``, the steps of a chain).

    Parameters
    ----------
    seeds : ndarray of uint64
    stream : int

    Returns
    -------
    seeds : ndarray of uint64
    """
    with np.errstate(over="ignore"):  # arithmetic modulo 2**64
        z = seeds + np.uint64(0x9E3779B97F4A7C15) * np.uint64(stream + 1)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def check_seed(random_state):
    """``sklearn.utils.check_random_state`` for the public functions, which refuses a numpy
    ``Generator`` with what to pass instead (numpy's own message says only that it cannot
    seed a RandomState)."""
    from sklearn.utils import check_random_state

    if isinstance(random_state, np.random.Generator):
        raise ValueError(
            "random_state must be an int, a numpy RandomState or None, as in scikit-learn; "
            "got a numpy Generator. Pass an int drawn from it, "
            "random_state=int(rng.integers(2**32)), or np.random.RandomState(seed)."
        )
    return check_random_state(random_state)
