"""Row matching for `compare_results`: ordered, exact hashed and tolerant unordered paths."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eval_pipeline.grading._normalise import _cells_equal, _exact, _Pair, _Tolerance

_MATCHING_GROUP_ROWS = 200  # a failing group up to this size per side gets an exact matching
_MATCHING_GROUPS = 2_000  # ... for at most this many failing groups


# --- row comparison -------------------------------------------------------------------


@dataclass(eq=False)
class _Outcome:
    bad_a: np.ndarray  # positions of actual rows without a match, ascending
    bad_e: np.ndarray
    ordered: bool = False

    @property
    def passed(self) -> bool:
        return len(self.bad_a) == 0 and len(self.bad_e) == 0


_NO_ROWS = np.empty(0, dtype=np.intp)


def _compare_rows(
    pairs: list[_Pair], n_a: int, n_e: int, ordered: bool, tol: _Tolerance
) -> _Outcome:
    if ordered:
        return _compare_ordered(pairs, n_a, n_e, tol)
    return _compare_unordered(pairs, n_a, n_e, tol)


def _compare_ordered(pairs: list[_Pair], n_a: int, n_e: int, tol: _Tolerance) -> _Outcome:
    common = min(n_a, n_e)
    rows = None if n_a == n_e else np.arange(common)
    differs = np.zeros(common, dtype=bool)
    for pair in pairs:
        differs |= ~_cells_equal(pair, rows, rows, tol)
    bad = np.flatnonzero(differs)
    bad_a = np.concatenate([bad, np.arange(common, n_a)])
    return _Outcome(bad_a, np.concatenate([bad, np.arange(common, n_e)]), ordered=True)


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, in place: every input bit moves every output bit."""
    h ^= h >> 30
    h *= 0xBF58476D1CE4E5B9
    h ^= h >> 27
    h *= 0x94D049BB133111EB
    h ^= h >> 31
    return h


def _as_u64(keys: np.ndarray) -> np.ndarray:
    return keys.view(np.uint64) if keys.dtype == np.float64 else keys.astype(np.uint64)


def _hash_rows(key_columns: list[np.ndarray], n: int) -> np.ndarray:
    h = np.full(n, 0x9E3779B97F4A7C15, dtype=np.uint64)
    for keys in key_columns:
        h ^= _as_u64(keys)
        _mix(h)
    return h


def _surplus(own: np.ndarray, other: np.ndarray) -> np.ndarray:
    """For sorted hashes, mark the copies of a value beyond the other side's count of it."""
    if len(own) == 0:
        return np.zeros(0, dtype=bool)
    starts = np.flatnonzero(np.concatenate([[True], own[1:] != own[:-1]]))
    rank = np.arange(len(own)) - np.repeat(starts, np.diff(np.append(starts, len(own))))
    available = np.searchsorted(other, own, "right") - np.searchsorted(other, own, "left")
    return rank >= available


def _compare_unordered(pairs: list[_Pair], n_a: int, n_e: int, tol: _Tolerance) -> _Outcome:
    hash_a = _hash_rows([p.a_keys for p in pairs], n_a)
    hash_e = _hash_rows([p.e_keys for p in pairs], n_e)
    order_a, order_e = np.argsort(hash_a), np.argsort(hash_e)
    sorted_a, sorted_e = hash_a[order_a], hash_e[order_e]
    del hash_a, hash_e
    if n_a == n_e and np.array_equal(sorted_a, sorted_e):
        # Equal hashes: confirm on the keys themselves, so a hash collision cannot pass.
        agree = np.ones(n_a, dtype=bool)
        for pair in pairs:
            agree &= _exact(pair, order_a, order_e)
        if agree.all():
            return _Outcome(_NO_ROWS, _NO_ROWS)
        loose_a, loose_e = order_a[~agree], order_e[~agree]
    else:
        loose_a = order_a[_surplus(sorted_a, sorted_e)]
        loose_e = order_e[_surplus(sorted_e, sorted_a)]
    del order_a, order_e, sorted_a, sorted_e
    return _match_with_tolerance(pairs, loose_a, loose_e, n_a, n_e, tol)


