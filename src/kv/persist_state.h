/* kv/persist_state.h - KV files of version 3 (docs/FORMATS.md, "KV files,
 * version 3"): the cache of a model whose token mixer keeps a state that
 * only goes forward (DeepSeek-V4: a window ring, compressor blocks, and
 * append-only rows: compressed entries, indexer keys).
 *
 * Such a state cannot be rebuilt from per-position rows, so the file is a
 * chain of chunks, each covering positions [p0, p1): their token ids, the
 * rows the state's arrays gained in them (array a holds p / ratio_a rows at
 * position p), and the state's snapshot at p1 (model/parts.h snap_save, all
 * layers back to back). Restoring reads the chunks' tokens and rows into the
 * session's arrays and hands each chunk's snapshot to the caller, whose
 * state resumes from the last one; a new prompt goes back to the last chunk
 * end within its common prefix: a save writes a chunk ending at each
 * snapshot the caller holds past the file's end, then one at its position.
 *
 * The header, count slots and crash safety are those of the row files
 * (kv/persist.h invariants (1)-(8), with "record" read as "chunk"): chunks
 * are synced before the count that publishes them; a diverged session
 * publishes the shorter count before a chunk at or past it is overwritten;
 * opening keeps the chunks before the first missing, cut short, misplaced
 * or failing its checksum, and trims the rest; creation writes PATH.tmp and
 * renames it over PATH; a refused file is never written. Everything that
 * differs (model, weights, tier, index tier, layer count, a layer's kind,
 * snapshot or row sizes or ratios, version) is refused naming the field. A
 * file without an index tier (written before the field) is read when its
 * row sizes match: its index keys were f32 or fp8, which differ in size. A file whose
 * write_version is newer is restored, never written.
 *
 * This module never sees the model: the caller gives the layout and its
 * memory. Not thread-safe. */
#ifndef COLIBRI_KV_PERSIST_STATE_H
#define COLIBRI_KV_PERSIST_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "colibri.h"
#include "io/file.h"
#include "kv/persist.h"

#define KV_STATE_ARRAYS      2
#define KV_STATE_LAYER_BYTES 32         /* one layer's entry in the layer table */
#define KV_STATE_CHUNK_HEAD  32

struct kv_state_layer {
    uint32_t kind;                      /* the mixer's layer kind (DeepSeek-V4: 0 sliding, 1 CSA, 2 HCA) */
    uint32_t snap_bytes;                /* this layer's part of a snapshot */
    uint32_t n_arrays;                  /* 0 to KV_STATE_ARRAYS */
    uint32_t row_bytes[KV_STATE_ARRAYS];
    uint32_t ratio[KV_STATE_ARRAYS];    /* positions per row */
};

struct kv_state_hdr {
    uint16_t write_version, read_version;
    uint64_t records_offset, salt, model;
    char weights[KV_FILE_WEIGHTS_MAX];
    char tier[KV_FILE_NAME_MAX];        /* the state's KV tier name */
    char index_tier[KV_FILE_NAME_MAX];  /* the index keys' tier name (--kv-index); "" when no layer keeps them */
    uint32_t n_layers, table_bytes;
    uint64_t snap_bytes;                /* the sum of the layers' */
    uint64_t table_checksum;
    struct kv_state_layer layer[KV_FILE_LAYERS_MAX];
};

/* Fills the derived fields of h (versions, table size and offset, snapshot
 * sum) from n_layers and layer[]; COLIBRI_EINVAL naming a bad field. */
int kv_state_hdr_finish(struct kv_state_hdr *h, struct colibri_err *err);

/* The session's memory the file reads into (open) and writes from (save). */
struct kv_state_mem {
    int32_t *tokens;
    int max_tokens;                     /* positions the session holds at most */
    uint8_t *rows[KV_FILE_LAYERS_MAX][KV_STATE_ARRAYS];
    uint32_t cap[KV_FILE_LAYERS_MAX][KV_STATE_ARRAYS];   /* rows each array holds at most */
};

/* Called for each restored chunk in order with the snapshot at its end. */
typedef int (*kv_state_snap_fn)(void *ctx, uint64_t pos, const uint8_t *snap, struct colibri_err *err);

struct kv_state_report {
    uint64_t published, kept;           /* chunks the count slot gave; sound from the first */
    uint64_t restored;                  /* of those, restored */
    uint64_t positions;                 /* the last restored chunk's end */
    int64_t first_bad;                  /* first published chunk not kept, or -1 */
    int created, read_only;
    char why[256];
};

struct kv_state_file;

/* Opens (creating when absent) the version-3 file at path for a session of
 * layout `want` (kv_state_hdr_finish; its salt is used for a file created
 * now), restores its sound chunks that fit m into m, calling on_snap for
 * each, trims the rest. Refusals leave the file untouched: COLIBRI_EMISMATCH
 * (another model, weights, tier or layout, or a file of cache rows),
 * COLIBRI_EFORMAT / EUNSUPPORTED (not a readable file, a newer read
 * version), COLIBRI_EIO. */
int kv_state_open(const struct io_fs *io, const char *path, const struct kv_state_hdr *want,
                  const struct kv_state_mem *m, kv_state_snap_fn on_snap, void *ctx, struct kv_state_report *rep,
                  struct kv_state_file **out, struct colibri_err *err);

/* Makes the file hold positions [0, n) of m, n = pos[n_snaps - 1]: keeps
 * the chunks whose tokens m still has, publishes a shorter count first when
 * m diverged, then appends a chunk ending at each pos[i] (ascending) past
 * the last kept chunk's end, with snap[i], the state there (snap_bytes). */
int kv_state_save(struct kv_state_file *f, const struct kv_state_mem *m, const int *pos, const uint8_t *const *snap,
                  int n_snaps, struct colibri_err *err);
uint64_t kv_state_count(const struct kv_state_file *f);

/* Walks a version-3 file read-only (no lock, nothing written): 0 with v
 * filled when the header and table are readable (first_bad -1 when every
 * published chunk is sound), else their refusal (COLIBRI_EMISMATCH for a
 * file of cache rows, read_version 1 or 2). */
struct kv_state_verify {
    struct kv_state_hdr hdr;
    uint64_t file_bytes, published, kept;   /* chunks */
    uint64_t positions;                     /* the last sound chunk's end */
    uint64_t tail_bytes;                    /* bytes past the sound chunks */
    int64_t first_bad;                      /* first published chunk not sound, or -1 */
    int read_only;
    char why[256];
};
int kv_state_verify(const struct io_fs *io, const char *path, struct kv_state_verify *v, struct colibri_err *err);
void kv_state_close(struct kv_state_file *f);

#endif
