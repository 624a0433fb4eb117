"""The mixins the estimators share: data refused in the constructor, and what the
non-negative factorisation transformers have in common."""

import functools
import inspect
import re
import reprlib

import numpy as np
from scipy import sparse
from sklearn.decomposition._nmf import _beta_divergence
from sklearn.utils._set_output import ADAPTERS_MANAGER, _get_output_config
from sklearn.utils.validation import check_array, check_is_fitted
from threadpoolctl import threadpool_limits

from ._utils._anndata import index_by_obs_names
from ._utils._validation import is_data, shape_of

__all__ = ["DataInFitMixin", "NonNegativeFactorisationMixin"]


class DataInFitMixin:
    """Refuse data given to the constructor, as in R's ``CoGAPS(data, uncertainty)``.

    The estimators take their parameters in the constructor and their data in ``fit``.
    Data passed positionally to the constructor would otherwise become ``n_components``
    (failing later with a message about an integer parameter) or meet Python's bare
    ``TypeError`` about positional arguments. A class using it sets ``_fit_advice``, the
    call to write instead, and ``_peer_parameters``, the peers' names of its parameters
    (``CoGAPS(nPatterns=3)``), which get a ``TypeError`` with ours rather than Python's bare
    "unexpected keyword argument". Put it left of ``BaseEstimator``.
    """

    _fit_advice = "Estimator(n_components=K).fit(X)"
    #: The peers' spellings of parameters this estimator names otherwise:
    #: ``{name: (whose spelling, what to write instead)}``.
    _peer_parameters = {}
    #: What to write when more parameters are given positionally than the estimator takes
    #: (a peer's positional habit, ``XDGMM(3, 100)``); None for the generic advice.
    _positional_advice = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # The class's signature is its __init__'s (without self): inspect.signature, IDEs
        # and the API pages would otherwise show the *args, **kwargs of __new__ below.
        signature = inspect.signature(cls.__init__)
        cls.__signature__ = signature.replace(parameters=list(signature.parameters.values())[1:])
        if "fit" in cls.__dict__:
            cls.fit = _parameters_not_in_fit(cls.fit)

    def set_params(self, **params):
        """Set the parameters of this estimator, as scikit-learn's ``set_params``.

        A peer's name of a parameter (``set_params(nPatterns=5)``) raises an error that
        gives ours.

        Parameters
        ----------
        **params : dict
            Estimator parameters.

        Returns
        -------
        self : estimator instance
            Estimator instance.
        """
        for name in params:
            if name in type(self)._peer_parameters:
                whose, instead = type(self)._peer_parameters[name]
                raise ValueError(
                    f"{type(self).__name__} has no parameter {name!r} ({whose}'s name); "
                    f"write set_params({instead})."
                )
        return super().set_params(**params)

    def __new__(cls, *args, **kwargs):
        for position, value in enumerate(args):
            if is_data(value):
                raise TypeError(
                    f"{cls.__name__}() takes its parameters, not data: positional argument "
                    f"{position + 1} is a data set of shape {shape_of(value)}. Create the "
                    f"estimator, then give it the data: {cls._fit_advice}."
                )
        positional = [
            p.name
            for p in inspect.signature(cls.__init__).parameters.values()
            if p.kind is p.POSITIONAL_OR_KEYWORD and p.name != "self"
        ]
        if len(args) > len(positional):
            advice = cls._positional_advice or (
                f"{cls.__name__}({', '.join(positional)}, <parameter>=<value>)"
            )
            raise TypeError(
                f"{cls.__name__}() takes {len(positional)} positional parameter"
                f"{'s' if len(positional) != 1 else ''} ({', '.join(positional)}) and the "
                f"others by keyword; {len(args)} were given positionally. Write {advice}."
            )
        for name, value in kwargs.items():
            if name in cls._peer_parameters:
                whose, instead = cls._peer_parameters[name]
                # reprlib: a list of 20,000 gene names or a matrix is not echoed whole
                raise TypeError(
                    f"{cls.__name__}() has no parameter {name!r} ({whose}'s name, given "
                    f"{reprlib.repr(value)}); write {instead}."
                )
        return super().__new__(cls)


def _what_to_write(cls, instead):
    """The advice of a peer's parameter given to ``fit``: a constructor assignment
    (``n_components=K``) is shown in the constructor; other advice (a call, "nothing
    here: ...") is shown as written."""
    if re.match(r"[A-Za-z_]\w*=", instead):
        return f", which goes to the constructor: write {cls.__name__}({instead}).fit(X)"
    if instead.startswith("nothing"):
        return f"; it needs {instead}"
    return f"; write {instead}"


