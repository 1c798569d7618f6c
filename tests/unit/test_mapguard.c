/* test_mapguard.c - a checkpoint file truncated under a loaded model
 * (io/mapguard.h): the forward that reads past the new end fails naming the
 * file, later ones too, colibri_model_check says so, and the process lives
 * (each case runs in a child under an alarm: a SIGBUS kill is reported as
 * such). A file rewritten in place is reported by colibri_model_check; one
 * replaced by rename is not (the mapping keeps the old file whole). Works on
 * a copy of the bundled colibri-tiny. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "colibri.h"

static char dir[256];

static int copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    char buf[1 << 16];
    ssize_t n = 0;
    while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)n) != n) { n = -1; break; }
    if (in >= 0) close(in);
    if (out >= 0) close(out);
    return in < 0 || out < 0 || n < 0 ? -1 : 0;
}

static int make_copy(void)
{
    snprintf(dir, sizeof dir, "/tmp/colibri-mapguard-XXXXXX");
    if (!mkdtemp(dir)) return -1;
    static const char *F[] = { "config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors" };
    for (size_t i = 0; i < sizeof F / sizeof *F; i++) {
        char a[512], b[512];
        snprintf(a, sizeof a, "models/colibri-tiny/%s", F[i]);
        snprintf(b, sizeof b, "%s/%s", dir, F[i]);
        if (copy_file(a, b)) return -1;
    }
    return 0;
}

/* Child: load, prefill once, change the file by `how`, prefill again.
 * Exit codes: 0 as expected, 1 a step failed (printed). */
enum how { TRUNCATE, REWRITE, RENAME };

static int child(enum how how)
{
    alarm(120);
    struct colibri_err err = { 0 };
    colibri_model *m = NULL;
    colibri_session *s = NULL;
    if (colibri_model_load(dir, NULL, &m, &err) || colibri_session_new(m, NULL, &s, &err)) {
        fprintf(stderr, "load: %s\n", err.msg);
        return 1;
    }
    int32_t tok[4] = { 1, 2, 3, 4 };
    int V = colibri_model_vocab(m);
    float *logits = malloc((size_t)V * sizeof *logits);
    if (colibri_session_prefill(s, tok, 4, logits, 0, &err)) { fprintf(stderr, "first prefill: %s\n", err.msg); return 1; }
    char path[512], tmp[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    struct stat sb;
    stat(path, &sb);
    if (how == TRUNCATE) {
        if (truncate(path, sb.st_size / 8)) { perror("truncate"); return 1; }
    } else if (how == REWRITE) {
        int fd = open(path, O_WRONLY);
        if (fd < 0 || pwrite(fd, "\0", 1, sb.st_size - 1) != 1) { perror("rewrite"); return 1; }
        struct timespec ts[2] = { { 0, UTIME_OMIT }, { sb.st_mtim.tv_sec + 5, 0 } };
        futimens(fd, ts);
        close(fd);
    } else {
        snprintf(tmp, sizeof tmp, "%s/new.safetensors", dir);
        if (copy_file(path, tmp) || truncate(tmp, 64) || rename(tmp, path)) { perror("replace"); return 1; }
    }
    int rc = colibri_session_prefill(s, tok, 4, logits, 0, &err);
    struct colibri_err cerr = { 0 };
    int crc = colibri_model_check(m, &cerr);
    int ok = 1;
    if (how == TRUNCATE) {
        if (rc != COLIBRI_EIO || !strstr(err.msg, "model.safetensors") || !strstr(err.msg, "truncated")) {
            fprintf(stderr, "prefill after truncation: rc %d '%s'\n", rc, err.msg);
            ok = 0;
        }
        err.msg[0] = 0;
        if (colibri_session_decode(s, 5, logits, &err) != COLIBRI_EIO) {
            fprintf(stderr, "a later decode ran on the zeroed mapping: '%s'\n", err.msg);
            ok = 0;
        }
    } else if (rc) {
        fprintf(stderr, "prefill after %s: rc %d '%s'\n", how == REWRITE ? "rewrite" : "rename", rc, err.msg);
        ok = 0;
    }
    if (how == RENAME ? crc != 0 : (crc != COLIBRI_EIO || !strstr(cerr.msg, "model.safetensors"))) {
        fprintf(stderr, "colibri_model_check: rc %d '%s'\n", crc, cerr.msg);
        ok = 0;
    }
    colibri_session_free(s);
    colibri_model_free(m);
    free(logits);
    return ok ? 0 : 1;
}

static void run(enum how how, const char *name)
{
    if (make_copy()) { CHECK(0, "%s: cannot copy models/colibri-tiny to %s", name, dir); return; }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) _exit(child(how));
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: child %s %d", name, WIFSIGNALED(st) ? "killed by signal" : "exited",
          WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "cannot remove %s\n", dir);
}

static void test_truncated(void) { run(TRUNCATE, "truncated"); }
static void test_rewritten(void) { run(REWRITE, "rewritten in place"); }
static void test_renamed(void) { run(RENAME, "replaced by rename"); }

/* A SIGBUS outside every guarded mapping still ends the process as before. */
static void test_other_sigbus_kills(void)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(60);
        struct colibri_err err = { 0 };
        colibri_model *m = NULL;
        if (colibri_model_load("models/colibri-tiny", NULL, &m, &err)) _exit(3);
        raise(SIGBUS);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS, "a SIGBUS elsewhere: status %d", st);
}

int main(void)
{
    RUN_TEST(test_truncated);
    RUN_TEST(test_rewritten);
    RUN_TEST(test_renamed);
    RUN_TEST(test_other_sigbus_kills);
    return CHECK_SUMMARY();
}
