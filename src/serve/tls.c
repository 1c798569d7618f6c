/* serve/tls.c - the key and certificate of HTTPS (contract in tls.h). */
#include "serve/tls.h"

#include <errno.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/util.h"

/* The file's text, holding a PEM block that begins with begin and whose
 * label ends with label_end ("PRIVATE KEY" also matches "RSA PRIVATE KEY"
 * and "EC PRIVATE KEY"); NULL with err naming the option and file. */
static char *read_pem(const char *opt, const char *path, const char *label_end, struct colibri_err *err)
{
    size_t len;
    char *s = base_read_file_all(path, &len);
    if (!s) {
        base_err_set(err, COLIBRI_EIO, "%s %s: cannot read it: %s", opt, path, strerror(errno));
        return NULL;
    }
    int found = 0;
    for (const char *p = s; !found && (p = strstr(p, "-----BEGIN ")); p++) {
        const char *end = strstr(p + 11, "-----");
        size_t n = strlen(label_end);
        found = end && (size_t)(end - (p + 11)) >= n && !memcmp(end - n, label_end, n) && memchr(p, '\n', (size_t)(end - p)) == NULL;
    }
    if (!found || strlen(s) != len) {
        base_err_set(err, COLIBRI_EINVAL, "%s %s: no PEM '%s' block in it (a PEM file, as openssl writes it, is "
                     "expected)", opt, path, label_end);
        free(s);
        return NULL;
    }
    return s;
}

int serve_tls_load(const char *key_file, const char *cert_file, struct serve_tls *t, struct colibri_err *err)
{
    *t = (struct serve_tls){ 0 };
    if (!key_file && !cert_file) return 0;
    if (!key_file || !cert_file)
        return base_err_set(err, COLIBRI_EINVAL, "%s given without %s: HTTPS needs both the private key and the "
                            "certificate", key_file ? "--ssl-key-file" : "--ssl-cert-file",
                            key_file ? "--ssl-cert-file" : "--ssl-key-file");
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "--ssl-key-file: this libmicrohttpd was built without TLS "
                            "(GnuTLS); serve plain HTTP behind a TLS proxy instead");
    if (!(t->key = read_pem("--ssl-key-file", key_file, "PRIVATE KEY", err))) return err->code;
    if (!(t->cert = read_pem("--ssl-cert-file", cert_file, "CERTIFICATE", err))) {
        serve_tls_free(t);
        return err->code;
    }
    return 0;
}

void serve_tls_free(struct serve_tls *t)
{
    if (!t) return;
    free(t->key);
    free(t->cert);
    *t = (struct serve_tls){ 0 };
}
