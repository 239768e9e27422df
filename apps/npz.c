/* npz.c - .npy headers and .npz archives (a ZIP of stored .npy entries) for numpy.load. */
#include "npz.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char *const NPY_DESCR[NPZ_DTYPE_COUNT] = {"<f4", "<f8", "<i4", "<i8", "|u1"};
static const size_t NPY_SIZE[NPZ_DTYPE_COUNT] = {4, 8, 4, 8, 1};

size_t npz_dtype_size(npz_dtype dt) {
    return (unsigned)dt < NPZ_DTYPE_COUNT ? NPY_SIZE[dt] : 0;
}

size_t npy_header(char *buf, size_t cap, npz_dtype dt, int ndim, const int64_t *shape) {
    char dict[256];
    if ((unsigned)dt >= NPZ_DTYPE_COUNT || ndim < 0 || ndim > NPY_MAX_DIMS || (ndim && !shape))
        return 0;
    /* numpy's own spelling: "(n,)" for one dimension, "(n, k)" for more, "()" for none */
    int len = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                       NPY_DESCR[dt]);
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return 0;
        len += snprintf(dict + len, sizeof dict - (size_t)len, "%s%lld", d ? ", " : "",
                        (long long)shape[d]);
    }
    len += snprintf(dict + len, sizeof dict - (size_t)len, "%s), }", ndim == 1 ? "," : "");
    /* magic (6) + version (2) + length (2) + dict + spaces + '\n', to a multiple of NPY_ALIGN */
    size_t total = (10 + (size_t)len + 1 + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN;
    if (total > cap)
        return 0;
    size_t hlen = total - 10;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (char)(hlen & 0xff);
    buf[9] = (char)(hlen >> 8);
    memcpy(buf + 10, dict, (size_t)len);
    memset(buf + 10 + len, ' ', hlen - (size_t)len - 1);
    buf[total - 1] = '\n';
    return total;
}

uint32_t npz_crc32(uint32_t crc, const void *data, size_t n) {
    static uint32_t table[256];
    static int ready; /* the table is the same whoever fills it: a race writes equal values */
    if (!ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    const unsigned char *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++)
        crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* ---- the archive -------------------------------------------------------------------------- */

enum {
    ZIP_LOCAL_SIG = 0x04034b50,
    ZIP_CENTRAL_SIG = 0x02014b50,
    ZIP_END_SIG = 0x06054b50,
    ZIP_VERSION = 20,   /* 2.0: stored entries, no ZIP64 */
    ZIP_DOS_DATE = 0x21 /* 1980-01-01, time 00:00:00 */
};

#define ZIP_MAX_U32 0xffffffffull

typedef struct npz_entry {
    char name[128];
    uint32_t crc, size, offset;
} npz_entry;

struct npz_writer {
    FILE *f;
    char *path;
    npz_entry *entries;
    int n, cap;
    uint64_t pos; /* bytes written */
    int finished;
};

static void put16(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v & 0xff);
    p[1] = (unsigned char)((v >> 8) & 0xff);
}

static void put32(unsigned char *p, uint32_t v) {
    put16(p, v & 0xffff);
    put16(p + 2, v >> 16);
}

static saga_status put(npz_writer *w, const void *p, size_t n) {
    if (n && fwrite(p, 1, n, w->f) != n)
        return saga_error(SAGA_ERR_IO, "%s: write failed: %s", w->path, strerror(errno));
    w->pos += n;
    return SAGA_OK;
}

saga_status npz_open(npz_writer **out, const char *path) {
    saga_status st = SAGA_OK;
    npz_writer *w = NULL;
    *out = NULL;
    SAGA_CHECK(path && *path, SAGA_ERR_INVALID_ARG, "npz: no file name");
    w = saga_calloc(1, sizeof *w);
    SAGA_CHECK(w, SAGA_ERR_OUT_OF_MEMORY, "npz: out of memory opening %s", path);
    SAGA_TRY(saga_alloc_array((void **)&w->path, strlen(path) + 1, 1, "npz file name"));
    memcpy(w->path, path, strlen(path) + 1);
    w->f = fopen(path, "wb");
    SAGA_CHECK(w->f, SAGA_ERR_IO, "cannot create %s: %s", path, strerror(errno));
    *out = w;
    return SAGA_OK;
fail:
    if (w)
        saga_free(w->path);
    saga_free(w);
    return st;
}

