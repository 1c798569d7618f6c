/* colibri kv inspect FILE | kv verify FILE: what a KV file holds, and whether
 * every published position is sound. Read-only: neither command writes or
 * locks the file. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "colibri.h"

static int kv_usage(FILE *f)
{
    fprintf(f, "usage: colibri kv inspect FILE   header, tier, positions and bytes of a KV file\n"
               "       colibri kv verify FILE    check every position; exit 0 when the file is sound,\n"
               "                                 1 naming the first bad position otherwise\n");
    return f == stdout ? 0 : 2;
}

static void print_stat(const char *path, const struct colibri_kv_file_stat *st)
{
    printf("file:          %s\n", path);
    printf("version:       read %d, write %d%s\n", st->read_version, st->write_version,
           st->read_only ? " (newer than this build: read-only)" : "");
    printf("model:         fingerprint %016llx\n", (unsigned long long)st->model_fingerprint);
    printf("weights:       %s\n", st->weights);
    if (st->read_version == 3) {
        /* a state file (DeepSeek-V4, GLM-5.3): chunks of tokens and rows, each with a snapshot */
        printf("state:         DeepSeek-V4 / GLM-5.3, %d layers, tier %s, %lld-byte snapshot per chunk\n", st->n_layers,
               st->tier, (long long)st->snapshot_bytes);
        printf("chunks:        %lld published, %lld sound\n", (long long)st->chunks, (long long)st->chunks_valid);
        printf("layout:        %s\n", st->layout);
    } else
        printf("geometry:      %d layers, r %d, dr %d\n", st->n_layers, st->r, st->dr);
    if (st->read_version == 3) {
        /* the rows' codecs are not in a state file: its tier and layer layout are checked whole */
    } else if (st->read_version >= 2) {
        /* per-layer layouts: codecs, sizes and seeds live in the part table */
        printf("layout:        %s\n", st->layout);
        if (st->index_key_layers) printf("index keys:    in %d of %d layers\n", st->index_key_layers, st->n_layers);
        printf("record:        %d bytes\n", st->record_bytes);
    } else {
        printf("tier:          %s (latent %d B/row), rope %s (%d B/row)\n", st->tier, st->latent_bytes, st->rope,
               st->rope_bytes);
        if (st->latent_bits || st->rope_bits) printf("codec bits:    latent %d, rope %d\n", st->latent_bits, st->rope_bits);
        printf("seeds:         latent %016llx, rope %016llx\n", (unsigned long long)st->latent_seed,
               (unsigned long long)st->rope_seed);
        printf("codec check:   %016llx\n", (unsigned long long)st->codec_check);
        printf("record:        %d bytes (%d per layer row)\n", st->record_bytes, st->row_bytes);
    }
    printf("tokens:        %lld published, %lld sound\n", (long long)st->published, (long long)st->valid);
    printf("bytes:         %lld (%lld after the published positions)\n", (long long)st->file_bytes,
           (long long)st->tail_bytes);
}

int cmd_kv(int argc, char **argv)
{
    if (argc < 1) return kv_usage(stderr);
    if (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) return kv_usage(stdout);
    int inspect = !strcmp(argv[0], "inspect"), verify = !strcmp(argv[0], "verify");
    if (!inspect && !verify) {
        fprintf(stderr, "colibri kv: unknown subcommand '%s'\n", argv[0]);
        return kv_usage(stderr);
    }
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) return kv_usage(stdout);
    if (argc != 2) return kv_usage(stderr);
    const char *path = argv[1];
    struct colibri_kv_file_stat st;
    struct colibri_err err = { 0 };
    if (colibri_kv_file_stat(path, &st, &err)) {
        fprintf(stderr, "colibri kv %s: %s\n", argv[0], err.msg);
        return 1;
    }
    if (inspect) {
        print_stat(path, &st);
        if (st.first_bad >= 0) printf("problem:       %s\n", st.problem);
        return 0;
    }
    if (st.first_bad >= 0) {
        fprintf(stderr, "colibri kv verify: %s: position %lld is bad: %s; %lld of %lld positions are sound\n", path,
                (long long)st.first_bad, st.problem, (long long)st.valid, (long long)st.published);
        return 1;
    }
    /* a version-2 file's layout differs per layer: name it by its options */
    printf("%s: sound, %lld positions (%s, %d layers)\n", path, (long long)st.published,
           st.read_version >= 2 ? st.layout + strlen("--kv ") : st.tier, st.n_layers);
    return 0;
}
