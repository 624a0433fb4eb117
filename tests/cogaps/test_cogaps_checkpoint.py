"""Checkpoints of a CoGAPS fit: written atomically during the fit, resumed after Ctrl-C or
``kill -9`` with the same bits as an uninterrupted fit, refused for other data or
parameters."""

import hashlib
import os
import pickle
import re
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest
from scipy import sparse

from sklearn_cogaps import CoGAPS, FitInterruptedWarning
from sklearn_cogaps._utils._checkpoint import Checkpoint
from sklearn_cogaps.datasets import make_patterns

from _shared import interrupt_cogaps_at

FITTED = (
    "loadings_",
    "loadings_std_",
    "components_",
    "components_std_",
    "chisq_",
    "objective_history_",
    "n_atoms_history_",
    "lambda_W_",
    "lambda_H_",
    "loadings_snapshots_",
    "components_snapshots_",
    "snapshot_iterations_",
    "n_iter_",
    "reconstruction_err_",
)


def _data(kind="dense"):
    X, _, _ = make_patterns(n_samples=25, n_features=40, n_components=3, random_state=0)
    if kind == "sparse":
        X = sparse.csr_matrix(np.where(X > np.median(X), X, 0.0))
    elif kind == "float32":
        X = X.astype(np.float32)
    return X


def _model(**params):
    params = {"n_components": 3, "max_iter": 60, "random_state": 0, "n_snapshots": 4, **params}
    return CoGAPS(**params)


