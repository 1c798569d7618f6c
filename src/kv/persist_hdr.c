/* kv/persist_hdr.c - the KV file header and (version 2) part table:
 * building them for a cache, encoding, decoding with every field validated,
 * and matching a file against a session (docs/FORMATS.md, "KV files").
 *
 *   off  size  field                      off  size  field
 *     0     8  magic "COLIBRKV"           124    16  rope_name
 *     8     2  write_version (1 or 2)     140     4  latent_bits      (v2: 0)
 *    10     2  read_version (1 or 2)      144     4  rope_bits        (v2: 0)
 *    12     4  header_bytes (256)         148     4  reserved (0)
 *    16     8  records_offset             152     8  latent_seed      (v2: 0)
 *    24     8  salt                       160     8  rope_seed        (v2: 0)
 *    32     8  model fingerprint          168     4  latent_bytes     (v2: 0)
 *    40    48  weights label              172     4  rope_bytes       (v2: 0)
 *    88     4  n_layers                   176     4  row_bytes        (v2: 0)
 *    92     4  r                          180     4  record_bytes
 *    96     4  dr                         184     8  codec_check      (v2: 0)
 *   100     4  tier                       192     4  table_bytes      (v1: 0)
 *   104    16  tier_name                  196     4  reserved (0)
 *   120     4  rope                       200     8  table_checksum   (v1: 0)
 *                                         208    40  reserved (0)
 *                                         248     8  XXH64([0,248), seed 0)
 *
 *   part table (v2, at 4096): per layer 0 u32 n_parts, 4 u32 row_bytes,
 *     8 u64 0, then 4 part slots of 40 B at 16: 0 kind, 4 codec, 8 dim,
 *     12 bits, 16 bytes, 20 offset (u32 each), 24 u64 seed, 32 u64 check
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "base/err.h"
#include "kv/layout.h"
#include "kv/persist.h"
#include "kv/persist_bytes.h"

#define KV_PROBE_SEED 0x70726f6265ull  /* "probe" */

static const char *part_name(uint32_t kind)
{
    return kind == KV_PART_LATENT ? "latent" : kind == KV_PART_ROPE ? "rope" : kind == KV_PART_INDEX_KEY ? "index_key" : "?";
}

/* The RoPE precision a RoPE part's codec stands for (kv_rope_tier inverted). */
static enum kv_rope_prec rope_of_codec(uint32_t codec)
{
    for (int p = 0; p < KV_ROPE_COUNT; p++)
        if ((uint32_t)kv_rope_tier((enum kv_rope_prec)p) == codec) return (enum kv_rope_prec)p;
    return KV_ROPE_DEFAULT;
}

static uint64_t records_offset_v2(uint32_t n_layers)
{
    uint64_t t = (uint64_t)n_layers * KV_FILE_LAYER_BYTES;
    return KV_FILE_RECORDS + (t + KV_FILE_RECORDS - 1) / KV_FILE_RECORDS * KV_FILE_RECORDS;
}
/* The probe row of docs/FORMATS.md: x[i] = (XXH64(u32le(i), "probe") >> 40) / 2^24 * 8 - 4. */
static uint64_t codec_check_part(const struct kv_codec *c, XXH64_state_t *st)
{
    float *x = malloc((size_t)c->dim * sizeof *x);
    uint8_t *row = malloc(c->row_bytes);
    if (!x || !row) {
        free(x);
        free(row);
        return 0;
    }
    for (int i = 0; i < c->dim; i++) {
        uint8_t le[4];
        put32(le, (uint32_t)i);
        x[i] = (float)((double)(XXH64(le, 4, KV_PROBE_SEED) >> 40) / 16777216.0 * 8.0 - 4.0);
    }
    kv_codec_encode(c, x, row);
    XXH64_update(st, row, c->row_bytes);
    free(x);
    free(row);
    return 1;
}

/* One part's check: XXH64 (seed 0) of its probe encoding; 0 for no values. */
static uint64_t codec_check_one(const struct kv_codec *c)
{
    if (!c->dim) return 0;
    XXH64_state_t st;
    XXH64_reset(&st, 0);
    return codec_check_part(c, &st) ? XXH64_digest(&st) : 0;
}