saga_status npz_add(npz_writer *w, const char *name, npz_dtype dt, int ndim, const int64_t *shape,
                    const void *data) {
    saga_status st = SAGA_OK;
    char head[256];
    unsigned char lh[30];
    SAGA_CHECK(w && !w->finished && name, SAGA_ERR_INVALID_ARG, "npz_add: no open archive");
    size_t nlen = strlen(name);
    SAGA_CHECK(nlen > 0 && nlen + 4 < sizeof w->entries->name && !strchr(name, '/'),
               SAGA_ERR_INVALID_ARG, "%s: bad array name '%s' (1 to %d characters, no '/')",
               w->path, name, (int)sizeof w->entries->name - 5);
    size_t hlen = npy_header(head, sizeof head, dt, ndim, shape);
    SAGA_CHECK(hlen > 0, SAGA_ERR_INVALID_ARG,
               "%s: array '%s': bad dtype %d or shape (%d dimensions, each >= 0)", w->path, name,
               (int)dt, ndim);
    uint64_t count = 1;
    for (int d = 0; d < ndim; d++) {
        SAGA_CHECK(shape[d] == 0 || count <= ZIP_MAX_U32 / (uint64_t)shape[d], SAGA_ERR_UNSUPPORTED,
                   "%s: array '%s' is larger than 4 GiB (no ZIP64)", w->path, name);
        count *= (uint64_t)shape[d];
    }
    uint64_t bytes = count * npz_dtype_size(dt);
    uint64_t size = hlen + bytes;
    SAGA_CHECK(count == 0 || data, SAGA_ERR_INVALID_ARG, "%s: array '%s' has no data", w->path,
               name);
    SAGA_CHECK(size <= ZIP_MAX_U32 && w->pos + sizeof lh + nlen + 4 + size <= ZIP_MAX_U32,
               SAGA_ERR_UNSUPPORTED,
               "%s: array '%s' (%llu bytes) would take the archive past 4 GiB (no ZIP64)", w->path,
               name, (unsigned long long)size);
    SAGA_CHECK(w->n < 0xffff, SAGA_ERR_UNSUPPORTED, "%s: more than 65535 arrays", w->path);
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 8;
        SAGA_TRY(saga_realloc_array((void **)&w->entries, (size_t)cap, sizeof *w->entries,
                                    "npz entries"));
        w->cap = cap;
    }
    npz_entry *e = &w->entries[w->n];
    snprintf(e->name, sizeof e->name, "%s.npy", name);
    e->crc = npz_crc32(npz_crc32(0, head, hlen), data, (size_t)bytes);
    e->size = (uint32_t)size;
    e->offset = (uint32_t)w->pos;
    put32(lh, ZIP_LOCAL_SIG);
    put16(lh + 4, ZIP_VERSION);
    put16(lh + 6, 0);  /* flags */
    put16(lh + 8, 0);  /* method: stored */
    put16(lh + 10, 0); /* time */
    put16(lh + 12, ZIP_DOS_DATE);
    put32(lh + 14, e->crc);
    put32(lh + 18, e->size); /* compressed */
    put32(lh + 22, e->size); /* uncompressed */
    put16(lh + 26, (uint32_t)(nlen + 4));
    put16(lh + 28, 0); /* extra */
    SAGA_TRY(put(w, lh, sizeof lh));
    SAGA_TRY(put(w, e->name, nlen + 4));
    SAGA_TRY(put(w, head, hlen));
    SAGA_TRY(put(w, data, (size_t)bytes));
    w->n++;
fail:
    return st;
}

saga_status npz_finish(npz_writer *w) {
    saga_status st = SAGA_OK;
    unsigned char ch[46], end[22];
    SAGA_CHECK(w && !w->finished, SAGA_ERR_INVALID_ARG, "npz_finish: no open archive");
    uint64_t dir = w->pos;
    for (int i = 0; i < w->n; i++) {
        const npz_entry *e = &w->entries[i];
        size_t nlen = strlen(e->name);
        put32(ch, ZIP_CENTRAL_SIG);
        put16(ch + 4, ZIP_VERSION); /* made by: MS-DOS attributes, version 2.0 */
        put16(ch + 6, ZIP_VERSION); /* needed */
        put16(ch + 8, 0);
        put16(ch + 10, 0);
        put16(ch + 12, 0);
        put16(ch + 14, ZIP_DOS_DATE);
        put32(ch + 16, e->crc);
        put32(ch + 20, e->size);
        put32(ch + 24, e->size);
        put16(ch + 28, (uint32_t)nlen);
        put16(ch + 30, 0); /* extra */
        put16(ch + 32, 0); /* comment */
        put16(ch + 34, 0); /* disk */
        put16(ch + 36, 0); /* internal attributes */
        put32(ch + 38, 0); /* external attributes */
        put32(ch + 42, e->offset);
        SAGA_TRY(put(w, ch, sizeof ch));
        SAGA_TRY(put(w, e->name, nlen));
    }
    SAGA_CHECK(w->pos + sizeof end <= ZIP_MAX_U32, SAGA_ERR_UNSUPPORTED,
               "%s: the archive would pass 4 GiB (no ZIP64)", w->path);
    put32(end, ZIP_END_SIG);
    put16(end + 4, 0);
    put16(end + 6, 0);
    put16(end + 8, (uint32_t)w->n);
    put16(end + 10, (uint32_t)w->n);
    put32(end + 12, (uint32_t)(w->pos - dir));
    put32(end + 16, (uint32_t)dir);
    put16(end + 20, 0); /* comment */
    SAGA_TRY(put(w, end, sizeof end));
    FILE *f = w->f;
    w->f = NULL;
    SAGA_CHECK(fclose(f) == 0, SAGA_ERR_IO, "%s: write failed: %s", w->path, strerror(errno));
    w->finished = 1;
fail:
    return st;
}

void npz_free(npz_writer **wp) {
    if (!wp || !*wp)
        return;
    npz_writer *w = *wp;
    if (w->f)
        fclose(w->f);
    if (!w->finished)
        remove(w->path);
    saga_free(w->entries);
    saga_free(w->path);
    saga_free(w);
    *wp = NULL;
}
