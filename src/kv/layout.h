/* kv/layout.h - how a user names a per-layer KV cache layout, and back.
 *
 * Spelling (the value of --kv and of colibri_session_opts.kv_tier):
 *
 *   TIER { "@" LAYERS ":" SETTING { ":" SETTING } }
 *   LAYERS  = N | N "-" M        (0-based, inclusive)
 *   SETTING = TIER | "rope=" PREC
 *
 * e.g. "int8r@1:rope=f32" (int8r everywhere, layer 1's RoPE part in f32) or
 * "fp8@0-1:int8r@1:rope=f32". TIER is a latent tier (kv_tier_names), PREC a
 * RoPE precision (kv_rope_names). A layer's RoPE precision is, in order: its
 * own rope= setting, the session's --kv-rope, the default of the layer's own
 * latent tier (kv_rope_default), so "@0-1:int8r" lays those layers out as the
 * int8r tier would. Refused by name (COLIBRI_EINVAL): an unknown tier or
 * precision, a layer outside [0, n_layers), an empty range, an entry without
 * a setting, and a layer whose latent tier or RoPE precision two entries set
 * (overlap), naming both entries.
 *
 * A name without "@" is a uniform layout: every layer as the plain tier.
 */
#ifndef COLIBRI_KV_LAYOUT_H
#define COLIBRI_KV_LAYOUT_H

#include <stddef.h>

#include "colibri.h"
#include "kv/cache.h"

/* Fills spec[n_layers] from name; rope is the session's --kv-rope
 * (KV_ROPE_DEFAULT when not given). Extra parts are left at none (the model
 * adds its own). Every spec[l].rope comes out resolved. */
int kv_layout_parse(const char *name, enum kv_rope_prec rope, int n_layers, struct kv_layer_spec *spec,
                    struct colibri_err *err);

/* The options that reproduce a layout whose layer l has latent tier[l] and
 * RoPE precision rope[l] (resolved): "--kv NAME" plus " --kv-rope P" when the
 * most common layout's RoPE is not its tier's default. The most common
 * (tier, rope) pair is the base; other layers become "@" entries, runs of
 * equal layers as ranges. Written to buf[n] as snprintf would; returns the
 * length of the whole text. */
size_t kv_layout_options(const enum kv_tier *tier, const enum kv_rope_prec *rope, int n_layers, char *buf,
                         size_t n);
/* The same for a cache. */
size_t kv_layout_options_of(const struct kv_cache *c, char *buf, size_t n);

#endif
