/* The streamed store's parts: the hot set's state file (round trip, atomic
 * replace, damaged and foreign files refused by name), pinning, the reader
 * pool (pieces, a read O_DIRECT refuses done through the page cache, short
 * reads and changed files named), a streamed read that fails on the Nth call
 * (tests/unit/io_fault.h), and a model on tmpfs, each computing exactly what
 * the resident store does. Runs on models/colibri-tiny. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "io_fault.h"
#include "model/expert_hotset.h"
#include "model/expert_io.h"
#include "model/expert_store_stream.h"
#include "dev/expert_trace.h"
#include "model/forward.h"

#define TINY "models/colibri-tiny"
#define TMPFS_MAGIC_ 0x01021994

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

/* Torn files: every prefix of a good file, and one byte more, is refused by
 * name (counts untouched); a save that crashes at its sync with the write
 * torn, or whose Nth file call fails, leaves the previous file, which loads
 * as it was, and no temporary beside it once a save succeeds. */
static void test_hotset_torn(const char *path, const uint32_t *c0)
{
    enum { L = 3, E = 5, N = 24 + 4 * L * E + 8 };
    const uint64_t fp = 0x0123456789abcdefull;
    uint32_t c[L * E], back[L * E];
    uint8_t good[N + 1];
    struct colibri_err err = { 0 };
    memcpy(c, c0, sizeof c);
    CHECK(model_hotset_save(NULL, path, fp, L, E, c, &err) == 0, "%s", err.msg);
    FILE *f = fopen(path, "rb");
    CHECK(f && fread(good, 1, N + 1, f) == N, "the file is %d bytes", N);
    if (f) fclose(f);
    int bad = 0;
    for (int k = 0; k <= N + 1 && !bad; k++) {
        if (k == N) continue;
        good[N] = 0x5a;
        f = fopen(path, "wb");
        if (!f || fwrite(good, 1, (size_t)k, f) != (size_t)k) bad = 1;
        if (f) fclose(f);
        memset(back, 0xab, sizeof back);
        int rc = model_hotset_load(NULL, path, fp, L, E, back, &err);
        if (rc != COLIBRI_EFORMAT || !strstr(err.msg, path) || back[0] != 0xabababab) {
            CHECK(0, "torn to %d of %d bytes: rc %d: %s", k, N, rc, err.msg);
            bad = 1;
        }
    }
    CHECK(model_hotset_save(NULL, path, fp, L, E, c, &err) == 0, "%s", err.msg);

    char dir[300];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = 0;
    uint32_t c2[L * E];
    for (int i = 0; i < L * E; i++) c2[i] = c[i] + 1000;
    struct io_fault *fl;
    const struct io_fs *fs;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        struct io_fault_opts o = { .crash_sync = 1, .fate = IO_FATE_TORN, .seed = seed };
        CHECK(io_fault_new(io_fs_posix(), &o, &fl, &fs) == 0, "fault layer");
        CHECK(model_hotset_save(fs, path, fp, L, E, c2, &err) == COLIBRI_EIO && strstr(err.msg, path) &&
                  io_fault_tripped(fl), "a save that crashed at its sync: %s", err.msg);
        io_fault_free(fl);
        memset(back, 0, sizeof back);
        CHECK(model_hotset_load(NULL, path, fp, L, E, back, &err) == 0 && !memcmp(back, c, sizeof c),
              "after a crash mid-save the old file loads as it was: %s", err.msg);
    }
    CHECK(count_entries(dir) == 2, "the crashed save's torn temporary is left (the process died)");
    CHECK(model_hotset_save(NULL, path, fp, L, E, c, &err) == 0 && count_entries(dir) == 1,
          "the next save replaces a temporary its pid left: %s", err.msg);
    for (int n = 1; n <= 5; n++) {   /* open, write, sync, close, rename */
        struct io_fault_opts o = { .fail_call = n };
        CHECK(io_fault_new(io_fs_posix(), &o, &fl, &fs) == 0, "fault layer");
        int rc = model_hotset_save(fs, path, fp, L, E, c2, &err);
        CHECK(rc == COLIBRI_EIO && strstr(err.msg, path) && io_fault_tripped(fl), "call %d failed: rc %d: %s", n, rc,
              err.msg);
        io_fault_free(fl);
        CHECK(model_hotset_load(NULL, path, fp, L, E, back, &err) == 0 && !memcmp(back, c, sizeof c),
              "call %d failed: the old file loads as it was: %s", n, err.msg);
        CHECK(count_entries(dir) == 1, "call %d failed: no temporary left", n);
    }
    CHECK(model_hotset_save(NULL, path, fp, L, E, c2, &err) == 0 && count_entries(dir) == 1, "%s", err.msg);
    CHECK(model_hotset_load(NULL, path, fp, L, E, back, &err) == 0 && !memcmp(back, c2, sizeof c2), "%s", err.msg);

    /* a link planted at the temporary's name is replaced, never followed */
    char tmp[400], victim[400];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    snprintf(victim, sizeof victim, "%s/victim", dir);
    f = fopen(victim, "wb");
    if (f) fclose(f);
    CHECK(symlink(victim, tmp) == 0, "symlink");
    struct stat sb;
    CHECK(model_hotset_save(NULL, path, fp, L, E, c, &err) == 0 && stat(victim, &sb) == 0 && sb.st_size == 0 &&
              lstat(tmp, &sb) != 0, "a link at the temporary's name: %s", err.msg);
    unlink(victim);
}

