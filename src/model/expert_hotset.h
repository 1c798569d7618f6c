/* model/expert_hotset.h - the routing counts a streamed expert store learns
 * its pinned hot set from, kept between runs in a small state file.
 *
 * File layout (little-endian), one file per model:
 *   off  size  field
 *     0     8  magic "CLBHOTS1"
 *     8     8  model fingerprint (the one KV files carry, docs/FORMATS.md)
 *    16     4  MoE layers L
 *    20     4  routed experts per layer E
 *    24  4·L·E acquisitions per expert, layer-major (u32, saturating)
 *  24+4LE   8  XXH64 of bytes [0, 24 + 4·L·E), seed 0
 * (1) A file whose size, magic or checksum is wrong is not read
 *     (COLIBRI_EFORMAT), nor one of another model (fingerprint, L or E
 *     differ: COLIBRI_EMISMATCH), each naming the file and what differs; the
 *     caller warns and starts from zero counts, and the next save replaces it.
 * (2) Saves write a temporary file in the same directory (created anew:
 *     O_EXCL, never through a symbolic link), fsync it and rename it over
 *     the old one: a reader sees the old file or the new one. A torn or
 *     partly written file is refused as in (1), never misread.
 * (3) Only a regular file is read: a FIFO, device, socket, directory or
 *     symbolic link at the path is refused at once by kind (COLIBRI_EIO),
 *     without blocking.
 * Every access goes through an io_fs (io/file.h; NULL: the real file
 * system), so tests can fail or tear it.
 * The state directory is never the model's: the caller resolves it
 * (model_hotset_dir). */
#ifndef COLIBRI_MODEL_EXPERT_HOTSET_H
#define COLIBRI_MODEL_EXPERT_HOTSET_H

#include <stddef.h>
#include <stdint.h>

#include "colibri.h"

/* The directory for state files: dir when given, else
 * $XDG_CACHE_HOME/colibri, else $HOME/.cache/colibri (not created here:
 * model_hotset_save creates it). 0, or COLIBRI_EIO when none is known. */
int model_hotset_dir(const char *dir, char *out, size_t n, struct colibri_err *err);
/* out = DIR/experts-<fingerprint as 16 hex digits>.hot */
void model_hotset_path(const char *dir, uint64_t fingerprint, char *out, size_t n);

/* Reads counts[L*E]. COLIBRI_EIO when the file does not exist or cannot be
 * read (err->msg empty when it does not exist), else as in (1); counts
 * untouched on failure. */
struct io_fs;
int model_hotset_load(const struct io_fs *fs, const char *path, uint64_t fingerprint, int L, int E, uint32_t *counts,
                      struct colibri_err *err);
/* Creates the file's directory (with its parents) when missing. */
int model_hotset_save(const struct io_fs *fs, const char *path, uint64_t fingerprint, int L, int E,
                      const uint32_t *counts, struct colibri_err *err);

/* The hot set from counts[L*E] (layer-major): sets pin[x] for at most
 * max_pins experts, the most used first (ties to the lower index), taking
 * only experts used at least min_ratio times as often as the mean expert of
 * their layer (and at least once). Returns how many it pinned. The store
 * (model_expert_stream_pin) and colibri trace's replays both choose with it. */
/* The streamed store's rule (docs/ARCHITECTURE.md, "hot set"): at most
 * HOTSET_MAX_SHARE of the cache's slots, experts at least HOTSET_MIN_RATIO
 * times their layer's mean use. */
#define HOTSET_MAX_SHARE 0.5
#define HOTSET_MIN_RATIO 0.0
int model_hotset_choose(const uint32_t *counts, int L, int E, int max_pins, double min_ratio, unsigned char *pin);

#endif
