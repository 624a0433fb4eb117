"""Statistical tests of the CoGAPS chain: does it sample the distribution it claims to?

CoGAPS's birth and death steps (Sherman, Gao & Fertig 2019, 1.3.1-1.3.2, and the C++ package)
are not a reversible pair: a birth always accepts a mass drawn from the conditional
posterior, and a death re-draws the mass from the same conditional and keeps the atom with
probability ``min(1, likelihood ratio)``. The chain therefore has no closed-form stationary
law (it is not the posterior of the compound Poisson-exponential prior of the atomic
domain; see "How we test the samplers" in the user guide). What these tests check is that
every chain of the package -- the sequential one of ``transform``, the queued one of
``fit`` on its serial and parallel paths, with dense and sparse data -- has the stationary
law of the documented transition kernel, written again below in plain numpy (one
proposal at a time, many chains in lockstep), and that the test rejects a chain run with
a wrong prior rate.

Each chain's time average is one independent replicate, so every moment gets a z-score
from the spread over chains; the p-value is Bonferroni over the moments compared.
"""

import numpy as np
import pytest
from scipy import sparse, special, stats

from sklearn_cogaps._cogaps._chisq import residual
from sklearn_cogaps._cogaps._queue import _set_parallel_thresholds_for_tests
from sklearn_cogaps._cogaps._sampler import GibbsSampler, sample_fixed_rows
from sklearn_cogaps._cogaps._uncertainty import SPARSE_SIGMA0

ALPHA = 0.05
MAX_MASS = 100.0
# Bonferroni-corrected p-value below which a comparison fails: with fixed seeds the tests
# are deterministic; a correct chain gives p-values spread over (0, 1] (see the guide).
P_MIN = 1e-3
# Sampling iterations of every chain (each chain's average is one replicate).
N_ITER = 240
# Iterations the reference chains run before their averages start: as many as the
# package's chains, which also start from an empty domain. With 60, the reference had not
# forgotten its start: on the three-row problem, over 40 seeds, Stouffer's z of the
# reference with 60 against the reference with 240 reached 13, and the queued chains
# seemed biased against it (doc/testing.rst, "How we test the samplers").
BURN_IN = N_ITER


# ---------------------------------------------------------------------------------------
# The documented transition kernel, in numpy (doc/cogaps.rst, "How we test the samplers").


def _truncnorm(rng, mean, sd, lo, hi):
    """Normal(mean, sd) truncated to [lo, hi], by the inverse CDF in log space (accurate in
    the tails: a bound above the mean is mirrored into the left tail)."""
    a = (lo - mean) / sd
    b = (hi - mean) / sd
    flip = a > 0
    a, b = np.where(flip, -b, a), np.where(flip, -a, b)
    log_a, log_b = special.log_ndtr(a), special.log_ndtr(b)
    u = rng.random(np.shape(mean))
    z = special.ndtri_exp(log_b + np.log(u + (1.0 - u) * np.exp(log_a - log_b)))
    z = np.clip(np.where(flip, -z, z), np.where(flip, -b, a), np.where(flip, -a, b))
    return mean + sd * z


