/* kv/codec_impl.h - internal: the traits table entry each tier fills, and the
 * per-tier functions the table in codec.c points to. Not for use outside kv/.
 *
 * encode() receives the row already rotated (code domain) in a scratch buffer
 * it may overwrite; decode_rot() writes the code-domain reconstruction
 * (including the gain). Faster bit-exact row decoders for the current CPU
 * live in the kernel table (kv/attn_kern.h), indexed by tier. */
#ifndef COLIBRI_KV_CODEC_IMPL_H
#define COLIBRI_KV_CODEC_IMPL_H

#include "kv/codec.h"

enum kv_rot_kind { KV_ROT_NONE = 0, KV_ROT_FULL = 1, KV_ROT_256 = 2 };

struct kv_codec_traits {
    const char *name;
    enum kv_rot_kind rot;
    int dim_multiple;                   /* dim must be a multiple of this */
    int q8_group;                       /* int8 form: 0 none, -1 one scale per row,
                                           else the columns per scale */
    size_t (*row_bytes)(int dim);
    int  (*init)(struct kv_codec *c, struct colibri_err *err);   /* may be NULL */
    void (*fini)(struct kv_codec *c);                             /* may be NULL */
    void (*encode)(const struct kv_codec *c, float *y, uint8_t *out);
    void (*decode_rot)(const struct kv_codec *c, const uint8_t *in, float *y);
};

/* codec_plain.c */
size_t kv_f32_row_bytes(int dim);
void kv_f32_encode(const struct kv_codec *c, float *y, uint8_t *out);
void kv_f32_decode(const struct kv_codec *c, const uint8_t *in, float *y);
size_t kv_bf16_row_bytes(int dim);
void kv_bf16_encode(const struct kv_codec *c, float *y, uint8_t *out);
void kv_bf16_decode(const struct kv_codec *c, const uint8_t *in, float *y);
size_t kv_fp8_row_bytes(int dim);
void kv_fp8_encode(const struct kv_codec *c, float *y, uint8_t *out);
void kv_fp8_decode(const struct kv_codec *c, const uint8_t *in, float *y);

/* codec_int.c */
size_t kv_int8r_row_bytes(int dim);
void kv_int8r_encode(const struct kv_codec *c, float *y, uint8_t *out);
void kv_int8r_decode(const struct kv_codec *c, const uint8_t *in, float *y);
size_t kv_q4_0_row_bytes(int dim);
void kv_q4_0_encode(const struct kv_codec *c, float *y, uint8_t *out);
void kv_q4_0_decode(const struct kv_codec *c, const uint8_t *in, float *y);

/* codec_tq.c */
size_t kv_tq4_row_bytes(int dim);
size_t kv_tq3_row_bytes(int dim);
size_t kv_tq2_row_bytes(int dim);
int  kv_tq_init(struct kv_codec *c, struct colibri_err *err);
void kv_tq_encode(const struct kv_codec *c, float *y, uint8_t *out);
void kv_tq_decode(const struct kv_codec *c, const uint8_t *in, float *y);
/* Lloyd-Max quantizer for N(0,1) with 2^bits levels: levels (ascending),
 * thresholds, and its MSE D_b. */
void kv_lloyd_max_gauss(int bits, float *level, float *thresh, double *mse);

/* codec_polar.c; the table is shared with the AVX-512 row decoder */
#define KV_POLAR_MAXL 13          /* 2^12 = KV_DIM_MAX */

struct kv_polar_tab {
    int L;
    int bits[KV_POLAR_MAXL + 1];        /* per level 1..L */
    size_t off[KV_POLAR_MAXL + 2];      /* bit offset of each level's indices */
    float ang[KV_POLAR_MAXL + 1][32];   /* codebook angles, ascending */
    float thr[KV_POLAR_MAXL + 1][32];   /* thresholds between them (l >= 2) */
    float cs[KV_POLAR_MAXL + 1][32], sn[KV_POLAR_MAXL + 1][32];
};

size_t kv_polar4_row_bytes(int dim);
size_t kv_polar3_row_bytes(int dim);
int  kv_polar_init(struct kv_codec *c, struct colibri_err *err);
void kv_polar_fini(struct kv_codec *c);
void kv_polar_encode(const struct kv_codec *c, float *y, uint8_t *out);
void kv_polar_decode(const struct kv_codec *c, const uint8_t *in, float *y);

#endif