int kv_file_hdr_for(const struct kv_cache *c, uint64_t model, const char *weights, uint64_t salt,
                    struct kv_file_hdr *h, struct colibri_err *err)
{
    if (!weights) weights = "";
    if (strlen(weights) >= KV_FILE_WEIGHTS_MAX)
        return base_err_set(err, COLIBRI_EINVAL, "kv file: weights label '%s' is longer than %d bytes", weights,
                       KV_FILE_WEIGHTS_MAX - 1);
    if (c->n_layers > KV_FILE_LAYERS_MAX)
        return base_err_set(err, COLIBRI_EUNSUPPORTED, "kv file: %d layers, more than the %d a KV file holds",
                            c->n_layers, KV_FILE_LAYERS_MAX);
    memset(h, 0, sizeof *h);
    int v1 = c->uniform && c->layer[0].n_parts == 2;
    h->write_version = h->read_version = v1 ? 1 : 2;
    h->salt = salt;
    h->model = model;
    strcpy(h->weights, weights);
    h->n_layers = (uint32_t)c->n_layers;
    h->r = (uint32_t)c->r;
    h->dr = (uint32_t)c->dr;
    /* the most common layer layout names the file (kv_layout_options' base) */
    int base = 0, best = 0;
    for (int l = 0; l < c->n_layers; l++) {
        int n = 0;
        for (int k = 0; k < c->n_layers; k++) n += c->layer[k].tier == c->layer[l].tier && c->layer[k].rope == c->layer[l].rope;
        if (n > best) best = n, base = l;
    }
    const struct kv_layer *L = &c->layer[base];
    h->tier = (uint32_t)L->tier;
    snprintf(h->tier_name, sizeof h->tier_name, "%s", kv_tier_name(L->tier));
    h->rope = (uint32_t)L->rope;
    snprintf(h->rope_name, sizeof h->rope_name, "%s", kv_rope_name(L->rope));
    uint64_t record = KV_FILE_REC_EXTRA;
    for (int l = 0; l < c->n_layers; l++) {
        const struct kv_layer *Y = &c->layer[l];
        struct kv_file_layer *fl = &h->layer[l];
        fl->n_parts = (uint32_t)Y->n_parts;
        fl->row_bytes = (uint32_t)Y->row_bytes;
        for (int i = 0; i < Y->n_parts; i++) {
            const struct kv_part *p = &Y->parts[i];
            /* a RoPE part of no values still records its precision */
            uint32_t codec = p->kind == KV_PART_ROPE ? (uint32_t)kv_rope_tier(Y->rope) : (uint32_t)p->codec->tier;
            fl->part[i] = (struct kv_file_part){ (uint32_t)p->kind, codec, (uint32_t)p->dim,
                                                 p->dim ? (uint32_t)p->codec->bits : 0, (uint32_t)p->bytes,
                                                 (uint32_t)p->offset, p->dim ? p->codec->rot.seed : 0, 0 };
            if (!v1 && p->dim && !(fl->part[i].check = codec_check_one(p->codec)))
                return base_err_set(err, COLIBRI_ENOMEM, "kv file: out of memory for the codec check");
        }
        record += Y->row_bytes;
    }
    h->record_bytes = (uint32_t)record;
    if (!v1) {
        h->records_offset = records_offset_v2(h->n_layers);
        h->table_bytes = h->n_layers * KV_FILE_LAYER_BYTES;
        uint8_t *t = malloc(h->table_bytes);
        if (!t) return base_err_set(err, COLIBRI_ENOMEM, "kv file: out of memory for the part table");
        kv_file_table_encode(h, t);
        h->table_checksum = XXH64(t, h->table_bytes, 0);
        free(t);
        return 0;
    }
    h->records_offset = KV_FILE_RECORDS;
    h->latent_bits = (uint32_t)L->lat.bits;
    h->rope_bits = c->dr > 0 ? (uint32_t)L->pe.bits : 0;
    h->latent_seed = KV_SEED_LATENT;
    h->rope_seed = KV_SEED_ROPE;
    h->latent_bytes = (uint32_t)L->lat_bytes;
    h->rope_bytes = (uint32_t)L->rope_bytes;
    h->row_bytes = (uint32_t)L->row_bytes;
    XXH64_state_t st;
    XXH64_reset(&st, 0);
    if (!codec_check_part(&L->lat, &st) || (c->dr > 0 && !codec_check_part(&L->pe, &st)))
        return base_err_set(err, COLIBRI_ENOMEM, "kv file: out of memory for the codec check");
    h->codec_check = XXH64_digest(&st);
    return 0;
}