def _parameters_not_in_fit(fit):
    """Wrap ``fit`` so that a parameter of the estimator given to it (R's habit of
    ``CoGAPS(data, nPatterns=3, seed=1)``, written ``fit(X, seed=1)``) says that parameters
    go to the constructor, under our name; other unknown arguments keep Python's error."""

    accepted = inspect.signature(fit).parameters

    @functools.wraps(fit)
    def wrapper(self, *args, **kwargs):
        cls = type(self)
        for name in kwargs:
            if name in accepted:
                continue
            if name in cls._peer_parameters:
                whose, instead = cls._peer_parameters[name]
                raise TypeError(
                    f"fit() takes the data; {name!r} is {whose}'s name of a parameter"
                    f"{_what_to_write(cls, instead)}."
                )
            if name in self.get_params(deep=False):
                raise TypeError(
                    f"fit() takes the data; {name!r} is a parameter, which goes to the "
                    f"constructor: write {cls.__name__}({name}=...).fit(X), or "
                    f"set_params({name}=...)."
                )
        return fit(self, *args, **kwargs)

    return wrapper


class NonNegativeFactorisationMixin:
    """What the non-negative factorisation transformers share.

    Their output features are the components (``X ≈ transform(X) @ components_``), they take
    non-negative dense or sparse input, and they compute in float64. Put it left of
    ``ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator``.
    """

    #: Whether a long table of (user, item, count) triplets is refused (see
    #: ``check_not_triplets``): the input of hpfrec's ``HPF.fit``.
    _refuses_triplets = True

    #: What to do instead, appended to scikit-learn's error on negative input.
    _negative_input_advice = (
        "The model is for non-negative data: pass the values before centring or "
        "standardising (in a Pipeline, drop StandardScaler or use MaxAbsScaler, which "
        "keeps held-out values non-negative where MinMaxScaler may not), or "
        "shift them by their minimum."
    )

    #: The beta-divergence whose square root ``reconstruction_err_`` is, as in scikit-learn's
    #: NMF: 2 (Frobenius) or 1 (Kullback-Leibler, the Poisson models' loss).
    _reconstruction_beta = 2

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)  # scikit-learn's set_output wraps transform here
        for name in ("transform", "fit_transform"):
            if hasattr(cls, name):
                setattr(cls, name, index_by_obs_names(getattr(cls, name)))

    def inverse_transform(self, X):
        """Data reconstructed from per-sample factors: ``X @ components_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_components)
            Per-sample factors, as returned by :meth:`transform`.

        Returns
        -------
        X_original : ndarray of shape (n_samples, n_features)
            The reconstruction of the data (the posterior mean of its expectation).
        """
        check_is_fitted(self)
        # float32 factors of a float32 fit stay float32, as scikit-learn's NMF keeps them
        W = check_array(X, dtype=[np.float64, np.float32])
        if W.shape[1] != self.components_.shape[0]:
            raise ValueError(
                f"inverse_transform expects per-sample factors of shape (n_samples, "
                f"n_components={self.components_.shape[0]}); got {W.shape}. Pass the output "
                f"of transform."
            )
        X_original = W @ self.components_.astype(np.result_type(W, self.components_), copy=False)
        # set_output wraps transform only; the reconstruction has the input's features
        config = _get_output_config("transform", self)["dense"]
        if config == "default":
            return X_original
        names = getattr(self, "feature_names_in_", None)
        if names is None:
            names = np.array([f"x{j}" for j in range(X_original.shape[1])], dtype=object)
        return ADAPTERS_MANAGER.adapters[config].create_container(
            X_original, X, columns=names, inplace=False
        )

    #: Fitted arrays given in the dtype of float32 data (the computation is in float64).
    _data_dtype_attributes = ("loadings_", "components_")

    def _cast_fitted(self, dtype):
        """Give float32 data float32 fitted factors, as scikit-learn's NMF does."""
        if dtype == np.float32:
            for name in self._data_dtype_attributes:
                setattr(self, name, np.asarray(getattr(self, name), dtype=np.float32))

    def _set_reconstruction_err(self, X):
        """``reconstruction_err_``: the distance between X and ``loadings_ @ components_``,
        as scikit-learn's NMF defines it for its ``beta_loss``: the Frobenius norm (beta 2)
        or sqrt(2 D_KL(X || WH)) (beta 1), from the stored entries of a sparse X."""
        W = np.asarray(self.loadings_, dtype=np.float64)
        H = np.asarray(self.components_, dtype=np.float64)
        if sparse.issparse(X):
            # scikit-learn's divergence pairs X.data with X's non-zero pattern: canonical CSR
            X = sparse.csr_matrix(X, dtype=np.float64, copy=True)
            X.sum_duplicates()
            X.eliminate_zeros()
        else:
            X = np.asarray(X, dtype=np.float64)
        # one BLAS thread: the divergence's dot products sum in an order that depends on
        # BLAS's thread count (OPENBLAS_NUM_THREADS, or OMP_NUM_THREADS, which OpenBLAS also
        # reads), and their last bit with it
        with threadpool_limits(limits=1, user_api="blas"):
            self.reconstruction_err_ = float(
                _beta_divergence(X, W, H, self._reconstruction_beta, square_root=True)
            )

    @property
    def _n_features_out(self):
        """Number of transformed output features."""
        return self.components_.shape[0]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
