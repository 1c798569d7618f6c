/* The converted-container writer (model/convert.c) under simulated crashes:
 * every file reaches the disk through a fault-injecting io_fs that "crashes"
 * at the Nth sync (unsynced writes kept, dropped, torn or garbled) or fails
 * the Nth call. After each, a file under its final name must be byte for byte
 * the file a clean conversion writes (never half a shard, never a shard the
 * index does not match), and rerunning the conversion must finish the
 * container so that every file equals the clean one. Runs on a synthetic
 * model small enough for thousands of conversions, in /dev/shm when present.
 * The fault layer models a process crash (what was written and closed is in
 * the page cache and survives), not a power loss: a rename without the sync
 * before it would not show here. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"
#include "check.h"
#include "io_fault.h"
#include "io/file.h"
#include "model/convert.h"
#include "quant/format.h"

static const char *CFG =
    "{\"model_type\":\"deepseek_v3\",\"vocab_size\":64,\"hidden_size\":32,\"intermediate_size\":64,"
    "\"moe_intermediate_size\":16,\"num_hidden_layers\":2,\"num_attention_heads\":2,\"q_lora_rank\":null,"
    "\"kv_lora_rank\":16,\"qk_nope_head_dim\":8,\"qk_rope_head_dim\":8,\"v_head_dim\":8,"
    "\"n_routed_experts\":8,\"n_shared_experts\":1,\"num_experts_per_tok\":2,\"n_group\":2,\"topk_group\":1,"
    "\"first_k_dense_replace\":1,\"max_position_embeddings\":256}";

static char root[256];
static char names[32][64];   /* the files of a clean conversion, and their bytes */
static char *ref_data[32];
static size_t ref_len[32];
static int n_names;

/* Removes dir and the files in it, and its subdirectories' files (one level). */
static void rm_rf(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char p[700];
    while (d && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        struct stat st;
        if (!lstat(p, &st) && S_ISDIR(st.st_mode)) rm_rf(p);
        else unlink(p);
    }
    if (d) closedir(d);
    rmdir(dir);
}

static char *slurp(const char *dir, const char *name, size_t *len)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return base_read_file_all(p, len);
}

static struct convert_opts opts(const struct io_fs *io)
{
    struct convert_opts o = { .shard_bytes = 24 << 10, .io = io };
    o.fmt = (struct model_load_opts){ QUANT_Q8, QUANT_Q4G64, MODEL_FMT_AS_STORED, 0, 0, 0 };
    return o;
}

/* Every file under a final name in dir equals the clean one; other files are
 * temporaries. all: every clean file must be there. 0 when it holds. */
static int check_dir(const char *dir, int all, const char *what)
{
    int bad = 0;
    for (int i = 0; i < n_names; i++) {
        size_t la;
        char *a = slurp(dir, names[i], &la);
        if (!a && all) {
            CHECK(0, "%s: %s is missing", what, names[i]);
            bad = 1;
        } else if (a && (la != ref_len[i] || memcmp(a, ref_data[i], la))) {
            CHECK(0, "%s: %s differs from the clean conversion", what, names[i]);
            bad = 1;
        }
        free(a);
    }
    /* the index is written after every shard: with it, every shard is there */
    char ip[600];
    snprintf(ip, sizeof ip, "%s/model.safetensors.index.json", dir);
    if (!all && access(ip, F_OK) == 0)
        for (int i = 0; i < n_names; i++) {
            char sp[700];
            snprintf(sp, sizeof sp, "%s/%s", dir, names[i]);
            if (!strncmp(names[i], "model-", 6) && access(sp, F_OK) != 0) {
                CHECK(0, "%s: the index is there but %s is not", what, names[i]);
                bad = 1;
            }
        }
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        int known = 0;
        for (int i = 0; i < n_names; i++) known |= !strcmp(de->d_name, names[i]);
        size_t len = strlen(de->d_name);
        if (!known && !(len > 4 && !strcmp(de->d_name + len - 4, ".tmp"))) {
            CHECK(0, "%s: unexpected file %s", what, de->d_name);
            bad = 1;
        }
    }
    if (d) closedir(d);
    return bad;
}