void kv_file_hdr_encode(const struct kv_file_hdr *h, uint8_t out[KV_FILE_HDR_BYTES])
{
    memset(out, 0, KV_FILE_HDR_BYTES);
    memcpy(out, KV_FILE_MAGIC, 8);
    put16(out + 8, h->write_version);
    put16(out + 10, h->read_version);
    put32(out + 12, KV_FILE_HDR_BYTES);
    put64(out + 16, h->records_offset);
    put64(out + 24, h->salt);
    put64(out + 32, h->model);
    memcpy(out + 40, h->weights, KV_FILE_WEIGHTS_MAX);
    put32(out + 88, h->n_layers);
    put32(out + 92, h->r);
    put32(out + 96, h->dr);
    put32(out + 100, h->tier);
    memcpy(out + 104, h->tier_name, KV_FILE_NAME_MAX);
    put32(out + 120, h->rope);
    memcpy(out + 124, h->rope_name, KV_FILE_NAME_MAX);
    put32(out + 140, h->latent_bits);
    put32(out + 144, h->rope_bits);
    put64(out + 152, h->latent_seed);
    put64(out + 160, h->rope_seed);
    put32(out + 168, h->latent_bytes);
    put32(out + 172, h->rope_bytes);
    put32(out + 176, h->row_bytes);
    put32(out + 180, h->record_bytes);
    put64(out + 184, h->codec_check);
    put32(out + 192, h->table_bytes);
    put64(out + 200, h->table_checksum);
    put64(out + 248, XXH64(out, 248, 0));
}

void kv_file_table_encode(const struct kv_file_hdr *h, uint8_t *out)
{
    memset(out, 0, h->table_bytes);
    for (uint32_t l = 0; l < h->n_layers && (l + 1) * KV_FILE_LAYER_BYTES <= h->table_bytes; l++) {
        uint8_t *e = out + (size_t)l * KV_FILE_LAYER_BYTES;
        const struct kv_file_layer *fl = &h->layer[l];
        put32(e, fl->n_parts);
        put32(e + 4, fl->row_bytes);
        for (uint32_t i = 0; i < fl->n_parts && i < KV_PARTS_MAX; i++) {
            uint8_t *p = e + 16 + (size_t)i * KV_FILE_PART_BYTES;
            const struct kv_file_part *q = &fl->part[i];
            put32(p, q->kind);
            put32(p + 4, q->codec);
            put32(p + 8, q->dim);
            put32(p + 12, q->bits);
            put32(p + 16, q->bytes);
            put32(p + 20, q->offset);
            put64(p + 24, q->seed);
            put64(p + 32, q->check);
        }
    }
}

/* Version 2's header rules (the table is checked by kv_file_table_decode). */
static int hdr_decode_v2(const struct kv_file_hdr *d, struct colibri_err *err)
{
    const struct { const char *name; uint64_t v; } zero[] = {
        { "latent_bits", d->latent_bits }, { "rope_bits", d->rope_bits },     { "latent_seed", d->latent_seed },
        { "rope_seed", d->rope_seed },     { "latent_bytes", d->latent_bytes }, { "rope_bytes", d->rope_bytes },
        { "row_bytes", d->row_bytes },     { "codec_check", d->codec_check },
    };
    for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++)
        if (zero[i].v)
            return base_err_set(err, COLIBRI_EFORMAT, "%s %#llx: version 2 keeps it in the part table (must be 0)",
                                zero[i].name, (unsigned long long)zero[i].v);
    if (d->table_bytes != d->n_layers * KV_FILE_LAYER_BYTES)
        return base_err_set(err, COLIBRI_EFORMAT, "table_bytes %u: %u layers x %d = %u", d->table_bytes, d->n_layers,
                            KV_FILE_LAYER_BYTES, d->n_layers * KV_FILE_LAYER_BYTES);
    if (d->record_bytes <= KV_FILE_REC_EXTRA || d->record_bytes > (1u << 30))
        return base_err_set(err, COLIBRI_EFORMAT, "record_bytes %u", d->record_bytes);
    return 0;
}

/* A NUL-terminated, NUL-padded text field. */
static int text_ok(const uint8_t *p, size_t n)
{
    size_t len = strnlen((const char *)p, n);
    return len < n && all_zero(p + len, n - len);
}

