/* kv/attend.c - decode attention over a kv_cache: the exact f32 path, the
 * native (code-domain, flash-decoding) path for every other tier, and the
 * plain reference loop. The arithmetic is in kv/attn_kern.h. */
#include "kv/attend.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/util.h"
#include "kv/attn_kern.h"

#define KV_TILE 64   /* rows decoded and scored together (fits L2 with all heads) */
/* The native path splits the key tiles into at most this many parts, of at
 * least KV_PART_MIN_TILES tiles (a part's own partial output costs a clear
 * and a merge: 1-tile parts made T = 1024 20% slower), each with its own
 * running max, sum and partial output, merged in part order: the split, so
 * the result, depends on T alone, not on the thread count. More threads
 * than parts idle there. */
#define KV_SOFTMAX_PARTS 16
#define KV_PART_MIN_TILES 4
_Static_assert(KV_TILE <= 64, "the int8 accumulation sums at most 64 rows in int32");

struct kv_scratch {
    int n_threads;
    int int8;           /* enum kv_int8_mode */
    size_t cap;
    uint8_t *buf;
    size_t sel_cap;     /* rows gathered for kv_attend_select */
    uint8_t *sel;
};

int kv_scratch_new(int n_threads, struct kv_scratch **out, struct colibri_err *err)
{
    struct kv_scratch *s = calloc(1, sizeof *s);
    if (!s) return base_err_set(err, COLIBRI_ENOMEM, "kv attention scratch");
    s->n_threads = n_threads > 0 ? n_threads : omp_get_max_threads();
    *out = s;
    return 0;
}

void kv_scratch_set_int8(struct kv_scratch *s, int mode)
{
    s->int8 = mode == KV_INT8_QUERY8 || mode == KV_INT8_QUERY16 ? mode : KV_INT8_OFF;
}

size_t kv_scratch_bytes(const struct kv_scratch *s) { return s ? s->cap + s->sel_cap : 0; }

void kv_scratch_free(struct kv_scratch *s)
{
    if (!s) return;
    free(s->buf);
    free(s->sel);
    free(s);
}

static size_t al64(size_t floats) { return (floats * sizeof(float) + 63) & ~(size_t)63; }

/* Grows geometrically: decode asks for a little more every token (the f32
 * path keeps T x H logits), and each growth costs a fresh zeroed buffer. */
static int scratch_reserve(struct kv_scratch *s, size_t bytes, struct colibri_err *err)
{
    if (bytes <= s->cap) return 0;
    size_t want = s->cap + s->cap / 2 > bytes ? s->cap + s->cap / 2 : bytes;
    free(s->buf);
    s->buf = base_xalloc(want);
    s->cap = s->buf ? want : 0;
    if (!s->buf) return base_err_set(err, COLIBRI_ENOMEM, "kv attention scratch: %zu bytes", want);
    return 0;
}

static float *carve(uint8_t **p, size_t floats)
{
    float *f = (float *)*p;
    *p += al64(floats);
    return f;
}

int kv_attend_ref(int T, int H, int r, int dr, const float *lat, const float *rope,
                  const float *q_lat, const float *q_rope, float scale, float *out_lat)
{
    float *p = malloc((size_t)(T > 0 ? T : 1) * sizeof *p);
    float *acc = malloc((size_t)r * sizeof *acc);
    if (!p || !acc) {
        free(p);
        free(acc);
        return COLIBRI_ENOMEM;
    }
    for (int h = 0; h < H; h++) {
        const float *ql = q_lat + (size_t)h * r, *qr = dr ? q_rope + (size_t)h * dr : NULL;
        for (int t = 0; t < T; t++) {
            const float *c = lat + (size_t)t * r, *k = dr ? rope + (size_t)t * dr : NULL;
            float s1 = 0.0f, s2 = 0.0f;
            for (int i = 0; i < r; i++) s1 = fmaf(ql[i], c[i], s1);
            for (int j = 0; j < dr; j++) s2 = fmaf(qr[j], k[j], s2);
            p[t] = (s1 + s2) * scale;
        }
        float m = -INFINITY;
        for (int t = 0; t < T; t++)
            if (p[t] > m) m = p[t];
        float sum = 0.0f;
        for (int t = 0; t < T; t++) {
            p[t] = kv_expf(p[t] - m);
            sum += p[t];
        }
        for (int i = 0; i < r; i++) acc[i] = 0.0f;
        for (int t = 0; t < T; t++) {
            const float *c = lat + (size_t)t * r;
            for (int i = 0; i < r; i++) acc[i] = fmaf(p[t], c[i], acc[i]);
        }
        for (int i = 0; i < r; i++) out_lat[(size_t)h * r + i] = acc[i] / sum;
    }
    free(p);
    free(acc);
    return 0;
}