static void test_hotset_file(void)
{
    char root[] = "/tmp/colibri-hot-XXXXXX", dir[4096], path[4200], cmd[4300];
    if (!mkdtemp(root)) { CHECK(0, "mkdtemp"); return; }
    struct colibri_err err = { 0 };
    snprintf(path, sizeof path, "%s/a/b", root);
    CHECK(model_hotset_dir(path, dir, sizeof dir, &err) == 0 && !strcmp(dir, path), "%s", err.msg);
    struct stat st;
    CHECK(stat(dir, &st) != 0, "resolving the state directory creates nothing");
    enum { L = 3, E = 5 };
    uint32_t c[L * E], back[L * E];
    for (int i = 0; i < L * E; i++) c[i] = (uint32_t)(i * 7919u % 13u) + (i == 4 ? 0xfffffff0u : 0);
    model_hotset_path(dir, 0x0123456789abcdefull, path, sizeof path);
    CHECK(strstr(path, "experts-0123456789abcdef.hot") != NULL, "%s", path);
    CHECK(model_hotset_load(NULL, path, 1, L, E, back, &err) == COLIBRI_EIO && !err.msg[0], "a missing file: %s",
          err.msg);
    CHECK(model_hotset_save(NULL, path, 0x0123456789abcdefull, L, E, c, &err) == 0, "%s", err.msg);
    CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode), "saving creates the state directory with its parents");
    CHECK(count_entries(dir) == 1, "no temporary file left beside it");
    memset(back, 0, sizeof back);
    CHECK(model_hotset_load(NULL, path, 0x0123456789abcdefull, L, E, back, &err) == 0 && !memcmp(back, c, sizeof c),
          "round trip: %s", err.msg);
    c[0] = 99;   /* a second save replaces the file */
    CHECK(model_hotset_save(NULL, path, 0x0123456789abcdefull, L, E, c, &err) == 0, "%s", err.msg);
    CHECK(model_hotset_load(NULL, path, 0x0123456789abcdefull, L, E, back, &err) == 0 && back[0] == 99, "replaced");
    CHECK(model_hotset_load(NULL, path, 0x0123456789abcdeeull, L, E, back, &err) == COLIBRI_EMISMATCH &&
              strstr(err.msg, "another model") && strstr(err.msg, path), "another fingerprint: %s", err.msg);
    CHECK(model_hotset_load(NULL, path, 0x0123456789abcdefull, L, E + 1, back, &err) == COLIBRI_EFORMAT,
          "another shape: %s", err.msg);
    /* one byte flipped in the counts */
    FILE *f = fopen(path, "r+b");
    if (f) {
        fseek(f, 30, SEEK_SET);
        int ch = fgetc(f);
        fseek(f, 30, SEEK_SET);
        fputc(ch ^ 1, f);
        fclose(f);
    }
    memset(back, 0xab, sizeof back);
    CHECK(model_hotset_load(NULL, path, 0x0123456789abcdefull, L, E, back, &err) == COLIBRI_EFORMAT &&
              strstr(err.msg, "checksum") && back[0] == 0xabababab, "damaged: %s", err.msg);
    CHECK(truncate(path, 20) == 0, "truncate");
    CHECK(model_hotset_load(NULL, path, 0x0123456789abcdefull, L, E, back, &err) == COLIBRI_EFORMAT &&
              strstr(err.msg, "bytes"), "truncated: %s", err.msg);
    test_hotset_torn(path, c);
    snprintf(path, sizeof path, "%s/a/b/experts-0123456789abcdef.hot/x.hot", root);   /* a file as directory */
    CHECK(model_hotset_save(NULL, path, 1, L, E, c, &err) == COLIBRI_EIO && strstr(err.msg, "experts-0123456789abcdef.hot"),
          "an unwritable path is refused by name: %s", err.msg);
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    CHECK(system(cmd) == 0, "clean up");
}

