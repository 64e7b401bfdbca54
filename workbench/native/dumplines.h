/* Strings as the lines of one buffer, for workbench/dumps/msprobe_lines.py: Python decodes the buffer once and
   splits it, instead of one bytes object and one decode (or one concatenation) per string.

   `items` holds three int64 per piece of text: the source (0 = `text`, 1 = `extra`), the offset and the length.
   Line r is the items index[r * per_line] .. index[r * per_line + per_line - 1], followed by '\n'; without an
   index (NULL) line r is item r alone. Every item is checked against its source, every index against `nitems`,
   and the room left in `out` before anything is copied; the lines must fill `out` exactly. It never allocates. */

/* Returns the bytes written (`out_size`), or -1: an item outside its source, an index outside the items, a bad
   count, or `out` not filled exactly (nothing written past `out_size`). `index` holds nlines * per_line values
   (the caller's array). */
int64_t dumpscan_lines(const unsigned char *text, int64_t text_size, const unsigned char *extra, int64_t extra_size,
                       const int64_t *items, int64_t nitems, const int64_t *index, int64_t nlines, int64_t per_line,
                       unsigned char *out, int64_t out_size) {
    int64_t written = 0;
    if (nlines < 0 || nitems < 0 || per_line < 1 || text_size < 0 || extra_size < 0 || out_size < 0 ||
        (index == NULL && (per_line != 1 || nlines > nitems)))
        return -1;
    for (int64_t line = 0; line < nlines; line++) {
        for (int64_t k = 0; k < per_line; k++) {
            int64_t at = index == NULL ? line : index[line * per_line + k];
            if (at < 0 || at >= nitems) return -1;
            const int64_t *item = items + 3 * at;
            const unsigned char *source = item[0] == 0 ? text : item[0] == 1 ? extra : NULL;
            int64_t size = item[0] == 0 ? text_size : extra_size, offset = item[1], length = item[2];
            if (source == NULL || offset < 0 || length < 0 || offset > size || length > size - offset ||
                length > out_size - written)
                return -1;
            memcpy(out + written, source + offset, (size_t)length);
            written += length;
        }
        if (written >= out_size) return -1;
        out[written++] = '\n';
    }
    return written == out_size ? written : -1;
}
