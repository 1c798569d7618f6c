/* serve/oai_sampling.c - the sampling fields beyond OpenAI's own that
 * llama-server and vLLM accept, and OpenAI's logit_bias (contract in oai.h).
 * Fields a client may send that colibri does not implement are refused by
 * name when set to anything but their neutral value, never ignored. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "serve/oai.h"

#define BAD "invalid_request_error"

static const cJSON *opt_field(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

/* 1 and *out when present, 0 when absent, -1 after filling e. */
static int number_in(const cJSON *o, const char *name, double lo, double hi, int integral, double *out,
                     struct oai_error *e)
{
    const cJSON *v = opt_field(o, name);
    if (!v) return 0;
    if (!cJSON_IsNumber(v))
        return -!!oai_error_set(e, 400, BAD, NULL, name, "'%s' must be a number", name);
    double x = v->valuedouble;
    if (!isfinite(x))   /* a literal beyond a double's range, such as 1e999 */
        return -!!oai_error_set(e, 400, BAD, NULL, name, "'%s' is out of range: it must be in [%g, %g]", name, lo, hi);
    if (integral && x != floor(x)) return -!!oai_error_set(e, 400, BAD, NULL, name, "'%s' must be an integer, got %g", name, x);
    if (x < lo || x > hi)
        return -!!oai_error_set(e, 400, BAD, NULL, name, "'%s' is %g; it must be in [%g, %g]", name, x, lo, hi);
    *out = x;
    return 1;
}

static int parse_logit_bias(const struct oai_model *m, const cJSON *root, struct job_params *p, struct oai_error *e)
{
    const cJSON *lb = opt_field(root, "logit_bias");
    if (!lb) return 0;
    if (!cJSON_IsObject(lb))
        return -!!oai_error_set(e, 400, BAD, NULL, "logit_bias", "'logit_bias' must be an object of token id -> bias");
    int n = cJSON_GetArraySize(lb);
    if (n > 1024)
        return -!!oai_error_set(e, 400, BAD, NULL, "logit_bias", "'logit_bias' holds %d tokens; at most 1024 are allowed", n);
    if (!n) return 0;
    p->logit_bias = calloc((size_t)n, sizeof *p->logit_bias);
    if (!p->logit_bias) return -!!oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    for (const cJSON *it = lb->child; it; it = it->next) {
        char *end;
        const char *k = it->string ? it->string : "";
        long id = strtol(k, &end, 10);
        if (!*k || *end || id < 0 || id >= m->n_vocab)
            return -!!oai_error_set(e, 400, BAD, NULL, "logit_bias",
                                    "'logit_bias' key '%s' is not a token id in [0, %d)", k, m->n_vocab);
        if (!cJSON_IsNumber(it) || !(it->valuedouble >= -100 && it->valuedouble <= 100))
            return -!!oai_error_set(e, 400, BAD, NULL, "logit_bias",
                                    "'logit_bias[\"%s\"]' must be a number in [-100, 100]", k);
        p->logit_bias[p->n_logit_bias++] = (struct colibri_logit_bias){ (int32_t)id, (float)it->valuedouble };
    }
    return 0;
}

/* llama-server / vLLM fields colibri does not implement, with the value
 * that means "off" (any other value is refused by name). */
static const struct { const char *name; double neutral; } UNSUPPORTED[] = {
    { "typical_p", 1 }, { "tfs_z", 1 }, { "mirostat", 0 }, { "dry_multiplier", 0 }, { "xtc_probability", 0 },
    { "dynatemp_range", 0 }, { "top_n_sigma", -1 }, { "min_tokens", 0 }, { "repeat_last_n", -1 },
    { "penalty_last_n", -1 }, { "top_a", 0 },
};

int oai_parse_sampling(const struct oai_model *m, const struct cJSON *root, struct job_params *p,
                       struct oai_error *e)
{
    double x;
    int r;
    p->repeat_penalty = 1;
    if ((r = number_in(root, "top_k", -1, 1 << 24, 1, &x, e)) < 0) return -1;
    if (r) p->top_k = x > 0 ? (int)x : 0;   /* vLLM spells "off" -1, llama-server 0 */
    if ((r = number_in(root, "min_p", 0, 1, 0, &x, e)) < 0) return -1;
    if (r) p->min_p = (float)x;
    double rp = 0;
    int r1 = number_in(root, "repetition_penalty", 0.01, 100, 0, &rp, e);
    if (r1 < 0) return -1;
    double rp2 = 0;
    int r2 = number_in(root, "repeat_penalty", 0.01, 100, 0, &rp2, e);
    if (r2 < 0) return -1;
    if (r1 && r2 && rp != rp2)
        return -!!oai_error_set(e, 400, BAD, NULL, "repeat_penalty",
                                "'repetition_penalty' (%g) and 'repeat_penalty' (%g) disagree; give one", rp, rp2);
    if (r1 || r2) p->repeat_penalty = (float)(r1 ? rp : rp2);
    for (size_t i = 0; i < sizeof UNSUPPORTED / sizeof *UNSUPPORTED; i++) {
        const cJSON *v = opt_field(root, UNSUPPORTED[i].name);
        if (v && !(cJSON_IsNumber(v) && v->valuedouble == UNSUPPORTED[i].neutral))
            return -!!oai_error_set(e, 400, BAD, NULL, UNSUPPORTED[i].name, "'%s' is not supported by colibri",
                                    UNSUPPORTED[i].name);
    }
    return parse_logit_bias(m, root, p, e);
}
