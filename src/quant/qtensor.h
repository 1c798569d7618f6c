/* quant/qtensor.h - a weight matrix in one of the quant/format.h formats, and
 * the products the forward pass needs: y = W·x (decode), Y = X·Wᵀ (prefill),
 * and dequantized row slices.
 *
 * A qtensor is [rows = out, cols = in]. It either owns its arrays (made by
 * quant_qtensor_from_f32; released by quant_qtensor_free) or borrows them
 * (quant_qtensor_wrap: e.g. bf16 or F8_E4M3 tensors inside an mmap'd
 * safetensors file, used as stored; the caller keeps them mapped and
 * unchanged for the qtensor's lifetime, and quant_qtensor_free only clears
 * the struct).
 *
 * Threads: a qtensor is read-only after it is made; any number of threads may
 * multiply with it at once. quant_matvec / quant_matmul parallelize over
 * output rows with OpenMP when called outside a parallel region and the
 * matrix is large enough; called from inside a parallel region (e.g. one
 * thread per expert) they run on the calling thread alone, so the caller
 * decides where the parallelism goes.
 *
 * Numerics: quant_isa_best() picks the kernel level. The scalar level is the
 * reference: dequantize in f32, multiply by the f32 activations, accumulate
 * in f32. At the AVX2 / AVX-512 / AMX levels, q8 and q4* quantize the
 * activations to int8 per block of 32 (scale amax/127) and use integer dot
 * products. AVX2 takes them on offset weights (q+8, q+128; the offset is
 * taken out in f32); the tests hold it to the exact product within
 *     sum_j |w_j| * amax(block of x_j) / 254  +  1e-5 * sum_j (|w_j| + o*s_j) |x_j|
 * (half a step of the activation rounding, plus f32 rounding of the terms and
 * of the offset o = 8 or 128 steps of the weight scale s_j). The AVX-512 and
 * AMX levels sum each 32-column block exactly in int32 and chain the blocks
 * in f32 (kernels_int8.h): no f32 offset term, so within the same bound, and
 * the same bits at both levels. mxfp4 at the AVX2 level (and above, which
 * use AVX2's kernel) also takes int8 activations: twice each e2m1 weight is
 * an integer in [-12, 12] multiplied by the activation codes exactly in
 * int16 pairs and int32 lanes (8 per 32-column block), each lane sum scaled
 * once by the activation scale times 2^(e-128) and accumulated in 8 f32
 * lanes, then reduced: the same bound without the offset term. NEON does the
 * same with 4 int32 and 4 f32 lanes (another f32 order, so other bits). Every other
 * format and level stays in f32
 * and is held within 1e-5 * sum_j |w_j x_j|. fp8b at the SIMD levels decodes
 * exactly (through f16, or bf16 byte tables with VBMI) except the NaN codes
 * 0x7F/0xFF, which read as +-480 (the reference table gives NaN); our
 * encoder never writes them and DeepSeek checkpoints do not hold them. At
 * the AVX-512 levels fp8b is f32 over its dequantized weights (value times
 * block scale, rounded once), with f32's order of operations.
 */
#ifndef COLIBRI_QUANT_QTENSOR_H
#define COLIBRI_QUANT_QTENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "colibri.h"
#include "quant/format.h"

struct qtensor {
    enum quant_fmt fmt;
    int rows, cols;
    const void *data;       /* rows * quant_fmt_row_bytes(fmt, cols) bytes */
    union {                 /* quant_fmt_scale_count(fmt, rows, cols); NULL if none */
        const float *scales;            /* f32 scales */
        const uint8_t *scales_e8m0;     /* formats with scale_e8m0 (mxfp4) */
    };
    int owned;              /* 1: data and scales are freed by quant_qtensor_free;
                             * QUANT_OWN_SCALES: only the scales (data borrowed) */
    /* 1: the model's products with this (bf16) tensor round the activations
     * to bf16 and run on VDPBF16PS (quant/bf16act.h; model_linear reads it).
     * Set by the loader under the opt-in colibri_model_opts.bf16_act; 0 from
     * every constructor here. quant_matvec / quant_matmul ignore it. */
    int act_bf16;
};

/* qtensor.owned for a borrowed data array with scales of its own (e.g. e8m0
 * block scales widened to f32 at load). */
#define QUANT_OWN_SCALES 2

/* Kernel levels. Only the levels built for this machine's architecture and
 * supported by its CPU are available. A level without its own kernel for a
 * format uses the one below it: AVX512VBMI -> AVX512 -> AVX2 -> SCALAR, and
 * NEON -> SCALAR. */
enum quant_isa {
    QUANT_ISA_SCALAR     = 0,
    QUANT_ISA_AVX2       = 1,   /* + FMA, F16C */
    QUANT_ISA_AVX512     = 2,   /* F, BW, VL, DQ, VNNI */
    QUANT_ISA_NEON       = 3,
    QUANT_ISA_AVX512VBMI = 4,   /* AVX512 + VBMI: byte-table fp8 decode (matvec) */
    QUANT_ISA_AMX        = 5,   /* AVX512VBMI + AMX-INT8: q8 / q4 / q4gG prefill on tiles */
    QUANT_ISA_COUNT
};

/* Quantizes w[rows][cols] (row-major f32, not kept) into a new owned tensor.
 * 0, or COLIBRI_EINVAL (bad format or shape) / COLIBRI_ENOMEM; *out is
 * untouched on failure. */
