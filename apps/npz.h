/* npz.h - NumPy archives written from C: .npy arrays (format version 1.0) in a .npz, a ZIP of
 * .npy files with the entries stored uncompressed, as numpy.load reads them.
 *
 *   npz_writer *w = NULL;
 *   int64_t shape[2] = {n, 3};
 *   SAGA_TRY(npz_open(&w, "event000000001.npz"));
 *   SAGA_TRY(npz_add(w, "x", NPZ_F32, 2, shape, x));      // x.npy: n x 3 float32, row-major
 *   SAGA_TRY(npz_finish(w));                               // the ZIP's central directory
 *   npz_free(&w);
 *
 * An .npy file is the magic "\x93NUMPY", the version 1 0, a little-endian uint16 header length,
 * then the header: a Python dict literal `{'descr': '<f4', 'fortran_order': False, 'shape': (n,
 * 3), }` padded with spaces and ended by a newline so that the data start at a multiple of 64
 * bytes; then the data, little-endian, C order. The archive has no ZIP64 records: every entry and
 * the whole file stay below 4 GiB (larger is SAGA_ERR_UNSUPPORTED). Entries carry a fixed date
 * (1980-01-01), so the same arrays make the same bytes.
 */
#pragma once

#include "saga_status.h"

#include <stddef.h>
#include <stdint.h>

typedef enum npz_dtype {
    NPZ_F32 = 0, /* '<f4' */
    NPZ_F64,     /* '<f8' */
    NPZ_I32,     /* '<i4' */
    NPZ_I64,     /* '<i8' */
    NPZ_U8,      /* '|u1' */
    NPZ_DTYPE_COUNT
} npz_dtype;

enum { NPY_MAX_DIMS = 8, NPY_ALIGN = 64 };

/* Bytes per element of dt (0 for an unknown dtype). */
size_t npz_dtype_size(npz_dtype dt);

/* The .npy preamble (magic, version, header length, padded header) of an array of dt with
 * ndim dimensions shape[0 .. ndim) into buf of cap bytes; returns its length, a multiple of
 * NPY_ALIGN, or 0 when dt, ndim (0 .. NPY_MAX_DIMS) or a dimension (< 0) is bad or cap is too
 * small (256 bytes always suffice). */
size_t npy_header(char *buf, size_t cap, npz_dtype dt, int ndim, const int64_t *shape);

/* CRC-32 (the ZIP and zlib polynomial) of n bytes, continuing from crc (0 to start). */
uint32_t npz_crc32(uint32_t crc, const void *data, size_t n);

typedef struct npz_writer npz_writer;

/* Creates (truncates) the archive at path. Errors: SAGA_ERR_IO naming path and the reason;
 * SAGA_ERR_OUT_OF_MEMORY. */
saga_status npz_open(npz_writer **w, const char *path);

/* Appends the array `name`.npy: dt, shape[0 .. ndim), data the product of the dimensions
 * elements in C order (may be NULL when that product is 0). Errors: SAGA_ERR_INVALID_ARG for a
 * bad dtype, shape or name (empty, or with '/'); SAGA_ERR_UNSUPPORTED past 4 GiB or 65,535
 * entries; SAGA_ERR_IO naming the file. */
saga_status npz_add(npz_writer *w, const char *name, npz_dtype dt, int ndim, const int64_t *shape,
                    const void *data);

/* Writes the central directory and closes the file; after it only npz_free applies. Errors:
 * SAGA_ERR_IO naming the file. */
saga_status npz_finish(npz_writer *w);

/* Frees w (NULL is fine) and clears the pointer. An archive not finished is closed and removed:
 * a failed export leaves no file that numpy would half-read. */
void npz_free(npz_writer **w);
