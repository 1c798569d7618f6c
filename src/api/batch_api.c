/* api/batch_api.c - the "serving" section of include/colibri.h: what a server
 * needs beyond single-session use. */
#include <omp.h>

#include "base/err.h"
#include "colibri.h"

void colibri_thread_set_compute_threads(int n)
{
    if (n > 0) omp_set_num_threads(n);
}

int colibri_batch_decode(colibri_session *const *s, const int32_t *tokens, int n, float *const *logits,
                         int *n_done, struct colibri_err *err)
{
    if (n_done) *n_done = 0;
    if (n < 0 || (n > 0 && (!s || !tokens)))
        return err_set(err, COLIBRI_EINVAL, "colibri_batch_decode: %d sessions without arrays", n);
    for (int i = 0; i < n; i++) {
        int rc = colibri_session_decode(s[i], tokens[i], logits ? logits[i] : NULL, err);
        if (rc) return err_prefix(err, rc, "batch decode, session %d of %d", i, n);
        if (n_done) *n_done = i + 1;
    }
    return 0;
}
