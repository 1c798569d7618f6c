/* api/batch_api.c - the "serving" section of include/colibri.h: what a server
 * needs beyond single-session use. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "base/err.h"
#include "colibri.h"

void colibri_thread_set_compute_threads(int n)
{
    if (n > 0) omp_set_num_threads(n);
}

/* One absorbed forward for all sessions (model_forward_groups): each weight
 * is read once per step instead of once per session, and every session gets
 * exactly the logits its own decode would give (the kernels are batch
 * invariant). A session that cannot advance (token out of range, context
 * full) is found first; the ones before it advance, it and later ones do not. */
int colibri_batch_decode(colibri_session *const *s, const int32_t *tokens, int n, float *const *logits,
                         int *n_done, struct colibri_err *err)
{
    if (n_done) *n_done = 0;
    if (n < 0 || (n > 0 && (!s || !tokens)))
        return base_err_set(err, COLIBRI_EINVAL, "colibri_batch_decode: %d sessions without arrays", n);
    if (n == 0) return 0;
    const struct model *m = &s[0]->model->m;
    for (int i = 0; i < n; i++) {
        if (&s[i]->model->m != m)
            return base_err_set(err, COLIBRI_EINVAL, "batch decode: session %d belongs to another model", i);
        for (int j = 0; j < i; j++)
            if (s[j] == s[i]) return base_err_set(err, COLIBRI_EINVAL, "batch decode: session %d appears twice", i);
    }
    int V = m->cfg.vocab_size;
    struct fwd_group *g = malloc((size_t)n * sizeof *g);
    float *out = logits ? malloc((size_t)n * V * sizeof *out) : NULL;
    if (!g || (logits && !out)) {
        free(g);
        free(out);
        return base_err_set(err, COLIBRI_ENOMEM, "batch decode: out of memory for %d sessions", n);
    }
    int ok = 0;
    while (ok < n && tokens[ok] >= 0 && tokens[ok] < V && s[ok]->pos < s[ok]->st.n_ctx) ok++;
    for (int i = 0; i < ok; i++) g[i] = (struct fwd_group){ &s[i]->st, i, 1, s[i]->pos };
    struct fwd_out fo = { .logits = out };
    int rc = ok ? model_forward_groups(m, g, ok, tokens, FWD_ABSORBED, &fo, err) : 0;
    if (!rc) {
        for (int i = 0; i < ok; i++) {
            s[i]->tokens[s[i]->pos++] = tokens[i];
            colibri_api_session_advanced(s[i]);
            if (logits && logits[i]) memcpy(logits[i], out + (int64_t)i * V, (size_t)V * sizeof *out);
        }
        if (n_done) *n_done = ok;
        if (ok < n) {
            rc = tokens[ok] < 0 || tokens[ok] >= V
                     ? base_err_set(err, COLIBRI_ERANGE, "token id %d is out of range [0, %d)", tokens[ok], V)
                     : base_err_set(err, COLIBRI_ERANGE, "the context of %d tokens is full", s[ok]->st.n_ctx);
            base_err_prefix(err, rc, "batch decode, session %d of %d", ok, n);
        }
    }
    free(g);
    free(out);
    return rc;
}
