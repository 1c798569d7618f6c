/* persist_fixture.h - shared by the test_persist*.c binaries: small caches
 * with rows that are a pure function of (position, epoch), files in a
 * private temporary directory, whole-file read/write helpers. Include after
 * check.h, from one .c file per binary. */
#ifndef COLIBRI_TEST_PERSIST_FIXTURE_H
#define COLIBRI_TEST_PERSIST_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kv/cache.h"
#include "kv/layout.h"
#include "kv/persist.h"

#define FX_LAYERS 2
#define FX_R 32
#define FX_DR 16
#define FX_MODEL 0x6d6f64656c31ull
#define FX_WEIGHTS "experts=stored dense=stored embed=stored"
#define FX_SALT 0x73616c7431ull
#define FX_KEY 16   /* index-key width of the "+key" layouts */

static char fx_dir[256];

static void fx_setup(void)
{
    /* /dev/shm when there is one: these tests sync thousands of times, and
     * what they check is ordering, not the disk. */
    snprintf(fx_dir, sizeof fx_dir, "%s/colibri_persist_XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    if (!mkdtemp(fx_dir)) {
        perror("mkdtemp");
        exit(1);
    }
}

static void fx_teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fx_dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", fx_dir);
}

static const char *fx_path(const char *name)
{
    static char p[8][320];
    static int k;
    k = (k + 1) % 8;
    snprintf(p[k], sizeof p[k], "%s/%s", fx_dir, name);
    return p[k];
}

static int32_t fx_token(int p, int epoch) { return (int32_t)((p * 31 + epoch * 7 + 1) % 1000); }

static void fx_values(int p, int l, int epoch, float *x, int n)
{
    for (int i = 0; i < n; i++) x[i] = (float)(((p * 131 + l * 17 + i * 7 + epoch * 1009) % 2001) - 1000) / 250.0f;
}

/* A cache with positions [from, to) written for epoch e (index keys too,
 * in the layers that have one). */
static void fx_fill(struct kv_cache *c, int32_t *tokens, int from, int to, int epoch)
{
    float lat[FX_R], rope[FX_DR], key[FX_KEY];
    for (int p = from; p < to; p++) {
        for (int l = 0; l < c->n_layers; l++) {
            fx_values(p, l, epoch, lat, FX_R);
            fx_values(p + 5000, l, epoch, rope, FX_DR);
            kv_cache_write(c, l, p, lat, rope, NULL);
            if (kv_cache_layer_part(c, l, KV_PART_INDEX_KEY)) {
                fx_values(p + 9000, l, epoch, key, FX_KEY);
                kv_cache_write_part(c, l, p, KV_PART_INDEX_KEY, key, NULL);
            }
        }
        tokens[p] = fx_token(p, epoch);
    }
}

static struct kv_cache *fx_new_layers(const struct kv_layer_spec *spec, int cap, const char *what)
{
    struct kv_cache *c = NULL;
    struct colibri_err err = { 0 };
    if (kv_cache_new_layers(spec, FX_LAYERS, FX_R, FX_DR, cap, &c, &err)) {
        fprintf(stderr, "kv_cache_new_layers %s: %s\n", what, err.msg);
        exit(1);
    }
    return c;
}

/* A cache laid out as `layout` (a --kv spelling, kv/layout.h), with an
 * index key of FX_KEY values in layer 1 when it ends in "+key" (f32 when
 * that layer's latent is f32, else fp8). */
static struct kv_cache *fx_cache_spec(const char *layout, int cap)
{
    char name[64];
    snprintf(name, sizeof name, "%s", layout);
    char *plus = strstr(name, "+key");
    if (plus) *plus = 0;
    struct kv_layer_spec spec[FX_LAYERS];
    struct colibri_err err = { 0 };
    if (kv_layout_parse(name, KV_ROPE_DEFAULT, FX_LAYERS, spec, &err)) {
        fprintf(stderr, "fx_cache_spec %s: %s\n", layout, err.msg);
        exit(1);
    }
    if (plus) {
        enum kv_tier kt = spec[1].tier == KV_TIER_F32 ? KV_TIER_F32 : KV_TIER_FP8;
        spec[1].n_extra = 1;
        spec[1].extra[0] = (struct kv_part_spec){ KV_PART_INDEX_KEY, FX_KEY, kt };
    }
    return fx_new_layers(spec, cap, layout);
}

