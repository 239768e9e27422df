/* text.c - integer and floating point tokens for the text parsers, without NUL termination. */
#include "text.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static inline bool is_blank(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static inline bool is_digit(char c) {
    return (unsigned)(c - '0') < 10u;
}

/* Skips blanks; true when a token follows. */
bool saga_text_skip_blank(const char **p, const char *end) {
    const char *s = *p;
    while (s < end && is_blank(*s))
        s++;
    *p = s;
    return s < end;
}

/* Parses the digits at s as a magnitude no larger than limit. Returns the end of the digits via
 * *q, or INVALID when there are none or the token goes on with something else. */
static saga_text_result scan_magnitude(const char *s, const char *end, uint64_t limit,
                                       uint64_t *out, const char **q) {
    const char *d = s;
    uint64_t v = 0;
    bool overflow = false;
    /* Up to 18 digits cannot overflow an unsigned 64-bit value, so check only past that. */
    const char *fast_end = end - s > 18 ? s + 18 : end;
    while (d < fast_end && is_digit(*d))
        v = v * 10 + (uint64_t)(*d++ - '0');
    if (d == fast_end) {
        while (d < end && is_digit(*d)) {
            uint64_t digit = (uint64_t)(*d++ - '0');
            if (overflow || v > (limit - digit) / 10)
                overflow = true;
            else
                v = v * 10 + digit;
        }
    }
    if (d == s || (d < end && !is_blank(*d)))
        return SAGA_TEXT_INVALID;
    if (overflow || v > limit)
        return SAGA_TEXT_OVERFLOW;
    *out = v;
    *q = d;
    return SAGA_TEXT_OK;
}

/* A non-negative integer up to INT64_MAX; see text.h. On any result but OK, *p is unchanged. */
saga_text_result saga_text_u63(const char **p, const char *end, int64_t *out) {
    const char *s = *p;
    if (!saga_text_skip_blank(&s, end))
        return SAGA_TEXT_EMPTY;
    bool neg = false;
    if (*s == '+' || *s == '-') {
        neg = *s == '-';
        s++;
    }
    uint64_t v = 0;
    const char *q = NULL;
    saga_text_result res = scan_magnitude(s, end, (uint64_t)INT64_MAX, &v, &q);
    if (res == SAGA_TEXT_OVERFLOW && neg)
        return SAGA_TEXT_NEGATIVE;
    if (res != SAGA_TEXT_OK)
        return res;
    if (neg && v != 0)
        return SAGA_TEXT_NEGATIVE;
    *out = (int64_t)v;
    *p = q;
    return SAGA_TEXT_OK;
}

/* A signed integer in [INT64_MIN, INT64_MAX]; see text.h. */
saga_text_result saga_text_i64(const char **p, const char *end, int64_t *out) {
    const char *s = *p;
    if (!saga_text_skip_blank(&s, end))
        return SAGA_TEXT_EMPTY;
    bool neg = false;
    if (*s == '+' || *s == '-') {
        neg = *s == '-';
        s++;
    }
    uint64_t v = 0;
    const char *q = NULL;
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    saga_text_result res = scan_magnitude(s, end, limit, &v, &q);
    if (res != SAGA_TEXT_OK)
        return res;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    *p = q;
    return SAGA_TEXT_OK;
}

