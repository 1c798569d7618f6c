#include "base/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int base_err_set(struct colibri_err *err, int code, const char *fmt, ...)
{
    if (!err) return code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->code = code;
    return code;
}

int base_err_prefix(struct colibri_err *err, int code, const char *fmt, ...)
{
    if (!err) return code;
    char head[COLIBRI_ERR_MSG_MAX], old[COLIBRI_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%s: %s", head, old);
    if (!err->code) err->code = code;
    return err->code;
}

const char *colibri_status_name(int code)
{
    switch (code) {
    case COLIBRI_OK: return "OK";
    case COLIBRI_EINVAL: return "EINVAL";
    case COLIBRI_EIO: return "EIO";
    case COLIBRI_ENOMEM: return "ENOMEM";
    case COLIBRI_EFORMAT: return "EFORMAT";
    case COLIBRI_EUNSUPPORTED: return "EUNSUPPORTED";
    case COLIBRI_ERANGE: return "ERANGE";
    case COLIBRI_EMISMATCH: return "EMISMATCH";
    default: return "EUNKNOWN";
    }
}