def _fit(model, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.fit(X)


def _assert_same_fit(a, b):
    for name in FITTED:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    np.testing.assert_array_equal(a.transform(_data()), b.transform(_data()))


@pytest.mark.parametrize("kind", ["dense", "sparse", "float32"])
def test_resumed_after_ctrl_c_equals_the_uninterrupted_fit(monkeypatch, tmp_path, kind, capsys):
    X = _data(kind)
    path = tmp_path / "chain.ckpt"
    reference = _fit(_model(), X)
    original = interrupt_cogaps_at(monkeypatch, 83)  # calibration 60 + 22 sampling done
    interrupted = _fit(_model(checkpoint_path=path, checkpoint_every=10), X)
    assert interrupted.n_iter_ == 82
    assert Checkpoint(path).read()["iteration"] == 80  # the last checkpoint due
    monkeypatch.setattr("sklearn_cogaps._cogaps._chain.GibbsSampler", original)
    capsys.readouterr()
    resumed = _fit(_model(checkpoint_path=path, checkpoint_every=10, verbose=1), X)
    _assert_same_fit(resumed, reference)
    assert not path.exists()  # a complete fit leaves nothing to resume
    assert re.search(
        r"resumed from the checkpoint .* after iteration 80\b", capsys.readouterr().out
    )


def test_resume_during_calibration_keeps_the_annealing(monkeypatch, tmp_path):
    """A checkpoint of the calibration phase resumes with the temperature of its iteration
    and the snapshots of the calibration taken before it."""
    X = _data()
    path = tmp_path / "chain.ckpt"
    params = {"snapshot_phase": "all", "n_snapshots": 6}
    reference = _fit(_model(**params), X)
    original = interrupt_cogaps_at(monkeypatch, 25)
    _fit(_model(checkpoint_path=path, checkpoint_every=7, **params), X)
    monkeypatch.setattr("sklearn_cogaps._cogaps._chain.GibbsSampler", original)
    resumed = _fit(_model(checkpoint_path=path, checkpoint_every=7, **params), X)
    _assert_same_fit(resumed, reference)


_KILLED_FIT = textwrap.dedent(
    """
    import sys, warnings
    from sklearn_cogaps import CoGAPS
    from sklearn_cogaps.datasets import make_patterns
    warnings.simplefilter("ignore")
    X, _, _ = make_patterns(n_samples=100, n_features=300, n_components=4, random_state=0)
    CoGAPS(n_components=4, max_iter=5000, random_state=0, checkpoint_path=sys.argv[1],
           checkpoint_every=200).fit(X)
    """
)


def _killed_after_a_checkpoint(tmp_path, script_text, path):
    """Run ``script_text`` (a fit that checkpoints to ``path``) in a subprocess, kill it with
    SIGKILL once the first checkpoint exists; returns the iteration the file holds."""
    script = tmp_path / "fit.py"
    script.write_text(script_text)
    process = subprocess.Popen([sys.executable, str(script), str(path)])
    deadline = time.monotonic() + 300
    while not path.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL  # killed while it ran
    return Checkpoint(path).read()["iteration"]


def test_resumed_after_kill_9_equals_the_uninterrupted_fit(tmp_path):
    """A fit killed with SIGKILL (no chance to clean up or to finish a write) resumes from
    its last checkpoint and ends with the uninterrupted fit's bits."""
    path = tmp_path / "chain.ckpt"
    written = _killed_after_a_checkpoint(tmp_path, _KILLED_FIT, path)
    assert 0 < written < 10000 and written % 200 == 0
    X, _, _ = make_patterns(n_samples=100, n_features=300, n_components=4, random_state=0)
    params = {"n_components": 4, "max_iter": 5000, "random_state": 0}
    resumed = _fit(CoGAPS(**params, checkpoint_path=path, checkpoint_every=200), X)
    reference = _fit(CoGAPS(**params), X)
    for name in FITTED[:8] + ("n_iter_",):
        np.testing.assert_array_equal(getattr(resumed, name), getattr(reference, name))
    assert not path.exists()


def test_a_failed_write_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    """The state goes to a temporary file renamed over the checkpoint only once it is on
    the disk: a write that stops half-way (here an error in the middle of pickling) leaves
    the previous checkpoint whole and no temporary file."""
    from sklearn_cogaps._utils import _checkpoint

    path = tmp_path / "chain.ckpt"
    checkpoint = _checkpoint.Checkpoint(path, every=1)
    checkpoint.write({"iteration": 1, "data": np.arange(10)})

    def dump_half(obj, f, protocol=None):
        f.write(b"\x80\x05partial")
        raise OSError("disk full")

    monkeypatch.setattr(_checkpoint.pickle, "dump", dump_half)
    # the fit is not lost for a checkpoint: the write warns, and the fit goes on
    with pytest.warns(RuntimeWarning, match="disk full.*the fit goes on"):
        checkpoint.write({"iteration": 2, "data": np.arange(20)})
    assert checkpoint.read()["iteration"] == 1
    assert os.listdir(tmp_path) == ["chain.ckpt"]


def test_a_checkpoint_file_that_cannot_be_written_is_refused_before_the_fit(tmp_path):
    X = _data()
    with pytest.raises(ValueError, match="does not exist: create"):
        _fit(_model(checkpoint_path=tmp_path / "missing" / "run.ckpt"), X)
    with pytest.raises(ValueError, match="is a directory, not a file"):
        _fit(_model(checkpoint_path=tmp_path), X)
    home = CoGAPS(checkpoint_path="~/run.ckpt")
    from sklearn_cogaps._utils._checkpoint import Checkpoint

    assert Checkpoint(home.checkpoint_path).path == os.path.expanduser("~/run.ckpt")


def test_one_fit_at_a_time_per_checkpoint_file(tmp_path):
    import socket

    X, path = _data(), tmp_path / "run.ckpt"
    lock = tmp_path / "run.ckpt.lock"
    # a fit holds the file: another, in this process (a search's threads) or another one, is
    # refused; the first is not disturbed
    lock.write_text(f"{socket.gethostname()} {os.getpid()} token")
    with pytest.raises(ValueError, match=r"in use by another fit \(this process\).*own file"):
        _fit(_model(checkpoint_path=path), X)
    lock.write_text("another-host 12345 token")
    with pytest.raises(ValueError, match=r"process 12345 on another-host.*delete"):
        _fit(_model(checkpoint_path=path), X)
    # a lock left by a process that has ended (kill -9) is taken over, and removed after
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    lock.write_text(f"{socket.gethostname()} {ended.pid} token")
    reference = _fit(_model(), X)
    _assert_same_fit(_fit(_model(checkpoint_path=path), X), reference)
    assert not lock.exists() and not path.exists()


def test_ctrl_c_advises_resuming_from_the_checkpoint(monkeypatch, tmp_path):
    interrupt_cogaps_at(monkeypatch, 30)
    with pytest.warns(RuntimeWarning, match="same data, parameters and checkpoint_path"):
        _model(checkpoint_path=tmp_path / "c.ckpt", checkpoint_every=10).fit(_data())


def test_checkpoint_of_other_data_or_parameters_is_refused(monkeypatch, tmp_path):
    X = _data()
    path = tmp_path / "chain.ckpt"
    original = interrupt_cogaps_at(monkeypatch, 30)
    _fit(_model(checkpoint_path=path, checkpoint_every=10), X)
    monkeypatch.setattr("sklearn_cogaps._cogaps._chain.GibbsSampler", original)
    with pytest.raises(ValueError, match="another n_components .*delete"):
        _fit(_model(n_components=2, checkpoint_path=path), X)
    with pytest.raises(ValueError, match="another data and uncertainty"):
        _fit(_model(checkpoint_path=path), X * 2)
    with pytest.raises(ValueError, match="another max_iter"):
        _fit(_model(max_iter=61, checkpoint_path=path), X)
    # how often to write is not part of the chain: a resumed fit may change it
    _fit(_model(checkpoint_path=path, checkpoint_every=3), X)


class _Planted:
    """A pickle that creates a file when it is loaded."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_bad_checkpoint_files_and_combinations_are_refused(tmp_path):
    X = _data()
    path = tmp_path / "chain.ckpt"
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="cannot be read.*delete it"):
        _fit(_model(checkpoint_path=path), X)
    with open(path, "wb") as f:
        pickle.dump({"format": 1}, f)  # the bare pickle of format 1
    with pytest.raises(ValueError, match="not a checkpoint of this version"):
        _fit(_model(checkpoint_path=path), X)
    Checkpoint(path)._write({"format": 0})
    with pytest.raises(ValueError, match="not a checkpoint of this version"):
        _fit(_model(checkpoint_path=path), X)
    # a pickle runs the callables it names while it loads: a file that names anything but
    # numpy's arrays is refused before it runs, even with its checksum right
    planted = tmp_path / "ran"
    body = pickle.dumps(_Planted(planted))
    digest = hashlib.blake2b(body, digest_size=32).digest()
    path.write_bytes(b"sklearn_cogaps checkpoint 2\n" + body + digest)
    with pytest.raises(ValueError, match=r"cannot be read.*names (builtins|io).open"):
        _fit(_model(checkpoint_path=path), X)
    assert not planted.exists()
    # a checkpoint of this fit that lacks part of the chain's state
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Checkpoint, "remove", lambda self: None)  # keep the last one
        path.unlink()
        _fit(_model(checkpoint_path=path, checkpoint_every=20), X)
    payload = Checkpoint(path).read()
    del payload["prior_rates"]
    Checkpoint(path)._write(payload)
    with pytest.raises(ValueError, match=r"lacks the chain's 'prior_rates'.*Delete it"):
        _fit(_model(checkpoint_path=path, checkpoint_every=20), X)
    with pytest.raises(ValueError, match="distributed fit runs one per set"):
        _fit(_model(checkpoint_path=path, distributed="genome-wide", n_sets=2), X)
    model = _fit(_model(warm_start=True), X)
    with pytest.raises(ValueError, match="continues the previous one"):
        _fit(model.set_params(checkpoint_path=tmp_path / "other.ckpt"), X)


def test_a_checkpoint_changed_since_it_was_written_is_refused(tmp_path):
    """A file damaged on the disk or in a copy, or edited, that is still a readable pickle
    resumed a chain from a state no fit had: a residual scaled by 1.5 ran to the end and
    gave another chisq_ without a word. Every byte of the pickle is now checked."""
    X = _data()
    path = tmp_path / "chain.ckpt"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Checkpoint, "remove", lambda self: None)  # keep the last one
        _fit(_model(checkpoint_path=path, checkpoint_every=20), X)
    whole = path.read_bytes()
    for position in (len(whole) // 2, 40, len(whole) - 1):  # the pickle, its start, the digest
        damaged = bytearray(whole)
        damaged[position] ^= 0x01
        path.write_bytes(bytes(damaged))
        with pytest.raises(ValueError, match="has changed since it was written.*Delete it"):
            _fit(_model(checkpoint_path=path, checkpoint_every=20), X)
    # edited and pickled again without its checksum: the residual of the chain scaled
    payload = pickle.loads(whole[len(b"sklearn_cogaps checkpoint 2\n") : -32])
    payload["sampler"]["residual"][0][:] *= 1.5
    body = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    path.write_bytes(whole[:28] + body + whole[-32:])
    with pytest.raises(ValueError, match="has changed since it was written"):
        _fit(_model(checkpoint_path=path, checkpoint_every=20), X)
    # cut short
    path.write_bytes(whole[: len(whole) // 3])
    with pytest.raises(ValueError, match="has changed since it was written"):
        _fit(_model(checkpoint_path=path, checkpoint_every=20), X)
    path.write_bytes(b"")
    with pytest.raises(ValueError, match="cannot be read .*it is empty"):
        _fit(_model(checkpoint_path=path, checkpoint_every=20), X)
    # the file as written resumes, to the bits of the fit without a checkpoint
    path.write_bytes(whole)
    resumed = _fit(_model(checkpoint_path=path, checkpoint_every=20), X)
    _assert_same_fit(resumed, _fit(_model(), X))


def test_checkpoints_by_time(tmp_path, monkeypatch):
    """checkpoint_minutes writes when the time has come, whatever the iteration."""
    from sklearn_cogaps._utils import _checkpoint

    clock = iter(np.arange(0.0, 1e6, 7.0))  # each reading of the clock 7 s later
    monkeypatch.setattr(_checkpoint.time, "monotonic", lambda: float(next(clock)))
    written = []
    monkeypatch.setattr(_checkpoint.Checkpoint, "write",
                        lambda self, payload: written.append(payload["iteration"]))  # fmt: skip
    _fit(
        _model(checkpoint_path=tmp_path / "c", checkpoint_every=10**6, checkpoint_minutes=1.0),
        _data(),
    )
    assert len(written) > 5
    assert all(b - a <= 10 for a, b in zip(written, written[1:]))


# -- several chains: one file holds every chain, at the end of a round of them ---------------

CHAINS_FITTED = FITTED + (
    "chain_loadings_",
    "chain_components_",
    "chain_objective_histories_",
    "snapshot_chains_",
    "n_calibration_iter_",
)


def _chains(**params):
    params = {"max_iter": 120, "n_chains": 2, "n_jobs": 1, "n_snapshots": 10, **params}
    return _model(**params)


def _assert_same_chains(a, b):
    for name in CHAINS_FITTED:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    for name in ("rhat_", "ess_bulk_", "ess_tail_"):
        for part in ("chisq", "loadings", "components"):
            np.testing.assert_array_equal(getattr(a, name)[part], getattr(b, name)[part])


@pytest.mark.filterwarnings("ignore:tol=0.05 asks a bulk ESS")
@pytest.mark.parametrize("tol", [None, 0.05])
def test_several_chains_resume_after_ctrl_c_with_the_bits_of_the_uninterrupted_fit(
    monkeypatch, tmp_path, tol, capsys
):
    """The chains run in rounds of 50 iterations (each chain in turn with n_jobs=1); a
    checkpoint after the rounds holds all of them. Ctrl-C in the second round of the
    sampling keeps the first, and the fit resumes from it to the bits of the uninterrupted
    fit: without ``tol`` that of the chains run whole, without a checkpoint file."""
    X = _data()
    path = tmp_path / "chains.ckpt"
    reference = _fit(_chains(tol=tol), X)
    calibration = reference.n_calibration_iter_
    assert reference.n_iter_ == calibration + 120  # tol=0.05 is not met with 20 draws
    _assert_same_chains(_fit(_chains(tol=tol, checkpoint_path=path), X), reference)
    assert not path.exists()
    # the second chain, 10 iterations into the second round of the sampling
    original = interrupt_cogaps_at(monkeypatch, 2 * (calibration + 50) + 50 + 10)
    with pytest.warns(FitInterruptedWarning, match="resume the chains from their last checkpo"):
        kept = _chains(tol=tol, checkpoint_path=path, checkpoint_every=10).fit(X)
    assert kept.n_iter_ == calibration + 50
    saved = Checkpoint(path).read()
    assert saved["iteration"] == calibration + 50 and len(saved["chains"]) == 2
    monkeypatch.setattr("sklearn_cogaps._cogaps._chain.GibbsSampler", original)
    capsys.readouterr()
    resumed = _fit(_chains(tol=tol, checkpoint_path=path, checkpoint_every=10, verbose=1), X)
    _assert_same_chains(resumed, reference)
    assert not path.exists()
    assert f"2 chains resumed from the checkpoint {str(path)!r} after iteration " in (
        capsys.readouterr().out
    )
    # in the calibration, Ctrl-C propagates; the chains resume from the calibration's rounds
    interrupt_cogaps_at(monkeypatch, 2 * 100 + 20)
    with pytest.raises(KeyboardInterrupt):
        _chains(tol=tol, checkpoint_path=path, checkpoint_every=10).fit(X)
    assert Checkpoint(path).read()["iteration"] == 100
    monkeypatch.setattr("sklearn_cogaps._cogaps._chain.GibbsSampler", original)
    _assert_same_chains(_fit(_chains(tol=tol, checkpoint_path=path), X), reference)


def test_a_checkpoint_of_several_chains_is_refused_for_other_chains_or_one(monkeypatch, tmp_path):
    X = _data()
    path = tmp_path / "chains.ckpt"
    original = interrupt_cogaps_at(monkeypatch, 2 * 100 + 20)
    with pytest.raises(KeyboardInterrupt):
        _chains(checkpoint_path=path, checkpoint_every=10).fit(X)
    monkeypatch.setattr("sklearn_cogaps._cogaps._chain.GibbsSampler", original)
    with pytest.raises(ValueError, match="another n_chains"):
        _fit(_chains(n_chains=3, checkpoint_path=path), X)
    with pytest.raises(ValueError, match="another tol"):
        _fit(_chains(tol=0.1, checkpoint_path=path), X)
    with pytest.raises(ValueError, match="another random_state"):
        _fit(_chains(random_state=1, checkpoint_path=path), X)
    with pytest.raises(ValueError, match="holds a fit of 2 chains; this fit runs one"):
        _fit(_model(checkpoint_path=path), X)
    # and a single chain's file, given to several chains
    single = tmp_path / "chain.ckpt"
    interrupt_cogaps_at(monkeypatch, 30)
    _fit(_model(checkpoint_path=single, checkpoint_every=10), X)
    monkeypatch.setattr("sklearn_cogaps._cogaps._chain.GibbsSampler", original)
    with pytest.raises(ValueError, match="holds a fit of one chain; this fit runs n_chains=2"):
        _fit(_chains(checkpoint_path=single), X)


_KILLED_CHAINS = textwrap.dedent(
    """
    import sys, warnings
    from sklearn_cogaps import CoGAPS
    from sklearn_cogaps.datasets import make_patterns
    warnings.simplefilter("ignore")
    X, _, _ = make_patterns(n_samples=60, n_features=200, n_components=3, random_state=0)
    CoGAPS(n_components=3, max_iter=3000, n_chains=2, random_state=0, checkpoint_path=sys.argv[1],
           checkpoint_every=300).fit(X)
    """
)


def test_several_chains_resumed_after_kill_9_equal_the_uninterrupted_fit(tmp_path):
    """Two chains on two workers, killed with SIGKILL after a checkpoint: the resumed fit
    has the bits of the chains run whole without a checkpoint file."""
    path = tmp_path / "chains.ckpt"
    written = _killed_after_a_checkpoint(tmp_path, _KILLED_CHAINS, path)
    assert 0 < written < 6000 and written % 300 == 0
    X, _, _ = make_patterns(n_samples=60, n_features=200, n_components=3, random_state=0)
    params = {"n_components": 3, "max_iter": 3000, "n_chains": 2, "random_state": 0}
    resumed = _fit(CoGAPS(**params, checkpoint_path=path, checkpoint_every=300), X)
    reference = _fit(CoGAPS(**params), X)
    for name in CHAINS_FITTED[:8] + CHAINS_FITTED[-5:-1] + ("n_iter_",):
        np.testing.assert_array_equal(getattr(resumed, name), getattr(reference, name))
    assert not path.exists()


@pytest.mark.parametrize("n_chains", [1, 2])
def test_the_file_goes_only_once_the_results_are_set(monkeypatch, tmp_path, n_chains):
    """A fit that dies after its last iteration but before its results exist (the pooling,
    the diagnostics, the command line's output) keeps its checkpoint, and the next fit
    resumes from it to the uninterrupted fit's bits."""
    X = _data()
    path = tmp_path / "run.ckpt"
    params = {"n_chains": n_chains, "n_jobs": 1, "checkpoint_every": 10}
    reference = _fit(_model(n_chains=n_chains, n_jobs=1), X)

    def dies(self, X):
        raise RuntimeError("killed")

    with monkeypatch.context() as mp:
        mp.setattr(CoGAPS, "_set_reconstruction_err", dies)
        with pytest.raises(RuntimeError, match="killed"):
            _fit(_model(checkpoint_path=path, **params), X)
    assert path.exists()
    assert not os.path.exists(str(path) + ".lock")  # released all the same
    resumed = _fit(_model(checkpoint_path=path, **params), X)
    for name in FITTED:
        np.testing.assert_array_equal(getattr(resumed, name), getattr(reference, name))
    assert not path.exists()


def test_removal_deferred_to_the_end_of_a_block(tmp_path):
    """Inside ``defer_removal`` (the command line's fit and writing), a completed fit's file
    stays until the block ends without an exception."""
    from sklearn_cogaps._utils._checkpoint import defer_removal

    X = _data()
    path = tmp_path / "run.ckpt"
    with defer_removal():
        _fit(_model(checkpoint_path=path, checkpoint_every=10), X)
        assert path.exists()
    assert not path.exists()
    with pytest.raises(OSError), defer_removal():
        _fit(_model(checkpoint_path=path, checkpoint_every=10), X)
        raise OSError("disk full while writing the results")
    assert path.exists()


def test_temporary_files_of_killed_writes_are_removed(tmp_path):
    """What a write killed midway leaves (named after its checkpoint) goes when a fit next
    takes the file; other files stay."""
    X = _data()
    path = tmp_path / "run.ckpt"
    orphans = [tmp_path / ".run.ckpt.a1b2c3d4.tmp", tmp_path / ".run.ckpt.zz_9yx8w.tmp"]
    # another checkpoint's, also one whose name starts with this one's
    others = [tmp_path / ".other.ckpt.a1b2c3d4.tmp", tmp_path / "run.ckpt.notes",
              tmp_path / ".run.ckpt.old.a1b2c3d4.tmp"]  # fmt: skip
    for f in orphans + others:
        f.write_bytes(b"partial")
    _fit(_model(checkpoint_path=path, checkpoint_every=10), X)
    assert not any(f.exists() for f in orphans)
    assert all(f.exists() for f in others)


def test_ctrl_c_in_the_calibration_writes_the_last_complete_round(monkeypatch, tmp_path):
    """Ctrl-C keeps the chains' last complete round in the file even when no checkpoint was
    due, so the next fit does not run it again."""
    X = _data()
    path = tmp_path / "chains.ckpt"
    original = interrupt_cogaps_at(monkeypatch, 2 * 100 + 20)  # in the third round
    with pytest.raises(KeyboardInterrupt):
        _chains(checkpoint_path=path, checkpoint_every=100000).fit(X)
    assert Checkpoint(path).read()["iteration"] == 100
    monkeypatch.setattr("sklearn_cogaps._cogaps._chain.GibbsSampler", original)
    _assert_same_chains(_fit(_chains(checkpoint_path=path), X), _fit(_chains(), X))