int kv_file_hdr_decode(const uint8_t in[KV_FILE_HDR_BYTES], struct kv_file_hdr *h, struct colibri_err *err)
{
    if (memcmp(in, KV_FILE_MAGIC, 8))
        return base_err_set(err, COLIBRI_EFORMAT, "magic: not a colibri KV file (no \"%s\" at offset 0)", KV_FILE_MAGIC);
    struct kv_file_hdr *hd = h;
    memset(hd, 0, sizeof *hd);
#define d (*hd)
    d.write_version = get16(in + 8);
    d.read_version = get16(in + 10);
    if (d.read_version == KV_STATE_VERSION)
        return base_err_set(err, COLIBRI_EMISMATCH, "read_version %u: a DeepSeek-V4 state file (window, compressed "
                            "entries, snapshots: kv/persist_state.h), not cache rows; only a DeepSeek-V4 session "
                            "opens it", d.read_version);
    if (d.read_version > KV_FILE_VERSION)
        return base_err_set(err, COLIBRI_EUNSUPPORTED,
                       "read_version %u: written by a newer colibri (this build reads version %d)",
                       d.read_version, KV_FILE_VERSION);
    if (XXH64(in, 248, 0) != get64(in + 248))
        return base_err_set(err, COLIBRI_EFORMAT, "header_checksum: header bytes [0, 248) do not match it (damaged header)");
    if (d.read_version == 0 || d.write_version == 0)
        return base_err_set(err, COLIBRI_EFORMAT, "%s is 0", d.read_version ? "write_version" : "read_version");
    if (get32(in + 12) != KV_FILE_HDR_BYTES)
        return base_err_set(err, COLIBRI_EFORMAT, "header_bytes %u (version 1 has %d)", get32(in + 12), KV_FILE_HDR_BYTES);
    const int v2 = d.read_version >= 2;
    d.n_layers = get32(in + 88);
    d.records_offset = get64(in + 16);
    if (!v2 && d.records_offset != KV_FILE_RECORDS)
        return base_err_set(err, COLIBRI_EFORMAT, "records_offset %llu (version 1 has %d)",
                       (unsigned long long)d.records_offset, KV_FILE_RECORDS);
    if (!v2 && (!all_zero(in + 148, 4) || !all_zero(in + 192, 56)))
        return base_err_set(err, COLIBRI_EFORMAT, "reserved: bytes at 148 or 192..247 are not zero");
    if (v2 && (!all_zero(in + 148, 4) || !all_zero(in + 196, 4) || !all_zero(in + 208, 40)))
        return base_err_set(err, COLIBRI_EFORMAT, "reserved: bytes at 148, 196..199 or 208..247 are not zero");
    if (d.n_layers == 0 || d.n_layers > KV_FILE_LAYERS_MAX)
        return base_err_set(err, COLIBRI_EFORMAT, "n_layers %u (1 to %d)", d.n_layers, KV_FILE_LAYERS_MAX);
    if (v2 && d.records_offset != records_offset_v2(d.n_layers))
        return base_err_set(err, COLIBRI_EFORMAT, "records_offset %llu (a read_version 2 file with %u layers has %llu)",
                            (unsigned long long)d.records_offset, d.n_layers,
                            (unsigned long long)records_offset_v2(d.n_layers));
    d.salt = get64(in + 24);
    d.model = get64(in + 32);
    if (!text_ok(in + 40, KV_FILE_WEIGHTS_MAX))
        return base_err_set(err, COLIBRI_EFORMAT, "weights: not a NUL-padded string");
    memcpy(d.weights, in + 40, KV_FILE_WEIGHTS_MAX);
    d.r = get32(in + 92);
    d.dr = get32(in + 96);
    d.tier = get32(in + 100);
    d.rope = get32(in + 120);
    if (!text_ok(in + 104, KV_FILE_NAME_MAX)) return base_err_set(err, COLIBRI_EFORMAT, "tier_name: not a NUL-padded string");
    if (!text_ok(in + 124, KV_FILE_NAME_MAX)) return base_err_set(err, COLIBRI_EFORMAT, "rope_name: not a NUL-padded string");
    memcpy(d.tier_name, in + 104, KV_FILE_NAME_MAX);
    memcpy(d.rope_name, in + 124, KV_FILE_NAME_MAX);
    d.latent_bits = get32(in + 140);
    d.rope_bits = get32(in + 144);
    d.latent_seed = get64(in + 152);
    d.rope_seed = get64(in + 160);
    d.latent_bytes = get32(in + 168);
    d.rope_bytes = get32(in + 172);
    d.row_bytes = get32(in + 176);
    d.record_bytes = get32(in + 180);
    d.codec_check = get64(in + 184);
    d.table_bytes = get32(in + 192);
    d.table_checksum = get64(in + 200);

    if (d.tier >= KV_TIER_COUNT)
        return base_err_set(err, COLIBRI_EFORMAT, "tier %u ('%s'): unknown to this build", d.tier, d.tier_name);
    if (strcmp(d.tier_name, kv_tier_name((enum kv_tier)d.tier)))
        return base_err_set(err, COLIBRI_EFORMAT, "tier_name '%s' does not name tier %u (%s)", d.tier_name, d.tier,
                       kv_tier_name((enum kv_tier)d.tier));
    if (d.rope >= KV_ROPE_COUNT)
        return base_err_set(err, COLIBRI_EFORMAT, "rope %u ('%s'): unknown to this build", d.rope, d.rope_name);
    if (strcmp(d.rope_name, kv_rope_name((enum kv_rope_prec)d.rope)))
        return base_err_set(err, COLIBRI_EFORMAT, "rope_name '%s' does not name rope precision %u (%s)", d.rope_name,
                       d.rope, kv_rope_name((enum kv_rope_prec)d.rope));
    if (v2) return hdr_decode_v2(hd, err);
    size_t lat = kv_tier_row_bytes((enum kv_tier)d.tier, d.r > KV_DIM_MAX ? 0 : (int)d.r);
    if (!lat) return base_err_set(err, COLIBRI_EFORMAT, "r %u: not a width tier %s takes", d.r, d.tier_name);
    if (d.latent_bytes != lat)
        return base_err_set(err, COLIBRI_EFORMAT, "latent_bytes %u: tier %s at r = %u has %zu", d.latent_bytes,
                       d.tier_name, d.r, lat);
    size_t rope = 0;
    if (d.dr) {
        enum kv_tier rt = kv_rope_tier((enum kv_rope_prec)d.rope);
        if (!(rope = kv_tier_row_bytes(rt, d.dr > KV_DIM_MAX ? 0 : (int)d.dr)))
            return base_err_set(err, COLIBRI_EFORMAT, "dr %u: not a width RoPE precision %s takes", d.dr, d.rope_name);
    }
    if (d.rope_bytes != rope)
        return base_err_set(err, COLIBRI_EFORMAT, "rope_bytes %u: RoPE precision %s at dr = %u has %zu", d.rope_bytes,
                       d.rope_name, d.dr, rope);
    if (d.row_bytes != (uint64_t)d.latent_bytes + d.rope_bytes)
        return base_err_set(err, COLIBRI_EFORMAT, "row_bytes %u != latent_bytes %u + rope_bytes %u", d.row_bytes,
                       d.latent_bytes, d.rope_bytes);
    uint64_t rec = KV_FILE_REC_EXTRA + (uint64_t)d.n_layers * d.row_bytes;
    if (d.record_bytes != rec || rec > (1u << 30))
        return base_err_set(err, COLIBRI_EFORMAT, "record_bytes %u: 16 + n_layers %u x row_bytes %u = %llu",
                       d.record_bytes, d.n_layers, d.row_bytes, (unsigned long long)rec);
    /* the part table a version-1 file implies */
    for (uint32_t l = 0; l < d.n_layers; l++) {
        struct kv_file_layer *fl = &d.layer[l];
        fl->n_parts = 2;
        fl->row_bytes = d.row_bytes;
        fl->part[0] = (struct kv_file_part){ KV_PART_LATENT, d.tier, d.r, d.latent_bits, d.latent_bytes, 0,
                                             d.latent_seed, 0 };
        fl->part[1] = (struct kv_file_part){ KV_PART_ROPE, (uint32_t)kv_rope_tier((enum kv_rope_prec)d.rope), d.dr,
                                             d.rope_bits, d.rope_bytes, d.latent_bytes, d.rope_seed, 0 };
    }
    return 0;
#undef d
}