/* Transposed query qT[i * ldq + h] for an unrotated f32 path. */
static void transpose_q(const float *q, int H, int d, float *qT, int ldq)
{
    memset(qT, 0, (size_t)d * ldq * sizeof *qT);
    for (int h = 0; h < H; h++)
        for (int i = 0; i < d; i++) qT[(size_t)i * ldq + h] = q[(size_t)h * d + i];
}

static int cols_ok_for(const struct kv_kern *k, int r, int dr)
{
    return k != kv_kern_scalar() ? r % 16 == 0 && dr % 16 == 0 : 1;
}

/* attend_f32's work over a team (or the calling thread alone): scores,
 * softmax per head block, then each thread's output columns. */
struct f32_job {
    const struct kv_kern *k;
    const float *qTl, *qTr, *base;
    float *L, *m, *sum, *out;
    size_t stride;
    float scale;
    int r, dr, Hp, H, T, nblk, nhb, col_unit, units;
};

static void f32_team(const struct f32_job *j)
{
    const struct kv_kern *k = j->k;
    const float *qTl = j->qTl, *qTr = j->qTr, *base = j->base;
    float *L = j->L, *m = j->m, *sum = j->sum, *out = j->out;
    const size_t stride = j->stride;
    const float scale = j->scale;
    const int r = j->r, dr = j->dr, Hp = j->Hp, H = j->H, T = j->T, nblk = j->nblk, nhb = j->nhb,
              col_unit = j->col_unit, units = j->units;
    const int tid = omp_get_thread_num(), nth = omp_get_num_threads();
#pragma omp for schedule(static)
    for (int b = 0; b < nblk; b++) {
        int t0 = b * KV_TILE, n = T - t0 < KV_TILE ? T - t0 : KV_TILE;
        k->scores(qTl, r, qTr, dr, Hp, base + t0 * stride, stride,
                  base + t0 * stride + r, stride, n, scale, L + (size_t)t0 * Hp, Hp);
    }
#pragma omp for schedule(static)
    for (int hb = 0; hb < nhb; hb++) {
        for (int h = 0; h < 16; h++) {
            m[16 * hb + h] = -INFINITY;
            sum[16 * hb + h] = 0.0f;
        }
        k->colmax(L + 16 * hb, Hp, 16, T, m + 16 * hb);
        k->expsum(L + 16 * hb, Hp, m + 16 * hb, 16, T, L + 16 * hb, sum + 16 * hb);
    }
    const int i0 = col_unit * (units * tid / nth), i1 = col_unit * (units * (tid + 1) / nth);
    if (i1 > i0) {
        for (int h = 0; h < H; h++) memset(out + (size_t)h * r + i0, 0, (size_t)(i1 - i0) * sizeof *out);
        for (int t0 = 0; t0 < T; t0 += 4 * KV_TILE) {
            int n = T - t0 < 4 * KV_TILE ? T - t0 : 4 * KV_TILE;
            k->accum(L + (size_t)t0 * Hp, Hp, H, base + t0 * stride, stride, i0, i1, n, out, r);
        }
        for (int h = 0; h < H; h++)
            for (int i = i0; i < i1; i++) out[(size_t)h * r + i] /= sum[h];
    }
}

