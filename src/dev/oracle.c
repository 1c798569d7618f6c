/* dev/oracle.c - checks colibri against Hugging Face reference outputs stored
 * in a fixture directory (format: tools/make_oracle.py). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "base/err.h"
#include "base/util.h"
#include "colibri_dev.h"
#include "io/safetensors.h"

#define ORACLE_MAX_DLOGIT 1e-4

static int read_ids(const cJSON *arr, int32_t **out, int *n)
{
    if (!cJSON_IsArray(arr)) return -1;
    *n = cJSON_GetArraySize(arr);
    *out = malloc((size_t)(*n ? *n : 1) * sizeof **out);
    int i = 0;
    for (const cJSON *e = arr->child; e; e = e->next) {
        /* checked as a double before the cast: an id must be an integer in int32 range */
        if (!cJSON_IsNumber(e) || !(e->valuedouble >= 0 && e->valuedouble <= 2147483647.0) ||
            e->valuedouble != (double)(int64_t)e->valuedouble) {
            free(*out);
            *out = NULL;    /* the caller may free it again */
            return -1;
        }
        (*out)[i++] = (int32_t)e->valuedouble;
    }
    return 0;
}

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[b]) b = i;
    return b;
}

static int check_sequence(colibri_model *cm, const struct colibri_session_opts *base, const int32_t *tok, int S, const cJSON *margins, const float *ref,
                          double tol, struct colibri_oracle_result *res, struct colibri_err *err)
{
    int V = colibri_model_vocab(cm), rc;
    struct colibri_session_opts so = *base;
    so.n_ctx = S;
    colibri_session *s = NULL;
    float *pre = malloc((size_t)S * V * sizeof *pre), *dec = malloc((size_t)V * sizeof *dec);
    if ((rc = colibri_session_new(cm, &so, &s, err))) goto out;
    if ((rc = colibri_session_prefill(s, tok, S, pre, 1, err))) goto out;
    res->logits_digest = XXH64(pre, (size_t)S * V * sizeof *pre, res->logits_digest);
    for (int t = 0; t < S; t++) {
        const cJSON *mg = cJSON_GetArrayItem(margins, t);
        for (int v = 0; v < V; v++) {
            double d = fabs((double)pre[(int64_t)t * V + v] - (double)ref[(int64_t)t * V + v]);
            if (!(d <= res->max_dlogit)) res->max_dlogit = d;   /* NaN propagates as a failure */
        }
        if (cJSON_IsNumber(mg) && mg->valuedouble > tol) {
            res->tf_total++;
            res->tf_agree += argmax(pre + (int64_t)t * V, V) == argmax(ref + (int64_t)t * V, V);
        }
    }
    colibri_session_free(s);
    s = NULL;
    if ((rc = colibri_session_new(cm, &so, &s, err))) goto out;
    for (int t = 0; t < S; t++) {
        if ((rc = colibri_session_decode(s, tok[t], dec, err))) goto out;
        res->logits_digest = XXH64(dec, (size_t)V * sizeof *dec, res->logits_digest);
        for (int v = 0; v < V; v++) {
            double d = fabs((double)dec[v] - (double)pre[(int64_t)t * V + v]);
            if (!(d <= res->decode_dlogit)) res->decode_dlogit = d;
        }
    }
out:
    colibri_session_free(s);
    free(pre);
    free(dec);
    return rc;
}

/* The MTP layer's draft logits against mtp_logits.<i> [S - 1, V], when the
 * fixture has them (tools/oracle_mtp.py): whole sequence and row by row. */
static int check_mtp(colibri_model *cm, const struct st_set *st, int i, const int32_t *tok, int S,
                     struct colibri_oracle_result *res, struct colibri_err *err)
{
    char name[64];
    snprintf(name, sizeof name, "mtp_logits.%d", i);
    const struct st_tensor *t = st_find(st, name);
    if (!t) return 0;
    int V = colibri_model_vocab(cm), rc = 0;
    if (t->dtype != ST_F32 || t->numel != (int64_t)(S - 1) * V)
        return base_err_set(err, COLIBRI_EFORMAT, "reference.safetensors: tensor '%s' is not F32 [%d, %d]", name,
                            S - 1, V);
    float *got = malloc((size_t)(S - 1) * V * sizeof *got), *ref = malloc(t->nbytes);
    if (!got || !ref) rc = base_err_set(err, COLIBRI_ENOMEM, "MTP check: out of memory");
    else memcpy(ref, t->data, t->nbytes);
    for (int mode = 0; mode < 2 && !rc; mode++) {
        if ((rc = colibri_mtp_draft_logits(cm, tok, S, mode, got, err))) break;
        for (int64_t k = 0; k < (int64_t)(S - 1) * V; k++) {
            double d = fabs((double)got[k] - (double)ref[k]);
            if (!(d <= res->mtp_dlogit)) res->mtp_dlogit = d;
        }
    }
    if (!rc) res->mtp_rows += S - 1;
    free(got);
    free(ref);
    return rc;
}

static int check_generation(colibri_model *cm, const struct colibri_session_opts *base, const int32_t *prompt, int np, const int32_t *want, int ng,
                            struct colibri_oracle_result *res, struct colibri_err *err)
{
    int V = colibri_model_vocab(cm), rc;
    struct colibri_session_opts so = *base;
    so.n_ctx = np + ng + 1;
    colibri_session *s = NULL;
    float *logits = malloc((size_t)V * sizeof *logits);
    if ((rc = colibri_session_new(cm, &so, &s, err))) goto out;
    if ((rc = colibri_session_prefill(s, prompt, np, logits, 0, err))) goto out;
    res->gen_total = ng;
    for (int i = 0; i < ng; i++) {
        res->logits_digest = XXH64(logits, (size_t)V * sizeof *logits, res->logits_digest);
        int32_t next = argmax(logits, V);
        if (next != want[i]) break;
        res->gen_agree++;
        if (i + 1 < ng && (rc = colibri_session_decode(s, next, logits, err))) goto out;
    }
out:
    colibri_session_free(s);
    free(logits);
    return rc;
}

