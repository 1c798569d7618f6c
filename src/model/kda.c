/* model/kda.c - the KDA core: convolution, gates, chunked and recurrent
 * delta rule, gated norm (contract in kda.h). */
#include "model/kda.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#include "base/err.h"
#include "base/par.h"

int model_kda_check(const struct kda *k, struct colibri_err *err)
{
    if (k->n_heads < 1 || k->head_dim < 1 || k->head_dim > KDA_MAX_HEAD_DIM)
        return base_err_set(err, COLIBRI_EINVAL, "kda: linear_num_heads %d, linear_head_dim %d (want >= 1, "
                            "head dim <= %d)", k->n_heads, k->head_dim, KDA_MAX_HEAD_DIM);
    if (k->conv_k < 1 || k->conv_k > KDA_MAX_CONV)
        return base_err_set(err, COLIBRI_EINVAL, "kda: linear_conv_kernel_dim %d (want 1..%d)", k->conv_k,
                            KDA_MAX_CONV);
    if (k->bounded && !(k->lower_bound < 0))
        return base_err_set(err, COLIBRI_EINVAL, "kda: linear_lower_bound %g (want < 0)", (double)k->lower_bound);
    if (!(k->norm_eps > 0))
        return base_err_set(err, COLIBRI_EINVAL, "kda: rms_norm_eps %g (want > 0)", (double)k->norm_eps);
    return 0;
}

size_t model_kda_conv_state_floats(const struct kda *k)
{
    return (size_t)(k->conv_k - 1) * 3 * k->n_heads * k->head_dim;
}

size_t model_kda_rec_state_floats(const struct kda *k)
{
    return (size_t)k->n_heads * k->head_dim * k->head_dim;
}

size_t model_kda_scratch_floats(const struct kda *k)
{
    return 5 * (size_t)KDA_CHUNK * k->head_dim + (size_t)KDA_CHUNK * KDA_CHUNK + 2 * KDA_CHUNK;
}

static float silu(float x) { return x / (1.0f + expf(-x)); }
static float sigm(float x) { return 1.0f / (1.0f + expf(-x)); }

void model_kda_conv(const struct kda *k, int n, const float *in, float *conv_state, float *out)
{
    const int C = 3 * k->n_heads * k->head_dim, K = k->conv_k, P = K - 1;
    for (int t = 0; t < n; t++) {
        float *o = out + (size_t)t * C;
        for (int ch = 0; ch < C; ch++) {
            const float *w = k->conv_w + (size_t)ch * K;
            float s = 0;
            for (int j = 0; j < K; j++) {
                int src = t - P + j; /* row index into in; negative: the state's row P + src */
                float v = src >= 0 ? in[(size_t)src * C + ch] : conv_state[(size_t)(P + src) * C + ch];
                s += w[j] * v;
            }
            o[ch] = silu(s);
        }
    }
    /* the state becomes the last P inputs of [state | in] */
    if (P == 0) return;
    if (n >= P) {
        memcpy(conv_state, in + (size_t)(n - P) * C, sizeof(float) * (size_t)P * C);
    } else {
        memmove(conv_state, conv_state + (size_t)n * C, sizeof(float) * (size_t)(P - n) * C);
        memcpy(conv_state + (size_t)(P - n) * C, in, sizeof(float) * (size_t)n * C);
    }
}

void model_kda_gates(const struct kda *k, int n, const float *fproj, const float *blog, float *g, float *beta)
{
    const int H = k->n_heads, D = k->head_dim;
    for (int t = 0; t < n; t++) {
        for (int h = 0; h < H; h++) {
            const float a = expf(k->a_log[h]);
            for (int d = 0; d < D; d++) {
                const size_t i = (size_t)t * H * D + (size_t)h * D + d;
                const float f = fproj[i] + k->dt_bias[h * D + d];
                if (k->bounded) {
                    g[i] = k->lower_bound * sigm(a * f);
                } else {
                    const float sp = f > 20.0f ? f : logf(1.0f + expf(f));
                    g[i] = -a * sp;
                }
            }
            beta[(size_t)t * H + h] = sigm(blog[(size_t)t * H + h]);
        }
    }
}

/* x / sqrt(|x|^2 + 1e-6) * mul into dst, D values. */
static void l2n(const float *x, int D, float mul, float *dst)
{
    float s = 0;
    for (int d = 0; d < D; d++) s += x[d] * x[d];
    const float inv = 1.0f / sqrtf(s + 1e-6f);
    for (int d = 0; d < D; d++) dst[d] = x[d] * inv * mul;
}

