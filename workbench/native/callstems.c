/* Call stems of a dump's row names and their numbering, for workbench/dumps/match_stems.py (matching's calls).

   Input: the names joined a line each (`text`, `size` bytes, not NUL-terminated, nothing past `size` read) and
   their number `lines`. A row's call stem is what match_names._stem_of gives: the name up to the end of the
   first ".parameters_grad" part (with ".<digits>" after it when a "." or the end follows them) that starts
   after the first byte and is followed by "." or the end; else up to the first ".input", ".output" or
   ".parameters" part after the first byte followed by "." or the end; else the whole name.

   Output, in arrays Python allocated with the sizes it passed: `start` and `stem` (each line's first byte and
   its stem's length), `code` (each line's stem numbered in order of first appearance), `first` (each number's
   first line); `table` is Python's zeroed hash table of `slots` entries (a power of two, at least twice the
   lines), which holds 1 + the first line of each distinct stem. Returns the number of distinct stems, or
   REFUSED when the text is not what this handles exactly: a byte outside ASCII (Python's \d also reads other
   digits, and str offsets are bytes only in ASCII), a line count other than `lines`, or a table too small;
   Python then takes its own path. Nothing is allocated; nothing is executed or followed from the input. */
#include <stdint.h>
#include <string.h>

#include "spancodes.h"

const char *workbench_source_hash(void) { return WORKBENCH_SOURCE_HASH; }

enum { REFUSED = -1 };

static int part_ends(const char *p, const char *end) { return p == end || *p == '.'; }

/* Whether `word` (of `length` bytes) follows the dot at `dot`, ends before "." or the end of the line. */
static int word_after(const char *dot, const char *end, const char *word, int64_t length) {
    return end - (dot + 1) >= length && memcmp(dot + 1, word, (size_t)length) == 0 && part_ends(dot + 1 + length, end);
}

/* The end of ".parameters_grad" at `dot` (with ".<digits>" when a "." or the end follows them), or NULL. */
static const char *grad_end(const char *dot, const char *end) {
    static const char grad[] = "parameters_grad";
    const int64_t length = (int64_t)sizeof grad - 1;
    if (end - (dot + 1) < length || memcmp(dot + 1, grad, (size_t)length) != 0) return NULL;
    const char *after = dot + 1 + length, *digit = after + 1;
    if (after < end && *after == '.') {
        while (digit < end && *digit >= '0' && *digit <= '9') digit++;
        if (digit > after + 1 && part_ends(digit, end)) return digit;
    }
    return part_ends(after, end) ? after : NULL;
}

static const char *next_dot(const char *p, const char *end) {                 /* the first "." in [p, end) */
    return p < end ? memchr(p, '.', (size_t)(end - p)) : NULL;
}

static int64_t stem_length(const char *line, const char *end) {
    for (const char *p = next_dot(line + 1, end); p; p = next_dot(p + 1, end)) {
        const char *found = grad_end(p, end);
        if (found) return found - line;
    }
    for (const char *p = next_dot(line + 1, end); p; p = next_dot(p + 1, end))
        if (word_after(p, end, "input", 5) || word_after(p, end, "output", 6) || word_after(p, end, "parameters", 10))
            return p - line;
    return end - line;
}

static int ascii(const char *text, int64_t size) {          /* eight bytes at a time: no byte has its top bit */
    uint64_t seen = 0, word;
    int64_t i = 0;
    for (; i + 8 <= size; i += 8) {
        memcpy(&word, text + i, sizeof word);
        seen |= word;
    }
    for (; i < size; i++) seen |= (unsigned char)text[i];
    return (seen & 0x8080808080808080ull) == 0;
}

struct call_key { const char *text, *line; const int64_t *start, *stem; int64_t length; };

static int same_stem(const void *context, int64_t other) {          /* spancodes.h's `same`: the same bytes */
    const struct call_key *key = context;
    return key->stem[other] == key->length && memcmp(key->text + key->start[other], key->line, (size_t)key->length) == 0;
}

int64_t callstems_codes(const char *text, int64_t size, int64_t lines, int64_t *start, int64_t *stem, int64_t *code,
                        int64_t *first, int64_t *table, int64_t slots) {
    if (lines < 1 || size < 0 || slots < 2 * lines || (slots & (slots - 1)) != 0) return REFUSED;
    if (!ascii(text, size)) return REFUSED;
    const char *end = text + size, *line = text;
    int64_t distinct = 0;
    for (int64_t row = 0; row < lines; row++) {
        if (line > end) return REFUSED;                                  /* fewer lines than said */
        const char *stop = memchr(line, '\n', (size_t)(end - line));
        if (!stop) stop = end;
        if (stop == end && row != lines - 1) return REFUSED;
        if (stop != end && row == lines - 1) return REFUSED;             /* more lines than said */
        int64_t length = stem_length(line, stop);
        start[row] = line - text;
        stem[row] = length;
        if (row && stem[row - 1] == length && memcmp(text + start[row - 1], line, (size_t)length) == 0) {
            code[row] = code[row - 1];          /* the rows of a call are usually adjacent: no hash table visit */
            line = stop + 1;
            continue;
        }
        struct call_key key = {text, line, start, stem, length};
        code[row] = span_code(table, slots, fnv1a((const unsigned char *)line, length), row, code, first, &distinct,
                              same_stem, &key);
        line = stop + 1;
    }
    return distinct;
}
