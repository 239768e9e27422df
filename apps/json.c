/* json.c - a tiny streaming JSON writer (one line, escaped strings, exact numbers). */
#include "json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void json_init(json *j, FILE *f) {
    memset(j, 0, sizeof *j);
    j->f = f;
    j->first[0] = true;
}

/* The separator before a value or a key. */
static void sep(json *j) {
    if (j->after_key) {
        j->after_key = false;
        return;
    }
    if (!j->first[j->depth])
        fputc(',', j->f);
    j->first[j->depth] = false;
}

static void push(json *j, char c) {
    sep(j);
    fputc(c, j->f);
    if (j->depth + 1 < JSON_MAX_DEPTH)
        j->depth++;
    j->first[j->depth] = true;
}

static void pop(json *j, char c) {
    fputc(c, j->f);
    if (j->depth > 0)
        j->depth--;
}

void json_object_begin(json *j) {
    push(j, '{');
}
void json_object_end(json *j) {
    pop(j, '}');
}
void json_array_begin(json *j) {
    push(j, '[');
}
void json_array_end(json *j) {
    pop(j, ']');
}

/* Length of the valid UTF-8 sequence at s, or 0 when it is not one. */
static int utf8_len(const unsigned char *s) {
    unsigned c = s[0];
    int n;
    unsigned min;
    if (c < 0x80)
        return 1;
    if ((c & 0xE0) == 0xC0)
        n = 2, min = 0x80, c &= 0x1F;
    else if ((c & 0xF0) == 0xE0)
        n = 3, min = 0x800, c &= 0x0F;
    else if ((c & 0xF8) == 0xF0)
        n = 4, min = 0x10000, c &= 0x07;
    else
        return 0;
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        c = (c << 6) | (s[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        return 0; /* overlong, out of range, or a surrogate */
    return n;
}

static void write_string(FILE *f, const char *str) {
    const unsigned char *s = (const unsigned char *)(str ? str : "");
    fputc('"', f);
    while (*s) {
        unsigned c = *s;
        switch (c) {
        case '"':
            fputs("\\\"", f), s++;
            continue;
        case '\\':
            fputs("\\\\", f), s++;
            continue;
        case '\n':
            fputs("\\n", f), s++;
            continue;
        case '\r':
            fputs("\\r", f), s++;
            continue;
        case '\t':
            fputs("\\t", f), s++;
            continue;
        case '\b':
            fputs("\\b", f), s++;
            continue;
        case '\f':
            fputs("\\f", f), s++;
            continue;
        default:
            break;
        }
        if (c < 0x20 || c == 0x7F) {
            fprintf(f, "\\u%04x", c);
            s++;
            continue;
        }
        int n = utf8_len(s);
        if (n == 0) {
            fputs("\\ufffd", f);
            s++;
            continue;
        }
        fwrite(s, 1, (size_t)n, f);
        s += n;
    }
    fputc('"', f);
}

void json_key(json *j, const char *key) {
    sep(j);
    write_string(j->f, key);
    fputc(':', j->f);
    j->after_key = true;
}

void json_str(json *j, const char *s) {
    sep(j);
    write_string(j->f, s);
}

void json_int(json *j, int64_t v) {
    sep(j);
    fprintf(j->f, "%lld", (long long)v);
}

void json_uint(json *j, uint64_t v) {
    sep(j);
    fprintf(j->f, "%llu", (unsigned long long)v);
}

int json_format_double(char *buf, size_t size, double v) {
    int n = 0;
    for (int prec = 15; prec <= 17; prec++) {
        n = snprintf(buf, size, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    return n;
}

void json_num(json *j, double v) {
    sep(j);
    if (!isfinite(v)) {
        fputs("null", j->f);
        return;
    }
    char buf[40];
    json_format_double(buf, sizeof buf, v);
    fputs(buf, j->f);
}

void json_bool(json *j, bool v) {
    sep(j);
    fputs(v ? "true" : "false", j->f);
}

void json_null(json *j) {
    sep(j);
    fputs("null", j->f);
}

void json_finish(json *j) {
    fputc('\n', j->f);
    fflush(j->f);
}