/* Head h of the recurrent form over n rows. */
static void rec_head(const struct kda *k, int h, int n, const float *qkv, const float *g, const float *beta,
                     float *state, float *out)
{
    const int H = k->n_heads, D = k->head_dim, HD = H * D;
    const float scale = 1.0f / sqrtf((float)D);
    float q[KDA_MAX_HEAD_DIM], kk[KDA_MAX_HEAD_DIM], u[KDA_MAX_HEAD_DIM];
    for (int t = 0; t < n; t++) {
        const float *row = qkv + (size_t)t * 3 * HD;
        {
            float *S = state + (size_t)h * D * D;
            const float *gh = g + (size_t)t * HD + (size_t)h * D, *v = row + 2 * HD + (size_t)h * D;
            const float b = beta[(size_t)t * H + h];
            l2n(row + (size_t)h * D, D, scale, q);
            l2n(row + HD + (size_t)h * D, D, 1.0f, kk);
            for (int i = 0; i < D; i++) {
                const float e = expf(gh[i]);
                for (int j = 0; j < D; j++) S[(size_t)i * D + j] *= e;
            }
            for (int j = 0; j < D; j++) u[j] = 0;
            for (int i = 0; i < D; i++)
                for (int j = 0; j < D; j++) u[j] += S[(size_t)i * D + j] * kk[i];
            for (int j = 0; j < D; j++) u[j] = (v[j] - u[j]) * b;
            for (int i = 0; i < D; i++)
                for (int j = 0; j < D; j++) S[(size_t)i * D + j] += kk[i] * u[j];
            float *o = out + (size_t)t * HD + (size_t)h * D;
            for (int j = 0; j < D; j++) o[j] = 0;
            for (int i = 0; i < D; i++)
                for (int j = 0; j < D; j++) o[j] += S[(size_t)i * D + j] * q[i];
        }
    }
}

void model_kda_recurrent(const struct kda *k, int n, const float *qkv, const float *g, const float *beta,
                         float *state, float *out, int n_threads)
{
    /* the heads are independent: their bits do not depend on the threads */
    BASE_PAR_FOR_N(omp_in_parallel() ? 1 : n_threads,
                   for (int h = 0; h < k->n_heads; h++) rec_head(k, h, n, qkv, g, beta, state, out););
}

/* One chunk of L rows of one head h (rows' q/k/v at qkv + t * 3HD, g at
 * g + t * HD, beta at beta + t * H, output at out + t * HD). */
