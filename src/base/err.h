/* base/err.h - errors as values.
 *
 * Library code reports failure by returning a negative COLIBRI_E* code and
 * filling a caller-supplied struct colibri_err (which may be NULL). base_err_set()
 * does both in one expression: `return base_err_set(err, COLIBRI_EIO, "...", ...);`
 */
#ifndef COLIBRI_BASE_ERR_H
#define COLIBRI_BASE_ERR_H

#include "colibri.h"

/* Formats the message into err (if non-NULL) and returns code. */
int base_err_set(struct colibri_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepends "prefix: " to an existing message (for adding context such as a
 * file name as an error travels up). Returns err->code, or code if err is NULL. */
int base_err_prefix(struct colibri_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
