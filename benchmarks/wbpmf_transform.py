"""WeightedBackgroundPMF's ``transform`` of new rows: seconds and the rows' bound, against
another build.

    python benchmarks/wbpmf_transform.py --repeats 3
    python benchmarks/wbpmf_transform.py --repeats 3 --other-python /path/to/venv/bin/python

Two data sets: ``load_digits`` (the first 1257 digits fitted, the other 540 transformed) and
``make_sc`` of the shared bench (the first 4,000 rows fitted, the next 2,000 transformed),
K = 10 and the defaults otherwise, ``random_state=0``. Each environment fits once per data
set in a fresh process, then transforms ``--repeats`` times; with ``--other-python`` the
processes alternate between this environment and the other (for example a build of an
earlier commit), so that both see the same load. Printed: the median seconds of
``transform`` and ``score`` (the mean bound of the new rows, higher is better; its
transform's search included).

The machine must be quiet for the times to mean anything.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

from _shared_data import import_bench


def measure(data, repeats):
    from sklearn.exceptions import ConvergenceWarning

    from sklearn_cogaps import WeightedBackgroundPMF

    warnings.simplefilter("ignore", ConvergenceWarning)
    if data == "digits":
        from sklearn.datasets import load_digits

        X = load_digits().data
        train, new = X[:1257], X[1257:]
    else:
        import_bench()
        from counts_data import make_sc

        X = make_sc()[0].tocsr()
        train, new = X[:4000], X[4000:6000]
    # the fit of the guide's figures (solver="sequential", the default when they were taken)
    model = WeightedBackgroundPMF(10, solver="sequential", random_state=0).fit(train)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        model.transform(new)
        times.append(time.perf_counter() - started)
    return {"transform": statistics.median(times), "score": float(model.score(new))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--data", nargs="+", default=["digits", "sc"], choices=["digits", "sc"])
    ap.add_argument("--other-python", help="Python of a second environment, run alternately")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(measure(args.worker, args.repeats)))
        return
    pythons = {"this": sys.executable}
    if args.other_python:
        pythons["other"] = args.other_python
    print(f"seconds of transform (median of {args.repeats}) and score (mean bound of the rows)")
    print(f"{'data':8s} {'build':6s} {'transform':>10s} {'score':>14s}")
    for data in args.data:
        for name, python in pythons.items():
            cmd = [python, str(Path(__file__).resolve()), "--worker", data]
            cmd += ["--repeats", str(args.repeats)]
            res = subprocess.run(cmd, capture_output=True, text=True, check=True)
            out = json.loads(res.stdout.strip().splitlines()[-1])
            print(f"{data:8s} {name:6s} {out['transform']:10.3f} {out['score']:14.6f}")


if __name__ == "__main__":
    main()