static void test_crashes_and_failures(void)
{
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(root, sizeof root, "%s/colibri-convert-XXXXXX", base);
    if (!mkdtemp(root)) { CHECK(0, "mkdtemp"); return; }
    char src[300], ref[300], run[300];
    snprintf(src, sizeof src, "%s/src", root);
    snprintf(ref, sizeof ref, "%s/ref", root);
    snprintf(run, sizeof run, "%s/run", root);
    struct colibri_err err = { 0 };
    struct convert_report rep;
    struct convert_opts so = { .fmt = { MODEL_FMT_AS_STORED, MODEL_FMT_AS_STORED, MODEL_FMT_AS_STORED, 0, 0, 0 } };
    CHECK(model_synth(src, CFG, &so, 1, &rep, &err) == 0, "synth: %s", err.msg);
    /* synth cut into several shards: its tensors have no source, so the cut
     * between a routed expert's tensors is decided by their output names */
    char small[300];
    snprintf(small, sizeof small, "%s/small", root);
    struct convert_opts sso = so;
    sso.shard_bytes = 4096;
    CHECK(model_synth(small, CFG, &sso, 1, &rep, &err) == 0 && rep.shards >= 2, "synth in 4 KiB shards: %d shards, %s",
          rep.shards, err.msg);
    rm_rf(small);
    struct convert_opts clean = opts(NULL);
    CHECK(model_convert(src, ref, &clean, &rep, &err) == 0, "clean conversion: %s", err.msg);
    CHECK(rep.shards >= 3, "%d shards (want several)", rep.shards);
    DIR *d = opendir(ref);
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.' && n_names < 32) snprintf(names[n_names++], sizeof names[0], "%s", de->d_name);
    if (d) closedir(d);
    for (int i = 0; i < n_names; i++) CHECK((ref_data[i] = slurp(ref, names[i], &ref_len[i])) != NULL, "read %s", names[i]);

    /* how many syncs and calls a whole conversion makes */
    struct io_fault *f;
    const struct io_fs *io;
    struct io_fault_opts fo = { 0 };
    CHECK(io_fault_new(io_fs_posix(), &fo, &f, &io) == 0, "fault layer");
    struct convert_opts o = opts(io);
    CHECK(model_convert(src, run, &o, &rep, &err) == 0, "conversion through the fault layer: %s", err.msg);
    int syncs = io_fault_syncs(f), calls = io_fault_calls(f);
    io_fault_free(f);
    check_dir(run, 1, "clean run through the fault layer");
    rm_rf(run);

    int crashes = 0, failures = 0, reruns = 0, bad = 0;
    const enum io_fate fates[] = { IO_FATE_KEEP, IO_FATE_DROP, IO_FATE_TORN, IO_FATE_GARBLE, IO_FATE_RANDOM };
    /* per sync: keep, drop, 8 torn and 8 garbled seeds, and random fates with
     * enough seeds to make at least 10,000 crashes in all (3,000 outside
     * `make test-full`) */
    const int want = check_full() ? 10000 : 3000;
    int seeds = (want + syncs - 1) / (syncs > 0 ? syncs : 1) - 18;
    if (seeds < 1) seeds = 1;
    for (int c = 1; c <= syncs && !bad; c++)
        for (int fi = 0; fi < 5 && !bad; fi++)
            for (int sd = 0; sd < (fates[fi] == IO_FATE_RANDOM ? seeds : fates[fi] >= IO_FATE_TORN ? 8 : 1) && !bad;
                 sd++) {
                fo = (struct io_fault_opts){ .crash_sync = c, .fate = fates[fi], .seed = (uint64_t)c * 7919 + sd };
                CHECK(io_fault_new(io_fs_posix(), &fo, &f, &io) == 0, "fault layer");
                o = opts(io);
                int rc = model_convert(src, run, &o, &rep, &err);
                CHECK(rc != 0 && io_fault_tripped(f), "crash at sync %d did not stop the conversion", c);
                io_fault_free(f);
                bad |= check_dir(run, 0, "after a crash");
                /* finishing the container: after every forced fate and every 8th random one */
                if (fates[fi] != IO_FATE_RANDOM || sd % 8 == 0) {
                    clean = opts(NULL);
                    CHECK(model_convert(src, run, &clean, &rep, &err) == 0, "rerun after a crash at sync %d: %s", c,
                          err.msg);
                    bad |= check_dir(run, 1, "after the rerun");
                    reruns++;
                }
                rm_rf(run);
                crashes++;
            }
    for (int c = 1; c <= calls && !bad; c++) {
        fo = (struct io_fault_opts){ .fail_call = c, .fail_persist = c % 2 };
        CHECK(io_fault_new(io_fs_posix(), &fo, &f, &io) == 0, "fault layer");
        o = opts(io);
        int rc = model_convert(src, run, &o, &rep, &err);
        CHECK(rc == COLIBRI_EIO && strstr(err.msg, run), "failing call %d: %d, '%s'", c, rc, err.msg);
        io_fault_free(f);
        bad |= check_dir(run, 0, "after a failed call");
        clean = opts(NULL);
        CHECK(model_convert(src, run, &clean, &rep, &err) == 0, "rerun after failing call %d: %s", c, err.msg);
        bad |= check_dir(run, 1, "after the rerun");
        rm_rf(run);
        failures++;
    }
    printf("converted-container writer: %d simulated crashes (%d syncs x every fate; %d finished by a rerun), "
           "%d failed calls; %s\n", crashes, syncs, reruns, failures,
           bad ? "a file under a final name differed from the clean conversion" : "every file under a final name was the clean conversion's");
    CHECK(crashes >= want || bad, "only %d crashes simulated", crashes);
    for (int i = 0; i < n_names; i++) free(ref_data[i]);
    rm_rf(root);
}

int main(void)
{
    RUN_TEST(test_crashes_and_failures);
    return CHECK_SUMMARY();
}
