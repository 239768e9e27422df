/* module.c - finding and loading saga's run-time modules: a program that never asks for a GPU or
 * for MPI never loads the CUDA libraries or MPI. */
#include "module_impl.h"
#include "saga_log.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

saga_status saga_module_error(saga_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    saga_error_v(st, fmt, ap);
    va_end(ap);
    return st;
}

void saga_module_log(int level, const char *fmt, ...) {
    if (level < 0 || level >= SAGA_LOG_COUNT || level > (int)saga_log_get_level())
        return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    saga_log((saga_log_level)level, "%s", line);
}

/* Lies in libsaga: dladdr on it names the shared library, or the executable for a static link. */
static const char module_anchor = 0;

#define MODULE_DLOPEN_FLAGS (RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE)

static bool file_exists(const char *path) {
    return access(path, F_OK) == 0;
}

static void copy_path(char *dst, size_t len, const char *src) {
    if (!dst || !len)
        return;
    size_t n = strnlen(src, len - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* Writes DIR/NAME, DIR/../lib/NAME, DIR/../lib64/NAME for the directory holding `file` into
 * cand[*n..]; each slot holds PATH_MAX characters. */
static void add_dir_candidates(char (*cand)[PATH_MAX], int *n, const char *file, const char *name) {
    static const char *const subdirs[] = {"", "/../lib", "/../lib64"};
    const char *slash = strrchr(file, '/');
    int dir_len = slash ? (int)(slash - file) : 1;
    const char *dir = slash ? file : ".";
    if (slash && dir_len == 0) { /* a file in / */
        dir = "/";
        dir_len = 0;
    }
    for (int i = 0; i < 3; i++) {
        int w = snprintf(cand[*n], PATH_MAX, "%.*s%s/%s", dir_len, dir, subdirs[i], name);
        if (w > 0 && w < PATH_MAX)
            (*n)++;
    }
}

static saga_status open_at(void **handle, const char *p, const char *what,
                           saga_status (*found)(void *ud), void *ud, char *path, size_t path_len) {
    if (found) {
        saga_status st = found(ud);
        if (st < 0)
            return st;
    }
    void *h = dlopen(p, MODULE_DLOPEN_FLAGS);
    if (!h)
        return saga_error(SAGA_ERR_DEVICE, "cannot load %s %s: %s", what, p, dlerror());
    copy_path(path, path_len, p);
    *handle = h;
    return SAGA_OK;
}

saga_status saga_module_open(void **handle, const char *name, const char *env, const char *what,
                             saga_status (*found)(void *ud), void *ud, char *path,
                             size_t path_len) {
    const char *e = env ? getenv(env) : NULL;
    if (e && *e) {
        if (!file_exists(e))
            return saga_error(SAGA_ERR_UNSUPPORTED, "%s not available: %s=%s: %s", what, env, e,
                              strerror(errno));
        return open_at(handle, e, what, found, ud, path, path_len);
    }
    char cand[6][PATH_MAX];
    int n = 0;
    Dl_info info;
    if (dladdr(&module_anchor, &info) && info.dli_fname && info.dli_fname[0])
        add_dir_candidates(cand, &n, info.dli_fname, name);
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = '\0';
        add_dir_candidates(cand, &n, exe, name);
    }
    for (int i = 0; i < n; i++)
        if (file_exists(cand[i]))
            return open_at(handle, cand[i], what, found, ud, path, path_len);
    void *h = dlopen(name, MODULE_DLOPEN_FLAGS);
    if (!h) {
        const char *why = dlerror();
        /* the loader found the module but not what it needs: say that */
        if (why && strncmp(why, name, strlen(name)) != 0)
            return saga_error(SAGA_ERR_DEVICE, "cannot load %s: %s", what, why);
        return saga_error(SAGA_ERR_UNSUPPORTED, "%s not available: %s not found", what, name);
    }
    copy_path(path, path_len, name);
    *handle = h;
    return SAGA_OK;
}

saga_status saga_module_sym(void *h, const char *symbol, const char *path, void **fn) {
    void *sym = dlsym(h, symbol);
    if (!sym)
        return saga_error(SAGA_ERR_UNSUPPORTED, "%s is not a saga module (no %s)", path, symbol);
    *fn = sym;
    return SAGA_OK;
}
