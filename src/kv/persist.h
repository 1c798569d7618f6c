/* kv/persist.h - KV caches on disk: the KV file format of docs/FORMATS.md
 * ("KV files"), appending, opening (validate, trim, restore), rewriting in
 * another tier, and verifying.
 *
 * File layout (little-endian; docs/FORMATS.md has every field):
 *      0   256  header: magic "COLIBRKV", write/read version, salt, model
 *               fingerprint, weights label, n_layers, r, dr, tier + name,
 *               RoPE precision + name, codec bits, rotation seeds, row and
 *               record sizes, codec check, XXH64 header checksum at 248
 *    512    32  count slot A: "KVCN", 0, seq, count, XXH64(slot[0,24), salt)
 *   1024    32  count slot B (same); the valid slot with the larger seq holds
 *               the published record count
 *   4096        version 2 only: the part table, n_layers entries of 176 B
 *               (each layer's parts: kind, codec, width, bits, bytes,
 *               offset, seed, codec check), then zeros to records_offset
 *      O     R  record i at O + i*R (O = records_offset: 4096 in version 1):
 *               u32 position, i32 token, n_layers rows (each layer's parts
 *               in its layout), XXH64 of the record's first R-8 bytes seeded
 *               with the salt
 *
 * Versions: a cache whose layers share one layout of latent + RoPE is written
 * as version 1, byte for byte as before version 2 existed (so older builds
 * read it); per-layer layouts and rows with more parts (a DSA index key) are
 * version 2. Both are read.
 *
 * Invariants (kv_file_check() asserts the in-memory ones in debug builds at
 * every state change):
 *  (1) Records are synced before the slot that publishes them is written.
 *  (2) A publish writes the slot not holding the current count, with seq+1;
 *      the current slot is never written.
 *  (3) A count shrinks (divergence) by a publish that is synced before any
 *      record at or past the new count is overwritten.
 *  (4) Nothing at or past the published count is read as data.
 *  (5) Opening keeps records [0, k) where k is the first record that is
 *      missing, cut short, misplaced (position field) or fails its checksum,
 *      and never reads past it; a writer then publishes k and truncates.
 *  (6) The header is written once, at creation, never in place afterwards.
 *  (7) Creation and tier changes write the whole file as PATH.tmp (records,
 *      sync, slot, sync), rename it over PATH and sync the directory.
 *  (8) A refused file (unreadable header, another model/tier/layout/codec)
 *      is not written, truncated or renamed.
 *
 * This module never sees the model: the caller passes a fingerprint and a
 * weights label, and the cache gives the geometry. All file access goes
 * through a struct io_fs (io/file.h). A struct kv_file is not thread-safe.
 */
#ifndef COLIBRI_KV_PERSIST_H
#define COLIBRI_KV_PERSIST_H

#include <stddef.h>
#include <stdint.h>

#include "colibri.h"
#include "kv/cache.h"
#include "io/file.h"

#define KV_FILE_MAGIC        "COLIBRKV"
#define KV_FILE_VERSION      2          /* newest read and write version of cache-row files this build knows */
#define KV_STATE_VERSION     3          /* the state files of kv/persist_state.h */
#define KV_FILE_LAYERS_MAX   256        /* layers a file may have in this build */
#define KV_FILE_LAYER_BYTES  176        /* one layer's entry in the version-2 part table */
#define KV_FILE_PART_BYTES   40         /* one part's slot in it (KV_PARTS_MAX slots) */
#define KV_FILE_HDR_BYTES    256
#define KV_FILE_SLOT_A       512
#define KV_FILE_SLOT_B       1024
#define KV_FILE_SLOT_BYTES   32
#define KV_FILE_RECORDS      4096       /* offset of record 0 */
#define KV_FILE_REC_EXTRA    16         /* position + token + checksum */
#define KV_FILE_WEIGHTS_MAX  48         /* bytes of the weights label, NUL included */
#define KV_FILE_NAME_MAX     16

/* One part of a layer's row, as the file describes it. */
struct kv_file_part {
    uint32_t kind;                      /* enum kv_part_kind */
    uint32_t codec;                     /* enum kv_tier */
    uint32_t dim, bits, bytes, offset;  /* values, codec index bits, encoded bytes, place in the row */
    uint64_t seed;                      /* rotation seed */
    uint64_t check;                     /* probe encoding hash (version 2; 0 when read from version 1) */
};

struct kv_file_layer {
    uint32_t n_parts, row_bytes;
    struct kv_file_part part[KV_PARTS_MAX];
};

struct kv_file_hdr {
    uint16_t write_version, read_version;
    uint64_t salt;
    uint64_t model;                     /* model fingerprint */
    char weights[KV_FILE_WEIGHTS_MAX];
    uint32_t n_layers, r, dr;
    uint32_t tier;                      /* enum kv_tier */
    char tier_name[KV_FILE_NAME_MAX];
    uint32_t rope;                      /* enum kv_rope_prec, resolved */
    char rope_name[KV_FILE_NAME_MAX];
    uint32_t latent_bits, rope_bits;
    uint64_t latent_seed, rope_seed;
    uint32_t latent_bytes, rope_bytes, row_bytes, record_bytes;
    uint64_t codec_check;
    /* Both versions: where records start, and every layer's parts (for
     * version 1 derived from the fields above). Version 2: the table's size
     * and XXH64 (seed 0) as the header records them. In version 2 tier and
     * rope name the most common layer layout and the single-layout fields
     * (bits, seeds, latent/rope/row bytes, codec_check) are 0. */
    uint64_t records_offset;
    uint32_t table_bytes;
    uint64_t table_checksum;
    struct kv_file_layer layer[KV_FILE_LAYERS_MAX];
};

