/* json.h - a tiny streaming JSON writer for the command line's --json output.
 *
 *   json j;
 *   json_init(&j, stdout);
 *   json_object_begin(&j);
 *   json_key(&j, "vertices"), json_int(&j, 34);
 *   json_key(&j, "top"), json_array_begin(&j), json_num(&j, 0.1), json_array_end(&j);
 *   json_object_end(&j);
 *   json_finish(&j);               // "\n", flush
 *
 * Everything goes on one line. Strings are escaped (control characters as \u00XX, invalid UTF-8
 * replaced by U+FFFD); numbers are written with the fewest digits that read back exactly, and a
 * non-finite number is written as null.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum { JSON_MAX_DEPTH = 32 };

typedef struct json {
    FILE *f;
    int depth;
    bool first[JSON_MAX_DEPTH]; /* nothing written yet at this level */
    bool after_key;             /* a key was written; its value comes next, without a comma */
} json;

void json_init(json *j, FILE *f);
void json_object_begin(json *j);
void json_object_end(json *j);
void json_array_begin(json *j);
void json_array_end(json *j);
void json_key(json *j, const char *key);
void json_str(json *j, const char *s);
void json_int(json *j, int64_t v);
void json_uint(json *j, uint64_t v);
void json_num(json *j, double v);
void json_bool(json *j, bool v);
void json_null(json *j);
/* Ends the line and flushes. */
void json_finish(json *j);

/* Writes v into buf (at least 32 bytes) with the fewest of 15, 16 or 17 significant digits that
 * read back to the same double ("0.85", not "0.84999999999999998"); returns the length. */
int json_format_double(char *buf, size_t size, double v);
