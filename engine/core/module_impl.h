/* module_impl.h - finding and loading saga's run-time modules (libsaga_cuda.so,
 * libsaga_mpi.so) and the host services they are given. Internal to saga. */
#pragma once

#include "saga_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dlopens module `name` (RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE: a module stays mapped until the
 * process exits). Search order: $env alone when env names a variable that is set; else the
 * directory holding libsaga (or the executable it is linked into), its ../lib and ../lib64; the
 * directory of the running executable, its ../lib and ../lib64; then the dynamic loader's search
 * by name. `what` names the module in messages ("the
 * CUDA backend module"). path gets the path opened. Errors: SAGA_ERR_UNSUPPORTED (not found),
 * SAGA_ERR_DEVICE (found but the loader refused it: a missing dependency). found (may be NULL)
 * runs when a file of the module was found, before it is loaded; an error it returns is
 * returned (the CUDA module checks for the driver there). */
saga_status saga_module_open(void **handle, const char *name, const char *env, const char *what,
                             saga_status (*found)(void *ud), void *ud, char *path, size_t path_len);

/* *fn = the function `symbol` of module h; SAGA_ERR_UNSUPPORTED naming path when it lacks it. */
saga_status saga_module_sym(void *h, const char *symbol, const char *path, void **fn);

/* Host services for modules: saga_error and saga_log with printf arguments. */
saga_status saga_module_error(saga_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void saga_module_log(int level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#ifdef __cplusplus
}
#endif
