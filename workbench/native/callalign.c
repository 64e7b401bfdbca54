/* The alignment of two operator sequences, for workbench/dumps/match_align_native.py: exactly what
   workbench/dumps/match_align.align gives (anchors kept in increasing order, each gap between them aligned by
   dynamic programming over calls of one class and pass, or greedily in order when it has more than `max_cells`
   cells), on the calls' features as numbers that Python made:
     kind   (operator class, pass) numbered 0 .. kinds - 1: calls pair only within one kind;
     key    (class, pass, element counts) numbered 0 .. keys - 1: anchors, and "the same element counts";
     last   the last element count (or none) numbered: "the same output size";
     level  the l2norm of the first output, NaN when unknown.
   The scores and the table are the same double operations in the same order as the Python code (ISO C, so
   nothing is contracted into a fused multiply-add), so the same pairs come out, ties included.

   Python sizes everything: `ints` holds at least 3 * keys + 7 * n + kinds + 1 + m values, `cells` at least
   2 * min(n * m, max_cells) + n + m + 1 doubles, `pair_a` / `pair_b` at least min(n, m) values; ids must lie in
   their ranges. Returns the number of pairs, or REFUSED when a size or an id is not what it should be (Python
   then aligns in Python). Nothing is allocated; nothing is executed or followed from the input. */
#include <math.h>
#include <stdint.h>
#include <string.h>

const char *workbench_source_hash(void) { return WORKBENCH_SOURCE_HASH; }

enum { REFUSED = -1, LOOKAHEAD = 8 };

typedef struct {
    const int64_t *kind, *key, *last;
    const double *level;
} Side;

typedef struct {
    int64_t *pair_a, *pair_b, count, capacity;
} Pairs;

static int add(Pairs *out, int64_t i, int64_t j) {
    if (out->count >= out->capacity) return 0;
    out->pair_a[out->count] = i;
    out->pair_b[out->count] = j;
    out->count++;
    return 1;
}

/* match_align.score */
static double score(const Side *a, int64_t i, const Side *b, int64_t j) {
    if (a->kind[i] != b->kind[j]) return 0.0;
    double value = 2.0;
    if (a->key[i] == b->key[j]) value += 1.0;
    else if (a->last[i] == b->last[j]) value += 0.5;
    double x = a->level[i], y = b->level[j];
    if (isfinite(x) && isfinite(y)) {
        double scale = fabs(x) > fabs(y) ? fabs(x) : fabs(y);
        if (1e-30 > scale) scale = 1e-30;
        double ratio = fabs(x - y) / scale;
        value += 1.0 - (1.0 < ratio ? 1.0 : ratio);
    }
    return value;
}

static double larger(double x, double y) { return y > x ? y : x; }

/* match_align._gap's dynamic programming and walk back, on a[from_a, from_a + rows) x b[from_b, from_b + cols). */
static int gap_table(const Side *a, int64_t from_a, int64_t rows, const Side *b, int64_t from_b, int64_t cols,
                     double *cells, Pairs *out) {
    double *scores = cells, *best = cells + rows * cols;
    const int64_t width = cols + 1;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) scores[i * cols + j] = score(a, from_a + i, b, from_b + j);
    for (int64_t j = 0; j < width; j++) best[j] = 0.0;
    for (int64_t i = 1; i <= rows; i++) {
        double *here = best + i * width, *above = here - width;
        const double *row = scores + (i - 1) * cols;
        here[0] = 0.0;
        for (int64_t j = 1; j <= cols; j++) {
            double pair = row[j - 1];
            here[j] = larger(larger(above[j], here[j - 1]), pair != 0.0 ? above[j - 1] + pair : -1.0);
        }
    }
    int64_t start = out->count, i = rows, j = cols;
    while (i && j) {
        double pair = scores[(i - 1) * cols + j - 1], here = best[i * width + j];
        if (pair != 0.0 && here == best[(i - 1) * width + j - 1] + pair) {
            if (!add(out, from_a + i - 1, from_b + j - 1)) return 0;
            i--, j--;
        } else if (here == best[(i - 1) * width + j]) {
            i--;
        } else {
            j--;
        }
    }
    for (int64_t x = start, y = out->count - 1; x < y; x++, y--) {       /* walked back: put in order */
        int64_t t = out->pair_a[x]; out->pair_a[x] = out->pair_a[y]; out->pair_a[y] = t;
        t = out->pair_b[x]; out->pair_b[x] = out->pair_b[y]; out->pair_b[y] = t;
    }
    return 1;
}

/* match_align._greedy: B's positions of each kind in order (`first` kinds + 1 offsets, `at` cols positions). */
static int gap_greedy(const Side *a, int64_t from_a, int64_t rows, const Side *b, int64_t from_b, int64_t cols,
                      int64_t kinds, int64_t *first, int64_t *at, Pairs *out) {
    memset(first, 0, (size_t)(kinds + 1) * sizeof *first);
    for (int64_t k = 0; k < cols; k++) first[b->kind[from_b + k] + 1]++;
    for (int64_t c = 0; c < kinds; c++) first[c + 1] += first[c];
    for (int64_t k = 0; k < cols; k++) at[first[b->kind[from_b + k]]++] = k;       /* first[c]: end of kind c */
    for (int64_t c = kinds; c > 0; c--) first[c] = first[c - 1];
    first[0] = 0;
    int64_t j = 0;
    for (int64_t i = 0; i < rows; i++) {
        int64_t c = a->kind[from_a + i], low = first[c], high = first[c + 1];
        while (low < high) {                                             /* bisect_left(positions, j) */
            int64_t middle = low + (high - low) / 2;
            if (at[middle] < j) low = middle + 1; else high = middle;
        }
        if (low == first[c + 1]) continue;
        int64_t end = low + LOOKAHEAD < first[c + 1] ? low + LOOKAHEAD : first[c + 1], k = at[low];
        for (int64_t w = low; w < end; w++)
            if (b->key[from_b + at[w]] == a->key[from_a + i]) { k = at[w]; break; }
        if (!add(out, from_a + i, from_b + k)) return 0;
        j = k + 1;
    }
    return 1;
}