static void chunk_head(const struct kda *k, int h, int L, const float *qkv, const float *g, const float *beta,
                       float *S, float *out, float *scratch)
{
    const int H = k->n_heads, D = k->head_dim, HD = H * D, C = KDA_CHUNK;
    const float scale = 1.0f / sqrtf((float)D);
    float *qn = scratch, *kn = qn + (size_t)C * D, *gc = kn + (size_t)C * D, *U = gc + (size_t)C * D;
    float *W = U + (size_t)C * D, *A = W + (size_t)C * D, *row = A + (size_t)C * C, *aq = row + C;
    for (int i = 0; i < L; i++) {
        const float *r = qkv + (size_t)i * 3 * HD + (size_t)h * D, *gi = g + (size_t)i * HD + (size_t)h * D;
        l2n(r, D, scale, qn + (size_t)i * D);
        l2n(r + HD, D, 1.0f, kn + (size_t)i * D);
        for (int d = 0; d < D; d++) gc[(size_t)i * D + d] = (i ? gc[(size_t)(i - 1) * D + d] : 0.0f) + gi[d];
    }
    /* A[i][j] (j < i) = -beta_i sum_d k_i k_j exp(gc_i - gc_j), then solved
     * row by row: A[i][j] += sum_m A[i][m] A[m][j] over the old row i. */
    for (int i = 0; i < L; i++) {
        const float bi = beta[(size_t)i * H + h];
        const float *ki = kn + (size_t)i * D, *gi = gc + (size_t)i * D;
        for (int j = 0; j < i; j++) {
            const float *kj = kn + (size_t)j * D, *gj = gc + (size_t)j * D;
            float s = 0;
            for (int d = 0; d < D; d++) s += ki[d] * bi * kj[d] * expf(gi[d] - gj[d]);
            A[(size_t)i * C + j] = -s;
        }
    }
    for (int i = 1; i < L; i++) {
        memcpy(row, A + (size_t)i * C, sizeof(float) * (size_t)i);
        for (int j = 0; j < i; j++) {
            float s = 0;
            for (int m = j + 1; m < i; m++) s += row[m] * A[(size_t)m * C + j];
            A[(size_t)i * C + j] = row[j] + s;
        }
    }
    /* U = (A + I) (beta v), W = (A + I) (beta k exp(gc)), then U -= W S */
    for (int i = 0; i < L; i++) {
        float *ui = U + (size_t)i * D, *wi = W + (size_t)i * D;
        for (int d = 0; d < D; d++) { ui[d] = 0; wi[d] = 0; }
        for (int j = 0; j <= i; j++) {
            const float a = j == i ? 1.0f : A[(size_t)i * C + j], bj = beta[(size_t)j * H + h];
            const float *vj = qkv + (size_t)j * 3 * HD + 2 * HD + (size_t)h * D;
            const float *kj = kn + (size_t)j * D, *gj = gc + (size_t)j * D;
            for (int d = 0; d < D; d++) {
                ui[d] += a * (vj[d] * bj);
                wi[d] += a * (kj[d] * bj * expf(gj[d]));
            }
        }
        for (int e = 0; e < D; e++) {
            const float w = wi[e];
            const float *Se = S + (size_t)e * D;
            for (int d = 0; d < D; d++) ui[d] -= w * Se[d];
        }
    }
    /* o_i = (q_i exp(gc_i)) S + sum_{j <= i} (q_i . k_j exp(gc_i - gc_j)) U_j */
    for (int i = 0; i < L; i++) {
        float *o = out + (size_t)i * HD + (size_t)h * D;
        const float *qi = qn + (size_t)i * D, *gi = gc + (size_t)i * D;
        for (int d = 0; d < D; d++) o[d] = 0;
        for (int e = 0; e < D; e++) {
            const float w = qi[e] * expf(gi[e]);
            const float *Se = S + (size_t)e * D;
            for (int d = 0; d < D; d++) o[d] += w * Se[d];
        }
        for (int j = 0; j <= i; j++) {
            const float *kj = kn + (size_t)j * D, *gj = gc + (size_t)j * D;
            float s = 0;
            for (int d = 0; d < D; d++) s += qi[d] * kj[d] * expf(gi[d] - gj[d]);
            aq[j] = s;
        }
        for (int j = 0; j <= i; j++) {
            const float *uj = U + (size_t)j * D;
            for (int d = 0; d < D; d++) o[d] += aq[j] * uj[d];
        }
    }
    /* S = S exp(gc_last) + sum_i (k_i exp(gc_last - gc_i)) U_i^T */
    const float *gl = gc + (size_t)(L - 1) * D;
    for (int e = 0; e < D; e++) {
        float *Se = S + (size_t)e * D;
        const float dec = expf(gl[e]);
        for (int d = 0; d < D; d++) Se[d] *= dec;
        for (int i = 0; i < L; i++) {
            const float w = kn[(size_t)i * D + e] * expf(gl[e] - gc[(size_t)i * D + e]);
            const float *ui = U + (size_t)i * D;
            for (int d = 0; d < D; d++) Se[d] += w * ui[d];
        }
    }
}

static void chunked_head(const struct kda *k, int h, int n, const float *qkv, const float *g, const float *beta,
                         float *state, float *out, float *scratch)
{
    const int H = k->n_heads, D = k->head_dim, HD = H * D;
    for (int c0 = 0; c0 < n; c0 += KDA_CHUNK) {
        const int L = n - c0 < KDA_CHUNK ? n - c0 : KDA_CHUNK;
        chunk_head(k, h, L, qkv + (size_t)c0 * 3 * HD, g + (size_t)c0 * HD, beta + (size_t)c0 * H,
                   state + (size_t)h * D * D, out + (size_t)c0 * HD, scratch);
    }
}

void model_kda_chunked(const struct kda *k, int n, const float *qkv, const float *g, const float *beta,
                       float *state, float *out, float *scratch, int n_threads)
{
    const size_t per = model_kda_scratch_floats(k);
    int nt = omp_in_parallel() ? 1 : n_threads;
    BASE_PAR_FOR_N(nt, for (int h = 0; h < k->n_heads; h++)
                           chunked_head(k, h, n, qkv, g, beta, state, out,
                                        scratch + (size_t)(nt > 1 ? omp_get_thread_num() : 0) * per););
}

void model_kda_out_norm(const struct kda *k, int n, const float *core, const float *gate, float *out)
{
    const int D = k->head_dim;
    const size_t rows = (size_t)n * k->n_heads;
    for (size_t r = 0; r < rows; r++) {
        const float *x = core + r * D, *gt = gate + r * D;
        float *o = out + r * D;
        float s = 0;
        for (int d = 0; d < D; d++) s += x[d] * x[d];
        const float inv = 1.0f / sqrtf(s / (float)D + k->norm_eps);
        for (int d = 0; d < D; d++) o[d] = k->norm_w[d] * (x[d] * inv) * sigm(gt[d]);
    }
}
