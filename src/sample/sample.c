/* sample/sample.c - penalties, greedy, temperature, top-k, min-p, top-p and
 * a seeded draw, all state in the struct sampler (contract in sample.h). */
#include "sample/sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "sample/grammar.h"

/* ---------------------------------------------------------------- RNG */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void sample_rng_seed(struct sample_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256** (Blackman & Vigna) */
uint64_t sample_rng_next(struct sample_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double sample_rng_uniform(struct sample_rng *r) { return (double)(sample_rng_next(r) >> 11) * 0x1.0p-53; }

/* ------------------------------------------------------------ sampler */

struct cand { float l; int32_t id; };

int sample_init(struct sampler *s, const struct colibri_sampler_opts *o, int32_t n_vocab,
                struct colibri_err *err)
{
    memset(s, 0, sizeof *s);
    if (n_vocab <= 0) return base_err_set(err, COLIBRI_EINVAL, "sampler: n_vocab %d must be > 0", n_vocab);
    if (!(o->temperature == o->temperature) || o->temperature > 1e6f)
        return base_err_set(err, COLIBRI_EINVAL, "sampler: temperature %g out of range", (double)o->temperature);
    if (!(o->top_p >= 0.0f))
        return base_err_set(err, COLIBRI_EINVAL, "sampler: top_p %g must be >= 0", (double)o->top_p);
    if (!(o->min_p >= 0.0f && o->min_p <= 1.0f))
        return base_err_set(err, COLIBRI_EINVAL, "sampler: min_p %g must be in [0, 1]", (double)o->min_p);
    if (!(o->repeat_penalty > 0.0f))
        return base_err_set(err, COLIBRI_EINVAL, "sampler: repeat_penalty %g must be > 0", (double)o->repeat_penalty);
    if (o->repeat_last_n < -1)
        return base_err_set(err, COLIBRI_EINVAL, "sampler: repeat_last_n %d must be >= -1", o->repeat_last_n);
    if (!(o->presence_penalty == o->presence_penalty) || !(o->frequency_penalty == o->frequency_penalty))
        return base_err_set(err, COLIBRI_EINVAL, "sampler: presence/frequency penalty is NaN");
    if (o->n_logit_bias && !o->logit_bias) return base_err_set(err, COLIBRI_EINVAL, "sampler: n_logit_bias without logit_bias");
    for (size_t i = 0; i < o->n_logit_bias; i++) {
        const struct colibri_logit_bias *b = &o->logit_bias[i];
        if (b->token < 0 || b->token >= n_vocab)
            return base_err_set(err, COLIBRI_EINVAL, "sampler: logit_bias token %d is outside the vocabulary [0, %d)",
                           b->token, n_vocab);
        if (!isfinite(b->bias))
            return base_err_set(err, COLIBRI_EINVAL, "sampler: logit_bias of token %d is not finite", b->token);
    }
    s->o = *o;
    s->n_vocab = n_vocab;
    if (o->n_logit_bias) {
        s->bias = malloc(o->n_logit_bias * sizeof *s->bias);
        if (!s->bias) return base_err_set(err, COLIBRI_ENOMEM, "sampler: %zu logit biases", o->n_logit_bias);
        memcpy(s->bias, o->logit_bias, o->n_logit_bias * sizeof *s->bias);
        s->o.logit_bias = s->bias;
    }
    s->hist_cap = o->repeat_last_n > 0 ? (size_t)o->repeat_last_n : 256;
    s->hist = malloc(s->hist_cap * sizeof *s->hist);
    s->cand = malloc((size_t)n_vocab * sizeof(struct cand));
    s->idx = malloc((size_t)n_vocab * sizeof *s->idx);
    s->count = calloc((size_t)n_vocab, sizeof *s->count);
    if (!s->hist || !s->cand || !s->idx || !s->count) {
        sample_free(s);
        return base_err_set(err, COLIBRI_ENOMEM, "sampler: scratch for %d logits", n_vocab);
    }
    sample_rng_seed(&s->rng, o->seed);
    s->pending = -1;
    if (o->grammar) {
        int rc = sample_grammar_state_new(o->grammar->g, &s->gst, err);
        s->allowed = malloc((size_t)n_vocab);
        s->base = malloc((size_t)n_vocab * sizeof *s->base);
        if (rc || !s->allowed || !s->base) {
            sample_free(s);
            return rc ? rc : base_err_set(err, COLIBRI_ENOMEM, "sampler: grammar scratch");
        }
        s->n_grammar = sample_grammar_n_vocab(o->grammar->g);
    }
    return 0;
}

void sample_free(struct sampler *s)
{
    free(s->hist);
    free(s->cand);
    free(s->idx);
    free(s->count);
    free(s->bias);
    sample_grammar_state_free(s->gst);
    free(s->allowed);
    free(s->base);
    memset(s, 0, sizeof *s);
}

void sample_reset(struct sampler *s, uint64_t seed)
{
    s->hist_n = s->hist_pos = 0;
    sample_rng_seed(&s->rng, seed);
    if (s->gst) {   /* back to the grammar's start */
        struct grammar_state *st = NULL;
        if (sample_grammar_state_new(s->o.grammar->g, &st, NULL) == 0) {
            sample_grammar_state_free(s->gst);
            s->gst = st;
        }
    }
    s->pending = -1;
}

void sample_accept(struct sampler *s, int32_t token)
{
    /* the grammar follows the generated text only: prompt tokens a caller
     * records for the penalties were not sampled */
    if (s->gst && token == s->pending) sample_grammar_accept(s->gst, token);
    s->pending = -1;
    if (s->hist_n == s->hist_cap && s->o.repeat_last_n < 0) {   /* whole history: grow */
        int32_t *nh = realloc(s->hist, 2 * s->hist_cap * sizeof *nh);
        if (nh) {
            s->hist = nh;
            s->hist_pos = s->hist_cap;
            s->hist_cap *= 2;
        }
    }
    s->hist[s->hist_pos] = token;
    s->hist_pos = (s->hist_pos + 1) % s->hist_cap;
    if (s->hist_n < s->hist_cap) s->hist_n++;
}

/* Lower rank first: larger logit, then lower id. */
static int cand_before(const struct cand *a, const struct cand *b)
{
    return a->l != b->l ? a->l > b->l : a->id < b->id;
}

static int cmp_cand(const void *pa, const void *pb)
{
    const struct cand *a = pa, *b = pb;
    return cand_before(a, b) ? -1 : cand_before(b, a) ? 1 : 0;
}

/* Keeps the k best of c[0..n) in c[0..k) (unordered): a heap whose root is
 * the worst kept candidate. */
static size_t keep_top_k(struct cand *c, size_t n, size_t k)
{
    if (k >= n) return n;
    for (size_t i = k / 2; i-- > 0;) {   /* heapify c[0..k), worst at the root */
        for (size_t j = i;;) {
            size_t l = 2 * j + 1, r = l + 1, m = j;
            if (l < k && cand_before(&c[m], &c[l])) m = l;
            if (r < k && cand_before(&c[m], &c[r])) m = r;
            if (m == j) break;
            struct cand t = c[j]; c[j] = c[m]; c[m] = t;
            j = m;
        }
    }
    for (size_t i = k; i < n; i++) {
        if (!cand_before(&c[i], &c[0])) continue;
        c[0] = c[i];
        for (size_t j = 0;;) {
            size_t l = 2 * j + 1, r = l + 1, m = j;
            if (l < k && cand_before(&c[m], &c[l])) m = l;
            if (r < k && cand_before(&c[m], &c[r])) m = r;
            if (m == j) break;
            struct cand t = c[j]; c[j] = c[m]; c[m] = t;
            j = m;
        }
    }
    return k;
}

static int32_t pick(struct sampler *s, struct cand *c, int32_t n);

int32_t sample_next(struct sampler *s, const float *logits)
{
    const struct colibri_sampler_opts *o = &s->o;
    struct cand *c = s->cand;
    int32_t n = s->n_vocab;
    for (int32_t i = 0; i < n; i++) c[i] = (struct cand){ .l = logits[i], .id = i };
    for (size_t i = 0; i < o->n_logit_bias; i++) c[o->logit_bias[i].token].l += o->logit_bias[i].bias;

    /* Penalties over the window of accepted tokens. */
    size_t win = o->repeat_last_n < 0 ? s->hist_n
               : (size_t)o->repeat_last_n < s->hist_n ? (size_t)o->repeat_last_n : s->hist_n;
    int penalize = win > 0 && (o->repeat_penalty != 1.0f || o->presence_penalty != 0.0f ||
                               o->frequency_penalty != 0.0f);
    if (penalize) {
        size_t n_distinct = 0;
        for (size_t k = 0; k < win; k++) {
            int32_t tkn = s->hist[(s->hist_pos + s->hist_cap - 1 - k) % s->hist_cap];
            if (tkn < 0 || tkn >= n) continue;
            if (s->count[tkn]++ == 0) s->idx[n_distinct++] = tkn;
        }
        for (size_t k = 0; k < n_distinct; k++) {
            int32_t tkn = s->idx[k];
            float l = c[tkn].l;
            if (o->repeat_penalty != 1.0f) l = l > 0 ? l / o->repeat_penalty : l * o->repeat_penalty;
            l -= o->presence_penalty + o->frequency_penalty * (float)s->count[tkn];
            c[tkn].l = l;
            s->count[tkn] = 0;
        }
    }

    if (!s->gst) return pick(s, c, n);
    for (int32_t i = 0; i < n; i++) s->base[i] = c[i].l;
    int32_t t = pick(s, c, n);
    if (sample_grammar_allows(s->gst, t)) return s->pending = t;
    /* the draw is one the grammar refuses: mask and draw again */
    int32_t k = sample_grammar_mask(s->gst, s->allowed);
    if (k == 0) return COLIBRI_EINVAL;
    for (int32_t i = 0; i < n; i++)
        c[i] = (struct cand){ .l = i < s->n_grammar && s->allowed[i] ? s->base[i] : -INFINITY, .id = i };
    t = pick(s, c, n);
    return s->pending = t;
}

/* Greedy, or temperature, min-p, top-k, top-p and a draw, over c[0..n)
 * (which it reorders). */
static int32_t pick(struct sampler *s, struct cand *c, int32_t n)
{
    const struct colibri_sampler_opts *o = &s->o;
    if (o->temperature <= 0.0f) {
        int32_t best = 0;
        for (int32_t i = 1; i < n; i++)
            if (c[i].l > c[best].l) best = i;
        return best;
    }

    float inv_t = 1.0f / o->temperature, maxl = -INFINITY;
    for (int32_t i = 0; i < n; i++) {
        c[i].l *= inv_t;
        if (c[i].l > maxl) maxl = c[i].l;
    }
    if (maxl == -INFINITY) return 0;   /* every token masked: nothing better to do */
    /* min-p as a logit threshold: p_i >= min_p * p_max  <=>  l_i >= l_max + ln(min_p);
     * applying it before top-k gives the same set and keeps the sort small. */
    float floor_l = o->min_p > 0.0f ? maxl + logf(o->min_p) : -INFINITY;
    size_t m = 0;
    for (int32_t i = 0; i < n; i++)
        if (c[i].l >= floor_l && c[i].l > -INFINITY) c[m++] = c[i];
    if (o->top_k > 0) m = keep_top_k(c, m, (size_t)o->top_k);
    /* Ranking is only needed for top-p; the draw itself walks any fixed order.
     * Sorting keeps that order independent of how the filters left it. */
    if (o->top_p < 1.0f || o->top_k > 0) qsort(c, m, sizeof *c, cmp_cand);

    double z = 0.0;
    for (size_t i = 0; i < m; i++) z += exp((double)c[i].l - (double)maxl);
    size_t keep = m;
    double mass = z;
    if (o->top_p < 1.0f) {
        double cum = 0.0, target = (double)o->top_p * z;
        for (size_t i = 0; i < m; i++) {
            cum += exp((double)c[i].l - (double)maxl);
            if (cum >= target) { keep = i + 1; break; }
        }
        mass = 0.0;
        for (size_t i = 0; i < keep; i++) mass += exp((double)c[i].l - (double)maxl);
    }
    double u = sample_rng_uniform(&s->rng) * mass, acc = 0.0;
    for (size_t i = 0; i < keep; i++) {
        acc += exp((double)c[i].l - (double)maxl);
        if (u < acc) return c[i].id;
    }
    return c[keep - 1].id;
}