/* Exact powers of ten representable in a double. */
static const double pow10_exact[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                     1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                     1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* Plain decimals ("3", "-0.25", "1.5e3") whose digits fit 2^53 and whose scale is at most 22
 * are exact: both operands are exact doubles and one IEEE multiply or divide rounds correctly.
 * Returns false to leave the token to strtod. */
static bool f64_fast(const char *s, const char *e, double *out) {
    bool neg = false;
    if (s < e && (*s == '+' || *s == '-')) {
        neg = *s == '-';
        s++;
    }
    uint64_t m = 0;
    int n_digits = 0, scale = 0;
    bool any = false;
    while (s < e && is_digit(*s)) {
        if (m != 0 || *s != '0')
            n_digits++;
        m = m * 10 + (uint64_t)(*s - '0');
        s++;
        any = true;
        if (n_digits > 15)
            return false;
    }
    if (s < e && *s == '.') {
        s++;
        while (s < e && is_digit(*s)) {
            if (m != 0 || *s != '0')
                n_digits++;
            m = m * 10 + (uint64_t)(*s - '0');
            scale--;
            s++;
            any = true;
            if (n_digits > 15)
                return false;
        }
    }
    if (!any)
        return false;
    if (s < e && (*s == 'e' || *s == 'E')) {
        s++;
        bool eneg = false;
        if (s < e && (*s == '+' || *s == '-')) {
            eneg = *s == '-';
            s++;
        }
        if (s == e || !is_digit(*s))
            return false;
        int x = 0;
        while (s < e && is_digit(*s)) {
            if (x > 1000)
                return false;
            x = x * 10 + (*s++ - '0');
        }
        scale += eneg ? -x : x;
    }
    if (s != e)
        return false;
    double v = (double)m;
    if (scale < -22 || scale > 22)
        return false;
    v = scale < 0 ? v / pow10_exact[-scale] : v * pow10_exact[scale];
    *out = neg ? -v : v;
    return true;
}

/* A finite floating point number; see text.h. */
saga_text_result saga_text_f64(const char **p, const char *end, double *out) {
    const char *s = *p;
    if (!saga_text_skip_blank(&s, end))
        return SAGA_TEXT_EMPTY;
    const char *e = s;
    while (e < end && !is_blank(*e))
        e++;
    double v;
    if (f64_fast(s, e, &v)) {
        *out = v;
        *p = e;
        return SAGA_TEXT_OK;
    }
    /* strtod needs a NUL-terminated copy; tokens longer than this are not numbers people
     * write. Hex floats are rejected: they are not a text format anyone exports graphs in. */
    char buf[128];
    size_t n = (size_t)(e - s);
    if (n >= sizeof buf || memchr(s, 'x', n) || memchr(s, 'X', n) || memchr(s, '\0', n))
        return SAGA_TEXT_INVALID;
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *stop = NULL;
    errno = 0;
    v = strtod(buf, &stop);
    if (stop != buf + n || n == 0)
        return SAGA_TEXT_INVALID;
    if (!isfinite(v))
        return SAGA_TEXT_NONFINITE;
    *out = v;
    *p = e;
    return SAGA_TEXT_OK;
}

/* Copies the token at p for a message, escaping what is not printable; see text.h. */
const char *saga_text_token(const char *p, const char *end, char *buf, size_t cap) {
    static const char hex[] = "0123456789abcdef";
    if (!buf || cap == 0)
        return "";
    saga_text_skip_blank(&p, end);
    size_t o = 0;
    while (p < end && !is_blank(*p)) {
        unsigned char c = (unsigned char)*p;
        size_t need = (c >= 0x20 && c < 0x7f) ? 1 : 4;
        if (o + need + 1 > cap)
            break;
        if (need == 1) {
            buf[o++] = (char)c;
        } else {
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[c >> 4];
            buf[o++] = hex[c & 15];
        }
        p++;
    }
    /* Mark a token cut short so a message does not pass a prefix off as the whole. */
    if (p < end && !is_blank(*p) && cap >= 4) {
        o = o + 4 > cap ? cap - 4 : o;
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}

/* Describes what a non-OK result found, for "expected X, found <this>" messages. */
const char *saga_text_result_str(saga_text_result r) {
    switch (r) {
    case SAGA_TEXT_OK:
        return "a valid number";
    case SAGA_TEXT_EMPTY:
        return "nothing";
    case SAGA_TEXT_INVALID:
        return "not a number";
    case SAGA_TEXT_OVERFLOW:
        return "a number out of range";
    case SAGA_TEXT_NEGATIVE:
        return "a negative number";
    case SAGA_TEXT_NONFINITE:
        return "a non-finite number";
    default:
        return "an unknown result";
    }
}
