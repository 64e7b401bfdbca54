/* The deepest [ / { nesting of JSON text outside its strings, for workbench/input_files.py json_depth, by its
   rules exactly (any bytes, valid JSON or not): a quote after an odd run of backslashes is escaped (dropped), an
   even run escapes nothing; brackets between a quote and the next one are inside a string; when the quotes are
   odd in number (an unterminated string) the brackets after the last quote count as outside; the depth is the
   highest running sum of +1 per opening and -1 per closing bracket, at least 0. One pass, no allocation. */
int64_t dumpscan_json_depth(const unsigned char *text, int64_t size) {
    int64_t depth = 0, deepest = 0, tail = 0, tail_deepest = 0, quotes = 0, i = 0;
    if (size < 0) return -1;
    while (i < size) {
        unsigned char c = text[i++];
        if (c == '\\') {
            int64_t run = 1;
            while (i < size && text[i] == '\\') { run++; i++; }
            if ((run & 1) && i < size && text[i] == '"') i++;        /* an escaped quote */
            continue;
        }
        if (c == '"') {
            quotes++;
            tail = tail_deepest = 0;                   /* brackets after it count only if no quote closes it */
        } else if (c == '[' || c == '{' || c == ']' || c == '}') {
            int64_t step = (c == '[' || c == '{') ? 1 : -1;
            if ((quotes & 1) == 0) {
                depth += step;
                if (depth > deepest) deepest = depth;
            }
            tail += step;
            if (tail > tail_deepest) tail_deepest = tail;
        }
    }
    if ((quotes & 1) && depth + tail_deepest > deepest) deepest = depth + tail_deepest;
    return deepest;
}