/* f32 latent and RoPE: the exact path (see attend.h). */
static int attend_f32(const struct kv_cache *c, const struct kv_layer *lay, const uint8_t *rows, int T, int H,
                      const float *q_lat, const float *q_rope, float scale, float *out, struct kv_scratch *s,
                      const struct kv_kern *k, struct colibri_err *err)
{
    const int r = c->r, dr = c->dr, Hp = (H + 15) & ~15;
    size_t need = al64((size_t)r * Hp) + al64((size_t)(dr ? dr : 1) * Hp) +
                  al64((size_t)T * Hp) + 2 * al64(Hp);
    int rc = scratch_reserve(s, need, err);
    if (rc) return rc;
    uint8_t *p = s->buf;
    float *qTl = carve(&p, (size_t)r * Hp), *qTr = carve(&p, (size_t)(dr ? dr : 1) * Hp);
    float *L = carve(&p, (size_t)T * Hp), *m = carve(&p, Hp), *sum = carve(&p, Hp);
    transpose_q(q_lat, H, r, qTl, Hp);
    if (dr) transpose_q(q_rope, H, dr, qTr, Hp);
    const size_t stride = lay->row_bytes / sizeof(float);
    const float *base = (const float *)rows;
    const int nblk = (T + KV_TILE - 1) / KV_TILE, nhb = Hp / 16;
    /* every team the size of the others (libgomp allocates one whenever the
     * size changes, base/par.h): threads past the blocks take columns only */
    int nt = nblk > 1 ? s->n_threads : 1;
    if (nt < 1) nt = 1;
    /* per-thread output columns, in multiples of 16 */
    const int col_unit = r % 16 == 0 ? 16 : 1, units = r / col_unit;
    const struct f32_job job = { k, qTl, qTr, base, L, m, sum, out, stride, scale, r, dr, Hp, H, T, nblk, nhb,
                                 col_unit, units };
    /* a region of one thread would allocate its team (base/par.h) */
    if (nt > 1 || omp_in_parallel()) {
#pragma omp parallel num_threads(nt)
        f32_team(&job);
    } else {
        f32_team(&job);
    }
    return 0;
}

/* One thread's working set in the native path. */
struct kv_tbufs {
    float *tileL, *tileR;   /* decoded rows, code domain */
    float *S;               /* scores, then weights, [KV_TILE][Hp] */
    float *mt;              /* tile max [Hp] */
    uint8_t *u;             /* int8 path: u8 codes [KV_TILE][r] */
    float *us;              /* int8 path: their scales [KV_TILE][G] */
    float *R, *S2;          /* int8 path: partial scores [KV_TILE][Hp] */
    uint8_t *work;          /* int8 path: accumulation work */
    uint8_t *ur;            /* int8 path with int8 RoPE: u8 RoPE codes [KV_TILE][dr] */
    float *urs;             /* their scales [KV_TILE] */
};

/* One part's online-softmax state in the native path. */
struct kv_softmax_part {
    float *m, *l;           /* running max, running sum [Hp] */
    float *acc;             /* partial output [Hp][r], code domain */
};

struct kv_native_dims { int r, dr, Hp, G, gs, q8, code16, q8rope, two; };

/* An int8 copy of a transposed query (struct kv_kern_q8 layouts). */
struct kv_q8q { int8_t *q; float *sq; int32_t *qsum; };

static struct kv_q8q q8q_carve(uint8_t **p, int d, int Hp, int G)
{
    struct kv_q8q q;
    q.q = (int8_t *)carve(p, (size_t)d * Hp / 4);
    q.sq = carve(p, Hp);
    q.qsum = (int32_t *)carve(p, (size_t)G * Hp);
    return q;
}

static size_t q8q_bytes(int d, int Hp, int G)
{
    return al64((size_t)d * Hp / 4) + al64(Hp) + al64((size_t)G * Hp);
}

/* qT[i][h] -= sq[h] * q8[i][h]: what the int8 copy missed (for the second part
 * of a two-part query). */
static void q8q_residual(float *qT, int d, int Hp, const struct kv_q8q *q)
{
    for (int i = 0; i < d; i++)
        for (int h = 0; h < Hp; h++)
            qT[(size_t)i * Hp + h] -= q->sq[h] * q->q[(size_t)(i / 4) * Hp * 4 + h * 4 + i % 4];
}

