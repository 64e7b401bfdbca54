/* The layer number of module paths, for workbench/dumps/layers.py: what Python's
   `re.search(r"(?:^|\.)WORD\.(\d+)(?:\.|$)", path)` and `int(group(1))` give, for the YAML's `layer_pattern` of
   that form (layers.py recognizes it and passes WORD).

   The paths are `n` (offset, length) rows of `spans` into `text` (ASCII without newlines: Python checked, so
   `\d` is 0-9 and `$` is the end). The leftmost match of the pattern is the leftmost position j where WORD starts
   at the path's start or after a '.', is followed by '.', one or more digits and then '.' or the end (a shorter
   run of digits is followed by a digit, so the greedy run is the only one that can match). Output in `out`
   (Python's array of n): the number, -1 where nothing matches, -2 where the digits are more than 18 (Python reads
   that path itself). Returns 0, or -1 when an argument or a span is out of range. Nothing is allocated. */

/* The number at the first match in [p, end), -1 or -2 as above. */
static int64_t path_layer(const unsigned char *p, const unsigned char *end, const unsigned char *word, int64_t w) {
    for (const unsigned char *at = p; end - at > w; at++) {
        if ((at != p && at[-1] != '.') || memcmp(at, word, (size_t)w) != 0 || at[w] != '.') continue;
        const unsigned char *digit = at + w + 1, *stop = digit;
        while (stop < end && *stop >= '0' && *stop <= '9') stop++;
        if (stop == digit || (stop < end && *stop != '.')) continue;
        if (stop - digit > 18) return -2;
        int64_t value = 0;
        for (; digit < stop; digit++) value = value * 10 + (*digit - '0');
        return value;
    }
    return -1;
}

int64_t dumpscan_layers(const unsigned char *text, int64_t text_size, const int64_t *spans, int64_t n,
                        const unsigned char *word, int64_t word_size, int64_t *out) {
    if (n < 0 || text_size < 0 || word_size < 1) return -1;
    for (int64_t row = 0; row < n; row++) {
        int64_t offset = spans[2 * row], length = spans[2 * row + 1];
        if (offset < 0 || length < 0 || offset > text_size || length > text_size - offset) return -1;
        out[row] = path_layer(text + offset, text + offset + length, word, word_size);
    }
    return 0;
}