/* Runs model_hotset_load on path in a child with an alarm, so that a load
 * that blocks fails the test instead of stalling it. 0 when the load was
 * refused with COLIBRI_EIO and a message naming the path and `kind`; 1 when
 * refused otherwise; -1 when it hung. */
static int load_refused_in_child(const char *path, const char *kind)
{
    pid_t pid = fork();
    if (pid == 0) {
        alarm(5);
        struct colibri_err err = { 0 };
        uint32_t c[15];
        int rc = model_hotset_load(NULL, path, 1, 3, 5, c, &err);
        if (rc != COLIBRI_EIO || !strstr(err.msg, path) || !strstr(err.msg, kind))
            fprintf(stderr, "  %s: rc %d: %s\n", path, rc, err.msg);
        _exit(rc == COLIBRI_EIO && strstr(err.msg, path) && strstr(err.msg, kind) ? 0 : 1);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) return 1;
    return WIFSIGNALED(st) ? -1 : WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

/* The state path holding a FIFO, a device or a symbolic link: the load is
 * refused at once, naming what is there (a FIFO without a writer used to
 * block the load forever). */
static void test_hotset_not_regular(void)
{
    char root[] = "/tmp/colibri-hotfifo-XXXXXX", path[300], cmd[400];
    if (!mkdtemp(root)) { CHECK(0, "mkdtemp"); return; }
    snprintf(path, sizeof path, "%s/experts-0000000000000001.hot", root);
    CHECK(mkfifo(path, 0644) == 0, "mkfifo");
    int r = load_refused_in_child(path, "FIFO");
    CHECK(r == 0, "a FIFO at the state path: %s", r < 0 ? "the load hung" : "not refused by name");
    r = load_refused_in_child("/dev/null", "device");
    CHECK(r == 0, "a device at the state path: %s", r < 0 ? "the load hung" : "not refused by name");
    unlink(path);
    CHECK(symlink("/dev/null", path) == 0, "symlink");
    r = load_refused_in_child(path, "symbolic link");
    CHECK(r == 0, "a symbolic link at the state path: %s", r < 0 ? "the load hung" : "not refused by name");
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    CHECK(system(cmd) == 0, "clean up");
}

/* logits of a 12-token prefill then 8 decoded tokens, concatenated; the
 * forward's error in *err */
static int run_err(const struct model *m, float *out, struct colibri_err *e)
{
    struct fwd_state st;
    struct colibri_err err = { 0 };
    const struct model_config *c = &m->cfg;
    struct compute_ctx cc = base_compute_ctx_make(0);
    if (fwd_state_init(&st, m, 32, 0, KV_TIER_F32, KV_ROPE_DEFAULT, KV_INT8_OFF, &cc, &err)) {
        CHECK(0, "%s", err.msg);
        return -1;
    }
    int32_t t[20];
    for (int i = 0; i < 20; i++) t[i] = (int32_t)((i * 2654435761u) % (unsigned)c->vocab_size);
    int rc = 0, V = c->vocab_size;
    struct fwd_out o = { .logits = out };
    rc = model_forward(m, &st, t, 12, 0, FWD_EXPANDED, &o, &err);
    for (int p = 12; p < 20 && !rc; p++) {
        o.logits = out + (int64_t)(p - 11) * V;
        rc = model_forward(m, &st, t + p, 1, p, FWD_ABSORBED, &o, &err);
    }
    *e = err;
    fwd_state_free(&st);
    return rc;
}

static int run(const struct model *m, float *out)
{
    struct colibri_err err = { 0 };
    int rc = run_err(m, out, &err);
    CHECK(rc == 0, "%s", err.msg);
    return rc;
}

/* Loads dir with its files read through io (NULL: the real file system). */
static int load_io(const char *dir, int64_t ram, const struct io_fs *io, struct model *m)
{
    struct colibri_err err = { 0 };
    struct model_load_opts lo = { MODEL_FMT_AS_STORED, MODEL_FMT_AS_STORED, MODEL_FMT_AS_STORED, 1, 0, ram };
    lo.io = io;
    int rc = model_load(dir, &lo, m, &err);
    CHECK(rc == 0, "%s: %s", dir, err.msg);
    return rc;
}

static int load(const char *dir, int64_t ram, struct model *m) { return load_io(dir, ram, NULL, m); }

/* A budget of `slots` experts on top of everything else. */
static int64_t budget(const struct model *m, int slots)
{
    struct model_bytes mb;
    model_bytes(m, &mb);
    int64_t per = m->experts->ops->expert_bytes(m->experts, m->cfg.first_k_dense_replace, 0);
    return mb.dense + mb.copies + mb.small + slots * (per + 3 * 8192) + per / 2;
}

/* The hot set's choice: the most used first, ties to the lower index, at
 * most max_pins, never an unused expert, and with min_ratio only experts used
 * that many times their own layer's mean. */
static void test_hotset_choose(void)
{
    /* 2 layers x 4 experts; layer means 4 and 1 */
    const uint32_t c[8] = { 1, 9, 3, 3, 0, 2, 1, 1 };
    unsigned char pin[8];
    CHECK(model_hotset_choose(c, 2, 4, 2, 0, pin) == 2 && pin[1] && pin[2] && !pin[3],
          "top 2, the tie to the lower index");
    CHECK(model_hotset_choose(c, 2, 4, 8, 0, pin) == 7 && !pin[4], "an unused expert is never pinned");
    /* 1.5x the mean: 6 in layer 0 (expert 1), 1.5 in layer 1 (expert 5) */
    CHECK(model_hotset_choose(c, 2, 4, 8, 1.5, pin) == 2 && pin[1] && pin[5], "min_ratio is per layer");
    CHECK(model_hotset_choose(c, 2, 4, 0, 0, pin) == 0 && !memchr(pin, 1, sizeof pin), "max_pins 0: none");
}

static void test_pinned_and_tmpfs(void)
{
    struct model a, b;
    if (load(TINY, 0, &a)) return;
    int V = a.cfg.vocab_size;
    size_t nl = (size_t)9 * V;
    float *la = malloc(nl * sizeof *la), *lb = malloc(nl * sizeof *lb);
    if (!la || !lb || run(&a, la)) goto done;
    int64_t ram = budget(&a, 4);
    if (load(TINY, ram, &b)) goto done;
    int slots = expert_store_stream_slots(b.experts), n = (b.cfg.num_hidden_layers + b.n_mtp - b.cfg.first_k_dense_replace) *
                                                             b.cfg.n_routed_experts;
    CHECK(slots >= 4 && slots < n, "%d slots of %d experts", slots, n);
    uint32_t *counts = calloc((size_t)n, sizeof *counts), *uses = calloc((size_t)n, sizeof *uses);
    for (int i = 0; i < n; i++) counts[i] = (uint32_t)(i % 5);
    int pinned = model_expert_stream_pin(b.experts, counts);
    CHECK(pinned == slots / 2, "%d pinned, want half of %d slots", pinned, slots);
    CHECK(run(&b, lb) == 0 && !memcmp(la, lb, nl * sizeof *la), "pinned: logits differ from the resident model's");
    struct expert_store_stats st;
    expert_store_get_stats(b.experts, &st);
    CHECK(model_expert_stream_uses(b.experts, uses) == n, "uses");
    uint64_t sum = 0;
    for (int i = 0; i < n; i++) sum += uses[i];
    CHECK(sum == st.acquires, "uses sum to the acquisitions: %llu vs %llu", (unsigned long long)sum,
          (unsigned long long)st.acquires);
    CHECK(model_expert_stream_direct(b.experts) == 1, "a file on ext4/xfs is read with O_DIRECT");
    free(counts);
    free(uses);
    model_free(&b);

    /* tmpfs refuses O_DIRECT: the same bytes through the page cache */
    struct statfs sf;
    if (statfs("/dev/shm", &sf) || sf.f_type != TMPFS_MAGIC_) {
        printf("  (no tmpfs at /dev/shm: the fallback is not exercised)\n");
        goto done;
    }
    char dir[] = "/dev/shm/colibri-stream-XXXXXX", cmd[512];
    if (!mkdtemp(dir)) { CHECK(0, "mkdtemp"); goto done; }
    snprintf(cmd, sizeof cmd, "cp " TINY "/config.json " TINY "/model.safetensors %s/", dir);
    CHECK(system(cmd) == 0, "copy the model");
    if (!load(dir, ram, &b)) {
        /* tmpfs takes O_DIRECT since Linux 6.6; older kernels refuse it at open */
        CHECK(!strcmp(b.experts->ops->name, "streamed"), "tmpfs: streamed");
        printf("  (tmpfs: %s)\n", model_expert_stream_direct(b.experts) ? "O_DIRECT" : "through the page cache");
        memset(lb, 0, nl * sizeof *lb);
        CHECK(run(&b, lb) == 0 && !memcmp(la, lb, nl * sizeof *la), "tmpfs: logits differ from the resident model's");
        model_free(&b);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "clean up");
done:
    free(la);
    free(lb);
    model_free(&a);
}

struct wait_done { int done; };
static void on_done(struct expert_io_req *q, void *user)
{
    (void)q;
    __atomic_store_n(&((struct wait_done *)user)->done, 1, __ATOMIC_RELEASE);
}

static int read_now(struct expert_io *io, struct expert_io_req *q)
{
    struct wait_done w = { 0 };
    q->done = on_done;
    q->user = &w;
    model_expert_io_submit(io, q, 1);
    while (!__atomic_load_n(&w.done, __ATOMIC_ACQUIRE)) usleep(1000);
    return q->rc;
}

static void test_reader_pool(void)
{
    const char *path = TINY "/model.safetensors";
    FILE *f = fopen(path, "rb");
    if (!f) { CHECK(0, "open %s", path); return; }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    size_t big = 3 * EXPERT_IO_PIECE + 12288;   /* four pieces, on several threads */
    uint8_t *want = malloc(big), *got = aligned_alloc(EXPERT_IO_ALIGN, big + EXPERT_IO_ALIGN);
    fseek(f, 0, SEEK_SET);
    CHECK(fread(want, 1, big, f) == big, "read the reference");
    fclose(f);
    _Atomic uint64_t bytes = 0;
    struct expert_io *io;
    struct colibri_err err = { 0 };
    if (model_expert_io_new(NULL, &path, 1, 4, &bytes, &io, &err)) { CHECK(0, "%s", err.msg); goto done; }
    int direct0 = model_expert_io_direct(io, 0);
    struct expert_io_req q = { .n_ranges = 1, .r = { { 0, 0, big, got, 1 } } };
    CHECK(read_now(io, &q) == 0 && !memcmp(got, want, big) && bytes == big, "aligned pieces: %s", q.msg);
    CHECK(model_expert_io_direct(io, 0) == direct0, "aligned reads keep O_DIRECT");
    /* an unaligned range marked direct: O_DIRECT refuses it (EINVAL), the
     * file is read through the page cache from then on */
    memset(got, 0, big);
    q = (struct expert_io_req){ .n_ranges = 2, .r = { { 0, 1, 8191, got, 1 }, { 0, 20000, 5000, got + 16384, 0 } } };
    CHECK(read_now(io, &q) == 0 && !memcmp(got, want + 1, 8191) && !memcmp(got + 16384, want + 20000, 5000),
          "unaligned: %s", q.msg);
    CHECK(model_expert_io_direct(io, 0) == 0, "after a refused O_DIRECT read the file is read through the page cache");
    /* past the end of the file: read up to the end only */
    q = (struct expert_io_req){ .n_ranges = 1, .r = { { 0, (uint64_t)size - 100, 4096, got, 0 } } };
    CHECK(read_now(io, &q) == 0, "a range reaching past the end is read to the end: %s", q.msg);
    q = (struct expert_io_req){ .n_ranges = 1, .r = { { 0, (uint64_t)size + 4096, 4096, got, 0 } } };
    CHECK(read_now(io, &q) == 0, "a range wholly past the end reads nothing: %s", q.msg);
    model_expert_io_free(io);
    /* a file that changes under the pool */
    char dir[] = "/tmp/colibri-io-XXXXXX", copy[300], cmd[400];
    if (mkdtemp(dir)) {
        snprintf(copy, sizeof copy, "%s/m.safetensors", dir);
        snprintf(cmd, sizeof cmd, "head -c 65536 %s > %s", path, copy);
        CHECK(system(cmd) == 0, "copy");
        const char *cp = copy;
        if (!model_expert_io_new(NULL, &cp, 1, 2, &bytes, &io, &err)) {
            CHECK(truncate(copy, 4096) == 0, "truncate");
            q = (struct expert_io_req){ .n_ranges = 1, .r = { { 0, 8192, 4096, got, 1 } } };
            CHECK(read_now(io, &q) == COLIBRI_EIO && strstr(q.msg, "changed on disk") && strstr(q.msg, copy),
                  "a changed file is named: %s", q.msg);
            model_expert_io_free(io);
        }
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        CHECK(system(cmd) == 0, "clean up");
    }
    /* the second read call fails (pieces go to 4 threads, any may be the
     * second): the request fails naming the file; the next one reads */
    struct io_fault *fl;
    const struct io_fs *fs;
    struct io_fault_opts fo = { .fail_call = 2, .fail_only = IO_OP_READ };
    CHECK(io_fault_new(io_fs_posix(), &fo, &fl, &fs) == 0, "fault layer");
    if (!model_expert_io_new(fs, &path, 1, 4, &bytes, &io, &err)) {
        q = (struct expert_io_req){ .n_ranges = 1, .r = { { 0, 0, big, got, 1 } } };
        CHECK(read_now(io, &q) == COLIBRI_EIO && strstr(q.msg, path) && strstr(q.msg, "Input/output error") &&
                  io_fault_tripped(fl), "the failed read is named: %s", q.msg);
        memset(got, 0, big);
        q = (struct expert_io_req){ .n_ranges = 1, .r = { { 0, 0, big, got, 1 } } };
        CHECK(read_now(io, &q) == 0 && !memcmp(got, want, big), "a later request reads again: %s", q.msg);
        model_expert_io_free(io);
    }
    io_fault_free(fl);
done:
    free(want);
    free(got);
}

static int same_expert(const struct mlp_weights *x, const struct mlp_weights *y)
{
    const struct qtensor *a[3] = { &x->gate, &x->up, &x->down }, *b[3] = { &y->gate, &y->up, &y->down };
    for (int i = 0; i < 3; i++) {
        size_t n = quant_fmt_data_bytes(a[i]->fmt, a[i]->rows, a[i]->cols);
        if (a[i]->fmt != b[i]->fmt || a[i]->rows != b[i]->rows || a[i]->cols != b[i]->cols ||
            memcmp(a[i]->data, b[i]->data, n))
            return 0;
    }
    return 1;
}

/* A streamed read that fails on the Nth read call. The acquire waiting for
 * it returns COLIBRI_EIO naming the layer, the expert, the file and the
 * offset, and empties the slot: the next acquire of that expert reads it
 * again (a retry) and gets the resident store's bytes. A forward whose reads
 * fail from the Nth on returns the error (never logits); with one failed
 * read it either returns the error or the resident model's logits (a failed
 * prefetch nobody waits for is dropped and read again), and the next forward
 * on the same model matches the resident one bit for bit. */
static void test_stream_read_fault(void)
{
    struct model a, b;
    if (load(TINY, 0, &a)) return;
    int V = a.cfg.vocab_size, layer = a.cfg.first_k_dense_replace;
    size_t nl = (size_t)9 * V;
    float *la = malloc(nl * sizeof *la), *lb = malloc(nl * sizeof *lb);
    int64_t ram = budget(&a, 4);
    struct io_fault *fl;
    const struct io_fs *fs;
    struct colibri_err err = { 0 };
    char name[64];
    if (!la || !lb || run(&a, la)) goto done;

    struct io_fault_opts fo = { .fail_call = 1, .fail_only = IO_OP_READ };
    CHECK(io_fault_new(io_fs_posix(), &fo, &fl, &fs) == 0, "fault layer");
    if (!load_io(TINY, ram, fs, &b)) {
        CHECK(!io_fault_tripped(fl) && !strcmp(b.experts->ops->name, "streamed"), "loading reads no expert");
        const struct mlp_weights *w = NULL, *wa = NULL;
        snprintf(name, sizeof name, "layer %d expert 1:", layer);
        int rc = expert_store_acquire(b.experts, layer, 1, &w, &err);
        CHECK(rc == COLIBRI_EIO && strstr(err.msg, name) && strstr(err.msg, "model.safetensors") &&
                  strstr(err.msg, "at offset") && io_fault_tripped(fl), "the failed read is named: %s", err.msg);
        if (!rc) expert_store_release(b.experts, layer, 1);
        rc = expert_store_acquire(b.experts, layer, 1, &w, &err);
        CHECK(rc == 0, "the next acquire reads the expert again: %s", err.msg);
        if (!rc && !expert_store_acquire(a.experts, layer, 1, &wa, &err)) {
            CHECK(same_expert(w, wa), "the retried read holds the resident expert's bytes");
            expert_store_release(a.experts, layer, 1);
        }
        if (!rc) expert_store_release(b.experts, layer, 1);
        model_free(&b);
    }
    io_fault_free(fl);

    /* every read from the 3rd on fails: the forward fails by name */
    fo = (struct io_fault_opts){ .fail_call = 3, .fail_only = IO_OP_READ, .fail_persist = 1 };
    CHECK(io_fault_new(io_fs_posix(), &fo, &fl, &fs) == 0, "fault layer");
    if (!load_io(TINY, ram, fs, &b)) {
        int rc = run_err(&b, lb, &err);
        CHECK(rc == COLIBRI_EIO && strstr(err.msg, "model.safetensors") && strstr(err.msg, "Input/output error"),
              "failing reads fail the forward by name (rc %d): %s", rc, err.msg);
        model_free(&b);
    }
    io_fault_free(fl);

    /* one failed read (the 1st, 2nd, 5th or 9th): an error or the same
     * logits, and the next forward matches */
    static const int NTH[] = { 1, 2, 5, 9 };
    int failed = 0;
    for (size_t k = 0; k < sizeof NTH / sizeof NTH[0]; k++) {
        fo = (struct io_fault_opts){ .fail_call = NTH[k], .fail_only = IO_OP_READ };
        CHECK(io_fault_new(io_fs_posix(), &fo, &fl, &fs) == 0, "fault layer");
        if (!load_io(TINY, ram, fs, &b)) {
            memset(lb, 0, nl * sizeof *lb);
            int rc = run_err(&b, lb, &err);
            CHECK(io_fault_tripped(fl), "read %d: the fault was injected", NTH[k]);
            CHECK(rc ? rc == COLIBRI_EIO && strstr(err.msg, "model.safetensors") != NULL
                     : !memcmp(la, lb, nl * sizeof *la),
                  "read %d failed: rc %d (%s), else the logits must match", NTH[k], rc, err.msg);
            failed += rc != 0;
            memset(lb, 0, nl * sizeof *lb);
            CHECK(run(&b, lb) == 0 && !memcmp(la, lb, nl * sizeof *la), "read %d: the next forward differs", NTH[k]);
            model_free(&b);
        }
        io_fault_free(fl);
    }
    printf("  (one failed read: %d of %zu forwards returned the error, the rest dropped a prefetch)\n", failed,
           sizeof NTH / sizeof NTH[0]);
done:
    free(la);
    free(lb);
    model_free(&a);
}

/* A B C A B C A B on one layer (top-1), cache of 2: the second half (B C A B)
 * worked out by hand for each policy. */
static void test_trace_replay(void)
{
    struct expert_trace t;
    struct colibri_err err = { 0 };
    if (model_trace_init(&t, 1, 3, 3, 1, 8, &err)) { CHECK(0, "%s", err.msg); return; }
    const int seq[8] = { 0, 1, 2, 0, 1, 2, 0, 1 };
    for (int i = 0; i < 8; i++) {
        model_trace_next_token(&t);
        model_trace_hook(&t, 3, &seq[i], 1, 0);
        int p = i < 4 ? seq[i] : (seq[i] + 1) % 3;   /* right for the first half, wrong after */
        model_trace_hook(&t, 3, &p, 1, 1);
    }
    model_trace_hook(&t, 2, &seq[0], 1, 0);   /* not an MoE layer of the trace: ignored */
    CHECK(t.n_tokens == 8 && !t.oom, "%d tokens", t.n_tokens);
    static const uint64_t HITS[POLICY_OURS + 1] = { [POLICY_LRU] = 0, [POLICY_LFU] = 0, [POLICY_BELADY] = 2,
                                                    [POLICY_OURS] = 1 };
    for (int p = 0; p <= POLICY_OURS; p++) {
        struct expert_replay r;
        CHECK(model_trace_replay(&t, (enum expert_policy)p, 2, &r, &err) == 0, "%s", err.msg);
        CHECK(r.accesses == 4 && r.hits == HITS[p] && r.reads == 4 - HITS[p], "%s: %llu hits, %llu reads of %llu",
              model_trace_policy_name((enum expert_policy)p), (unsigned long long)r.hits, (unsigned long long)r.reads,
              (unsigned long long)r.accesses);
    }
    struct expert_replay r;
    CHECK(model_trace_replay(&t, POLICY_BELADY, 3, &r, &err) == 0 && r.hits == 4 && r.reads == 0,
          "everything fits: %llu hits", (unsigned long long)r.hits);
    CHECK(model_trace_replay(&t, POLICY_LRU, 0, &r, &err) == COLIBRI_EINVAL, "a budget below top-k is refused");
    struct expert_layer_stats st;
    model_trace_layer_stats(&t, 0, &st);
    CHECK(st.overlap == 0, "no adjacent overlap: %g", st.overlap);
    CHECK(st.reuse[EXPERT_REUSE_BUCKETS - 1] == 3 && st.reuse[2] == 5, "3 first uses, 5 reuses at distance 3");
    CHECK(fabs(st.recall - 0.5) < 1e-12, "recall %g, want 0.5", st.recall);
    model_trace_free(&t);
}

/* Reads per expert: the fp8 fixture as transformers wrote it stores weights
 * and scales apart (several ranges); colibri convert puts each expert in one
 * extent of one shard, even with shards cut every 256 KiB, and the streamed
 * converted copy computes what the resident original does. */
static void test_convert_expert_major(void)
{
    const char *src = "tests/oracle/deepseek_v3_fp8";
    struct model a, b;
    if (load(src, 0, &a)) return;
    int V = a.cfg.vocab_size, first = a.cfg.first_k_dense_replace, L = a.cfg.num_hidden_layers;
    int E = a.cfg.n_routed_experts;
    size_t nl = (size_t)9 * V;
    float *la = malloc(nl * sizeof *la), *lb = malloc(nl * sizeof *lb);
    char dir[] = "/tmp/colibri-xm-XXXXXX", out[300], cmd[400];
    int64_t ram = budget(&a, 4);
    if (!la || !lb || run(&a, la) || !mkdtemp(dir)) goto done;
    if (!load(src, ram, &b)) {
        int split = 0;
        for (int l = first; l < L; l++)
            for (int e = 0; e < E; e++) split += model_expert_stream_ranges(b.experts, l, e) > 1;
        CHECK(split > 0, "the fixture as shipped keeps weights and scales apart (%d experts in several ranges)", split);
        model_free(&b);
    }
    snprintf(out, sizeof out, "%s/c", dir);
    struct colibri_err err = { 0 };
    struct colibri_convert_report rep;
    CHECK(colibri_convert(src, out, NULL, 256 << 10, 0, &rep, &err) == 0 && rep.shards > 2, "%s (%d shards)", err.msg,
          rep.shards);
    if (!load(out, ram, &b)) {
        int whole = 0;
        for (int l = first; l < L; l++)
            for (int e = 0; e < E; e++) whole += model_expert_stream_ranges(b.experts, l, e) == 1;
        CHECK(whole == (L - first) * E, "%d of %d experts in one range", whole, (L - first) * E);
        CHECK(run(&b, lb) == 0 && !memcmp(la, lb, nl * sizeof *la), "converted, streamed: logits differ");
        model_free(&b);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "clean up");
done:
    free(la);
    free(lb);
    model_free(&a);
}

int main(void)
{
    RUN_TEST(test_convert_expert_major);
    RUN_TEST(test_trace_replay);
    RUN_TEST(test_reader_pool);
    RUN_TEST(test_stream_read_fault);
    RUN_TEST(test_hotset_file);
    RUN_TEST(test_hotset_not_regular);
    RUN_TEST(test_hotset_choose);
    RUN_TEST(test_pinned_and_tmpfs);
    return CHECK_SUMMARY();
}