/* A part slot of layer l as the file gives it, checked against what the
 * header and its place in the row allow. */
static int part_decode(const uint8_t *p, const struct kv_file_hdr *h, uint32_t l, uint32_t i, uint32_t n_parts,
                       uint32_t at, struct kv_file_part *q, struct colibri_err *err)
{
    *q = (struct kv_file_part){ get32(p), get32(p + 4), get32(p + 8), get32(p + 12), get32(p + 16), get32(p + 20),
                                get64(p + 24), get64(p + 32) };
    const uint32_t want_kind = i == 0 ? KV_PART_LATENT : i == 1 ? KV_PART_ROPE : KV_PART_INDEX_KEY;
    if (q->kind != want_kind)
        return base_err_set(err, COLIBRI_EFORMAT, "part table layer %u part %u: kind %u (this place holds %s; "
                            "n_parts %u)", l, i, q->kind, part_name(want_kind), n_parts);
    const char *pn = part_name(q->kind);
    if (q->codec >= KV_TIER_COUNT)
        return base_err_set(err, COLIBRI_EFORMAT, "part table layer %u %s part: codec %u unknown to this build", l, pn,
                            q->codec);
    if (q->kind == KV_PART_ROPE && rope_of_codec(q->codec) == KV_ROPE_DEFAULT)
        return base_err_set(err, COLIBRI_EFORMAT, "part table layer %u rope part: codec %s is no RoPE precision", l,
                            kv_tier_name((enum kv_tier)q->codec));
    uint32_t want_dim = q->kind == KV_PART_LATENT ? h->r : q->kind == KV_PART_ROPE ? h->dr : q->dim;
    if (q->dim != want_dim || (q->kind == KV_PART_INDEX_KEY && (q->dim == 0 || q->dim > KV_DIM_MAX)))
        return base_err_set(err, COLIBRI_EFORMAT, "part table layer %u %s part: dim %u (the header says %u)", l, pn,
                            q->dim, want_dim);
    size_t bytes = q->dim ? kv_tier_row_bytes((enum kv_tier)q->codec, (int)q->dim) : 0;
    if ((q->dim && !bytes) || q->bytes != bytes)
        return base_err_set(err, COLIBRI_EFORMAT, "part table layer %u %s part: bytes %u (%s at %u values has %zu)", l,
                            pn, q->bytes, kv_tier_name((enum kv_tier)q->codec), q->dim, bytes);
    if (q->offset != at)
        return base_err_set(err, COLIBRI_EFORMAT, "part table layer %u %s part: offset %u (it follows at %u)", l, pn,
                            q->offset, at);
    if (!q->dim && (q->bits || q->seed || q->check))
        return base_err_set(err, COLIBRI_EFORMAT, "part table layer %u %s part: bits, seed and check of no values "
                            "must be 0", l, pn);
    return 0;
}

