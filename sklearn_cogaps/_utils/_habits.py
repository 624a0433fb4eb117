"""The peers' spellings of a function's arguments: a call written with the habits of the tool
a user comes from (astroML's ``fit(X, Xerr=S)``, implicit's ``recommend(..., N=10)``, R's
``patternMarkers(lp=...)``) gets a ``TypeError`` that says what to write here, where Python
would only say "unexpected keyword argument"."""

import functools

__all__ = ["peer_arguments"]


def peer_arguments(renamed, *, n_positional=None, positional_advice=None, example=None):
    """Decorate a function or method so that the peers' argument names say ours.

    The decorated callable keeps its signature (``inspect.signature`` follows
    ``__wrapped__``, as scikit-learn's metadata routing does).

    Parameters
    ----------
    renamed : dict
        ``{peer's name: (whose name, our name)}``; ``our name`` None when the value is our
        first positional argument.
    n_positional : int or None, default=None
        The positional arguments the callable takes, ``self`` included for a method; more
        are refused with ``positional_advice``. None: left to Python.
    positional_advice : str or None, default=None
        What to write when too many positional arguments are given.
    example : str or None, default=None
        The call to show after a renamed argument (``"{name}(X, {new}=...)"`` by default,
        formatted with the callable's ``name`` and our ``new`` name).

    Returns
    -------
    decorator : callable
    """

    def decorate(function):
        name = function.__name__

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            for old, (whose, new) in renamed.items():
                if old in kwargs:
                    takes = f"{new}=" if new else "that value as its first argument"
                    default = "{name}(X, {new}=...)" if new else "{name}(X)"
                    write = (example or default).format(name=name, new=new)
                    raise TypeError(
                        f"{name}() takes {takes}, not {old}= ({whose} name): write {write}."
                    )
            if n_positional is not None and len(args) > n_positional:
                raise TypeError(positional_advice.format(name=name))
            return function(*args, **kwargs)

        return wrapper

    return decorate