static size_t tbufs_bytes(const struct kv_native_dims *d)
{
    size_t b = al64((size_t)KV_TILE * d->r) + al64((size_t)KV_TILE * (d->dr ? d->dr : 1)) +
               al64((size_t)KV_TILE * d->Hp) + al64(d->Hp);
    if (d->q8)
        b += al64((size_t)KV_TILE * d->r / (d->code16 ? 2 : 4) + 1) + al64((size_t)KV_TILE * d->G) +
             2 * al64((size_t)KV_TILE * d->Hp) + al64(kv_q8_work_bytes(KV_TILE, d->r, d->gs, d->Hp) / 4 + 1);
    if (d->q8rope) b += al64((size_t)KV_TILE * d->dr / 4 + 1) + al64(KV_TILE);
    return b;
}

static struct kv_tbufs tbufs_at(uint8_t *p, const struct kv_native_dims *d)
{
    struct kv_tbufs b = {0};
    b.tileL = carve(&p, (size_t)KV_TILE * d->r);
    b.tileR = carve(&p, (size_t)KV_TILE * (d->dr ? d->dr : 1));
    b.S = carve(&p, (size_t)KV_TILE * d->Hp);
    b.mt = carve(&p, d->Hp);
    if (d->q8) {
        b.u = (uint8_t *)carve(&p, (size_t)KV_TILE * d->r / (d->code16 ? 2 : 4) + 1);
        b.us = carve(&p, (size_t)KV_TILE * d->G);
        b.R = carve(&p, (size_t)KV_TILE * d->Hp);
        b.S2 = carve(&p, (size_t)KV_TILE * d->Hp);
        b.work = (uint8_t *)carve(&p, kv_q8_work_bytes(KV_TILE, d->r, d->gs, d->Hp) / 4 + 1);
    }
    if (d->q8rope) {
        b.ur = (uint8_t *)carve(&p, (size_t)KV_TILE * d->dr / 4 + 1);
        b.urs = carve(&p, KV_TILE);
    }
    return b;
}

static size_t part_bytes(const struct kv_native_dims *d)
{
    return 2 * al64(d->Hp) + al64((size_t)d->Hp * d->r);
}

static struct kv_softmax_part part_at(uint8_t *p, const struct kv_native_dims *d)
{
    struct kv_softmax_part t;
    t.m = carve(&p, d->Hp);
    t.l = carve(&p, d->Hp);
    t.acc = carve(&p, (size_t)d->Hp * d->r);
    return t;
}

/* attend_native's work over a team (or the calling thread alone): each
 * part's online softmax over its tiles, then each thread's heads merged. */
struct native_job {
    const struct kv_layer *lay;
    const struct kv_kern *k;
    const struct kv_kern_q8 *k8;
    const struct kv_native_dims *d;
    const float *qTl, *qTr, *sq;
    const int8_t *q8T;
    const int32_t *qsum;
    struct kv_q8q lo, rhi, rlo;
    const uint8_t *rows;
    uint8_t *thread_base, *part_base;
    size_t per_thread, per_part, stride;
    float scale;
    float *out;
    int T, H, r, dr, Hp, nblk, np;
};

