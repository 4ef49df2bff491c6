"""The order in which TensorFlow's C++ walks a ``std::unordered_map<std::string, ...>``, for
the answers whose order TF takes from one (a V1 checkpoint's ``debug_string``).

TF's Linux wheels use libstdc++: ``std::hash<std::string>`` is ``_Hash_bytes`` (a 64-bit
MurmurHash2 variant, seed ``0xc70f6907``), and the table is a singly linked list of nodes
grouped by bucket with the prime rehash policy (max load factor 1). Inserting a key into an
empty bucket puts it at the front of the list; into a non-empty bucket, at the front of that
bucket's group; a rehash relinks the nodes the same way in list order. Replayed here for the
keys in their insertion order.
"""

from __future__ import annotations

_MUL = (0xC6A4A793 << 32) + 0x5BD1E995
_MASK = (1 << 64) - 1
_SEED = 0xC70F6907

#: libstdc++'s bucket counts: the small-size table, then its prime list (to a million buckets;
#: larger tables fall back to sorted order).
_FAST_BUCKETS = (2, 2, 2, 3, 5, 5, 7, 7, 11, 11, 11, 11, 13, 13)
_PRIMES = (
    2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 103, 109,
    113, 127, 137, 139, 149, 157, 167, 179, 193, 199, 211, 227, 241, 257, 277, 293, 313, 337, 359, 383, 409,
    439, 467, 503, 541, 577, 619, 661, 709, 761, 823, 887, 953, 1031, 1109, 1193, 1289, 1381, 1493, 1613, 1741,
    1879, 2029, 2179, 2357, 2549, 2753, 2971, 3209, 3469, 3739, 4027, 4349, 4703, 5087, 5503, 5953, 6427, 6949,
    7517, 8123, 8783, 9497, 10273, 11113, 12011, 12983, 14033, 15173, 16411, 17749, 19183, 20753, 22447, 24281,
    26267, 28411, 30727, 33223, 35933, 38873, 42043, 45481, 49201, 53201, 57557, 62233, 67307, 72817, 78779,
    85229, 92203, 99733, 107897, 116731, 126271, 136607, 147793, 159871, 172933, 187091, 202409, 218971, 236897,
    256279, 277261, 299951, 324503, 351061, 379787, 410857, 444487, 480881, 520241, 562841, 608903, 658753,
    712697, 771049, 834181, 902483, 976369,
)


def _shift_mix(v: int) -> int:
    return v ^ (v >> 47)


def hash_bytes(data: bytes) -> int:
    """libstdc++'s ``std::hash<std::string>`` on a 64-bit platform."""
    n = len(data)
    h = (_SEED ^ (n * _MUL)) & _MASK
    whole = n & ~7
    for i in range(0, whole, 8):
        k = (_shift_mix((int.from_bytes(data[i:i + 8], "little") * _MUL) & _MASK) * _MUL) & _MASK
        h = ((h ^ k) * _MUL) & _MASK
    if n & 7:
        h = ((h ^ int.from_bytes(data[whole:], "little")) * _MUL) & _MASK
    h = (_shift_mix(h) * _MUL) & _MASK
    return _shift_mix(h)


def _next_bucket_count(n: int) -> int | None:
    if n < len(_FAST_BUCKETS):
        return _FAST_BUCKETS[n]
    for p in _PRIMES[6:]:
        if p >= n:
            return p
    return None


class _Table:
    """The node list as its bucket groups: a node into an empty bucket starts a group at the
    front of the list; into a non-empty one, it goes to the front of that bucket's group.
    Both kept reversed (appended), so each insertion is O(1)."""

    def __init__(self, buckets: int) -> None:
        self.buckets = buckets
        self.groups: list[int] = []  # bucket of each group, last = front of the list
        self.members: dict[int, list[tuple[bytes, int]]] = {}  # last = front of the group

    def insert(self, node: tuple[bytes, int]) -> None:
        b = node[1] % self.buckets
        group = self.members.get(b)
        if group is None:
            self.groups.append(b)
            self.members[b] = [node]
        else:
            group.append(node)

    def nodes(self) -> list[tuple[bytes, int]]:
        return [n for b in reversed(self.groups) for n in reversed(self.members[b])]


def unordered_map_order(keys: list[bytes]) -> list[bytes] | None:
    """The iteration order of a libstdc++ ``unordered_map`` after inserting ``keys`` (distinct)
    in this order; None past the table sizes known here."""
    table = _Table(1)
    next_resize = 0
    for count, key in enumerate(keys):
        if count + 1 > next_resize:
            wanted = max(count + 1, 0 if next_resize else 11)
            if wanted >= table.buckets:
                new = _next_bucket_count(max(wanted + 1, table.buckets * 2))
                if new is None:
                    return None
                old, table, next_resize = table.nodes(), _Table(new), new
                for node in old:  # a rehash relinks in list order, by the same rules
                    table.insert(node)
            else:
                next_resize = table.buckets
        table.insert((key, hash_bytes(key)))
    return [k for k, _ in table.nodes()]