int kv_file_table_decode(const uint8_t *in, struct kv_file_hdr *h, struct colibri_err *err)
{
    if (XXH64(in, h->table_bytes, 0) != h->table_checksum)
        return base_err_set(err, COLIBRI_EFORMAT, "table_checksum: the part table does not match it (damaged table)");
    uint64_t record = KV_FILE_REC_EXTRA;
    for (uint32_t l = 0; l < h->n_layers; l++) {
        const uint8_t *e = in + (size_t)l * KV_FILE_LAYER_BYTES;
        struct kv_file_layer *fl = &h->layer[l];
        memset(fl, 0, sizeof *fl);
        fl->n_parts = get32(e);
        fl->row_bytes = get32(e + 4);
        if (fl->n_parts < 2 || fl->n_parts > KV_PARTS_MAX)
            return base_err_set(err, COLIBRI_EFORMAT, "part table layer %u: n_parts %u (2 to %d)", l, fl->n_parts,
                                KV_PARTS_MAX);
        if (!all_zero(e + 8, 8))
            return base_err_set(err, COLIBRI_EFORMAT, "part table layer %u: reserved bytes are not zero", l);
        uint32_t at = 0;
        for (uint32_t i = 0; i < KV_PARTS_MAX; i++) {
            const uint8_t *p = e + 16 + (size_t)i * KV_FILE_PART_BYTES;
            if (i >= fl->n_parts) {
                if (!all_zero(p, KV_FILE_PART_BYTES))
                    return base_err_set(err, COLIBRI_EFORMAT, "part table layer %u: unused part slot %u is not zero", l,
                                        i);
                continue;
            }
            int rc = part_decode(p, h, l, i, fl->n_parts, at, &fl->part[i], err);
            if (rc) return rc;
            at += fl->part[i].bytes;
        }
        if (fl->row_bytes != at)
            return base_err_set(err, COLIBRI_EFORMAT, "part table layer %u: row_bytes %u, its parts sum to %u", l,
                                fl->row_bytes, at);
        record += at;
    }
    if (h->record_bytes != record)
        return base_err_set(err, COLIBRI_EFORMAT, "record_bytes %u: 16 + the layers' row bytes = %llu", h->record_bytes,
                            (unsigned long long)record);
    return 0;
}

