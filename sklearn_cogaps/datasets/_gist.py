"""CoGAPS's GIST example data set and its published result, shipped with the package."""

import csv
import gzip
from pathlib import Path

import numpy as np
from sklearn.utils import Bunch

from .._cogaps._uncertainty import default_uncertainty

__all__ = ["load_gist"]

# installed beside this module by meson (see meson.build); README.md there is the DESCR
GIST_DIR = Path(__file__).resolve().parent / "data" / "gist"


def _read_table(name):
    """Row names, column names and values of one shipped table, ``<name>.csv.gz``.

    The tables are R's ``write.csv`` output (quoted names, a first column of row names),
    gzipped. Every number is read with Python's ``float``, which rounds correctly: the
    values are the doubles nearest to the decimals written.
    """
    with gzip.open(GIST_DIR / f"{name}.csv.gz", "rt", encoding="utf-8", newline="") as f:
        header, *rows = csv.reader(f)
    index = np.array([row[0] for row in rows], dtype=object)
    columns = np.array(header[1:], dtype=object)
    values = np.array([[float(v) for v in row[1:]] for row in rows], dtype=np.float64)
    return index, columns, values


def load_gist(*, as_frame=False):
    """Load CoGAPS's GIST example: a tumour cell line's expression over an imatinib time course.

    The example data set of the R/Bioconductor package CoGAPS (``data(GIST)``): the
    expression of 1363 genes in a gastrointestinal stromal tumour (GIST) cell line at nine
    time points, 0 to 48 hours after treatment with imatinib (Ochs et al., 2009), with its
    uncertainty and the CoGAPS result the package publishes (``GIST.result``: three
    patterns, 50000 iterations). The data are in scikit-learn's
    orientation, samples in rows: the transpose of R's ``GIST.matrix``.

    The values are ``log2(x + 1)`` of the measured expression (CoGAPS has shipped them
    transformed since 2019), but the package's uncertainty matrix (R's
    ``GIST.uncertainty``) was left on the scale of ``x``: fitted with it, CoGAPS finds other
    patterns than the published ones. The published result was fitted with CoGAPS's default
    uncertainty, ``max(0.1 * x, 0.1)`` of these values, which is ``uncertainty`` here, so
    that ``CoGAPS(...).fit(gist.data, uncertainty=gist.uncertainty)`` (R's
    ``CoGAPS(GIST.matrix, GIST.uncertainty)`` habit) fits the published model; R's matrix is
    ``r_uncertainty``.
    ``DESCR`` gives the source, the citation, the terms (BSD-3-Clause, from the CoGAPS
    package) and how the files were made.

    Parameters
    ----------
    as_frame : bool, default=False
        If True, return the matrices as pandas DataFrames labelled with the sample, gene
        and pattern names, and ``hours`` as a Series indexed by sample; this needs pandas.

    Returns
    -------
    gist : :class:`~sklearn.utils.Bunch`
        Dictionary-like object with the following attributes.

        data : ndarray or DataFrame of shape (9, 1363)
            The expression, samples × genes.
        uncertainty : ndarray or DataFrame of shape (9, 1363)
            The uncertainty of the published fit: ``max(0.1 * data, 0.1)``
            (:func:`~sklearn_cogaps.default_uncertainty`).
        r_uncertainty : ndarray or DataFrame of shape (9, 1363)
            R's ``GIST.uncertainty``, transposed: on the scale of the untransformed
            expression, not of ``data``; kept for comparison, not for fitting.
        feature_names : ndarray of str of shape (1363,)
            The genes (UniGene cluster identifiers, ``Hs.…``).
        sample_names : ndarray of str of shape (9,)
            The samples, ``IM00`` to ``IM48``.
        hours : ndarray or Series of shape (9,)
            Hours of imatinib treatment of each sample: 0, 2, 4, 6, 9, 12, 18, 24, 48.
        published_patterns : ndarray or DataFrame of shape (9, 3)
            The published patterns, samples × patterns (R's ``Pmean``, the result's
            ``sampleFactors``); each column's maximum is just below 1, as the patterns of
            every posterior sample are scaled to a maximum of 1 before they are averaged.
        published_amplitudes : ndarray or DataFrame of shape (3, 1363)
            The published amplitudes, patterns × genes (R's ``Amean``, the result's
            ``featureLoadings``, transposed): ``published_patterns @
            published_amplitudes`` approximates ``data``.
        pattern_names : ndarray of str of shape (3,)
            ``Pattern_1`` to ``Pattern_3``.
        DESCR : str
            Description of the data set: source, citation, terms and conversion.

    See Also
    --------
    sklearn_cogaps.CoGAPS : The estimator the published result comes from.

    References
    ----------
    .. [1] M. F. Ochs, L. Rink, C. Tarn, S. Mburu, T. Taguchi, B. Eisenberg and
       A. K. Godwin, "Detection of treatment-induced changes in signaling pathways in
       gastrointestinal stromal tumors using transcriptomic data", Cancer Research,
       69(23), 9125-9132, 2009. doi:10.1158/0008-5472.CAN-09-1709
    .. [2] E. J. Fertig, J. Ding, A. V. Favorov, G. Parmigiani and M. F. Ochs, "CoGAPS:
       an integrated R/C++ package to identify overlapping patterns of activation of
       biological processes from expression data", Bioinformatics, 26(21), 2792-2793,
       2010.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_cogaps import CoGAPS, match_components
    >>> from sklearn_cogaps.datasets import load_gist
    >>> gist = load_gist()
    >>> gist.data.shape, gist.published_patterns.shape, gist.published_amplitudes.shape
    ((9, 1363), (9, 3), (3, 1363))
    >>> gist.hours
    array([ 0,  2,  4,  6,  9, 12, 18, 24, 48])
    >>> model = CoGAPS(n_components=3, max_iter=1000, random_state=0).fit(gist.data)
    >>> _, corr = match_components(gist.published_patterns, model.loadings_)
    >>> bool(np.all(corr > 0.95))
    True

    The published patterns are one chain's: chains of 1000 + 1000 iterations find them to
    a few hundredths of correlation, varying with the seed.
    """
    if as_frame:
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError(
                "load_gist(as_frame=True) returns pandas DataFrames and needs pandas, which "
                "is not installed: pip install pandas, or call load_gist() for arrays."
            ) from exc
    genes, samples, data = _read_table("GIST_matrix")
    _, _, r_uncertainty = _read_table("GIST_uncertainty")
    _, patterns, amplitudes = _read_table("GIST_result_Amean")
    _, _, published_patterns = _read_table("GIST_result_Pmean")
    hours = np.array([int(name[2:]) for name in samples])  # IM00 ... IM48
    gist = Bunch(
        data=np.ascontiguousarray(data.T),
        uncertainty=np.ascontiguousarray(default_uncertainty(data.T)),
        r_uncertainty=np.ascontiguousarray(r_uncertainty.T),
        feature_names=genes,
        sample_names=samples,
        hours=hours,
        published_patterns=published_patterns,
        published_amplitudes=np.ascontiguousarray(amplitudes.T),
        pattern_names=patterns,
        DESCR=(GIST_DIR / "README.md").read_text(encoding="utf-8"),
    )
    if as_frame:
        sample_index = pd.Index(samples, name="sample")
        gene_index = pd.Index(genes, name="gene")
        pattern_index = pd.Index(patterns, name="pattern")
        gist.data = pd.DataFrame(gist.data, index=sample_index, columns=gene_index)
        gist.uncertainty = pd.DataFrame(gist.uncertainty, index=sample_index, columns=gene_index)
        gist.r_uncertainty = pd.DataFrame(
            gist.r_uncertainty, index=sample_index, columns=gene_index
        )
        gist.hours = pd.Series(hours, index=sample_index, name="hours")
        gist.published_patterns = pd.DataFrame(
            published_patterns, index=sample_index, columns=pattern_index
        )
        gist.published_amplitudes = pd.DataFrame(
            gist.published_amplitudes, index=pattern_index, columns=gene_index
        )
    return gist
