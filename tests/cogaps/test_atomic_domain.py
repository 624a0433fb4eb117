"""The atomic domain data structure against a plain sorted list."""

import bisect

import numpy as np

from sklearn_cogaps._cogaps._atomic_domain import DomainForTests


def test_insert_erase_neighbours_and_predecessor_match_a_sorted_list():
    rng = np.random.default_rng(0)
    dom = DomainForTests(n_bins=1000, seed=1)
    ids = {}
    ref = []
    for step in range(3000):
        if ref and rng.random() < 0.4:
            pos = ref[rng.integers(len(ref))]
            dom.erase(ids.pop(pos))
            ref.remove(pos)
        else:
            pos = dom.random_position()
            ids[pos] = dom.insert(pos, 1.0)
            bisect.insort(ref, pos)
        if step % 97 == 0:
            np.testing.assert_array_equal(dom.positions_in_order(), np.array(ref, dtype=np.uint64))
            for probe in rng.integers(0, 2**63, size=20, dtype=np.uint64):
                i = bisect.bisect_left(ref, int(probe))
                expect = ids[ref[i - 1]] if i > 0 else -1
                assert dom.predecessor(int(probe)) == expect
    assert dom.n_atoms == len(ref)
    for i, pos in enumerate(ref):
        left, right = dom.neighbours(ids[pos])
        assert left == (ids[ref[i - 1]] if i > 0 else -1)
        assert right == (ids[ref[i + 1]] if i + 1 < len(ref) else -1)
        assert dom.find(pos) == ids[pos]


def test_random_atom_is_uniform():
    dom = DomainForTests(n_bins=10, seed=3)
    atoms = [dom.insert(p, 1.0) for p in (5, 10**6, 10**12, 10**15, 2**62)]
    picks = np.array([dom.random_atom() for _ in range(10000)])
    counts = np.array([np.sum(picks == a) for a in atoms])
    assert counts.min() > 1800 and counts.max() < 2200


def test_bins_cover_the_domain_equally():
    dom = DomainForTests(n_bins=7)
    assert dom.bin_length == (2**64 - 1) // 7


def test_each_atom_keeps_the_element_of_its_position():
    # the proposals read a live atom's row and column from the domain instead of dividing
    # its position: after births, deaths and moves they must be position // bin_length's
    rng = np.random.default_rng(3)
    n_rows, n_cols = 37, 5
    dom = DomainForTests(n_bins=n_rows * n_cols, seed=4, n_cols=n_cols)
    live = []
    for _ in range(2000):
        u = rng.random()
        if live and u < 0.3:
            dom.erase(live.pop(rng.integers(len(live))))
        elif live and u < 0.6:
            atom = live[rng.integers(len(live))]
            left, right = dom.neighbours(atom)
            lo = dom.position(left) + 1 if left >= 0 else 0
            hi = dom.position(right) - 1 if right >= 0 else n_rows * n_cols * dom.bin_length - 1
            dom.move(atom, int(rng.integers(lo, hi, endpoint=True, dtype=np.uint64)))
        else:
            live.append(dom.insert(dom.random_position(), 1.0))
        for atom in live[-3:]:
            assert dom.element(atom) == divmod(dom.position(atom) // dom.bin_length, n_cols)
    assert all(dom.element(a) == divmod(dom.position(a) // dom.bin_length, n_cols) for a in live)


def test_a_move_lands_strictly_between_the_neighbours_and_reaches_both_ends():
    # A move's destination is uniform on the free positions between the atom's neighbours
    # (the domain's ends for the first and last atoms); an exchange pairs an atom with its
    # right neighbour, the last atom with the first (Sherman, Gao & Fertig 2019, section
    # 1.3). The ranges are a few positions wide here, so each end is drawn often.
    from sklearn_cogaps._cogaps._queue import _fill_for_tests

    n_bins = 4
    dom = DomainForTests(n_bins=n_bins, seed=0)
    length = n_bins * dom.bin_length
    positions = [0, 2, 3, 5, length - 3, length - 1]
    atoms = [dom.insert(p, 1.0) for p in positions]
    atom1, atom2, dest = _fill_for_tests(dom, "move", 7, 6000)
    assert set(atom1.tolist()) == set(atoms) and np.all(atom2 == -1)
    for i, atom in enumerate(atoms):
        lo = positions[i - 1] + 1 if i > 0 else 0
        hi = positions[i + 1] - 1 if i + 1 < len(atoms) else length - 1
        drawn = dest[atom1 == atom]
        assert drawn.min() >= lo and drawn.max() <= hi, (i, drawn.min(), drawn.max())
        if hi - lo < 8:  # every position of a short range is reached
            assert set(drawn.tolist()) == set(range(lo, hi + 1)), i

    atom1, atom2, _ = _fill_for_tests(dom, "exchange", 8, 600)
    following = {a: atoms[(i + 1) % len(atoms)] for i, a in enumerate(atoms)}
    assert set(atom1.tolist()) == set(atoms)
    assert all(following[a] == b for a, b in zip(atom1.tolist(), atom2.tolist()))
