/* serve/cors.c - the --cors origin list; see cors.h. */
#include "serve/cors.h"

#include <stdio.h>
#include <string.h>

#include "base/err.h"

/* scheme://host[:port] with nothing after it. */
static int is_origin(const char *s, size_t n)
{
    size_t k = n > 7 && !strncmp(s, "http://", 7) ? 7 : n > 8 && !strncmp(s, "https://", 8) ? 8 : 0;
    if (!k) return 0;
    for (size_t i = k; i < n; i++)
        if (s[i] == '/' || s[i] == '?' || s[i] == '#' || s[i] == ' ' || s[i] == '*') return 0;
    return 1;
}

int serve_cors_parse(const char *spec, struct serve_cors *out, struct colibri_err *err)
{
    memset(out, 0, sizeof *out);
    if (!spec || !spec[0]) return 0;
    out->enabled = 1;
    for (const char *p = spec; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        while (n && p[0] == ' ') p++, n--;
        while (n && p[n - 1] == ' ') n--;
        while (n > 1 && p[n - 1] == '/') n--;   /* "http://host/" names the same origin */
        if (n == 1 && p[0] == '*') {
            out->any = 1;
        } else if (!is_origin(p, n) || n >= sizeof out->origin[0]) {
            return base_err_set(err, COLIBRI_EINVAL,
                           "--cors: '%.*s' is not an origin; give '*' or origins like http://localhost:3000, "
                           "comma-separated", (int)n, p);
        } else if (out->n == SERVE_CORS_MAX) {
            return base_err_set(err, COLIBRI_EINVAL, "--cors: more than %d origins", SERVE_CORS_MAX);
        } else {
            snprintf(out->origin[out->n++], sizeof out->origin[0], "%.*s", (int)n, p);
        }
        if (!end) break;
        p = end + 1;
    }
    if (!out->any && out->n == 0) return base_err_set(err, COLIBRI_EINVAL, "--cors '%s' names no origin", spec);
    return 0;
}

const char *serve_cors_allow(const struct serve_cors *c, const char *origin)
{
    if (!c->enabled || !origin) return NULL;
    if (c->any) return "*";
    for (int i = 0; i < c->n; i++)
        if (!strcmp(origin, c->origin[i])) return c->origin[i];
    return NULL;
}
