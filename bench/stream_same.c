/* bench/stream_same.c - whether a model's logits are the same with its
 * routed experts resident and streamed under a RAM budget, for checkpoints
 * too large for a test fixture (colibri synth's real shapes, MXFP4 experts):
 *
 *   stream_same DIR RAM_BYTES [PROMPT [DECODE]]
 *
 * Loads DIR resident, runs a prefill of PROMPT tokens (default 8) then
 * DECODE tokens one at a time (default 4), keeping every emitted row's
 * logits; loads it again with --ram RAM_BYTES (the experts streamed) and
 * runs the same; prints "identical" or the first differing logit, and the
 * streamed store's read statistics. Exit status 0 only when identical. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/compute.h"
#include "model/expert_store_stream.h"
#include "model/forward.h"

static int run(const char *dir, int64_t ram, int prompt, int decode, float **out, int *V, struct colibri_err *err)
{
    struct model m;
    struct model_load_opts lo = { MODEL_FMT_AS_STORED, MODEL_FMT_AS_STORED, MODEL_FMT_AS_STORED, 0, 0, ram };
    int rc = model_load(dir, &lo, &m, err);
    if (rc) return rc;
    if (ram && !expert_store_stream_slots(m.experts)) {
        model_free(&m);
        snprintf(err->msg, sizeof err->msg, "--ram %lld: the experts are not streamed", (long long)ram);
        return COLIBRI_EINVAL;
    }
    *V = m.cfg.vocab_size;
    float *lg = malloc((size_t)(1 + decode) * (size_t)*V * sizeof *lg);
    int32_t *t = malloc((size_t)(prompt + decode) * sizeof *t);
    struct compute_ctx cc = base_compute_ctx_make(0);
    struct fwd_state st;
    if (!lg || !t) rc = COLIBRI_ENOMEM;
    if (!rc) rc = fwd_state_init(&st, &m, prompt + decode, 0, KV_TIER_F32, KV_ROPE_DEFAULT, KV_INT8_OFF, &cc, err);
    if (!rc) {
        for (int i = 0; i < prompt + decode; i++) t[i] = (int32_t)(((int64_t)i * 7919 + 13) % *V);
        struct fwd_out o = { .logits = lg };
        rc = model_forward(&m, &st, t, prompt, 0, FWD_EXPANDED, &o, err);
        for (int p = 0; p < decode && !rc; p++) {
            o.logits = lg + (size_t)(p + 1) * *V;
            rc = model_forward(&m, &st, t + prompt + p, 1, prompt + p, FWD_ABSORBED, &o, err);
        }
        fwd_state_free(&st);
    }
    if (!rc && ram) {
        struct expert_store_stats s;
        expert_store_get_stats(m.experts, &s);
        printf("streamed: %d slots, %llu acquisitions, %llu experts read (%.1f MiB), %llu by prefetch\n",
               expert_store_stream_slots(m.experts), (unsigned long long)s.acquires, (unsigned long long)s.reads,
               s.bytes_read / 1048576.0, (unsigned long long)s.prefetch_reads);
    }
    free(t);
    model_free(&m);
    if (rc) free(lg);
    else *out = lg;
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: stream_same DIR RAM_BYTES [PROMPT [DECODE]]\n");
        return 2;
    }
    int64_t ram = strtoll(argv[2], NULL, 10);
    int prompt = argc > 3 ? atoi(argv[3]) : 8, decode = argc > 4 ? atoi(argv[4]) : 4, V = 0;
    struct colibri_err err = { 0 };
    float *a = NULL, *b = NULL;
    if (ram <= 0 || prompt < 1 || decode < 0) {
        fprintf(stderr, "stream_same: bad arguments\n");
        return 2;
    }
    if (run(argv[1], 0, prompt, decode, &a, &V, &err) || run(argv[1], ram, prompt, decode, &b, &V, &err)) {
        fprintf(stderr, "stream_same: %s\n", err.msg);
        return 1;
    }
    size_t n = (size_t)(1 + decode) * (size_t)V;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof *a)) {
            printf("differ: step %zu logit %zu: resident %.9g, streamed %.9g\n", i / V, i % V, a[i], b[i]);
            return 1;
        }
    printf("identical: %zu logits (%d steps x %d)\n", n, 1 + decode, V);
    free(a);
    free(b);
    return 0;
}
