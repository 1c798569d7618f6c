/* kv/tier_id.h - the ids of the KV cache tiers (kv/codec.h describes each),
 * alone so that code which cannot include the rest of kv/ reads the same
 * ids: the CUDA attention kernel (cuda/cu_common.h, compiled by nvcc too).
 * Plain C and C++; nothing else. The ids are written into KV files: never
 * renumber. */
#ifndef COLIBRI_KV_TIER_ID_H
#define COLIBRI_KV_TIER_ID_H

enum kv_tier {
    KV_TIER_F32    = 0,
    KV_TIER_BF16   = 1,
    KV_TIER_FP8    = 2,
    KV_TIER_INT8R  = 3,
    KV_TIER_Q4_0   = 4,
    KV_TIER_TQ4    = 5,
    KV_TIER_TQ3    = 6,
    KV_TIER_TQ2    = 7,
    KV_TIER_POLAR4 = 8,
    KV_TIER_POLAR3 = 9,
    KV_TIER_COUNT
};

#endif
