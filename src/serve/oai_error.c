/* serve/oai_error.c - filling an OpenAI-shaped error (serve/oai.h), for
 * every part of the request parser. */
#include <stdarg.h>
#include <stdio.h>

#include "serve/oai.h"

int oai_error_set(struct oai_error *e, int status, const char *type, const char *code, const char *param,
                  const char *fmt, ...)
{
    e->status = status;
    e->type = type;
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return status;
}
