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
 *   4096     R  record i at 4096 + i*R: u32 position, i32 token, n_layers
 *               rows (latent then RoPE part, the tier's layout), XXH64 of the
 *               record's first R-8 bytes seeded with the salt
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
 *  (8) A refused file (unreadable header, another model/tier/codec) is not
 *      written, truncated or renamed.
 *
 * This module never sees the model: the caller passes a fingerprint and a
 * weights label, and the cache gives the geometry. All file access goes
 * through a struct kv_io (kv/fileio.h). A struct kv_file is not thread-safe.
 */
#ifndef COLIBRI_KV_PERSIST_H
#define COLIBRI_KV_PERSIST_H

#include <stddef.h>
#include <stdint.h>

#include "colibri.h"
#include "kv/cache.h"
#include "kv/fileio.h"

#define KV_FILE_MAGIC        "COLIBRKV"
#define KV_FILE_VERSION      1          /* read and write version this build knows */
#define KV_FILE_HDR_BYTES    256
#define KV_FILE_SLOT_A       512
#define KV_FILE_SLOT_B       1024
#define KV_FILE_SLOT_BYTES   32
#define KV_FILE_RECORDS      4096       /* offset of record 0 */
#define KV_FILE_REC_EXTRA    16         /* position + token + checksum */
#define KV_FILE_WEIGHTS_MAX  48         /* bytes of the weights label, NUL included */
#define KV_FILE_NAME_MAX     16

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

enum kv_file_match {
    KV_FILE_SAME = 0,       /* rows can be used as they are */
    KV_FILE_UPGRADE = 1,    /* an f32/f32 file, the session has another tier: re-encode */
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
int kv_file_open(const struct kv_io *io, const char *path, const struct kv_file_hdr *want,
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
int kv_file_verify(const struct kv_io *io, const char *path, struct kv_file_verify *v,
                   struct colibri_err *err);

#endif
