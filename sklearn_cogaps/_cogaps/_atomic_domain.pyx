"""The atomic domain: an ordered set of atoms with O(log n) insertion and predecessor search,
O(1) neighbours and O(1) uniform choice.

Positions live in a treap (a binary search tree balanced by random priorities) used only to
find where a newborn atom goes; every atom also keeps its left and right neighbours in a
doubly linked list, so the neighbour lookups of a move or an exchange cost O(1), and an
unsorted array of live atoms gives a uniform random atom in O(1). A move stays strictly
between its neighbours, so it changes a position in place without touching the tree.
"""

import numpy as np

from libc.stdlib cimport malloc, realloc, free
from libc.stdint cimport uint64_t, int64_t
from .._utils._rng cimport Rng, rng_below_by, rng_seed, splitmix64, divisor_init


cdef uint64_t _U64_MAX = 0xFFFFFFFFFFFFFFFF

#: The most columns (patterns) whose elements an atom's packed element can name.
MAX_N_COLUMNS = ELEMENT_COLUMN_MASK


cdef inline int _resize(void** field, size_t n, size_t item) noexcept nogil:
    """realloc one per-atom array in place; -1 when out of memory (the old one is kept)."""
    cdef void* p = realloc(field[0], n * item)
    if p == NULL:
        return -1
    field[0] = p
    return 0


cdef int _grow(AtomicDomain* d, int64_t capacity) noexcept nogil:
    """Reallocate every per-atom array to ``capacity``; 0 on success, -1 when out of memory."""
    cdef size_t n = <size_t>capacity
    if (_resize(<void**>&d.pos, n, sizeof(uint64_t)) != 0
            or _resize(<void**>&d.elem, n, sizeof(uint64_t)) != 0
            or _resize(<void**>&d.mass, n, sizeof(double)) != 0
            or _resize(<void**>&d.prev, n, sizeof(int64_t)) != 0
            or _resize(<void**>&d.next, n, sizeof(int64_t)) != 0
            or _resize(<void**>&d.child_l, n, sizeof(int64_t)) != 0
            or _resize(<void**>&d.child_r, n, sizeof(int64_t)) != 0
            or _resize(<void**>&d.prio, n, sizeof(uint64_t)) != 0
            or _resize(<void**>&d.slot, n, sizeof(int64_t)) != 0
            or _resize(<void**>&d.order, n, sizeof(int64_t)) != 0
            or _resize(<void**>&d.free_ids, n, sizeof(int64_t)) != 0):
        return -1
    d.capacity = capacity
    return 0


cdef int domain_init(AtomicDomain* d, uint64_t n_bins, uint64_t n_cols,
                     int64_t capacity) noexcept nogil:
    """Empty domain of ``n_bins`` equal bins covering (almost) all of [0, 2**64), the
    elements of a matrix of ``n_cols`` columns (at most MAX_N_COLUMNS) in row-major order."""
    d.pos = NULL
    d.elem = NULL
    d.mass = NULL
    d.prev = NULL
    d.next = NULL
    d.child_l = NULL
    d.child_r = NULL
    d.prio = NULL
    d.slot = NULL
    d.order = NULL
    d.free_ids = NULL
    d.n_atoms = 0
    d.n_free = 0
    d.n_used = 0
    d.root = -1
    d.first = -1
    d.last = -1
    d.n_bins = n_bins
    d.bin_length = _U64_MAX // n_bins
    d.length = d.bin_length * n_bins
    divisor_init(&d.bin_div, d.bin_length)
    divisor_init(&d.col_div, n_cols)
    divisor_init(&d.length_div, d.length)
    d.length_threshold = (<uint64_t>0 - d.length) % d.length
    d.atoms_div.d = 0
    if capacity < 16:
        capacity = 16
    return _grow(d, capacity)


cdef void domain_free(AtomicDomain* d) noexcept nogil:
    free(d.pos); free(d.elem); free(d.mass); free(d.prev); free(d.next); free(d.child_l)
    free(d.child_r); free(d.prio); free(d.slot); free(d.order); free(d.free_ids)
    d.pos = NULL; d.elem = NULL; d.mass = NULL; d.prev = NULL; d.next = NULL; d.child_l = NULL
    d.child_r = NULL; d.prio = NULL; d.slot = NULL; d.order = NULL; d.free_ids = NULL
    d.capacity = 0
    d.n_atoms = 0