static void native_team(const struct native_job *job)
{
    const struct kv_layer *lay = job->lay;
    const struct kv_kern *k = job->k;
    const struct kv_kern_q8 *k8 = job->k8;
    const struct kv_native_dims d = *job->d;
    const float *qTl = job->qTl, *qTr = job->qTr, *sq = job->sq;
    const int8_t *q8T = job->q8T;
    const int32_t *qsum = job->qsum;
    const struct kv_q8q lo = job->lo, rhi = job->rhi, rlo = job->rlo;
    const uint8_t *rows = job->rows;
    uint8_t *thread_base = job->thread_base, *part_base = job->part_base;
    const size_t per_thread = job->per_thread, per_part = job->per_part, stride = job->stride;
    const float scale = job->scale;
    float *out = job->out;
    const int T = job->T, H = job->H, r = job->r, dr = job->dr, Hp = job->Hp, nblk = job->nblk, np = job->np;
    const int tid = omp_get_thread_num(), nth = omp_get_num_threads();
#pragma omp for schedule(static)
    for (int pi = 0; pi < np; pi++) {
        /* a buffer per part when each thread has one part at most, else per thread */
        struct kv_tbufs b = tbufs_at(thread_base + (size_t)(np <= nth ? pi : tid) * per_thread, &d);
        struct kv_softmax_part pt = part_at(part_base + (size_t)pi * per_part, &d);
        for (int h = 0; h < Hp; h++) {
            pt.m[h] = -INFINITY;
            pt.l[h] = 0.0f;
        }
        memset(pt.acc, 0, (size_t)Hp * r * sizeof *pt.acc);
        const int b0 = nblk * pi / np, b1 = nblk * (pi + 1) / np;
        for (int blk = b0; blk < b1; blk++) {
            const int t0 = blk * KV_TILE, n = T - t0 < KV_TILE ? T - t0 : KV_TILE;
            const uint8_t *tr = rows + (size_t)t0 * stride;
            if (d.q8) {
                if (d.code16)
                    k8->decode16[lay->tier](&lay->lat, tr, stride, n, b.u, b.us);
                else
                    k8->decode[lay->tier](&lay->lat, tr, stride, n, b.u, b.us);
                /* partial scores chain through R and S2 (a kernel's input and
                 * output must not alias) */
                const float *R = NULL;
                if (d.q8rope) {
                    k8->decode[lay->pe.tier](&lay->pe, tr + lay->lat_bytes, stride, n, b.ur, b.urs);
                    k8->scores(rhi.q, rhi.sq, rhi.qsum, dr, dr, Hp, b.ur, b.urs, n, NULL, 1.0f, b.R);
                    R = b.R;
                    if (rlo.q) {
                        k8->scores(rlo.q, rlo.sq, rlo.qsum, dr, dr, Hp, b.ur, b.urs, n, R, 1.0f, b.S2);
                        R = b.S2;
                    }
                } else if (dr) {
                    kv_codec_decode_rows(&lay->pe, tr + lay->lat_bytes, stride, n, b.tileR, dr);
                    k->scores(qTr, dr, NULL, 0, Hp, b.tileR, dr, NULL, 0, n, 1.0f, b.R, Hp);
                    R = b.R;
                }
                if (d.code16) {
                    k8->scores16((const int16_t *)q8T, sq, r, Hp, b.u, b.us, n, R, scale, b.S);
                } else if (lo.q) {
                    float *mid = R == b.R ? b.S2 : b.R;
                    k8->scores(q8T, sq, qsum, r, d.gs, Hp, b.u, b.us, n, R, 1.0f, mid);
                    k8->scores(lo.q, lo.sq, lo.qsum, r, d.gs, Hp, b.u, b.us, n, mid, scale, b.S);
                } else {
                    k8->scores(q8T, sq, qsum, r, d.gs, Hp, b.u, b.us, n, R, scale, b.S);
                }
            } else {
                if (dr) kv_codec_decode_rows(&lay->pe, tr + lay->lat_bytes, stride, n, b.tileR, dr);
                kv_codec_decode_rows(&lay->lat, tr, stride, n, b.tileL, r);
                k->scores(qTl, r, qTr, dr, Hp, b.tileL, r, b.tileR, dr, n, scale, b.S, Hp);
            }
            memcpy(b.mt, pt.m, Hp * sizeof *b.mt);
            k->colmax(b.S, Hp, Hp, n, b.mt);
            for (int h = 0; h < H; h++) {
                if (b.mt[h] > pt.m[h] && pt.l[h] != 0.0f) {
                    const float alpha = kv_expf(pt.m[h] - b.mt[h]);
                    float *a = pt.acc + (size_t)h * r;
                    pt.l[h] *= alpha;
#pragma omp simd
                    for (int i = 0; i < r; i++) a[i] *= alpha;
                }
            }
            memcpy(pt.m, b.mt, Hp * sizeof *pt.m);
            k->expsum(b.S, Hp, pt.m, Hp, n, b.S, pt.l);
            if (d.q8)
                k8->accum(b.S, Hp, H, b.u, b.us, n, r, d.code16 ? 0 : d.gs, pt.acc, b.work);
            else
                k->accum(b.S, Hp, H, b.tileL, r, 0, r, n, pt.acc, r);
        }
    }   /* the omp for's barrier: every part is done before the merge */
    /* merge, parts in order; this thread owns heads [h0, h1) */
    const int h0 = H * tid / nth, h1 = H * (tid + 1) / nth;
    for (int h = h0; h < h1; h++) {
        float M = -INFINITY, L = 0.0f, *o = out + (size_t)h * r;
        for (int j = 0; j < np; j++) {
            struct kv_softmax_part pj = part_at(part_base + (size_t)j * per_part, &d);
            if (pj.l[h] != 0.0f && pj.m[h] > M) M = pj.m[h];
        }
        memset(o, 0, (size_t)r * sizeof *o);
        for (int j = 0; j < np; j++) {
            struct kv_softmax_part pj = part_at(part_base + (size_t)j * per_part, &d);
            if (pj.l[h] == 0.0f) continue;   /* a part without weight */
            const float w = kv_expf(pj.m[h] - M);
            const float *aj = pj.acc + (size_t)h * r;
            L += w * pj.l[h];
#pragma omp simd
            for (int i = 0; i < r; i++) o[i] = fmaf(w, aj[i], o[i]);
        }
        const float inv = 1.0f / L;
#pragma omp simd
        for (int i = 0; i < r; i++) o[i] *= inv;
    }
    if (h1 > h0) kv_codec_finish(&lay->lat, h1 - h0, out + (size_t)h0 * r);
}