int colibri_oracle_check(const char *dir, const struct colibri_model_opts *mopts, const char *kv_tier,
                         const char *kv_rope, struct colibri_oracle_result *res, struct colibri_err *err)
{
    memset(res, 0, sizeof *res);
    /* with MPI every rank loads each fixture's model, so rank 0 loads it
     * first whatever the reference holds: the loads pair up rank by rank */
    colibri_model *cm = NULL;
    int rc;
    if (mopts && mopts->mpi && (rc = colibri_model_load(dir, mopts, &cm, err))) return rc;
    const char *base = strrchr(dir, '/');
    snprintf(res->name, sizeof res->name, "%s", base && base[1] ? base + 1 : dir);
    char path[4096];
    snprintf(path, sizeof path, "%s/reference.json", dir);
    size_t len;
    char *text = base_read_file_all(path, &len);
    if (!text) {
        colibri_model_free(cm);
        return base_err_set(err, COLIBRI_EIO, "%s: cannot read: %s", path, strerror(errno));
    }
    cJSON *ref = cJSON_ParseWithLength(text, len);
    free(text);
    if (!ref) {
        colibri_model_free(cm);
        return base_err_set(err, COLIBRI_EFORMAT, "%s: not valid JSON", path);
    }

    struct st_set st = { 0 };
    struct colibri_session_opts sopts = { .kv_tier = kv_tier, .kv_rope = kv_rope };
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(ref, "name");
    if (cJSON_IsString(name)) snprintf(res->name, sizeof res->name, "%s", name->valuestring);
    const cJSON *tolj = cJSON_GetObjectItemCaseSensitive(ref, "margin_tolerance");
    double tol = cJSON_IsNumber(tolj) ? tolj->valuedouble : 1e-4;
    const cJSON *seqs = cJSON_GetObjectItemCaseSensitive(ref, "sequences");
    const cJSON *gen = cJSON_GetObjectItemCaseSensitive(ref, "generation");
    if (!cJSON_IsArray(seqs) || !cJSON_IsObject(gen)) {
        rc = base_err_set(err, COLIBRI_EFORMAT, "%s: needs 'sequences' (array) and 'generation' (object)", path);
        goto out;
    }
    if (!cm && (rc = colibri_model_load(dir, mopts, &cm, err))) goto out;
    snprintf(path, sizeof path, "%s/reference.safetensors", dir);
    if ((rc = st_open_file(path, &st, err))) goto out;
    int V = colibri_model_vocab(cm), i = 0;
    for (const cJSON *sq = seqs->child; sq; sq = sq->next, i++) {
        int32_t *tok;
        int S;
        if (read_ids(cJSON_GetObjectItemCaseSensitive(sq, "tokens"), &tok, &S) || S == 0) {
            rc = base_err_set(err, COLIBRI_EFORMAT, "reference.json: sequences[%d].tokens is not a non-empty id array", i);
            goto out;
        }
        char tname[64];
        snprintf(tname, sizeof tname, "logits.%d", i);
        const struct st_tensor *lt = st_find(&st, tname);
        if (!lt || lt->dtype != ST_F32 || lt->numel != (int64_t)S * V) {
            free(tok);
            rc = base_err_set(err, COLIBRI_EFORMAT, "%s: tensor '%s' missing or not F32 [%d, %d]", path, tname, S, V);
            goto out;
        }
        float *reflog = malloc(lt->nbytes);
        memcpy(reflog, lt->data, lt->nbytes);
        rc = check_sequence(cm, &sopts, tok, S, cJSON_GetObjectItemCaseSensitive(sq, "top2_margin"), reflog, tol, res, err);
        /* under MPI the ranks serve the main layers' experts only (the MTP
         * layer's MoE is outside their range): drafts are checked by the
         * one-process runs */
        if (!rc && !(mopts && mopts->mpi)) rc = check_mtp(cm, &st, i, tok, S, res, err);
        free(reflog);
        free(tok);
        if (rc) goto out;
    }
    int32_t *prompt = NULL, *want = NULL;
    int np = 0, ng = 0;
    if (read_ids(cJSON_GetObjectItemCaseSensitive(gen, "prompt"), &prompt, &np) || np == 0 ||
        read_ids(cJSON_GetObjectItemCaseSensitive(gen, "tokens"), &want, &ng)) {
        free(prompt);
        rc = base_err_set(err, COLIBRI_EFORMAT, "reference.json: generation.prompt/tokens are not id arrays");
        goto out;
    }
    rc = check_generation(cm, &sopts, prompt, np, want, ng, res, err);
    free(prompt);
    free(want);
    res->pass = !rc && res->tf_agree == res->tf_total && res->gen_agree == res->gen_total &&
                res->max_dlogit <= ORACLE_MAX_DLOGIT && res->decode_dlogit <= ORACLE_MAX_DLOGIT &&
                res->mtp_dlogit <= ORACLE_MAX_DLOGIT;
out:
    st_close(&st);
    colibri_model_free(cm);
    cJSON_Delete(ref);
    return rc;
}