int quant_qtensor_from_f32(enum quant_fmt fmt, int rows, int cols, const float *w,
                           struct qtensor *out, struct colibri_err *err);

/* Makes a borrowing tensor over data (data_bytes long) and scales (n_scales
 * floats; NULL and 0 for unscaled formats). Checks both sizes against the
 * format: COLIBRI_EINVAL with a message naming the expected and given sizes.
 * Nothing is copied; see the lifetime rule above. */
int quant_qtensor_wrap(enum quant_fmt fmt, int rows, int cols,
                       const void *data, size_t data_bytes,
                       const float *scales, size_t n_scales,
                       struct qtensor *out, struct colibri_err *err);

/* quant_qtensor_wrap for any format, the scales given as bytes
 * (quant_fmt_scale_bytes long; f32 ones 4-byte aligned): how a loader wraps
 * mxfp4's e8m0 exponents, or the scales of a tensor it read as bytes. */
int quant_qtensor_wrap_raw(enum quant_fmt fmt, int rows, int cols,
                           const void *data, size_t data_bytes,
                           const void *scales, size_t scale_bytes,
                           struct qtensor *out, struct colibri_err *err);

/* Re-encodes src in fmt into a new owned tensor (e.g. fp8b or bf16 weights
 * quantized to q4g64 at load). Goes through f32 128 rows at a time, so no
 * f32 copy of the whole matrix is made; slabs run in parallel with OpenMP
 * (same rule as quant_matmul). The result equals quant_qtensor_from_f32 of
 * src dequantized. 0, or COLIBRI_EINVAL / COLIBRI_ENOMEM; *out untouched on
 * failure. */
int quant_qtensor_convert(const struct qtensor *src, enum quant_fmt fmt,
                          struct qtensor *out, struct colibri_err *err);

/* Bytes of data plus scales (what a matvec reads). */
size_t quant_qtensor_bytes(const struct qtensor *W);

/* Frees owned arrays and zeroes *W. NULL, or a zeroed struct, is a no-op. */
void quant_qtensor_free(struct qtensor *W);

/* A product's working memory: the prepared activations and one panel per
 * thread of its batch slices. The caller owns it, passes it to each product
 * and frees it with quant_scratch_free; a zeroed struct is empty. A product
 * that needs more than it holds grows it (by half at least) and keeps it, so
 * a caller that has run its largest product once allocates nothing more: the
 * forward keeps one in its run buffers (model/runstate.h). Used by one
 * product at a time: threads that multiply at once (see Threads above) pass
 * one each, or NULL. */
struct quant_scratch {
    void *buf;                  /* 64-byte aligned */
    size_t cap;                 /* bytes */
};

/* Makes s hold at least bytes. 0 or COLIBRI_ENOMEM (s unchanged). */
int quant_scratch_reserve(struct quant_scratch *s, size_t bytes, struct colibri_err *err);
void quant_scratch_free(struct quant_scratch *s);

/* y[rows] = W · x[cols]. x and y must not overlap. The same as quant_matmul
 * of one row. */
int quant_matvec(const struct qtensor *W, const float *x, float *y, struct quant_scratch *s, struct colibri_err *err);

/* Y[n][rows] = X[n][cols] · Wᵀ, row-major (prefill). The weights are read
 * once per slice of the batch whose prepared activations fit in 8 MiB (at
 * 7168 columns: 1168 int8 activations for q8/q4*, 288 f32 ones for the float
 * formats; slices are multiples of 8), and each output is computed
 * exactly as quant_matvec would compute it. n <= 0 does nothing. Working
 * memory comes from s (NULL: allocated for this call and freed). 0, or
 * COLIBRI_ENOMEM when s cannot grow to what the product needs (nothing
 * written to Y then). */
int quant_matmul(const struct qtensor *W, const float *X, int n, float *Y, struct quant_scratch *s,
                 struct colibri_err *err);

/* out[nrows][cols] = rows row0 .. row0+nrows-1 of W in f32 (for slices such as
 * kv_b_proj's W_UK / W_UV of one head). Exact dequantization (no activation
 * rounding is involved): every level gives the format's to_f32 bits. */
void quant_dequant_rows(const struct qtensor *W, int row0, int nrows, float *out);

/* The level quant_matvec / quant_matmul use: the best the CPU supports,
 * chosen once from CPUID. */
enum quant_isa quant_isa_best(void);
int quant_isa_available(enum quant_isa isa);
const char *quant_isa_name(enum quant_isa isa);

/* quant_matmul at a chosen level (tests and benchmarks compare levels with
 * it). A format the level has no kernel for falls back to the next lower
 * level that has one. COLIBRI_EUNSUPPORTED if the level is not available
 * here; COLIBRI_EINVAL for n <= 0; COLIBRI_ENOMEM if its working memory
 * cannot be allocated (then Y is untouched). */
int quant_matmul_isa(const struct qtensor *W, const float *X, int n, float *Y,
                     enum quant_isa isa, struct colibri_err *err);
/* quant_dequant_rows at a chosen level (tests compare levels with it);
 * COLIBRI_EUNSUPPORTED if the level is not available here. */
int quant_dequant_rows_isa(const struct qtensor *W, int row0, int nrows, float *out, enum quant_isa isa,
                           struct colibri_err *err);

#endif