/* Every other tier: decode each tile once, score and accumulate in the code
 * domain with an online softmax per thread, merge, unrotate once. */
static int attend_native(const struct kv_cache *c, const struct kv_layer *lay, const uint8_t *rows, int T, int H,
                         const float *q_lat, const float *q_rope, float scale, float *out, struct kv_scratch *s,
                         const struct kv_kern *k, struct colibri_err *err)
{
    const int r = c->r, dr = c->dr, Hp = (H + 15) & ~15;
    const int nblk = (T + KV_TILE - 1) / KV_TILE;
    const struct kv_kern_q8 *k8 = s->int8 ? kv_kern_q8_get() : NULL;
    struct kv_native_dims d = {.r = r, .dr = dr, .Hp = Hp};
    d.q8 = k8 && (k8->decode[lay->tier] || k8->decode16[lay->tier]) && k == kv_kern_get() &&
           r % 32 == 0;
    d.code16 = d.q8 && !k8->decode[lay->tier];
    d.gs = d.q8 && !d.code16 ? kv_codec_q8_group(&lay->lat) : r;
    d.G = r / d.gs;
    d.q8rope = d.q8 && dr > 0 && dr % 16 == 0 && k8->decode[lay->pe.tier] &&
               kv_codec_q8_group(&lay->pe) == dr;
    d.two = s->int8 == KV_INT8_QUERY16;
    const int np_tiles = (nblk + KV_PART_MIN_TILES - 1) / KV_PART_MIN_TILES,
              np = np_tiles < KV_SOFTMAX_PARTS ? np_tiles : KV_SOFTMAX_PARTS;
    /* every team the size of the others (libgomp allocates one whenever the
     * size changes, base/par.h): threads past the parts (thread i runs part
     * i when there are fewer parts than threads) only merge heads */
    int nt = np > 1 ? s->n_threads : 1, nbuf = np < nt ? np : nt;
    if (nt < 1) nt = nbuf = 1;
    const size_t per_thread = tbufs_bytes(&d), per_part = part_bytes(&d);
    size_t shared = al64((size_t)r * Hp) + al64((size_t)(dr ? dr : 1) * Hp);
    if (d.q8) shared += al64((size_t)r * Hp / 2) + al64(Hp) + al64((size_t)d.G * Hp);
    if (d.q8 && !d.code16 && d.two) shared += q8q_bytes(r, Hp, d.G);
    if (d.q8rope) shared += (d.two ? 2 : 1) * q8q_bytes(dr, Hp, 1);
    int rc = scratch_reserve(s, shared + nbuf * per_thread + np * per_part, err);
    if (rc) return rc;
    uint8_t *p = s->buf;
    float *qTl = carve(&p, (size_t)r * Hp), *qTr = carve(&p, (size_t)(dr ? dr : 1) * Hp);
    int8_t *q8T = NULL;
    float *sq = NULL;
    int32_t *qsum = NULL;
    if (d.q8) {
        q8T = (int8_t *)carve(&p, (size_t)r * Hp / 2);   /* int8, or int16 for code16 */
        sq = carve(&p, Hp);
        qsum = (int32_t *)carve(&p, (size_t)d.G * Hp);
    }
    struct kv_q8q lo = {0}, rhi = {0}, rlo = {0};
    if (d.q8 && !d.code16 && d.two) lo = q8q_carve(&p, r, Hp, d.G);
    if (d.q8rope) rhi = q8q_carve(&p, dr, Hp, 1);
    if (d.q8rope && d.two) rlo = q8q_carve(&p, dr, Hp, 1);
    uint8_t *thread_base = p, *part_base = p + nbuf * per_thread;
    kv_codec_prepare_query(&lay->lat, H, q_lat, qTl, Hp);
    if (dr) kv_codec_prepare_query(&lay->pe, H, q_rope, qTr, Hp);
    if (d.q8 && d.code16) k8->quant_query16(qTl, r, Hp, (int16_t *)q8T, sq);
    else if (d.q8) k8->quant_query(qTl, r, Hp, d.gs, q8T, sq, qsum);
    if (lo.q) {
        q8q_residual(qTl, r, Hp, &(struct kv_q8q){q8T, sq, qsum});
        k8->quant_query(qTl, r, Hp, d.gs, lo.q, lo.sq, lo.qsum);
    }
    if (d.q8rope) k8->quant_query(qTr, dr, Hp, dr, rhi.q, rhi.sq, rhi.qsum);
    if (rlo.q) {
        q8q_residual(qTr, dr, Hp, &rhi);
        k8->quant_query(qTr, dr, Hp, dr, rlo.q, rlo.sq, rlo.qsum);
    }
    const size_t stride = lay->row_bytes;

    const struct native_job job = { lay, k, k8, &d, qTl, qTr, sq, q8T, qsum, lo, rhi, rlo, rows, thread_base, part_base,
                                    per_thread, per_part, stride, scale, out, T, H, r, dr, Hp, nblk, np };
    /* a region of one thread would allocate its team (base/par.h) */
    if (nt > 1 || omp_in_parallel()) {
#pragma omp parallel num_threads(nt)
        native_team(&job);
    } else {
        native_team(&job);
    }
    return 0;
}

