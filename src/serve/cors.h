/* serve/cors.h - which browser origins may call the server (--cors).
 *
 * Off by default: the server then sends no Access-Control-* header at all,
 * and a page served from another origin cannot read its answers. "*" lets
 * any origin in; otherwise a comma-separated list of exact origins
 * ("scheme://host[:port]", as browsers send them in the Origin header).
 * Immutable after serve_cors_parse(); thread-safe to query. Internal to
 * src/serve/. */
#ifndef COLIBRI_SERVE_CORS_H
#define COLIBRI_SERVE_CORS_H

#include "colibri.h"

#define SERVE_CORS_MAX 16

struct serve_cors {
    int enabled, any;
    int n;
    char origin[SERVE_CORS_MAX][256];
};

/* Parses spec (NULL or "" = off). An entry that is not "*" nor an origin
 * (http:// or https://, a host, no path) is refused by name. */
int serve_cors_parse(const char *spec, struct serve_cors *out, struct colibri_err *err);

/* The Access-Control-Allow-Origin value for a request from origin (NULL when
 * the request has no Origin header): "*", the origin itself, or NULL when it
 * may not read the answer (or CORS is off). */
const char *serve_cors_allow(const struct serve_cors *c, const char *origin);

#endif
