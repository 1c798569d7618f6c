/* quant/format.h - the weight formats: an enum, and one traits table that says
 * how each format lays out a [rows, cols] matrix (cols = the input dimension).
 *
 * Every format stores two arrays: `data` (rows of packed elements, row r at
 * r * quant_fmt_row_bytes(fmt, cols)) and, for scaled formats, `scales`: f32,
 * except mxfp4's e8m0 bytes (quant_fmt_scale_size; the exponents as the OCP
 * MX releases ship them, so such tensors are used without conversion).
 * All multi-byte values are little-endian.
 *
 *   format  element                    row bytes            scales (f32)
 *   f32     IEEE binary32              4*cols               none
 *   bf16    bfloat16 (f32 >> 16)       2*cols               none
 *   f16     IEEE binary16              2*cols               none
 *   q8      int8 q in [-127, 127]      cols                 [rows]            w = q*s
 *   q4      int4, see below            ceil(cols/128)*64    [rows]            w = q*s
 *   q4gG    int4, see below            ceil(cols/128)*64    [rows][ceil(cols/G)] G = 32/64/128
 *   fp8b    e4m3fn byte (quant/fp8.h)  cols                 [ceil(rows/128)][ceil(cols/128)]
 *   mxfp4   e2m1 nibble (quant/mxfp4.h) ceil(cols/32)*16    e8m0 bytes [rows][ceil(cols/32)]
 *                                                            w = e2m1 * 2^(e-127)
 *
 * int4 layout: a nibble holds q+8 with q in [-8, 7] (0x0 = -8, 0x8 = 0,
 * 0xF = +7); the quantizer is symmetric and emits q in [-7, 7] with
 * s = amax/7, so the round-trip error is at most s/2. A row is a sequence of
 * 128-element blocks of 64 bytes: byte j of a block holds element j in its low
 * nibble and element j+64 in its high nibble. (This keeps both halves of a
 * byte in input order, so SIMD code of any width unpacks a load into two
 * contiguous runs of elements.) A row is padded to a multiple of 128 elements
 * with 0x8 nibbles (value 0). Group scales are f32, not f16: exact, and one
 * code path for every format; q4g32 costs 5 bits per weight, q4g64 4.5,
 * q4g128 4.25.
 *
 * q8 / q4 / q4gG scales are amax/127 or amax/7 of the row or group; a row or
 * group whose amax is 0 gets scale 0 and all-zero codes. fp8b is DeepSeek's
 * layout: one scale per 128x128 block, edge blocks partial; the scale is a
 * multiplier (safetensors names it weight_scale_inv), amax/448 when we
 * quantize.
 *
 * mxfp4 layout (OCP MX, as gpt-oss and DeepSeek-V4 ship their experts): byte
 * j of a row holds element 2j in its low nibble and 2j+1 in its high nibble;
 * one e8m0 scale per 32 elements; a row is padded to a multiple of 32 with
 * +0 codes. The block scale is the OCP rule (quant/mxfp4.h), 4.25 bits per
 * weight in all.
 *
 * Ids are stable (they may be written into converted files): never renumber,
 * retire an id by commenting it out.
 */
#ifndef COLIBRI_QUANT_FORMAT_H
#define COLIBRI_QUANT_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "quant/fmt_id.h"

/* int4 storage block: 128 elements in 64 bytes (see the layout above). */
#define QUANT_INT4_BLOCK 128
/* fp8b scale block edge (rows and cols). */
#define QUANT_FP8B_BLOCK 128

enum quant_scale_kind {
    QUANT_SCALE_NONE,       /* no scales array */
    QUANT_SCALE_ROW,        /* one per row */
    QUANT_SCALE_GROUP,      /* one per row per group of group_cols columns */
    QUANT_SCALE_BLOCK2D,    /* one per group_rows x group_cols block */
};

struct qtensor;

struct quant_fmt_traits {
    const char *name;
    int bits;               /* storage bits per element */
    int row_align;          /* a row is padded to a multiple of this many elements */
    enum quant_scale_kind scale_kind;
    int group_cols;         /* GROUP / BLOCK2D: columns per scale */
    int group_rows;         /* BLOCK2D: rows per scale */
    int int8_act;           /* the SIMD kernels round the activations to int8 (quant/qtensor.h) */
    int scale_e8m0;         /* scales are e8m0 bytes (qtensor.scales_e8m0), not f32 */
    /* Dequantizes row `row` of W into out[W->cols]. Pure; thread-safe. */
    void (*to_f32)(const struct qtensor *W, int row, float *out);
    /* Quantizes w[rows][cols] into data/scales sized by quant_fmt_*_bytes
     * (padding bytes are written too): scales is f32[] or, for scale_e8m0,
     * uint8_t[]. Pure; thread-safe. */
    void (*from_f32)(const float *w, int rows, int cols, void *data, void *scales);
};

/* The traits of fmt; fmt must be a valid id (quant_fmt_valid). */
const struct quant_fmt_traits *quant_fmt_traits(enum quant_fmt fmt);
int quant_fmt_valid(int fmt);
/* "q4g64" -> QUANT_Q4G64; -1 for an unknown name. */
int quant_fmt_from_name(const char *name);
const char *quant_fmt_name(enum quant_fmt fmt);
/* Every format's name in id order ("f32 bf16 ..." with sep " "), written to
 * buf[n] as snprintf would; returns the length of the whole list (a result
 * >= n means buf was too small). */
size_t quant_fmt_names(char *buf, size_t n, const char *sep);

/* Sizes of the two arrays of a [rows, cols] matrix. */
size_t quant_fmt_row_bytes(enum quant_fmt fmt, int cols);
size_t quant_fmt_data_bytes(enum quant_fmt fmt, int rows, int cols);
size_t quant_fmt_scale_count(enum quant_fmt fmt, int rows, int cols);
/* Bytes per scale (4, or 1 for e8m0), and bytes of the scales array. */
size_t quant_fmt_scale_size(enum quant_fmt fmt);
size_t quant_fmt_scale_bytes(enum quant_fmt fmt, int rows, int cols);

/* Index into scales[] of the scale covering element (row, col); only for
 * scaled formats. */
size_t quant_fmt_scale_index(enum quant_fmt fmt, int rows, int cols, int row, int col);

#endif