int kv_attend_int8_applies(const struct kv_cache *c)
{
    const struct kv_kern_q8 *k8 = kv_kern_q8_get();
    int any = 0;
    for (int l = 0; k8 && l < c->n_layers; l++) any |= k8->decode[c->layer[l].tier] || k8->decode16[c->layer[l].tier];
    return any && c->r % 32 == 0 && cols_ok_for(kv_kern_get(), c->r, c->dr);
}

/* Rows at `rows` with layer lay's row layout and stride. */
static int attend_rows(const struct kv_cache *c, const struct kv_layer *lay, const uint8_t *rows, int T, int H,
                       const float *q_lat, const float *q_rope, float scale, float *out_lat, struct kv_scratch *s,
                       struct colibri_err *err)
{
    const struct kv_kern *k = kv_kern_get();
    if (!cols_ok_for(k, c->r, c->dr)) k = kv_kern_scalar();
    if (lay->tier == KV_TIER_F32 && (c->dr == 0 || lay->rope == KV_ROPE_F32))
        return attend_f32(c, lay, rows, T, H, q_lat, q_rope, scale, out_lat, s, k, err);
    return attend_native(c, lay, rows, T, H, q_lat, q_rope, scale, out_lat, s, k, err);
}

int kv_attend(const struct kv_cache *c, int layer, int T, int H, const float *q_lat,
              const float *q_rope, float scale, float *out_lat, struct kv_scratch *s,
              struct colibri_err *err)
{
    if (layer < 0 || layer >= c->n_layers || T < 1 || T > c->capacity || H < 1)
        return base_err_set(err, COLIBRI_EINVAL, "kv attend: layer %d T %d H %d (cache %d x %d)",
                       layer, T, H, c->n_layers, c->capacity);
    if (c->dr > 0 && !q_rope) return base_err_set(err, COLIBRI_EINVAL, "kv attend: q_rope is NULL");
    return attend_rows(c, &c->layer[layer], kv_cache_row(c, layer, 0), T, H, q_lat, q_rope, scale, out_lat, s, err);
}

