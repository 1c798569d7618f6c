/* serve/tls.h - HTTPS for serve (--ssl-key-file / --ssl-cert-file, as
 * llama-server spells them), through libmicrohttpd's GnuTLS.
 *
 * The key and the certificate chain are PEM files read once at start and
 * held in memory for the daemon's life. Refused by name: only one of the two
 * given, a file that cannot be read or holds no PEM block of its kind (a
 * private key; a certificate), and a libmicrohttpd built without TLS. A key
 * and certificate that do not match are found by GnuTLS when the daemon
 * starts (http.c says so). Internal to src/serve/. */
#ifndef COLIBRI_SERVE_TLS_H
#define COLIBRI_SERVE_TLS_H

#include "colibri.h"

struct serve_tls {
    char *key, *cert;           /* NUL-terminated PEM text; both NULL: plain HTTP */
};

/* Fills t from the two files (both NULL: plain HTTP, t zeroed). */
int  serve_tls_load(const char *key_file, const char *cert_file, struct serve_tls *t, struct colibri_err *err);
void serve_tls_free(struct serve_tls *t);

#endif