class ReferenceChain:
    """Many independent CoGAPS chains on the patterns W of ``X ~ N(W H, 1 / prec)`` with H
    fixed, one proposal at a time. Positions are uniform on [0, 1) (the 2**64 positions of
    the kernel, scaled); the domain has ``n_rows * K`` equal bins, row-major as in the
    kernel, and atoms are kept sorted by position."""

    def __init__(self, X, prec, H, lam, n_chains, seed, capacity=40):
        self.X, self.prec, self.H = X, prec, H
        self.n_rows, self.K = X.shape[0], H.shape[0]
        self.B = self.n_rows * self.K
        self.lam = lam
        self.cap = MAX_MASS / lam
        self.C = n_chains
        self.rng = np.random.default_rng(seed)
        self.pos = np.full((n_chains, capacity), np.inf)
        self.mass = np.zeros((n_chains, capacity))
        self.n = np.zeros(n_chains, dtype=np.int64)

    # matrix and residual from the atoms
    def W(self):
        W = np.zeros((self.C, self.B))
        live = np.isfinite(self.pos)
        bins = np.where(live, np.floor(self.pos * self.B), 0).astype(np.int64)
        np.add.at(W, (np.nonzero(live)[0], bins[live]), self.mass[live])
        return W.reshape(self.C, self.n_rows, self.K)

    def _stats(self, chains, bins, W, minus_bins=None):
        """s and smu of +delta at ``bins`` (minus delta at ``minus_bins``) per chain."""
        r, q = np.divmod(bins, self.K)
        R = self.X[r] - np.einsum("ck,kj->cj", W[chains, r], self.H)
        d = self.H[q]
        s = np.sum(d * d * self.prec[r], axis=1)
        smu = np.sum(d * R * self.prec[r], axis=1)
        if minus_bins is None:
            return s, smu
        r2, q2 = np.divmod(minus_bins, self.K)
        same = r2 == r
        d_same = self.H[q] - self.H[q2]
        s_same = np.sum(d_same**2 * self.prec[r], axis=1)
        smu_same = np.sum(d_same * R * self.prec[r], axis=1)
        R2 = self.X[r2] - np.einsum("ck,kj->cj", W[chains, r2], self.H)
        s2 = np.sum(self.H[q2] ** 2 * self.prec[r2], axis=1)
        smu2 = np.sum(self.H[q2] * R2 * self.prec[r2], axis=1)
        return np.where(same, s_same, s + s2), np.where(same, smu_same, smu - smu2)

    def _gibbs_mass(self, s, smu):
        return _truncnorm(self.rng, (smu - self.lam) / s, 1.0 / np.sqrt(s), 0.0, self.cap)

    def step(self):
        """One proposal in every chain."""
        C, rng = self.C, self.rng
        n = self.n
        W = self.W()
        u1, u2 = rng.random(C), rng.random(C)
        p_death = n / (n + ALPHA * self.B)  # the domain length 2**64 makes 1 - n / L = 1
        birth = (n < 2) | ((u1 < 0.5) & (u2 >= p_death))
        death = (n >= 2) & (u1 < 0.5) & (u2 < p_death)
        move = (n >= 2) & (u1 >= 0.5) & (u1 < 0.75)
        exchange = (n >= 2) & (u1 >= 0.75)
        atom = np.minimum((rng.random(C) * n).astype(np.int64), np.maximum(n - 1, 0))
        rows = np.arange(C)
        chosen = self.pos[rows, atom]
        bins = np.floor(np.where(np.isfinite(chosen), chosen, 0.0) * self.B).astype(np.int64)

        c = np.nonzero(birth)[0]
        if c.size:
            p = rng.random(c.size)
            b = np.floor(p * self.B).astype(np.int64)
            s, smu = self._stats(c, b, W)
            x = self._gibbs_mass(s, smu)
            self.pos[c, n[c]] = p
            self.mass[c, n[c]] = x
            self.n[c] += 1

        c = np.nonzero(death)[0]
        if c.size:
            a, b = atom[c], bins[c]
            x0 = self.mass[c, a]
            s, smu = self._stats(c, b, W)
            smu = smu + x0 * s
            x = self._gibbs_mass(s, smu)
            dl = x * smu - 0.5 * s * x * x
            keep = rng.random(c.size) < np.exp(np.minimum(dl, 0.0))
            self.mass[c, a] = np.where(keep, x, 0.0)
            self.pos[c, a] = np.where(keep, self.pos[c, a], np.inf)
            self.n[c] -= ~keep

        c = np.nonzero(move)[0]
        if c.size:
            a = atom[c]
            lo = np.where(a > 0, self.pos[c, np.maximum(a - 1, 0)], 0.0)
            hi = np.where(a + 1 < n[c], self.pos[c, np.minimum(a + 1, self.pos.shape[1] - 1)], 1.0)
            new = lo + (hi - lo) * rng.random(c.size)
            b1, b2 = bins[c], np.floor(new * self.B).astype(np.int64)
            x = self.mass[c, a]
            # +x at the new element and -x at the old one
            s, smu = self._stats(c, b2, W, minus_bins=b1)
            dl = x * smu - 0.5 * s * x * x
            accept = (b1 == b2) | (rng.random(c.size) < np.exp(np.minimum(dl, 0.0)))
            self.pos[c, a] = np.where(accept, new, self.pos[c, a])

        c = np.nonzero(exchange)[0]
        if c.size:
            a1 = atom[c]
            a2 = np.where(a1 + 1 < n[c], a1 + 1, 0)
            b1, b2 = bins[c], np.floor(self.pos[c, a2] * self.B).astype(np.int64)
            differ = b1 != b2
            c, a1, a2, b1, b2 = c[differ], a1[differ], a2[differ], b1[differ], b2[differ]
            if c.size:
                x1, x2 = self.mass[c, a1], self.mass[c, a2]
                s, smu = self._stats(c, b1, W, minus_bins=b2)
                delta = _truncnorm(rng, smu / s, 1.0 / np.sqrt(s), -x1, x2)
                self.mass[c, a1] = np.maximum(x1 + delta, 0.0)
                self.mass[c, a2] = np.maximum(x2 - delta, 0.0)

        order = np.argsort(self.pos, axis=1, kind="stable")
        self.pos = np.take_along_axis(self.pos, order, axis=1)
        self.mass = np.take_along_axis(self.mass, order, axis=1)
        assert self.n.max() < self.pos.shape[1], "raise the reference chain's capacity"

    def run(self, n_iter, burn_in):
        """Iterations of Poisson(max(n_atoms, 10)) proposals each; returns, per chain, the
        time averages of W and W**2 over the iterations after ``burn_in``."""
        total = np.zeros((self.C, self.n_rows, self.K))
        total2 = np.zeros_like(total)
        done = np.zeros(self.C, dtype=np.int64)
        left = self.rng.poisson(np.maximum(self.n, 10))
        while done.min() < burn_in + n_iter:
            self.step()
            left -= 1
            while np.any(ended := (left <= 0) & (done < burn_in + n_iter)):
                record = ended & (done >= burn_in)
                W = self.W()
                total[record] += W[record]
                total2[record] += W[record] ** 2
                done[ended] += 1
                left[ended] = self.rng.poisson(np.maximum(self.n[ended], 10))
            left[done >= burn_in + n_iter] = 1 << 40
        return total / n_iter, total2 / n_iter


