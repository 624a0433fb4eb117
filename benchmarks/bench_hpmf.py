"""HierarchicalPMF against hpfrec, poismf and scikit-learn's KL-NMF on the shared count matrices.

    python benchmarks/bench_hpmf.py            # make_sim() and make_sc(), every method
    python benchmarks/bench_hpmf.py --quick    # make_sim() only
    python benchmarks/bench_hpmf.py --whole-fit [--repeats 3]   # make_sc, start included

Each (method, matrix) runs in its own process, on one thread, so that its peak memory
(VmHWM) is its own. Printed per run: CPU seconds per iteration, total CPU seconds, the
number of iterations, the peak resident memory of the process (and its increase over the
process after loading the data), and ``poisson_loglik`` of the fitted mean on the training
counts. On make_sc every method runs 100 iterations (as the reference figures); a last row
runs HierarchicalPMF to convergence (relative ELBO change 1e-5). The peers that are not
installed are installed from PyPI first. Timings are noisy when the machine is shared.

``--whole-fit`` times what a user waits for on make_sc: HierarchicalPMF's fit with 10
iterations, its start included, against hpfrec's 10 iterations, wall clock, both on 2
threads (``ncores=2``), each fit in its own process after its imports, the two alternating,
medians of ``--repeats`` runs.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from _memory import peak_rss_mb
from _shared_data import import_bench, shared_dir

ROOT = Path(__file__).resolve().parents[1]
BENCH = shared_dir() / "bench"

PEERS = {"hpfrec": "hpfrec", "poismf": "poismf"}

# Measured figures quoted in ../shared/reference/poisson-factorisation.md (make_sc, one thread).
REFERENCE = [
    ("scHPF (reference)", "sc", 0.95, 2048, -24.037e6),
    ("hpfrec (reference)", "sc", 2.8, 863, -24.050e6),
    ("NMF-KL (reference)", "sc", 1.46, 549, -24.014e6),
]


def ensure_peers():
    for module, package in PEERS.items():
        try:
            __import__(module)
        except ImportError:
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", package], check=False)


def load(name):
    import_bench()
    from counts_data import make_sc, make_sim
    from scipy import sparse

    if name == "sim":
        X, L, F, K = make_sim()
        return X, K
    cache = Path(tempfile.gettempdir()) / "sklearn_cogaps_bench_make_sc.npz"
    if not cache.exists():
        X, L, F, K = make_sc()
        sparse.save_npz(cache, X)
        return X, K
    return sparse.load_npz(cache).tocsr(), 10


def fit_ours(X, K, n_iter, tol):
    from sklearn_cogaps import HierarchicalPMF

    est = HierarchicalPMF(K, max_iter=n_iter, tol=tol, random_state=0).fit(X)
    return est.loadings_, est.components_.T, est.n_iter_


def fit_nmf(X, K, n_iter, tol):
    from sklearn.decomposition import NMF

    est = NMF(
        K,
        beta_loss="kullback-leibler",
        solver="mu",
        init="nndsvda",
        max_iter=n_iter,
        tol=tol,
        random_state=0,
    )
    W = est.fit_transform(X)
    return W, est.components_.T, est.n_iter_


def _triplets(X, columns):
    import pandas as pd

    coo = X.tocoo()
    return pd.DataFrame({columns[0]: coo.row, columns[1]: coo.col, columns[2]: coo.data})


def fit_hpfrec(X, K, n_iter, tol):
    from hpfrec import HPF

    df = _triplets(X, ("UserId", "ItemId", "Count"))
    kw = dict(stop_crit="maxiter") if tol == 0 else dict(stop_crit="train-llk", stop_thr=tol)
    est = HPF(
        k=K,
        ncores=1,
        maxiter=n_iter,
        reindex=False,
        verbose=False,
        random_seed=0,
        check_every=10,
        **kw,
    )
    est.fit(df)
    return est.Theta, est.Beta, int(getattr(est, "niter", n_iter))


def fit_poismf(X, K, n_iter, tol):
    from poismf import PoisMF

    # poismf's default l2_reg ("auto") shrinks the factors far from the counts' scale
    # (poisson_loglik -337k on make_sim); a light penalty gives its fair fit. With tol > 0 it
    # runs its default 10 outer iterations with early stopping.
    df = _triplets(X, ("UserId", "ItemId", "Count"))
    niter = n_iter if tol == 0 else 10
    est = PoisMF(k=K, niter=niter, l2_reg=1e-4, nthreads=1, reindex=False, random_state=0)
    est.fit(df)
    return est.A, est.B, niter


METHODS = {
    "HierarchicalPMF": fit_ours,
    "NMF-KL (mu)": fit_nmf,
    "hpfrec": fit_hpfrec,
    "poismf": fit_poismf,
}


def run_one(method, data, n_iter, tol):
    import_bench()
    from counts_data import poisson_loglik

    X, K = load(data)
    base = peak_rss_mb()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.process_time()
        L, F, iters = METHODS[method](X, K, n_iter, tol)
        cpu = time.process_time() - t0
    peak = peak_rss_mb()
    ll = poisson_loglik(X, np.asarray(L, dtype=float), np.asarray(F, dtype=float))
    print(json.dumps(dict(cpu=cpu, iters=int(iters), peak=peak, extra=peak - base, ll=ll)))


def spawn(method, data, n_iter, tol):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    out = subprocess.run(
        [sys.executable, __file__, "--one", method, data, str(n_iter), str(tol)],
        capture_output=True,
        text=True,
        env=env,
    )
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        return dict(error=(out.stderr.strip().splitlines() or ["failed"])[-1])
    return json.loads(lines[-1])


def whole_fit(method, n_iter):
    """Wall seconds of one whole fit on make_sc, 2 threads (run in a subprocess)."""
    X, K = load("sc")
    # imports before the clock: a fit's time is its start and its iterations
    from hpfrec import HPF

    from sklearn_cogaps import HierarchicalPMF

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        if method == "HierarchicalPMF":
            est = HierarchicalPMF(K, max_iter=n_iter, random_state=0).fit(X)
            L, F = est.loadings_, est.components_.T
        else:
            est = HPF(k=K, ncores=2, maxiter=n_iter, stop_crit="maxiter", reindex=False,
                      verbose=False, random_seed=0)  # fmt: skip
            est.fit(_triplets(X, ("UserId", "ItemId", "Count")))
            L, F = est.Theta, est.Beta
        seconds = time.perf_counter() - t0
    import_bench()
    from counts_data import poisson_loglik

    ll = poisson_loglik(X, np.asarray(L, dtype=float), np.asarray(F, dtype=float))
    print(json.dumps(dict(seconds=seconds, ll=ll, peak=peak_rss_mb())))


def main_whole_fit(repeats, n_iter=10):
    ensure_peers()
    load("sc")
    env = dict(os.environ, OMP_NUM_THREADS="2", OPENBLAS_NUM_THREADS="2", MKL_NUM_THREADS="2")
    times = {"HierarchicalPMF": [], "hpfrec": []}
    for r in range(repeats):
        for method in times:
            out = subprocess.run(
                [sys.executable, __file__, "--whole", method, str(n_iter)],
                capture_output=True, text=True, env=env,
            )  # fmt: skip
            lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
            if out.returncode != 0 or not lines:
                print(f"{method} failed: {out.stderr.strip()[-300:]}")
                continue
            res = json.loads(lines[-1])
            times[method].append(res["seconds"])
            print(f"round {r + 1}: {method:<16} {res['seconds']:7.2f} s  peak {res['peak']:6.0f} MB  "
                  f"poisson_loglik {res['ll']:,.0f}")  # fmt: skip
            sys.stdout.flush()
    ours, peer = np.median(times["HierarchicalPMF"]), np.median(times["hpfrec"])
    print(f"make_sc, {n_iter} iterations, 2 threads, medians of {repeats}: HierarchicalPMF "
          f"{ours:.2f} s (start included), hpfrec {peer:.2f} s, ratio {ours / peer:.3f}")  # fmt: skip


def main(quick):
    ensure_peers()
    import_bench()
    from counts_data import make_sim, poisson_loglik

    X, L, F, _ = make_sim()
    print(f"make_sim: 200 x 300, true mean scores poisson_loglik {poisson_loglik(X, L, F):,.0f}")
    plan = [(m, "sim", 1000, 1e-5) for m in METHODS]
    if not quick:
        load("sc")  # cached once, so no run's peak memory includes making the matrix
        plan += [(m, "sc", 100, 0) for m in METHODS]
        plan += [("HierarchicalPMF", "sc", 1000, 1e-5)]
    header = (
        f"{'method':<22}{'data':<6}{'iters':>6}{'s/iter':>9}{'total s':>9}"
        f"{'peak MB':>9}{'+MB':>7}{'poisson_loglik':>17}{'s/iter ratio':>14}"
    )
    print(header)
    print("-" * len(header))
    ours = {}
    for method, data, n_iter, tol in plan:
        r = spawn(method, data, n_iter, tol)
        if "error" in r:
            print(f"{method:<22}{data:<6} failed: {r['error']}")
            continue
        per = r["cpu"] / max(r["iters"], 1)
        if method == "HierarchicalPMF" and data not in ours:
            ours[data] = per
        ratio = per / ours[data] if data in ours else float("nan")
        print(
            f"{method:<22}{data:<6}{r['iters']:>6}{per:>9.3f}{r['cpu']:>9.1f}"
            f"{r['peak']:>9.0f}{r['extra']:>7.0f}{r['ll']:>17,.0f}{ratio:>13.1f}x"
        )
        sys.stdout.flush()
    if not quick and "sc" in ours:
        for name, data, per, peak, ll in REFERENCE:
            print(
                f"{name:<22}{data:<6}{100:>6}{per:>9.3f}{per * 100:>9.1f}{peak:>9.0f}"
                f"{'':>7}{ll:>17,.0f}{per / ours['sc']:>13.1f}x"
            )
    print(
        "s/iter ratio: CPU seconds per iteration relative to HierarchicalPMF on the same "
        "matrix (one thread). Timings are noisy on a shared machine."
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--whole":
        whole_fit(sys.argv[2], int(sys.argv[3]))
    elif "--whole-fit" in sys.argv:
        n = sys.argv.index("--repeats") + 1 if "--repeats" in sys.argv else None
        main_whole_fit(int(sys.argv[n]) if n else 3)
    elif len(sys.argv) > 1 and sys.argv[1] == "--one":
        run_one(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]))
    else:
        main(quick="--quick" in sys.argv)