int kv_scratch_reserve(struct kv_scratch *s, const struct kv_cache *c, int H, struct colibri_err *err)
{
    /* the f32 path's need grows with T; the native path's is fixed per thread */
    const int r = c->r, dr = c->dr, Hp = (H + 15) & ~15;
    size_t f32 = al64((size_t)r * Hp) + al64((size_t)(dr ? dr : 1) * Hp) + al64((size_t)c->capacity * Hp) +
                 2 * al64(Hp);
    /* the native path at its largest: int8 codes in groups of 32, int8 RoPE, two-part query */
    struct kv_native_dims d = {.r = r, .dr = dr, .Hp = Hp, .q8 = 1, .gs = 32, .G = (r + 31) / 32,
                               .q8rope = dr > 0, .two = 1};
    size_t native = al64((size_t)r * Hp) + al64((size_t)(dr ? dr : 1) * Hp) + al64((size_t)r * Hp / 2) + al64(Hp) +
                    al64((size_t)d.G * Hp) + q8q_bytes(r, Hp, d.G) + 2 * q8q_bytes(dr ? dr : 1, Hp, 1) +
                    (size_t)(s->n_threads < KV_SOFTMAX_PARTS ? s->n_threads : KV_SOFTMAX_PARTS) * tbufs_bytes(&d) +
                    (size_t)KV_SOFTMAX_PARTS * part_bytes(&d);
    return scratch_reserve(s, f32 > native ? f32 : native, err);
}

static int sel_reserve(struct kv_scratch *s, size_t need, int n, struct colibri_err *err)
{
    if (need <= s->sel_cap) return 0;
    uint8_t *p = malloc(need);
    if (!p) return base_err_set(err, COLIBRI_ENOMEM, "kv attend: %zu bytes for %d selected rows", need, n);
    free(s->sel);
    s->sel = p;
    s->sel_cap = need;
    return 0;
}

int kv_scratch_reserve_select(struct kv_scratch *s, const struct kv_cache *c, int n, struct colibri_err *err)
{
    size_t rb = 0;
    for (int l = 0; l < c->n_layers; l++)
        if (c->layer[l].row_bytes > rb) rb = c->layer[l].row_bytes;
    return sel_reserve(s, (size_t)n * rb, n, err);
}

int kv_attend_select(const struct kv_cache *c, int layer, const int32_t *pos, int n, int H, const float *q_lat,
                     const float *q_rope, float scale, float *out_lat, struct kv_scratch *s,
                     struct colibri_err *err)
{
    if (layer < 0 || layer >= c->n_layers || n < 1 || n > c->capacity || H < 1 || !pos)
        return base_err_set(err, COLIBRI_EINVAL, "kv attend: layer %d, %d selected positions, H %d (cache %d x %d)",
                       layer, n, H, c->n_layers, c->capacity);
    if (c->dr > 0 && !q_rope) return base_err_set(err, COLIBRI_EINVAL, "kv attend: q_rope is NULL");
    const size_t rb = c->layer[layer].row_bytes;
    int rc = sel_reserve(s, (size_t)n * rb, n, err);
    if (rc) return rc;
    for (int i = 0; i < n; i++) {
        if (pos[i] < 0 || pos[i] >= c->capacity)
            return base_err_set(err, COLIBRI_ERANGE, "kv attend: selected position %d (index %d) outside [0, %d)", pos[i],
                           i, c->capacity);
        memcpy(s->sel + (size_t)i * rb, kv_cache_row(c, layer, pos[i]), rb);
    }
    return attend_rows(c, &c->layer[layer], s->sel, n, H, q_lat, q_rope, scale, out_lat, s, err);
}