# ---------------------------------------------------------------------------------------
# The package's chains: per-chain time averages of W and W**2.


def sequential_chains(X, prec, H, lam, n_chains, n_iter, seed):
    """``transform``'s chains (one row each, its own domain): calibration with annealing,
    then ``n_iter`` sampling iterations."""
    assert X.shape[0] == 1
    seeds = np.random.default_rng(seed).integers(1, 2**63, n_chains).astype(np.uint64)
    Xs = np.repeat(X, n_chains, axis=0)
    P = np.repeat(prec, n_chains, axis=0)
    mean, std = sample_fixed_rows(
        Xs, P, np.ascontiguousarray(H.T), ALPHA, lam, MAX_MASS, n_iter, seeds, 2
    )
    return mean[:, None, :], (std**2 + mean**2)[:, None, :]


def queued_chains(X, prec, H, lam, n_chains, n_iter, seed, model="dense", n_threads=2, tau=1.0):
    """``fit``'s chain with H fixed, through the proposal queue; ``model`` "sparse" runs
    the sparse-data model (whose uncertainty is the default one); ``tau`` is the
    calibration's temperature, held fixed."""
    seeds = np.random.default_rng(seed).integers(1, 2**63, n_chains)
    Ht = np.ascontiguousarray(H.T)
    W0 = np.zeros((X.shape[0], H.shape[0]))
    means, squares = [], []
    for s in seeds:
        args = (ALPHA, ALPHA, lam, lam, MAX_MASS, MAX_MASS, int(s))
        if model == "sparse":
            rows = sparse.csr_matrix(X)
            sampler = GibbsSampler(
                None,
                None,
                W0,
                Ht,
                *args,
                fixed="H",
                sparse_data=(rows, rows.T.tocsr(), SPARSE_SIGMA0, False),
            )
        else:
            sampler = GibbsSampler(residual(X, W0, Ht), prec, W0, Ht, *args, fixed="H")
        total = np.zeros_like(W0)
        total2 = np.zeros_like(W0)
        for it in range(2 * n_iter):
            sampler.iterate(tau, n_threads)
            if it >= n_iter:
                W = sampler.W
                total += W
                total2 += W * W
        means.append(total / n_iter)
        squares.append(total2 / n_iter)
    return np.array(means), np.array(squares)


def compare(a, b):
    """Bonferroni p-value of equal expectations of every moment, from per-chain averages."""
    z = []
    for x, y in zip(a, b):
        x = x.reshape(len(x), -1)
        y = y.reshape(len(y), -1)
        se = np.sqrt(x.var(axis=0, ddof=1) / len(x) + y.var(axis=0, ddof=1) / len(y))
        z.append((x.mean(axis=0) - y.mean(axis=0)) / se)
    z = np.concatenate(z)
    return min(1.0, z.size * 2.0 * stats.norm.sf(np.abs(z).max())), z


# ---------------------------------------------------------------------------------------
# Problems: small enough that the chains mix in a few hundred iterations and the prior
# matters (posterior means some prior standard deviations away from the likelihood's).


