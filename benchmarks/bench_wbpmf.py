"""Benchmark of WeightedBackgroundPMF: time per iteration, peak memory, fit quality.

Compares with
- the R implementation ``ebpmf.alpha::ebpmf_wbg`` through its reference run (fixture
  ``../shared/fixtures/ebpmf_wbg``: 0.30 s per iteration for K = 5 on this kind of machine,
  final ELBO -119,793.47 after 100 iterations from the same starting factors); R is not
  installed here, so its figures are quoted;
- scikit-learn's KL-NMF (multiplicative updates), the only Python Poisson factorisation with
  the same API, on time per iteration and Poisson log-likelihood of the fitted mean
  (``counts_data.poisson_loglik``).

Every configuration runs in a fresh subprocess so that its peak resident memory (``ru_maxrss``)
is its own. Timings on a shared machine are noisy.

    python benchmarks/bench_wbpmf.py            # all tables
    python benchmarks/bench_wbpmf.py --quick    # smaller scaling study
"""

import argparse
import json
import subprocess
import sys
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
from _memory import peak_rss_mb
from _shared_data import import_bench, shared_dir

HERE = Path(__file__).resolve().parent
SHARED = shared_dir()
FIXTURE = SHARED / "fixtures" / "ebpmf_wbg"
R_SEC_PER_ITER = 0.30
R_FINAL_ELBO = -119793.4710996461


def _rss_mb():
    return peak_rss_mb()


def _data(name):
    import_bench()
    from counts_data import make_sc, make_sim
    from scipy import io

    if name == "fixture":
        X = io.mmread(FIXTURE / "X.mtx").tocsr().astype(np.float64)
        return X, 5
    if name == "sim":
        X, _, _, K = make_sim()
        return X, K
    if name.startswith("sc"):
        # sc:n:p:density
        _, n, p, d = name.split(":")
        X, _, _, K = make_sc(n=int(n), p=int(p), K=10, density=float(d))
        return X, K
    raise ValueError(name)


