/* The fold's sums: one entry per distinct (table, window, key), found through a hash index,
 * and sorted into window order for the apply. Included by _fastagg.c, after `entry`. */

/* The sums of a fold: entries dense in the order they came, found through an open-addressing
 * index of their positions (+ 1; 0 is empty). A table of entries themselves cost a calloc of
 * 48 bytes a slot, doubling from 256, and a scan of every slot to sort them. */
typedef struct {
    entry *entries;
    int32_t *index;
    Py_ssize_t cap, used; /* index slots (a power of two); entries, at most cap / 2 */
    Py_ssize_t last[4];   /* per kind, the entry hit last: consecutive rows mostly repeat it */
} sums;

static uint64_t mix(int64_t kind, int64_t group, int64_t key) {
    uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ULL;
    h ^= ((uint64_t)group + ((uint64_t)kind << 58)) * 0xC2B2AE3D27D4EB4FULL;
    return h ^ (h >> 29);
}

static int sums_grow(sums *t) {
    Py_ssize_t cap = t->cap ? t->cap * 2 : 256;
    if (cap / 2 > INT32_MAX) return -1;
    int32_t *index = calloc((size_t)cap, sizeof(int32_t));
    entry *entries = index ? realloc(t->entries, (size_t)(cap / 2) * sizeof(entry)) : NULL;
    if (!entries) { free(index); return -1; }
    for (Py_ssize_t i = 0; i < t->used; i++) {
        const entry *e = &entries[i];
        uint64_t slot = mix(e->kind, e->group, e->key) & (uint64_t)(cap - 1);
        while (index[slot]) slot = (slot + 1) & (uint64_t)(cap - 1);
        index[slot] = (int32_t)(i + 1);
    }
    free(t->index);
    t->index = index; t->entries = entries; t->cap = cap;
    return 0;
}

static int sums_add(sums *t, int64_t kind, int64_t group, int64_t key, int64_t first,
                    int64_t second) {
    entry *e;
    if (t->last[kind] >= 0) {
        e = &t->entries[t->last[kind]];
        if (e->key == key && e->group == group) {
            e->first += (uint64_t)first; e->second += (uint64_t)second;
            return 0;
        }
    }
    if ((t->used + 1) * 2 > t->cap && sums_grow(t) < 0) return -1;
    uint64_t slot = mix(kind, group, key) & (uint64_t)(t->cap - 1);
    for (int32_t at; (at = t->index[slot]); slot = (slot + 1) & (uint64_t)(t->cap - 1)) {
        e = &t->entries[at - 1];
        if (e->key == key && e->group == group && e->kind == kind) {
            e->first += (uint64_t)first; e->second += (uint64_t)second;
            t->last[kind] = at - 1;
            return 0;
        }
    }
    t->entries[t->used] = (entry){kind, group, key, (uint64_t)first, (uint64_t)second};
    t->last[kind] = t->used++;
    t->index[slot] = (int32_t)t->used;
    return 0;
}

static int by_key(const void *a, const void *b) {
    const entry *x = a, *y = b;
    return x->key < y->key ? -1 : x->key > y->key;
}

/* A bucket's sums by key: most buckets hold a few dozen, sorted in place by insertion (qsort's
 * comparator call per step cost a fifth of the fold's apply); larger ones by qsort. */
static void sort_by_key(entry *run, Py_ssize_t count) {
    if (count > 48) {
        qsort(run, count, sizeof(entry), by_key);
        return;
    }
    for (Py_ssize_t i = 1; i < count; i++) {
        entry moving = run[i];
        Py_ssize_t j = i;
        for (; j > 0 && run[j - 1].key > moving.key; j--) run[j] = run[j - 1];
        run[j] = moving;
    }
}

/* The used sums in (group, kind, key) order, into `out`: counted into one bucket per (group,
 * kind) (a fold has a few hundred windows at most; glibc's qsort with a comparator call per
 * step cost a sixth of the fold), then each bucket, mostly a few dozen, sorted by key: a
 * window's sums are then one run, held back in one piece (`defer`).
 * Returns how many, or -1 when memory runs out. */
static Py_ssize_t sorted_sums(const sums *t, Py_ssize_t groups, entry **out) {
    Py_ssize_t buckets = 4 * groups, count = t->used;
    Py_ssize_t *starts = calloc((size_t)buckets + 1, sizeof(Py_ssize_t));
    entry *ordered = malloc((size_t)(count ? count : 1) * sizeof(entry));
    if (!starts || !ordered) { free(starts); free(ordered); return -1; }
    for (Py_ssize_t i = 0; i < count; i++)
        starts[t->entries[i].group * 4 + t->entries[i].kind + 1]++;
    for (Py_ssize_t b = 0; b < buckets; b++) starts[b + 1] += starts[b];
    for (Py_ssize_t i = 0; i < count; i++) {
        const entry *e = &t->entries[i];
        ordered[starts[e->group * 4 + e->kind]++] = *e;
    }
    /* each bucket's start moved on to its end, the next bucket's start */
    for (Py_ssize_t b = 0, begin = 0; b < buckets; begin = starts[b++])
        if (starts[b] - begin > 1) sort_by_key(&ordered[begin], starts[b] - begin);
    free(starts);
    *out = ordered;
    return count;
}
