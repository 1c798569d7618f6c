/* tok/jinja_fail.c - a render's failure and step budget (jinja_internal.h):
 * the one exit every part of the interpreter takes on an error. */
#include <stdarg.h>
#include <stdio.h>

#include "base/err.h"
#include "tok/jinja_internal.h"

_Noreturn void jinja_fail(struct jctx *c, int code, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->err_code = base_err_set(c->err, code, "chat template line %d: %s", c->line, msg);
    longjmp(c->fail, 1);
}

void jinja_step(struct jctx *c)
{
    if (++c->steps > c->lim.max_steps)
        jinja_fail(c, COLIBRI_EINVAL, "rendering took more than %ld steps", c->lim.max_steps);
}
