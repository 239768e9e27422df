/* load.c - telling graph file formats apart and dispatching to their readers. */
#include "saga_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

enum { DETECT_BYTES = 8192, BANNER_BYTES = 64 };

static const char *const format_names[SAGA_FORMAT_COUNT] = {"auto", "edgelist", "mtx", "metis",
                                                            "sgr"};

/* Lower-case name of a format; "unknown" outside the enum. */
const char *saga_format_name(saga_format f) {
    if ((unsigned)f >= SAGA_FORMAT_COUNT)
        return "unknown";
    return format_names[f];
}

/* Parses a format name (case-insensitive); -1 when unknown. */
int saga_format_parse(const char *s) {
    if (!s)
        return -1;
    for (int f = 0; f < SAGA_FORMAT_COUNT; f++)
        if (strcasecmp(s, format_names[f]) == 0)
            return f;
    return -1;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcasecmp(s + n - k, suffix) == 0;
}

/* The first bytes of the text: inflates a gzip start into out (at most cap bytes). */
static size_t text_start(const unsigned char *raw, size_t n, unsigned char *out, size_t cap) {
    if (n < 2 || raw[0] != 0x1f || raw[1] != 0x8b) {
        size_t k = n < cap ? n : cap;
        memcpy(out, raw, k);
        return k;
    }
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
        return 0;
    zs.next_in = (Bytef *)raw;
    zs.avail_in = (uInt)n;
    zs.next_out = out;
    zs.avail_out = (uInt)cap;
    /* a damaged stream just yields fewer bytes here; the reader reports it properly */
    while (zs.avail_out > 0) {
        int ret = inflate(&zs, Z_NO_FLUSH);
        if (ret != Z_OK)
            break;
    }
    size_t got = cap - zs.avail_out;
    inflateEnd(&zs);
    return got;
}

/* Detects the format of path from its first bytes and its name; see saga_io.h. */
saga_status saga_format_detect(const char *path, saga_format *out) {
    saga_status st = SAGA_OK;
    int fd = -1;
    SAGA_CHECK(path && out, SAGA_ERR_INVALID_ARG, "saga_format_detect: NULL argument");
    fd = open(path, O_RDONLY | O_CLOEXEC);
    SAGA_CHECK(fd >= 0, SAGA_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    SAGA_CHECK(fstat(fd, &sb) == 0, SAGA_ERR_IO, "cannot stat %s: %s", path, strerror(errno));
    SAGA_CHECK(!S_ISDIR(sb.st_mode), SAGA_ERR_IO, "cannot read %s: %s", path, strerror(EISDIR));
    unsigned char raw[DETECT_BYTES];
    size_t n = 0;
    while (n < sizeof raw) {
        ssize_t k = read(fd, raw + n, sizeof raw - n);
        if (k < 0 && errno == EINTR)
            continue;
        SAGA_CHECK(k >= 0, SAGA_ERR_IO, "%s: read failed: %s", path, strerror(errno));
        if (k == 0)
            break;
        n += (size_t)k;
    }

    if (n >= 8 && memcmp(raw, "SAGAGRPH", 8) == 0) {
        *out = SAGA_FORMAT_SGR;
        goto fail;
    }
    unsigned char text[BANNER_BYTES];
    size_t t = text_start(raw, n, text, sizeof text);
    static const char banner[] = "%%MatrixMarket";
    if (t >= sizeof banner - 1 && strncasecmp((const char *)text, banner, sizeof banner - 1) == 0) {
        *out = SAGA_FORMAT_MTX;
        goto fail;
    }
    /* Names decide the rest. A file named like a binary cache or a Matrix Market file goes to
     * that reader, which then says what is wrong with it, rather than being read as an edge
     * list (1-based ids, or binary bytes, would otherwise make a wrong graph). */
    if (ends_with(path, ".graph") || ends_with(path, ".metis") || ends_with(path, ".graph.gz") ||
        ends_with(path, ".metis.gz"))
        *out = SAGA_FORMAT_METIS;
    else if (ends_with(path, ".mtx") || ends_with(path, ".mtx.gz"))
        *out = SAGA_FORMAT_MTX;
    else if (ends_with(path, ".sgr"))
        *out = SAGA_FORMAT_SGR;
    else
        *out = SAGA_FORMAT_EDGELIST;
fail:
    if (fd >= 0)
        close(fd);
    return st;
}

/* Loads a graph in any supported format; see saga_io.h. The .sgr cache holds a finished graph:
 * its loader applies the options to it or refuses them. */
saga_status saga_graph_load(saga_graph **out, const char *path, const saga_load_opts *opts) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(out && path, SAGA_ERR_INVALID_ARG, "saga_graph_load: NULL argument");
    saga_load_opts o = opts ? *opts : saga_load_opts_defaults();
    saga_format f = o.format;
    SAGA_CHECK((unsigned)f < SAGA_FORMAT_COUNT, SAGA_ERR_INVALID_ARG,
               "saga_graph_load: invalid format %d", (int)f);
    if (f == SAGA_FORMAT_AUTO)
        SAGA_TRY(saga_format_detect(path, &f));
    switch (f) {
    case SAGA_FORMAT_EDGELIST:
        st = saga_edgelist_read(out, path, &o);
        break;
    case SAGA_FORMAT_MTX:
        st = saga_mtx_read(out, path, &o);
        break;
    case SAGA_FORMAT_METIS:
        st = saga_metis_read(out, path, &o);
        break;
    case SAGA_FORMAT_SGR:
        st = saga_sgr_load(out, path, &o);
        break;
    default:
        st = saga_error(SAGA_ERR_INTERNAL, "saga_graph_load: unhandled format %d", (int)f);
    }
fail:
    return st;
}