static int gap(const Side *a, int64_t from_a, int64_t rows, const Side *b, int64_t from_b, int64_t cols,
               int64_t max_cells, int64_t kinds, int64_t *scratch, double *cells, Pairs *out) {
    if (!rows || !cols) return 1;
    if (rows * cols > max_cells)
        return gap_greedy(a, from_a, rows, b, from_b, cols, kinds, scratch, scratch + kinds + 1, out);
    return gap_table(a, from_a, rows, b, from_b, cols, cells, out);
}

/* match_align._anchors and _increasing: the anchors' (i, j) into anchor_a / anchor_b; returns their number.
   `ints`: 3 * keys + 5 * n values of scratch. */
static int64_t anchors(const Side *a, int64_t n, const Side *b, int64_t m, int64_t keys, int64_t *ints,
                       int64_t *anchor_a, int64_t *anchor_b) {
    int64_t *count_a = ints, *count_b = ints + keys, *where_b = ints + 2 * keys;
    int64_t *cand_i = where_b + keys, *cand_j = cand_i + n, *tails = cand_j + n;
    int64_t *tail_at = tails + n, *back = tail_at + n;
    memset(ints, 0, (size_t)(2 * keys) * sizeof *ints);
    for (int64_t i = 0; i < n; i++) count_a[a->key[i]]++;
    for (int64_t j = 0; j < m; j++) count_b[b->key[j]]++;
    for (int64_t j = 0; j < m; j++) where_b[b->key[j]] = j;          /* read only where the key is once in B */
    int64_t candidates = 0, length = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t key = a->key[i];
        if (count_a[key] == 1 && count_b[key] == 1) {
            cand_i[candidates] = i;
            cand_j[candidates++] = where_b[key];
        }
    }
    for (int64_t p = 0; p < candidates; p++) {
        int64_t j = cand_j[p], low = 0, high = length;
        while (low < high) {                                             /* bisect_left(tails, j) */
            int64_t middle = low + (high - low) / 2;
            if (tails[middle] < j) low = middle + 1; else high = middle;
        }
        tails[low] = j;
        tail_at[low] = p;
        if (low == length) length++;
        back[p] = low ? tail_at[low - 1] : -1;
    }
    int64_t p = length ? tail_at[length - 1] : -1;
    for (int64_t k = length - 1; k >= 0; k--, p = back[p]) {
        anchor_a[k] = cand_i[p];
        anchor_b[k] = cand_j[p];
    }
    return length;
}

static int ids_in_range(const int64_t *ids, int64_t size, int64_t limit) {
    for (int64_t i = 0; i < size; i++)
        if (ids[i] < 0 || ids[i] >= limit) return 0;
    return 1;
}

int64_t callalign_pairs(int64_t n, int64_t m, const int64_t *kind_a, const int64_t *key_a, const int64_t *last_a,
                        const double *level_a, const int64_t *kind_b, const int64_t *key_b, const int64_t *last_b,
                        const double *level_b, int64_t kinds, int64_t keys, int64_t max_cells, int64_t *ints,
                        int64_t ints_size, double *cells, int64_t cells_size, int64_t *pair_a, int64_t *pair_b,
                        int64_t capacity) {
    if (n < 0 || m < 0 || kinds < 0 || keys < 0 || max_cells < 0 || n > INT32_MAX || m > INT32_MAX
        || keys > INT32_MAX || kinds > INT32_MAX) return REFUSED;
    int64_t table = n * m < max_cells ? n * m : max_cells;
    if (ints_size < 3 * keys + 7 * n + kinds + 1 + m || cells_size < 2 * table + n + m + 1
        || capacity < (n < m ? n : m)) return REFUSED;
    if (!ids_in_range(kind_a, n, kinds) || !ids_in_range(kind_b, m, kinds) || !ids_in_range(key_a, n, keys)
        || !ids_in_range(key_b, m, keys)) return REFUSED;
    Side a = {kind_a, key_a, last_a, level_a}, b = {kind_b, key_b, last_b, level_b};
    Pairs out = {pair_a, pair_b, 0, capacity};
    /* `ints`: the anchors, then the scratch of anchors(), which the greedy gaps reuse once the anchors are found. */
    int64_t *anchor_a = ints, *anchor_b = ints + n, *scratch = ints + 2 * n;
    int64_t count = anchors(&a, n, &b, m, keys, scratch, anchor_a, anchor_b);
    int64_t start_a = 0, start_b = 0;
    for (int64_t k = 0; k <= count; k++) {
        int64_t i = k < count ? anchor_a[k] : n, j = k < count ? anchor_b[k] : m;
        if (!gap(&a, start_a, i - start_a, &b, start_b, j - start_b, max_cells, kinds, scratch, cells, &out))
            return REFUSED;
        if (i < n && !add(&out, i, j)) return REFUSED;
        start_a = i + 1, start_b = j + 1;
    }
    return out.count;
}
