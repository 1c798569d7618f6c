/* The MTP layer (model/mtp.h) against Hugging Face: the fixture
 * tests/oracle/deepseek_v3_mtp (tools/oracle_mtp.py) holds HF MtpModel's
 * draft logits for three sequences; ours must be within 1e-4 of them, in
 * the expanded form over a whole sequence and in the absorbed form one row at
 * a time. Also: what loading the MTP layer adds and that skipping it leaves
 * the main model as it was. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "check.h"
#include "io/safetensors.h"
#include "model/forward.h"
#include "model/mtp.h"
#include "model/norm.h"

#define FIXTURE "tests/oracle/deepseek_v3_mtp"
#define MAX_DLOGIT 1e-4

static int load(const char *dir, int skip_mtp, struct model *m)
{
    struct colibri_err err = { 0 };
    struct model_load_opts lo = { MODEL_FMT_AS_STORED, MODEL_FMT_AS_STORED, MODEL_FMT_AS_STORED, 1, 0, 0, skip_mtp };
    int rc = model_load(dir, &lo, m, &err);
    CHECK(rc == 0, "%s: %s", dir, err.msg);
    return rc;
}

static double max_abs_diff(const float *a, const float *b, size_t n)
{
    double d = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (!(e <= d)) d = e;   /* NaN propagates */
    }
    return d;
}

static const float *ref_tensor(const struct st_set *ref, const char *name, int64_t numel)
{
    const struct st_tensor *t = st_find(ref, name);
    CHECK(t && t->dtype == ST_F32 && t->numel == numel, "reference tensor %s missing or not F32 x %lld", name,
          (long long)numel);
    return t && t->dtype == ST_F32 && t->numel == numel ? t->data : NULL;
}

static void test_mtp_logits_match_hf(void)
{
    struct model m;
    if (load(FIXTURE, 0, &m)) return;
    CHECK(m.n_mtp == 1, "MTP layers loaded: %d", m.n_mtp);
    struct colibri_err err = { 0 };
    struct st_set ref = { 0 };
    size_t len;
    char *json = base_read_file_all(FIXTURE "/reference.json", &len);
    cJSON *root = json ? cJSON_Parse(json) : NULL;
    CHECK(root, "reference.json");
    int rc = st_open_file(FIXTURE "/reference.safetensors", &ref, &err);
    CHECK(rc == 0, "%s", err.msg);
    const cJSON *seqs = root ? cJSON_GetObjectItem(root, "sequences") : NULL;
    int V = m.cfg.vocab_size, hid = m.cfg.hidden_size, n_seq = cJSON_GetArraySize(seqs);
    CHECK(n_seq == 3, "%d sequences", n_seq);
    struct compute_ctx cc = base_compute_ctx_make(0);
    for (int i = 0; i < n_seq && !rc; i++) {
        const cJSON *toks = cJSON_GetObjectItem(cJSON_GetArrayItem(seqs, i), "tokens");
        int S = cJSON_GetArraySize(toks);
        int32_t *tok = malloc((size_t)S * sizeof *tok);
        int j = 0;
        for (const cJSON *e = toks->child; e; e = e->next) tok[j++] = (int32_t)e->valueint;
        char name[64];
        snprintf(name, sizeof name, "mtp_logits.%d", i);
        const float *want = ref_tensor(&ref, name, (int64_t)(S - 1) * V);
        snprintf(name, sizeof name, "final_hidden.%d", i);
        const float *want_h = ref_tensor(&ref, name, (int64_t)S * hid);
        float *logits = malloc((size_t)S * V * sizeof *logits), *hidden = malloc((size_t)S * hid * sizeof *hidden);
        float *mlog = malloc((size_t)S * V * sizeof *mlog), *one = malloc((size_t)V * sizeof *one);
        struct fwd_state st;
        struct mtp_state ms;
        rc = fwd_state_init(&st, &m, S, 0, KV_TIER_F32, KV_ROPE_DEFAULT, KV_INT8_OFF, &cc, &err);
        CHECK(rc == 0, "%s", err.msg);
        if (!rc) rc = model_mtp_state_init(&ms, &m, S, KV_TIER_F32, KV_ROPE_DEFAULT, KV_INT8_OFF, &cc, &err);
        CHECK(rc == 0, "%s", err.msg);
        struct fwd_out fo = { .logits = logits, .hidden = hidden, .all_logits = 1, .all_hidden = 1 };
        if (!rc) rc = model_forward(&m, &st, tok, S, 0, FWD_EXPANDED, &fo, &err);
        CHECK(rc == 0, "%s", err.msg);
        if (!rc && want && want_h) {
            model_rmsnorm(hidden, hidden, m.final_norm, S, hid, m.cfg.rms_norm_eps);
            double dh = max_abs_diff(hidden, want_h, (size_t)S * hid);
            CHECK(dh <= MAX_DLOGIT, "sequence %d: final hidden differs from HF's by %.3g", i, dh);
            /* the whole sequence at once (expanded MLA) */
            struct fwd_out mo = { .logits = mlog, .all_logits = 1 };
            rc = model_mtp_forward(&m, &ms, &st.bufs, 0, tok + 1, hidden, S - 1, 0, FWD_EXPANDED, &mo, &err);
            CHECK(rc == 0, "%s", err.msg);
            double d = rc ? INFINITY : max_abs_diff(mlog, want, (size_t)(S - 1) * V);
            CHECK(d <= MAX_DLOGIT, "sequence %d (%d rows): MTP logits differ from HF's by %.3g", i, S - 1, d);
            /* one row at a time (absorbed MLA through the attention door) */
            double da = 0;
            struct fwd_out o1 = { .logits = one };
            for (int t = 0; t + 1 < S && !rc; t++) {
                rc = model_mtp_forward(&m, &ms, &st.bufs, 0, tok + t + 1, hidden + (int64_t)t * hid, 1, t, FWD_ABSORBED, &o1,
                                 &err);
                double e = max_abs_diff(one, want + (int64_t)t * V, (size_t)V);
                if (!(e <= da)) da = e;
            }
            CHECK(rc == 0 && da <= MAX_DLOGIT, "sequence %d: row-by-row MTP logits differ from HF's by %.3g (%s)", i,
                  da, rc ? err.msg : "");
            printf("  sequence %d: %d MTP rows, max |dlogit| %.2e (whole), %.2e (row by row)\n", i, S - 1, d, da);
        }
        model_mtp_state_free(&ms);
        fwd_state_free(&st);
        free(tok); free(logits); free(hidden); free(mlog); free(one);
    }
    if (!rc) st_close(&ref);
    cJSON_Delete(root);
    free(json);
    model_free(&m);
}