static inline struct kv_cache *fx_cache(enum kv_tier t, int cap) { return fx_cache_spec(kv_tier_name(t), cap); }

/* An empty cache with c's layer layouts. */
static struct kv_cache *fx_cache_like(const struct kv_cache *c, int cap)
{
    struct kv_layer_spec spec[FX_LAYERS];
    for (int l = 0; l < FX_LAYERS; l++) {
        const struct kv_layer *L = &c->layer[l];
        spec[l] = (struct kv_layer_spec){ .tier = L->tier, .rope = L->rope, .n_extra = L->n_parts - 2 };
        for (int i = 2; i < L->n_parts; i++)
            spec[l].extra[i - 2] = (struct kv_part_spec){ L->parts[i].kind, L->parts[i].dim, L->parts[i].codec->tier };
    }
    return fx_new_layers(spec, cap, "like");
}

static struct kv_file_hdr fx_want(const struct kv_cache *c)
{
    struct kv_file_hdr h;
    struct colibri_err err = { 0 };
    if (kv_file_hdr_for(c, FX_MODEL, FX_WEIGHTS, FX_SALT, &h, &err)) {
        fprintf(stderr, "kv_file_hdr_for: %s\n", err.msg);
        exit(1);
    }
    return h;
}

/* Whole files. */
static uint8_t *fx_read(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        *n = 0;
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(len > 0 ? (size_t)len : 1);
    *n = fread(b, 1, (size_t)len, f);
    fclose(f);
    return b;
}

static void fx_write(const char *path, const uint8_t *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, n, f) != n) {
        perror(path);
        exit(1);
    }
    fclose(f);
}

/* Writes a file holding positions [0, n) of epoch e, laid out as layout. */
static void fx_make_file_spec(const char *path, const char *layout, int n, int epoch)
{
    struct kv_cache *c = fx_cache_spec(layout, 64);
    int32_t tok[64];
    fx_fill(c, tok, 0, n, epoch);
    struct kv_file_hdr want = fx_want(c);
    struct kv_file_report rep;
    struct kv_file *f = NULL;
    struct colibri_err err = { 0 };
    unlink(path);
    if (kv_file_open(io_fs_posix(), path, &want, c, tok, 0, &rep, &f, &err) ||
        kv_file_save(f, c, tok, n, &err)) {
        fprintf(stderr, "fx_make_file %s: %s\n", path, err.msg);
        exit(1);
    }
    kv_file_close(f);
    kv_cache_free(c);
}

static inline void fx_make_file(const char *path, enum kv_tier t, int n, int epoch)
{
    fx_make_file_spec(path, kv_tier_name(t), n, epoch);
}

/* 1 if the cache's rows and tokens [0, n) equal epoch e's. */
static inline int fx_cache_is(const struct kv_cache *c, const int32_t *tokens, int n, int epoch)
{
    struct kv_cache *ref = fx_cache_like(c, n > 0 ? n : 1);
    int32_t *rt = malloc((size_t)(n > 0 ? n : 1) * sizeof *rt);
    fx_fill(ref, rt, 0, n, epoch);
    int ok = 1;
    for (int p = 0; p < n && ok; p++) {
        ok = tokens[p] == rt[p];
        for (int l = 0; l < c->n_layers && ok; l++)
            ok = !memcmp(kv_cache_row(c, l, p), kv_cache_row(ref, l, p), c->layer[l].row_bytes);
    }
    free(rt);
    kv_cache_free(ref);
    return ok;
}

#endif
