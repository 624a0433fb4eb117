"""Names that changed: old parameter and attribute names keep working for one release, with a
``FutureWarning`` that says what to write instead, and estimators pickled under the old names
load with the new ones."""

import inspect
import re

import numpy as np

from ._warnings import warn

__all__ = ["RenamedMixin"]

#: The release that renamed them, and the one that will remove the old names.
RENAMED_IN, REMOVED_IN = "0.2", "0.3"
#: The value of an old parameter that is not set.
NOT_SET = "deprecated"


class RenamedMixin:
    """Old names of parameters and fitted attributes, for one release.

    A class using it sets ``_renamed_parameters`` (``{old: new}``: the old parameter stays in
    ``__init__`` with the default ``"deprecated"``, and the fit reads the value through
    :meth:`_parameter`) and ``_renamed_attributes`` (``{old: (new, transposed)}``: reading the
    old attribute warns and returns the new one, transposed when the orientation changed
    too). Put it left of ``BaseEstimator``. A class may also say why a fitted attribute is
    absent: ``_absent_attribute(self, name)`` returns the reason (appended to the
    ``AttributeError``) or None.
    """

    _renamed_parameters = {}
    _renamed_attributes = {}
    #: ``{parameter: value}``: parameters retired without a new name, whose old default now
    #: reads as set (an earlier release's pickle holds it).
    _retired_defaults = {}

    def _validate_params(self):
        # scikit-learn's refusal of max_iter=1e4 says only "must be an int": say what to write
        # a bool is an int to Python and to scikit-learn's intervals: n_components=True
        # (a boolean grid) would fit one component, or fail inside numpy
        from sklearn.utils._param_validation import Interval, InvalidParameterError

        from ._params import integral_float_hint

        # a fit reads a renamed parameter in several places: it warns about each once
        self._renamed_warned = set()
        for name, constraints in type(self)._parameter_constraints.items():
            value = getattr(self, name, None)
            if (
                isinstance(value, (bool, np.bool_))
                and "boolean" not in constraints
                and any(isinstance(c, Interval) for c in constraints)
            ):
                raise InvalidParameterError(
                    f"The {name!r} parameter of {type(self).__name__} must be a number, not "
                    f"a bool; got {value!r}."
                )
        try:
            super()._validate_params()
        except InvalidParameterError as exc:
            named = re.match(r"The '(\w+)' parameter", str(exc))
            hint = integral_float_hint(self, named.group(1)) if named else None
            if hint is None:
                raise
            raise InvalidParameterError(f"{exc} {hint}") from None

    def __getattr__(self, name):
        # only called when ordinary lookup fails: a fitted attribute under its old name
        renamed = type(self)._renamed_attributes.get(name)
        # methods of the peers under their names (hpfrec's ``topN``), declared by a class or
        # a mixin as ``_peer_methods = {name: (whose, what to write instead)}``
        peer = getattr(type(self), "_peer_methods", {})
        if name in peer:
            whose, instead = peer[name]
            raise AttributeError(
                f"{type(self).__name__!r} object has no attribute {name!r} ({whose}'s); "
                f"write {instead}."
            )
        # why a fitted attribute is absent, where a class can say (``_absent_attribute``)
        explain = getattr(type(self), "_absent_attribute", None)
        if explain is not None and not name.startswith("__"):
            reason = explain(self, name)
            if reason is not None:
                raise AttributeError(
                    f"{type(self).__name__!r} object has no attribute {name!r}: {reason}"
                )
        if renamed is None or name.startswith("__"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        new, transposed = renamed
        value = getattr(self, new)  # an AttributeError here: the estimator is not fitted
        warn(
            f"'{name}' was renamed '{new}' in {RENAMED_IN} and will be removed in "
            f"{REMOVED_IN}; use {new}{'.T' if transposed else ''}.",
            FutureWarning,
        )
        return value.T if transposed else value

    def set_params(self, **params):
        """Set the parameters of this estimator; a new name also unsets its old one.

        As ``BaseEstimator.set_params``, where a renamed parameter set without its old name
        unsets the old one, so the value set last wins. Otherwise an estimator made with the
        old name (``method="sgd"``) would keep it through ``set_params(solver="em")``
        whenever the new value is the default, and ``GridSearchCV`` over ``solver`` would
        fit one solver for every candidate.

        Parameters
        ----------
        **params : dict
            Estimator parameters.

        Returns
        -------
        self : estimator instance
            Estimator instance.
        """
        for old, new in type(self)._renamed_parameters.items():
            if new in params and old not in params:
                params[old] = NOT_SET
        return super().set_params(**params)

    def _parameter(self, new):
        """The value of parameter ``new``, or of its old name when that one is set (with a
        ``FutureWarning``; a ``ValueError`` when both are set to different values)."""
        old = next((o for o, n in type(self)._renamed_parameters.items() if n == new), None)
        value = getattr(self, new)
        if old is None:
            return value
        old_value = getattr(self, old, NOT_SET)
        if isinstance(old_value, str) and old_value == NOT_SET:
            return value
        default = type(self)._init_default(new)
        if not _same(value, default) and not _same(value, old_value):
            raise ValueError(
                f"{old}={old_value!r} and {new}={value!r} are both set; '{old}' is the old name "
                f"of '{new}': set {new} only."
            )
        warned = self.__dict__.setdefault("_renamed_warned", set())
        if old not in warned:
            warned.add(old)
            warn(
                f"'{old}' was renamed '{new}' in {RENAMED_IN} and will be removed in "
                f"{REMOVED_IN}. Use {new}={old_value!r}.",
                FutureWarning,
            )
        return old_value

    def _under_new_names(self):
        """``set_params`` arguments that move the values set under old names to the new
        ones, for the clones a fit makes (they would warn again, in every worker)."""
        moved = {}
        for old, new in type(self)._renamed_parameters.items():
            moved[new] = self._parameter(new)
            moved[old] = NOT_SET
        return moved

    @classmethod
    def _init_default(cls, name):
        return inspect.signature(cls.__init__).parameters[name].default

    def __setstate__(self, state):
        # an estimator pickled by an earlier release: its parameters and attributes renamed,
        # the parameters added since at their defaults, and what it did not record
        cls = type(self)
        for old, value in cls._retired_defaults.items():
            if old in state and _same(state[old], value):
                state[old] = NOT_SET
        for old, new in type(self)._renamed_parameters.items():
            if old in state and new not in state:
                state[new] = state[old]
                state[old] = NOT_SET
        for old, (new, transposed) in type(self)._renamed_attributes.items():
            if old in state:
                value = state.pop(old)
                if new not in state:
                    state[new] = value.T if transposed else value
        for name, parameter in inspect.signature(cls.__init__).parameters.items():
            if name != "self" and name not in state:
                state[name] = parameter.default
        fitted = getattr(cls, "_fitted_attribute", None)
        if fitted in state and "converged_" not in state:
            state["converged_"] = cls._converged_of_earlier_fit(state)
        super().__setstate__(state)


def _same(a, b):
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # arrays
        return a is b