def run_one(method, data, n_iter):
    """Fit one method on one data set; return a dict of figures."""
    import_bench()
    from counts_data import poisson_loglik
    from sklearn.exceptions import ConvergenceWarning

    warnings.simplefilter("ignore", ConvergenceWarning)
    X, K = _data(data)
    base_rss = _rss_mb()
    out = {"method": method, "data": data, "n": X.shape[0], "p": X.shape[1], "nnz": X.nnz, "K": K}
    if method == "wbpmf":
        from sklearn_cogaps import WeightedBackgroundPMF, effective_n_threads

        out["threads"] = effective_n_threads()
        if data == "fixture":
            W = np.loadtxt(FIXTURE / "init_L.csv", delimiter=",")
            H = np.loadtxt(FIXTURE / "init_F.csv", delimiter=",").T
        else:
            from sklearn.decomposition import NMF

            nmf = NMF(
                K, beta_loss="kullback-leibler", solver="mu", max_iter=50, tol=0, random_state=0
            )
            t0 = time.perf_counter()
            W = nmf.fit_transform(X)
            H = nmf.components_
            out["init_s"] = time.perf_counter() - t0
        model = WeightedBackgroundPMF(
            K, init="custom", solver="sequential", max_iter=n_iter, tol=0.0
        )
        tracemalloc.start()
        t0 = time.perf_counter()
        model.fit(X, W=W, H=H)
        dt = time.perf_counter() - t0
        out["fit_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        out["s_per_iter"] = dt / model.n_iter_
        out["iters"] = model.n_iter_
        out["elbo"] = model.lower_bound_
        L_hat = model.l0_[:, None] * model.loadings_mean_
        out["loglik"] = poisson_loglik(X, L_hat, model.components_.T)
    elif method == "nmf":
        from sklearn.decomposition import NMF

        nmf = NMF(
            K, beta_loss="kullback-leibler", solver="mu", max_iter=n_iter, tol=0, random_state=0
        )
        tracemalloc.start()
        t0 = time.perf_counter()
        W = nmf.fit_transform(X)
        dt = time.perf_counter() - t0
        out["fit_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        out["s_per_iter"] = dt / nmf.n_iter_
        out["iters"] = nmf.n_iter_
        out["loglik"] = poisson_loglik(X, W, nmf.components_.T)
    out["peak_mb"] = _rss_mb()
    out["data_mb"] = base_rss
    return out


def _spawn(method, data, n_iter):
    cmd = [sys.executable, str(Path(__file__).resolve()), "--one", method, data, str(n_iter)]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--one", nargs=3, metavar=("METHOD", "DATA", "ITERS"))
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.one:
        method, data, n_iter = args.one
        print(json.dumps(run_one(method, data, int(n_iter))))
        return

    print("WeightedBackgroundPMF benchmark (figures from one run; shared machine, noisy)\n")
    # 1. The R reference run.
    r = _spawn("wbpmf", "fixture", 100)
    print("Fixture 999 x 453, nnz 40,763, K = 5, 100 iterations from R's starting factors")
    print(f"{'':22s}{'s/iter':>10s}{'ratio to R':>12s}{'final ELBO':>16s}{'fit MB':>10s}")
    print(
        f"{'R ebpmf_wbg (quoted)':22s}{R_SEC_PER_ITER:10.3f}{1.0:12.2f}{R_FINAL_ELBO:16.2f}"
        f"{'-':>10s}"
    )
    print(
        f"{'WeightedBackgroundPMF':22s}{r['s_per_iter']:10.3f}"
        f"{r['s_per_iter'] / R_SEC_PER_ITER:12.2f}{r['elbo']:16.2f}{r['fit_mb']:10.1f}"
    )
    print(f"(threads: {r['threads']}; ratio < 1 means faster than R)\n")

    # 2. Against scikit-learn's KL-NMF on the shared count data.
    sets = [("sim", 100), ("sc:20000:5000:0.07", 10)]
    if args.quick:
        sets = [("sim", 100), ("sc:4000:2000:0.07", 10)]
    print("Against scikit-learn KL-NMF (MU) on counts_data: NMF runs 50 + N iterations, WBPMF N")
    print("iterations started from those 50 NMF iterations")
    print(
        f"{'data':22s}{'nnz':>10s}{'method':>8s}{'iters':>7s}{'s/iter':>9s}{'ratio':>7s}"
        f"{'poisson_loglik':>17s}{'fit MB':>9s}{'peak MB':>9s}"
    )
    for data, it in sets:
        a = _spawn("nmf", data, 50 + it)
        b = _spawn("wbpmf", data, it)
        for x in (a, b):
            name = "NMF-KL" if x["method"] == "nmf" else "WBPMF"
            print(
                f"{data:22s}{x['nnz']:10d}{name:>8s}{x['iters']:7d}{x['s_per_iter']:9.3f}"
                f"{x['s_per_iter'] / a['s_per_iter']:7.2f}{x['loglik']:17.1f}"
                f"{x['fit_mb']:9.0f}{x['peak_mb']:9.0f}"
            )
    print(
        "(ratio: time per iteration relative to NMF-KL; WBPMF's loglik is of its posterior mean)\n"
    )

    # 3. Scaling with nnz, K = 10.
    dens = [0.0025, 0.005, 0.01, 0.02] if not args.quick else [0.005, 0.01]
    shape = (20000, 10000) if not args.quick else (5000, 2500)
    print(f"Scaling with nnz: make_sc {shape[0]} x {shape[1]}, K = 10, 5 iterations from NMF init")
    print(
        f"{'density':>8s}{'nnz':>12s}{'s/iter':>9s}{'us/nnz/iter':>13s}{'fit MB':>9s}"
        f"{'peak MB':>9s}"
    )
    for d in dens:
        x = _spawn("wbpmf", f"sc:{shape[0]}:{shape[1]}:{d}", 5)
        print(
            f"{d:8.4f}{x['nnz']:12d}{x['s_per_iter']:9.3f}"
            f"{1e6 * x['s_per_iter'] / x['nnz']:13.3f}{x['fit_mb']:9.0f}{x['peak_mb']:9.0f}"
        )
    print("(fit MB: peak of the arrays allocated by fit (tracemalloc); peak MB: resident memory")
    print(" of the whole process, data generation included)")


if __name__ == "__main__":
    main()