cdef int64_t _treap_insert(AtomicDomain* d, int64_t t, int64_t atom) noexcept nogil:
    cdef int64_t c
    if t < 0:
        return atom
    if d.pos[atom] < d.pos[t]:
        d.child_l[t] = _treap_insert(d, d.child_l[t], atom)
        c = d.child_l[t]
        if d.prio[c] > d.prio[t]:  # rotate right
            d.child_l[t] = d.child_r[c]
            d.child_r[c] = t
            return c
    else:
        d.child_r[t] = _treap_insert(d, d.child_r[t], atom)
        c = d.child_r[t]
        if d.prio[c] > d.prio[t]:  # rotate left
            d.child_r[t] = d.child_l[c]
            d.child_l[c] = t
            return c
    return t


cdef int64_t _treap_merge(AtomicDomain* d, int64_t a, int64_t b) noexcept nogil:
    """Join two treaps whose keys are all smaller in ``a`` than in ``b``."""
    if a < 0:
        return b
    if b < 0:
        return a
    if d.prio[a] > d.prio[b]:
        d.child_r[a] = _treap_merge(d, d.child_r[a], b)
        return a
    d.child_l[b] = _treap_merge(d, a, d.child_l[b])
    return b


cdef int64_t _treap_erase(AtomicDomain* d, int64_t t, uint64_t key) noexcept nogil:
    if t < 0:
        return -1
    if key < d.pos[t]:
        d.child_l[t] = _treap_erase(d, d.child_l[t], key)
    elif key > d.pos[t]:
        d.child_r[t] = _treap_erase(d, d.child_r[t], key)
    else:
        return _treap_merge(d, d.child_l[t], d.child_r[t])
    return t


cdef int64_t domain_find(AtomicDomain* d, uint64_t pos) noexcept nogil:
    """Id of the atom at ``pos``, or -1."""
    cdef int64_t t = d.root
    while t >= 0:
        if pos < d.pos[t]:
            t = d.child_l[t]
        elif pos > d.pos[t]:
            t = d.child_r[t]
        else:
            return t
    return -1


cdef int64_t domain_predecessor(AtomicDomain* d, uint64_t pos) noexcept nogil:
    """Id of the right-most atom strictly left of ``pos``, or -1."""
    cdef int64_t t = d.root, best = -1
    while t >= 0:
        if d.pos[t] < pos:
            best = t
            t = d.child_r[t]
        else:
            t = d.child_l[t]
    return best


cdef int64_t domain_insert(AtomicDomain* d, uint64_t pos, double mass) noexcept nogil:
    """Add an atom at the free position ``pos``; its id, or -1 when out of memory."""
    cdef int64_t atom, left
    cdef uint64_t h
    if d.n_free > 0:
        d.n_free -= 1
        atom = d.free_ids[d.n_free]
    else:
        if d.n_used == d.capacity and _grow(d, 2 * d.capacity) != 0:
            return -1
        atom = d.n_used
        d.n_used += 1
    h = pos
    d.pos[atom] = pos
    d.elem[atom] = domain_element(d, pos)
    d.mass[atom] = mass
    d.prio[atom] = splitmix64(&h)
    d.child_l[atom] = -1
    d.child_r[atom] = -1
    # neighbours: found before the atom enters the tree
    left = domain_predecessor(d, pos)
    d.prev[atom] = left
    if left >= 0:
        d.next[atom] = d.next[left]
        d.next[left] = atom
    else:
        d.next[atom] = d.first
        d.first = atom
    if d.next[atom] >= 0:
        d.prev[d.next[atom]] = atom
    else:
        d.last = atom
    d.root = _treap_insert(d, d.root, atom)
    d.slot[atom] = d.n_atoms
    d.order[d.n_atoms] = atom
    d.n_atoms += 1
    return atom