/* The header a file holding `c`'s rows would have. weights: the caller's
 * label (< KV_FILE_WEIGHTS_MAX bytes, else COLIBRI_EINVAL). */
int kv_file_hdr_for(const struct kv_cache *c, uint64_t model, const char *weights, uint64_t salt,
                    struct kv_file_hdr *h, struct colibri_err *err);
void kv_file_hdr_encode(const struct kv_file_hdr *h, uint8_t out[KV_FILE_HDR_BYTES]);
/* Validates everything a header can say about itself (magic, versions,
 * checksum, reserved bytes, names against ids, sizes against each other and
 * against the tier's row layout). COLIBRI_EFORMAT naming the field, or
 * COLIBRI_EUNSUPPORTED for a read version this build does not know. */
int kv_file_hdr_decode(const uint8_t in[KV_FILE_HDR_BYTES], struct kv_file_hdr *h, struct colibri_err *err);
/* Version 2: the part table (h->table_bytes bytes at KV_FILE_RECORDS) into
 * h->layer, validated against the header (checksum, each part's kind, codec,
 * width, size and place, row and record sizes): COLIBRI_EFORMAT naming the
 * layer, part and field. Encode writes h->table_bytes bytes. */
int kv_file_table_decode(const uint8_t *in, struct kv_file_hdr *h, struct colibri_err *err);
void kv_file_table_encode(const struct kv_file_hdr *h, uint8_t *out);
/* "--kv TIER[@...] [--kv-rope P]": the options that give a session the
 * file's layout (kv/layout.h). */
void kv_file_layout_options(const struct kv_file_hdr *h, char *buf, size_t n);

enum kv_file_match {
    KV_FILE_SAME = 0,       /* rows can be used as they are */
    KV_FILE_UPGRADE = 1,    /* every part f32, the session has another layout of the same parts: re-encode */
    KV_FILE_OTHER = 2,      /* refused: why names the field and how to reuse the file */
};
enum kv_file_match kv_file_hdr_match(const struct kv_file_hdr *file, const struct kv_file_hdr *want,
                                     char *why, size_t why_n);

/* What opening found. */
struct kv_file_report {
    uint64_t published;     /* record count the file's slot gave */
    uint64_t kept;          /* valid records from position 0 */
    uint64_t restored;      /* of those, copied into the cache (at most max_tokens) */
    int64_t first_bad;      /* first published record not kept, or -1 */
    uint64_t tail_bytes;    /* bytes past the kept records that were dropped */
    int created;            /* no file existed: an empty one was made */
    int upgraded;           /* rows were re-encoded into the cache's tier */
    int read_only;          /* newer write version: restored, never written */
    char why[256];          /* why first_bad was not kept */
};

struct kv_file;

/* Opens (or creates, when absent) the KV file at path for the cache's owner.
 * want: the header the caller's cache has (kv_file_hdr_for; its salt is used
 * for a file created or rewritten now). Restores records [0, min(kept,
 * max_tokens)) into cache rows and tokens[], trims what invariant (5) does not
 * keep, and reports in *rep. Refusals leave the file untouched (invariant 8)
 * and the cache and tokens unchanged: COLIBRI_EMISMATCH (another model, tier
 * or codec: the message names the field and how to reuse the file),
 * COLIBRI_EFORMAT / EUNSUPPORTED (not a readable KV file), COLIBRI_EIO (I/O,
 * or another writer holds the file). io must outlive *out; path is copied.
 * Release with kv_file_close(). */
int kv_file_open(const struct io_fs *io, const char *path, const struct kv_file_hdr *want,
                 struct kv_cache *cache, int32_t *tokens, int max_tokens, struct kv_file_report *rep,
                 struct kv_file **out, struct colibri_err *err);

/* Makes the file hold exactly positions [0, n) of cache + tokens: keeps the
 * longest prefix already on disk whose records are byte-identical, publishes
 * a shorter count first if the cache diverged (invariant 3), appends the rest
 * (invariant 1). After an upgrade the first save rewrites the whole file in
 * the cache's tier (invariant 7). On failure the file still holds its last
 * published state (or the old file, for a rewrite). */
int kv_file_save(struct kv_file *f, const struct kv_cache *cache, const int32_t *tokens, int n,
                 struct colibri_err *err);

uint64_t kv_file_count(const struct kv_file *f);     /* published records */
void kv_file_close(struct kv_file *f);

/* Walks a file read-only (no lock, nothing written). Returns 0 when the
 * header is readable, with v filled (first_bad -1 when every published
 * record is sound); else the header error of kv_file_hdr_decode, or EIO. */
struct kv_file_verify {
    struct kv_file_hdr hdr;
    uint64_t file_bytes;
    uint64_t seq;           /* of the slot holding the count */
    uint64_t published, valid;
    int64_t first_bad;
    uint64_t tail_bytes;    /* bytes past the published records */
    int read_only;          /* write version newer than this build */
    char why[256];
};
int kv_file_verify(const struct io_fs *io, const char *path, struct kv_file_verify *v,
                   struct colibri_err *err);

#endif
