"""``python -m sklearn_cogaps``: the command line (see ``sklearn_cogaps._cli``)."""

from ._cli import main

raise SystemExit(main())
