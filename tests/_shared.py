"""Where the tests find the shared fixtures (real data and peer runs).

The ``shared`` folder is looked for in ``SKC_SHARED`` first, then beside the repository
and in every directory above it, so the tests find it from a checkout at any depth below
the directory that holds it.
"""

import os
from pathlib import Path


def shared_fixture(name):
    """The folder ``shared/fixtures/<name>``, wherever ``shared`` is.

    Parameters
    ----------
    name : str
        The fixture's folder under ``shared/fixtures``.

    Returns
    -------
    path : pathlib.Path
        The first existing folder among ``$SKC_SHARED/fixtures/<name>`` and
        ``<parent>/shared/fixtures/<name>`` for every parent of this file; if none exists,
        the place beside the repository, so that a test reading it fails with the path it
        looked at.
    """
    places = []
    if os.environ.get("SKC_SHARED"):
        places.append(Path(os.environ["SKC_SHARED"]))
    here = Path(__file__).resolve()
    places += [parent / "shared" for parent in here.parents]
    for shared in places:
        if (shared / "fixtures" / name).is_dir():
            return shared / "fixtures" / name
    return here.parents[1].parent / "shared" / "fixtures" / name