cdef void domain_erase(AtomicDomain* d, int64_t atom) noexcept nogil:
    """Remove a live atom."""
    cdef int64_t moved, left = d.prev[atom], right = d.next[atom]
    d.root = _treap_erase(d, d.root, d.pos[atom])
    if left >= 0:
        d.next[left] = right
    else:
        d.first = right
    if right >= 0:
        d.prev[right] = left
    else:
        d.last = left
    # swap-remove from the unsorted array
    moved = d.order[d.n_atoms - 1]
    d.order[d.slot[atom]] = moved
    d.slot[moved] = d.slot[atom]
    d.n_atoms -= 1
    d.free_ids[d.n_free] = atom
    d.n_free += 1


cdef class DomainForTests:
    """A Python handle on one atomic domain, to test the data structure.

    Parameters
    ----------
    n_bins : int
        Number of bins (matrix elements) the domain covers.
    seed : int
        Seed of the generator used by :meth:`random_atom` and :meth:`random_position`.
    n_cols : int or None, default=None
        Number of columns of the matrix whose elements the bins are (row-major); None for
        one row of ``n_bins``.
    """
    def __cinit__(self, uint64_t n_bins, uint64_t seed=0, n_cols=None):
        n_cols = n_bins if n_cols is None else n_cols
        if not 1 <= n_cols <= MAX_N_COLUMNS:
            raise ValueError(f"n_cols must be in [1, {MAX_N_COLUMNS}]; got {n_cols}")
        if domain_init(&self.d, n_bins, n_cols, 16) != 0:
            raise MemoryError("could not allocate the atomic domain")
        rng_seed(&self.rng, seed)

    def __dealloc__(self):
        domain_free(&self.d)

    @property
    def n_atoms(self):
        """Number of live atoms."""
        return self.d.n_atoms

    @property
    def bin_length(self):
        """Number of positions in each bin."""
        return self.d.bin_length

    def insert(self, uint64_t pos, double mass):
        """Insert an atom at a free position; return its id."""
        if domain_find(&self.d, pos) >= 0:
            raise ValueError(f"position {pos} is occupied")
        atom = domain_insert(&self.d, pos, mass)
        if atom < 0:
            raise MemoryError("could not grow the atomic domain")
        return atom

    def erase(self, int64_t atom):
        """Remove the atom with id ``atom``."""
        domain_erase(&self.d, atom)

    def find(self, uint64_t pos):
        """Id of the atom at ``pos`` or -1."""
        return domain_find(&self.d, pos)

    def predecessor(self, uint64_t pos):
        """Id of the right-most atom left of ``pos`` or -1."""
        return domain_predecessor(&self.d, pos)

    def position(self, int64_t atom):
        """Position of an atom."""
        return self.d.pos[atom]

    def element(self, int64_t atom):
        """Row and column of the matrix element an atom is in, as the domain keeps them."""
        cdef uint64_t e = self.d.elem[atom]
        return int(e >> ELEMENT_COLUMN_BITS), int(e & ELEMENT_COLUMN_MASK)

    def move(self, int64_t atom, uint64_t pos):
        """Move an atom to ``pos``, strictly between its neighbours."""
        cdef int64_t left = self.d.prev[atom], right = self.d.next[atom]
        if (left >= 0 and pos <= self.d.pos[left]) or (right >= 0 and pos >= self.d.pos[right]):
            raise ValueError(f"position {pos} is not between the atom's neighbours")
        domain_move(&self.d, atom, pos)

    def neighbours(self, int64_t atom):
        """Ids of the left and right neighbours (-1 where there is none)."""
        return self.d.prev[atom], self.d.next[atom]

    def random_atom(self):
        """Id of a uniformly chosen live atom."""
        return domain_random_atom(&self.d, &self.rng)

    def random_position(self):
        """A uniformly chosen free position."""
        return domain_random_free_position(&self.d, &self.rng)

    def positions_in_order(self):
        """Positions of all atoms, walking the neighbour links from the left."""
        out = []
        cdef int64_t t = self.d.first
        while t >= 0:
            out.append(self.d.pos[t])
            t = self.d.next[t]
        return np.array(out, dtype=np.uint64)
