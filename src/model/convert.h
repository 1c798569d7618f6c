/* model/convert.h - `colibri convert`: rewrite a checkpoint with its weights in
 * chosen formats, as a container that is itself safetensors.
 *
 * Container layout (readable by any safetensors tool):
 *  - f32 / bf16 / f16 weights: the plain F32 / BF16 / F16 tensor.
 *  - fp8b weights: F8_E4M3 `<name>` + F32 `<name>_scale_inv` [ceil(rows/128),
 *    ceil(cols/128)], exactly DeepSeek's layout.
 *  - q8 / q4 / q4gG weights: U8 `<name>` [rows, row bytes] holding the packed
 *    rows of quant/format.h, F32 `<name>_scale` [n_scales], and in the shard's
 *    __metadata__ the key "colibri.fmt.<name>" = the format name.
 *  - everything else (norms, router, biases, fused experts, weights whose role
 *    keeps its stored format) is copied byte for byte.
 * Shards are `model-NNNNN-of-NNNNN.safetensors` plus model.safetensors.index.json;
 * config.json and the tokenizer files are copied. Each shard is written to a
 * temporary file, fsynced and renamed, and records in its metadata a hash of
 * the plan that produced it ("colibri.plan"): a rerun with the same source and
 * options keeps finished shards (resume), anything else rewrites them. After
 * writing, every written tensor is read back and its xxHash compared. */
#ifndef COLIBRI_MODEL_CONVERT_H
#define COLIBRI_MODEL_CONVERT_H

#include <stdint.h>

#include "colibri.h"
#include "io/file.h"
#include "model/model.h"

struct convert_opts {
    struct model_load_opts fmt; /* MODEL_FMT_AS_STORED keeps a role as it is */
    uint64_t shard_bytes;       /* target shard size; 0 = 4 GiB */
    int show_progress;
    /* With mtp_set, the MTP layers' matrices (eh_proj and those with a
     * dense or expert role) are written in mtp_fmt; else as those roles say
     * (so a zeroed struct keeps the earlier behaviour). */
    int mtp_set, mtp_fmt;
    /* Every file written goes through io (NULL: io_fs_posix()), so tests can
     * crash the writer at any sync. Invariant: a file under its final name is
     * complete (written, synced, then renamed; the index after every shard). */
    const struct io_fs *io;
};

struct convert_report {
    int shards, shards_reused, tensors;
    uint64_t bytes;
};

int model_convert(const char *src, const char *dst, const struct convert_opts *o, struct convert_report *rep,
                  struct colibri_err *err);

/* Writes a synthetic model with random weights (non-degenerate init, seeded)
 * in the shapes of config_json (a config.json text, written to dst too) and the
 * formats of o (roles left AS_STORED are bf16), in the container layout above.
 * For benchmarks a tiny fixture cannot stand in for. */
int model_synth(const char *dst, const char *config_json, const struct convert_opts *o, uint64_t seed,
                struct convert_report *rep, struct colibri_err *err);

#endif