def _match_with_tolerance(
    pairs: list[_Pair],
    loose_a: np.ndarray,
    loose_e: np.ndarray,
    n_a: int,
    n_e: int,
    tol: _Tolerance,
) -> _Outcome:
    """Decide the rows the exact path left unmatched, with the number tolerance."""
    numeric = [p for p in pairs if p.kind == "number"]
    if not numeric:
        return _Outcome(np.sort(loose_a), np.sort(loose_e))
    # Rows can only match within a group of equal non-number keys and equal null pattern.
    exact_a = [p.a_keys for p in pairs if p.kind != "number"] + [
        np.isnan(p.a_keys) for p in numeric
    ]
    exact_e = [p.e_keys for p in pairs if p.kind != "number"] + [
        np.isnan(p.e_keys) for p in numeric
    ]
    group_a, group_e = _hash_rows(exact_a, n_a), _hash_rows(exact_e, n_e)
    del exact_a, exact_e
    groups = _unique(np.concatenate([group_a[loose_a], group_e[loose_e]]))
    rows_a = _sorted_group_rows(group_a, groups, [p.a_raw for p in numeric])
    rows_e = _sorted_group_rows(group_e, groups, [p.e_raw for p in numeric])
    start_a, count_a = _group_spans(group_a[rows_a], groups)
    start_e, count_e = _group_spans(group_e[rows_e], groups)

    # Groups of equal size: pair the rows in sorted order (optimal for one number column).
    same_size = count_a == count_e
    in_same_a = np.repeat(same_size, count_a)
    in_same_e = np.repeat(same_size, count_e)
    paired_a, paired_e = rows_a[in_same_a], rows_e[in_same_e]
    agree = np.ones(len(paired_a), dtype=bool)
    for pair in pairs:
        agree &= _cells_equal(pair, paired_a, paired_e, tol)
    failing = _unique(np.concatenate([groups[~same_size], group_a[paired_a[~agree]]]))
    if len(failing) == 0:
        return _Outcome(_NO_ROWS, _NO_ROWS)

    # Failing groups that are small get an exact matching, so that with several number
    # columns a pairing that sorting missed is still found; the others keep the sorted
    # pairing's verdict (groups of unequal size fail whole).
    index = np.searchsorted(groups, failing)
    small = np.maximum(count_a, count_e)[index] <= _MATCHING_GROUP_ROWS
    to_match = index[small][:_MATCHING_GROUPS]
    rest = np.zeros(len(groups), dtype=bool)
    rest[index] = True
    rest[to_match] = False
    in_rest = np.repeat(rest[same_size], count_a[same_size]) & ~agree
    unequal = rest & ~same_size
    bad_a = [paired_a[in_rest], rows_a[np.repeat(unequal, count_a)]]
    bad_e = [paired_e[in_rest], rows_e[np.repeat(unequal, count_e)]]
    for g in to_match:
        unmatched_a, unmatched_e = _unmatched(
            pairs,
            rows_a[start_a[g] : start_a[g] + count_a[g]],
            rows_e[start_e[g] : start_e[g] + count_e[g]],
            tol,
        )
        bad_a.append(unmatched_a)
        bad_e.append(unmatched_e)
    return _Outcome(_unique(np.concatenate(bad_a)), _unique(np.concatenate(bad_e)))


def _sorted_group_rows(
    group: np.ndarray, groups: np.ndarray, numbers_: list[np.ndarray]
) -> np.ndarray:
    """Rows whose group is in `groups` (sorted), by group, then by each number column."""
    if len(groups) * 8 < len(group):  # few groups: searching a small set is cheap
        rows = np.flatnonzero(_member(group, groups))
        rows = rows[np.argsort(group[rows])]
    else:  # many: sort first, since sorted needles make searchsorted fast
        order = np.argsort(group)
        rows = order[_member(group[order], groups)]
    # Only rows sharing a group need the (slow) sort by their numbers.
    same = group[rows[1:]] == group[rows[:-1]]
    shared = np.concatenate([same, [False]]) | np.concatenate([[False], same])
    if shared.any():
        sub = rows[shared]
        sub = sub[np.lexsort([values[sub] for values in reversed(numbers_)] + [group[sub]])]
        rows[shared] = sub
    return rows


def _unique(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values (numpy's hash-based unique is slow on random 64-bit keys)."""
    values = np.sort(values)
    return values[np.concatenate([[True], values[1:] != values[:-1]])] if len(values) else values


def _member(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    if len(sorted_set) == 0:
        return np.zeros(len(values), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    return sorted_set[at] == values


def _group_spans(sorted_group: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and length of each of `groups` (sorted) within a sorted array of group ids."""
    start = np.searchsorted(sorted_group, groups, "left")
    return start, np.searchsorted(sorted_group, groups, "right") - start


def _unmatched(pairs: list[_Pair], rows_a: np.ndarray, rows_e: np.ndarray, tol: _Tolerance):
    """Rows left over by a maximum matching of actual to expected rows (Kuhn's algorithm)."""
    n_a, n_e = len(rows_a), len(rows_e)
    grid_a, grid_e = np.tile(rows_a, n_e), np.repeat(rows_e, n_a)
    fits = np.ones(n_a * n_e, dtype=bool)
    for pair in pairs:
        fits &= _cells_equal(pair, grid_a, grid_e, tol)
    candidates = [np.flatnonzero(row) for row in fits.reshape(n_e, n_a)]
    owner = np.full(n_a, -1)  # expected row matched to each actual row

    def augment(i: int, seen: np.ndarray) -> bool:
        for j in candidates[i]:
            if not seen[j]:
                seen[j] = True
                if owner[j] < 0 or augment(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    for i in range(n_e):
        augment(i, np.zeros(n_a, dtype=bool))
    matched_e = np.zeros(n_e, dtype=bool)
    matched_e[owner[owner >= 0]] = True
    return rows_a[owner < 0], rows_e[~matched_e]
