/* api/names_api.c - the name lists of colibri.h, read from the traits tables
 * of the weight formats (quant/format.c) and the KV tiers (kv/codec.c). */
#include "colibri.h"
#include "kv/codec.h"
#include "quant/format.h"

size_t colibri_weight_format_names(char *buf, size_t n, const char *sep)
{
    return quant_fmt_names(buf, n, sep);
}

size_t colibri_kv_tier_names(char *buf, size_t n, const char *sep)
{
    return kv_tier_names(buf, n, sep);
}

size_t colibri_kv_rope_names(char *buf, size_t n, const char *sep)
{
    return kv_rope_names(buf, n, sep);
}
