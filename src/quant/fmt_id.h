/* quant/fmt_id.h - the ids of the weight formats (quant/format.h describes
 * each), alone so that code which cannot include the rest of quant/ reads
 * the same ids: the CUDA kernels (cuda/cu_common.h, compiled by nvcc too).
 * Plain C and C++; nothing else. Ids are stable (they may be written into
 * converted files): never renumber, retire an id by commenting it out. */
#ifndef COLIBRI_QUANT_FMT_ID_H
#define COLIBRI_QUANT_FMT_ID_H

enum quant_fmt {
    QUANT_F32    = 0,
    QUANT_BF16   = 1,
    QUANT_F16    = 2,
    QUANT_Q8     = 3,
    QUANT_Q4     = 4,
    QUANT_Q4G32  = 5,
    QUANT_Q4G64  = 6,
    QUANT_Q4G128 = 7,
    QUANT_FP8B   = 8,
    QUANT_MXFP4  = 9,
    QUANT_FMT_COUNT
};

#endif
