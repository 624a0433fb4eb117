# The atomic domain of CoGAPS (Sherman, Gao & Fertig 2019, section 1.1): atoms with integer positions in
# [0, n_bins * bin_length) and positive masses; bin = position // bin_length maps each
# atom to one matrix element. See doc/cogaps.rst ("The atomic domain") for the design.
from libc.stdint cimport uint64_t, int64_t
from .._utils._rng cimport Rng, Divisor, divisor_init, divisor_div, rng_below_by

# An atom's matrix element is one word, row << ELEMENT_COLUMN_BITS | column: the columns
# (the patterns) are fewer than 2**ELEMENT_COLUMN_BITS, which leaves 40 bits for the rows.
cdef enum:
    ELEMENT_COLUMN_BITS = 24
    ELEMENT_COLUMN_MASK = (1 << ELEMENT_COLUMN_BITS) - 1


cdef struct AtomicDomain:
    # per atom id (ids are recycled through a free list)
    uint64_t* pos
    uint64_t* elem      # the atom's matrix element, packed by domain_element
    double* mass
    int64_t* prev       # left neighbour in position order, -1 if none
    int64_t* next       # right neighbour in position order, -1 if none
    int64_t* child_l    # treap children, for the predecessor search of a birth
    int64_t* child_r
    uint64_t* prio      # treap priorities (a hash of the position at insertion)
    int64_t* slot       # index of the atom in `order`
    # live atoms in arbitrary order, for a uniform choice in O(1)
    int64_t* order
    int64_t* free_ids
    int64_t n_atoms
    int64_t n_free
    int64_t n_used      # ids ever handed out (high-water mark)
    int64_t capacity
    int64_t root
    int64_t first
    int64_t last
    uint64_t bin_length
    uint64_t n_bins
    uint64_t length
    # the divisions of every proposal, prepared once (_rng.pxd, Divisor): position -> bin,
    # a uniform position, and a uniform atom (for the count it was last prepared for)
    Divisor bin_div
    Divisor col_div     # bin -> (row, column)
    Divisor length_div
    uint64_t length_threshold
    Divisor atoms_div
    uint64_t atoms_threshold


cdef class DomainForTests:
    # declared here so that the proposals' test hook (_queue) can reach the domain
    cdef AtomicDomain d
    cdef Rng rng


cdef int domain_init(AtomicDomain* d, uint64_t n_bins, uint64_t n_cols,
                     int64_t capacity) noexcept nogil
cdef void domain_free(AtomicDomain* d) noexcept nogil
cdef int64_t domain_insert(AtomicDomain* d, uint64_t pos, double mass) noexcept nogil
cdef void domain_erase(AtomicDomain* d, int64_t atom) noexcept nogil
cdef int64_t domain_find(AtomicDomain* d, uint64_t pos) noexcept nogil
cdef int64_t domain_predecessor(AtomicDomain* d, uint64_t pos) noexcept nogil


# The uniform choices of every proposal, inline so that the samplers compile them into
# their loops.
cdef inline int64_t domain_random_atom(AtomicDomain* d, Rng* rng) noexcept nogil:
    """A live atom chosen uniformly (the domain must not be empty): ``rng_below`` with the
    division prepared once per atom count."""
    cdef uint64_t n = <uint64_t>d.n_atoms
    if d.atoms_div.d != n:
        divisor_init(&d.atoms_div, n)
        d.atoms_threshold = (<uint64_t>0 - n) % n
    return d.order[rng_below_by(rng, &d.atoms_div, d.atoms_threshold)]


cdef inline uint64_t domain_random_free_position(AtomicDomain* d, Rng* rng) noexcept nogil:
    """A uniform position of the domain not occupied by an atom."""
    cdef uint64_t pos = rng_below_by(rng, &d.length_div, d.length_threshold)
    while domain_find(d, pos) >= 0:
        pos = rng_below_by(rng, &d.length_div, d.length_threshold)
    return pos


cdef inline void domain_move(AtomicDomain* d, int64_t atom, uint64_t pos) noexcept nogil:
    """Move a live atom to ``pos``, strictly between its neighbours (the tree is unchanged)."""
    d.pos[atom] = pos
    d.elem[atom] = domain_element(d, pos)


cdef inline uint64_t domain_element(const AtomicDomain* d, uint64_t pos) noexcept nogil:
    """The matrix element of the bin holding ``pos``, packed as row << ELEMENT_COLUMN_BITS
    | column: bin = pos // bin_length, row = bin // n_cols, column = bin % n_cols, by
    prepared divisions (exact)."""
    cdef uint64_t rem, row
    row = divisor_div(&d.col_div, divisor_div(&d.bin_div, pos, &rem), &rem)
    return (row << ELEMENT_COLUMN_BITS) | rem