void kv_file_layout_options(const struct kv_file_hdr *h, char *buf, size_t n)
{
    enum kv_tier t[KV_FILE_LAYERS_MAX];
    enum kv_rope_prec r[KV_FILE_LAYERS_MAX];
    uint32_t L = h->n_layers < KV_FILE_LAYERS_MAX ? h->n_layers : KV_FILE_LAYERS_MAX;
    for (uint32_t l = 0; l < L; l++) {
        t[l] = (enum kv_tier)h->layer[l].part[0].codec;
        r[l] = rope_of_codec(h->layer[l].part[1].codec);
    }
    kv_layout_options(t, r, (int)L, buf, n);
}

/* 1 if every part of every layer of the file is f32 and the session has the
 * same parts (kinds and widths) in each layer: rows can be re-encoded. */
static int upgradable(const struct kv_file_hdr *f, const struct kv_file_hdr *w)
{
    for (uint32_t l = 0; l < f->n_layers; l++) {
        const struct kv_file_layer *a = &f->layer[l], *b = &w->layer[l];
        if (a->n_parts != b->n_parts) return 0;
        for (uint32_t i = 0; i < a->n_parts; i++)
            if (a->part[i].codec != KV_TIER_F32 || a->part[i].kind != b->part[i].kind || a->part[i].dim != b->part[i].dim)
                return 0;
    }
    return 1;
}

/* Layer by layer, part by part, when either side is version 2: the first
 * difference is named with its layer and part. */
static enum kv_file_match layout_match(const struct kv_file_hdr *f, const struct kv_file_hdr *w, char *why,
                                       size_t why_n)
{
    char saved[160];
    kv_file_layout_options(f, saved, sizeof saved);
    int both_v2 = f->read_version >= 2 && w->read_version >= 2;
    int same_codecs = 1;
    for (uint32_t l = 0; l < f->n_layers && same_codecs; l++)
        for (uint32_t i = 0; i < f->layer[l].n_parts && i < w->layer[l].n_parts; i++)
            same_codecs &= f->layer[l].part[i].codec == w->layer[l].part[i].codec;
    if (!same_codecs && upgradable(f, w)) return KV_FILE_UPGRADE;
    /* what the rows hold (parts, kinds, widths) in every layer first, then how they are coded */
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t l = 0; l < f->n_layers; l++) {
            const struct kv_file_layer *a = &f->layer[l], *b = &w->layer[l];
            for (uint32_t i = 0; i < a->n_parts || i < b->n_parts; i++) {
                const struct kv_file_part *p = &a->part[i], *q = &b->part[i];
                int differ = i >= a->n_parts || i >= b->n_parts || p->kind != q->kind || p->dim != q->dim;
                if (!pass && !differ) continue;
                if (differ) {
                    char fa[48] = "nothing", wa[48] = "nothing";
                    if (i < a->n_parts) snprintf(fa, sizeof fa, "%s of %u values", part_name(p->kind), p->dim);
                    if (i < b->n_parts) snprintf(wa, sizeof wa, "%s of %u values", part_name(q->kind), q->dim);
                    snprintf(why, why_n,
                             "layer %u part %u: the file's rows hold %s there, this model's %s; run the model that wrote "
                             "it to reuse it",
                             l, i, fa, wa);
                    return KV_FILE_OTHER;
                }
                const char *pn = part_name(p->kind);
                if (p->codec != q->codec) {
                    int rope = p->kind == KV_PART_ROPE;
                    snprintf(why, why_n, "layer %u %s part: saved as %s, this session has %s; saved with %s; run with %s "
                             "to reuse it",
                             l, pn, rope ? kv_rope_name(rope_of_codec(p->codec)) : kv_tier_name((enum kv_tier)p->codec),
                             rope ? kv_rope_name(rope_of_codec(q->codec)) : kv_tier_name((enum kv_tier)q->codec), saved,
                             saved);
                    return KV_FILE_OTHER;
                }
                const struct { const char *name; uint64_t a, b; } codec[] = {
                    { "bits", p->bits, q->bits }, { "seed", p->seed, q->seed }, { "bytes", p->bytes, q->bytes },
                    { "check", both_v2 ? p->check : 0, both_v2 ? q->check : 0 },
                };
                for (size_t k = 0; k < sizeof codec / sizeof codec[0]; k++)
                    if (codec[k].a != codec[k].b) {
                        snprintf(why, why_n,
                                 "layer %u %s part: %s: the file has %#llx, this build %#llx: its %s rows come from another "
                                 "codec version and cannot be reused; delete it to start a new one",
                                 l, pn, codec[k].name, (unsigned long long)codec[k].a, (unsigned long long)codec[k].b,
                                 kv_tier_name((enum kv_tier)p->codec));
                        return KV_FILE_OTHER;
                    }
            }
        }
    }
    if (f->record_bytes != w->record_bytes) {
        snprintf(why, why_n, "record_bytes: the file has %u, this session %u", f->record_bytes, w->record_bytes);
        return KV_FILE_OTHER;
    }
    return KV_FILE_SAME;
}