/* Loading the MTP layer adds its weights and leaves the main model's output
 * as it was (skip_mtp: the same logits bit for bit). */
static void test_mtp_load(void)
{
    struct model a, b;
    if (load(FIXTURE, 0, &a)) return;
    if (load(FIXTURE, 1, &b)) { model_free(&a); return; }
    CHECK(b.n_mtp == 0, "skip_mtp loaded %d MTP layers", b.n_mtp);
    struct model_bytes ba, bb;
    model_bytes(&a, &ba);
    model_bytes(&b, &bb);
    CHECK(ba.mtp > 0 && bb.mtp == 0, "MTP bytes %lld / %lld", (long long)ba.mtp, (long long)bb.mtp);
    CHECK(ba.token_read == bb.token_read, "a main token reads %lld bytes with the MTP layer, %lld without",
          (long long)ba.token_read, (long long)bb.token_read);
    CHECK(ba.dense - bb.dense + ba.experts - bb.experts == ba.mtp, "MTP bytes %lld", (long long)ba.mtp);
    struct colibri_err err = { 0 };
    struct compute_ctx cc = base_compute_ctx_make(0);
    int S = 24, V = a.cfg.vocab_size;
    int32_t tok[24];
    for (int i = 0; i < S; i++) tok[i] = (int32_t)((i * 7919 + 13) % V);
    float *la = malloc((size_t)V * sizeof *la), *lb = malloc((size_t)V * sizeof *lb);
    struct fwd_state sa, sb;
    int rc = fwd_state_init(&sa, &a, S, 0, KV_TIER_F32, KV_ROPE_DEFAULT, KV_INT8_OFF, &cc, &err) ||
             fwd_state_init(&sb, &b, S, 0, KV_TIER_F32, KV_ROPE_DEFAULT, KV_INT8_OFF, &cc, &err);
    struct fwd_out oa = { .logits = la }, ob = { .logits = lb };
    if (!rc) rc = model_forward(&a, &sa, tok, S, 0, FWD_EXPANDED, &oa, &err) ||
                  model_forward(&b, &sb, tok, S, 0, FWD_EXPANDED, &ob, &err);
    CHECK(rc == 0, "%s", err.msg);
    CHECK(!rc && !memcmp(la, lb, (size_t)V * sizeof *la), "main logits depend on whether the MTP layer is loaded");
    struct mtp_state ms;
    CHECK(model_mtp_state_init(&ms, &b, S, KV_TIER_F32, KV_ROPE_DEFAULT, KV_INT8_OFF, &cc, &err) == COLIBRI_EINVAL &&
          strstr(err.msg, "no MTP layer"), "a model without MTP layers: %s", err.msg);
    fwd_state_free(&sa);
    fwd_state_free(&sb);
    free(la); free(lb);
    model_free(&a);
    model_free(&b);
}

int main(void)
{
    RUN_TEST(test_mtp_logits_match_hf);
    RUN_TEST(test_mtp_load);
    return CHECK_SUMMARY();
}