def one_row(K):
    H = np.array([[1.0, 0.5, 0.2, 1.0], [0.1, 0.6, 1.0, 0.3]])[:K]
    X = np.array([[1.2, 0.9, 0.6, 1.1]])
    prec = 1.0 / np.maximum(0.1 * X, 0.1) ** 2 / 25.0  # a weak likelihood: sd 0.5 X
    return X, prec, H, 2.0


def several_rows():
    H = np.array([[1.0, 0.5, 0.0, 1.0, 0.3], [0.0, 0.6, 1.0, 0.3, 0.8]])
    X = np.array([[1.0, 0.8, 0.0, 1.2, 0.5], [0.3, 1.0, 1.5, 0.6, 1.1], [2.0, 1.2, 0.4, 2.1, 1.0]])
    prec = 1.0 / np.maximum(0.1 * X, 0.1) ** 2  # the default (and sparse-model) uncertainty
    return X, prec, H, 1.0


@pytest.fixture(scope="module")
def reference_one_row():
    return {
        K: ReferenceChain(*one_row(K), n_chains=400, seed=K).run(N_ITER, BURN_IN) for K in (1, 2)
    }


@pytest.fixture(scope="module")
def reference_several_rows():
    X, prec, H, lam = several_rows()
    return ReferenceChain(X, prec, H, lam, n_chains=400, seed=3).run(N_ITER, BURN_IN)


@pytest.mark.parametrize("K", [1, 2])
def test_sequential_chain_has_the_kernel_law(K, reference_one_row):
    X, prec, H, lam = one_row(K)
    p, z = compare(
        sequential_chains(X, prec, H, lam, 400, N_ITER, seed=10 + K), reference_one_row[K]
    )
    assert p > P_MIN, f"z-scores {np.round(z, 2)}"


def test_transform_averages_exactly_its_sampling_iterations():
    """A posterior concentrated at w = 1 (sd 1e-3 per entry): the mean of the sampling
    iterations is 1 to 1e-2, where one calibration state more, divided by n_iter = 10,
    would give 1.1. The law tests above cannot see a bias of 1 / n_iter at n_iter = 240."""
    n, n_iter = 50, 10
    seeds = np.arange(1, n + 1, dtype=np.uint64)
    mean, std = sample_fixed_rows(
        np.ones((n, 3)), np.full((n, 3), 1e6), np.ones((3, 1)), ALPHA, 1.0, MAX_MASS, n_iter,
        seeds, 1
    )  # fmt: skip
    assert np.abs(mean - 1.0).max() < 0.01 and std.max() < 0.01


@pytest.mark.parametrize("K", [1, 2])
def test_wrong_prior_rate_is_rejected(K, reference_one_row):
    """The comparison has power: a chain given a prior rate 1.5 times too large fails."""
    X, prec, H, lam = one_row(K)
    p, _ = compare(
        sequential_chains(X, prec, H, 1.5 * lam, 400, N_ITER, seed=10 + K), reference_one_row[K]
    )
    assert p < P_MIN


def test_a_tempered_chain_has_the_law_of_the_precision_times_the_temperature():
    """The calibration anneals the likelihood: at temperature tau every move's s and s mu
    are multiplied by tau (Sherman, Gao & Fertig 2019, section 1.4), so the chain is the
    kernel's with the precisions times tau. The other tests run at tau = 1, where a move
    that left tau out would pass."""
    tau = 0.3
    X, prec, H, lam = one_row(2)
    reference = ReferenceChain(X, prec * tau, H, lam, n_chains=400, seed=7).run(N_ITER, BURN_IN)
    chains = queued_chains(X, prec, H, lam, 150, N_ITER, seed=8, n_threads=1, tau=tau)
    p, z = compare(chains, reference)
    assert p > P_MIN, f"z-scores {np.round(z, 2)}"


@pytest.mark.parametrize("model", ["dense", "sparse"])
@pytest.mark.parametrize("parallel", [False, True])
def test_queued_chain_has_the_kernel_law(model, parallel, reference_several_rows):
    X, prec, H, lam = several_rows()
    previous = _set_parallel_thresholds_for_tests(min_work=0, min_entries=0) if parallel else None
    try:
        # the parallel path gives the serial path's chain bit for bit (tested elsewhere);
        # fewer chains keep its thread start-ups affordable
        chains = queued_chains(
            X,
            prec,
            H,
            lam,
            30 if parallel else 100,
            N_ITER,
            seed=20,
            model=model,
            n_threads=2 if parallel else 1,
        )
    finally:
        if previous is not None:
            _set_parallel_thresholds_for_tests(*previous)
    p, z = compare(chains, reference_several_rows)
    assert p > P_MIN, f"z-scores {np.round(z, 2)}"