enum kv_file_match kv_file_hdr_match(const struct kv_file_hdr *f, const struct kv_file_hdr *w, char *why,
                                     size_t why_n)
{
    if (f->model != w->model) {
        snprintf(why, why_n,
                 "model: saved by another model (fingerprint %016llx; this model's is %016llx); run that model to "
                 "reuse it",
                 (unsigned long long)f->model, (unsigned long long)w->model);
        return KV_FILE_OTHER;
    }
    if (strcmp(f->weights, w->weights)) {
        snprintf(why, why_n,
                 "weights: saved with weights '%s', this run has '%s'; load the model with those formats "
                 "(--experts/--dense/--embed) to reuse it",
                 f->weights, w->weights);
        return KV_FILE_OTHER;
    }
    const struct { const char *name; uint64_t a, b; } dims[] = {
        { "n_layers", f->n_layers, w->n_layers }, { "r", f->r, w->r }, { "dr", f->dr, w->dr },
    };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i].a != dims[i].b) {
            snprintf(why, why_n, "%s: the file has %llu, this model %llu; run the model that wrote it to reuse it",
                     dims[i].name, (unsigned long long)dims[i].a, (unsigned long long)dims[i].b);
            return KV_FILE_OTHER;
        }
    if (f->read_version >= 2 || w->read_version >= 2) return layout_match(f, w, why, why_n);
    if (f->tier != w->tier || f->rope != w->rope) {
        if (f->tier == KV_TIER_F32 && f->rope == KV_ROPE_F32) return KV_FILE_UPGRADE;
        if (f->tier != w->tier)
            snprintf(why, why_n, "tier: saved with --kv %s; run with --kv %s to reuse it", f->tier_name, f->tier_name);
        else
            snprintf(why, why_n, "rope: saved with --kv %s --kv-rope %s; run with --kv-rope %s to reuse it",
                     f->tier_name, f->rope_name, f->rope_name);
        return KV_FILE_OTHER;
    }
    const struct { const char *name; uint64_t a, b; } codec[] = {
        { "latent_bits", f->latent_bits, w->latent_bits },   { "rope_bits", f->rope_bits, w->rope_bits },
        { "latent_seed", f->latent_seed, w->latent_seed },   { "rope_seed", f->rope_seed, w->rope_seed },
        { "latent_bytes", f->latent_bytes, w->latent_bytes }, { "rope_bytes", f->rope_bytes, w->rope_bytes },
        { "row_bytes", f->row_bytes, w->row_bytes },          { "record_bytes", f->record_bytes, w->record_bytes },
        { "codec_check", f->codec_check, w->codec_check },
    };
    for (size_t i = 0; i < sizeof codec / sizeof codec[0]; i++)
        if (codec[i].a != codec[i].b) {
            snprintf(why, why_n,
                     "%s: the file has %#llx, this build %#llx: its %s rows come from another codec version and "
                     "cannot be reused; delete it to start a new one",
                     codec[i].name, (unsigned long long)codec[i].a, (unsigned long long)codec[i].b, f->tier_name);
            return KV_FILE_OTHER;
        }
    return KV_FILE_SAME;
}

