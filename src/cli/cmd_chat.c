/* cli/cmd_chat.c - `colibri chat`: a multi-turn chat in the terminal. Each
 * turn renders the whole conversation with the model's chat template and
 * reuses the session's cache for the common prefix, so only the new tokens
 * are prefilled. Lines starting with '/' are commands (/reset, /exit). Uses
 * only colibri.h. */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/generate.h"
#include "cli/mpi_cli.h"
#include "cli/opts.h"
#include "cli/textio.h"
#include "colibri.h"

struct convo {
    struct colibri_chat_msg *m;
    char **owned;               /* the strings of m, freed with the conversation */
    size_t n, cap;
};

static int convo_add(struct convo *c, const char *role, char *content)
{
    if (c->n == c->cap) {
        size_t ncap = c->cap ? 2 * c->cap : 16;
        struct colibri_chat_msg *nm = realloc(c->m, ncap * sizeof *nm);
        if (!nm) return -1;
        c->m = nm;
        char **no = realloc(c->owned, ncap * sizeof *no);
        if (!no) return -1;
        c->owned = no;
        c->cap = ncap;
    }
    c->m[c->n] = (struct colibri_chat_msg){ role, content };
    c->owned[c->n++] = content;
    return 0;
}

static void convo_clear(struct convo *c, size_t keep)
{
    while (c->n > keep) free(c->owned[--c->n]);
}

/* Reads one line (without the newline) into a malloc'd string; NULL at EOF. */
static char *read_line(FILE *f)
{
    size_t cap = 256, n = 0;
    char *s = malloc(cap);
    int ch;
    while (s && (ch = fgetc(f)) != EOF && ch != '\n') {
        if (n + 2 > cap) {
            char *ns = realloc(s, cap *= 2);
            if (!ns) { free(s); return NULL; }
            s = ns;
        }
        s[n++] = (char)ch;
    }
    if (!s || (n == 0 && ch == EOF)) { free(s); return NULL; }
    s[n] = 0;
    return s;
}

/* Ctrl-C while a reply is generated stops that reply (the generator's cancel
 * callback reads the flag between tokens) and returns to the prompt; at the
 * prompt it ends the chat, as it would without the handler. The only state a
 * signal handler may touch. */
static volatile sig_atomic_t chat_interrupted;
static volatile sig_atomic_t chat_generating;

static void on_sigint(int sig)
{
    (void)sig;
    if (!chat_generating) _exit(130);
    chat_interrupted = 1;
}

static int chat_cancel(void *user)
{
    (void)user;
    return chat_interrupted != 0;
}

static const char CHAT_HELP[] =
    "  /help    this list\n"
    "  /reset   forget the conversation (the system prompt stays)\n"
    "  /exit    leave (also Ctrl-D; Ctrl-C stops a reply, or leaves at the prompt)\n";

int cmd_chat(int argc, char **argv)
{
    const char *dir = "models/colibri-tiny", *system = NULL, *kv_tier = NULL, *kv_rope = NULL, *kv_path = NULL;
    const char *kv_index = NULL;
    int snap_every = 0, snaps = 0;
    const char *chat_template = NULL, *chat_kwargs = NULL;
    int kv_int8 = 0;
    int n_predict = 512, n_ctx = 0, threads = 0, seed = 0, n_draft = 0, draft = 0, draft_auto = 0;
    const char *mtp_mode = NULL;
    struct colibri_sampler_opts so = colibri_sampler_default_opts();
    struct colibri_model_opts mo = { 0 };
    struct cli_mpi cm = CLI_MPI_INIT;
    const struct opt opts[] = {
        { "model", 'm', OPT_STR, &dir, "model directory (default models/colibri-tiny)" },
        { "system", 0, OPT_STR, &system, "system prompt" },
        OPTS_CHAT_TEMPLATE(chat_template),
        OPTS_CHAT_TEMPLATE_KWARGS(chat_kwargs),
        { "n-predict", 'n', OPT_INT, &n_predict, "tokens per reply at most; -1 = until the end of text or a full context (default 512)", -1, 1 << 24 },
        OPTS_SAMPLER(so),
        OPTS_MTP(mtp_mode, n_draft),
        { "seed", 's', OPT_INT, &seed, "sampler seed (default 0)", 0, 2147483647 },
        { "ctx", 'c', OPT_INT, &n_ctx, "context length; 0 = the model's maximum", 0, 1 << 24 },
        { "threads", 't', OPT_INT, &threads, "OpenMP threads (default: all cores)", 0, 1024 },
        OPTS_KV_CACHE(kv_tier, kv_rope, kv_int8),
        OPTS_KV_INDEX(kv_index),
        OPTS_KV_SNAPSHOT(snap_every, snaps),
        { "kv-file", 0, OPT_STR, &kv_path, "keep the KV cache in this file: reuse its prefix, save after each reply" },
        OPTS_WEIGHT_FORMATS(mo),
        OPTS_MODEL_MEMORY(mo),
        OPTS_BF16_ACT(mo.bf16_act),
        OPTS_MPI(cm),
        OPTS_DEVICE(mo),
    };
    const struct opts_spec spec = {
        "colibri chat [-m DIR] [--system TEXT] [-n N] [--temp T] [--seed S] [--ctx N]",
        "Chats in the terminal: type a message and press Enter; /reset starts over, /exit or end of input "
        "quits. The cache is kept between turns, so only new tokens are prefilled; each reply ends with a "
        "line (on stderr) giving prefill and decode tokens/s.",
        opts, sizeof opts / sizeof opts[0] };
    char *pos[1];
    int npos, rc = opts_parse(&spec, argc, argv, pos, 0, &npos);
    if (rc) return rc > 0 ? 0 : 2;
    if (n_predict == 0) {
        fprintf(stderr, "colibri: --n-predict: 0 generates nothing; give a count, or -1 for no limit\n");
        return 2;
    }
    if (n_predict < 0) n_predict = INT_MAX;   /* the end of text or a full context stops it */
    so.seed = (uint64_t)seed;

    struct colibri_err err = { 0 };
    colibri_tokenizer *tok = NULL;
    colibri_model *m = NULL;
    colibri_session *s = NULL;
    colibri_sampler *smp = NULL;
    colibri_gen *gen = NULL;
    colibri_kv_file *kvf = NULL;
    struct convo c = { 0 };
    int status = 1, tty = isatty(0);
    mo.n_threads = threads;
    /* under mpirun only rank 0 reads stdin (mpirun's default); the other ranks serve experts here */
    int mpi_status;
    if (cli_mpi_begin("chat", &cm, dir, &mo, &mpi_status)) return mpi_status;
    if (!kv_tier) kv_tier = opts_env_kv_tier();
    if (colibri_model_probe(dir, &err)) goto fail;
    struct colibri_session_opts sopt = { .n_ctx = n_ctx, .kv_tier = kv_tier, .kv_rope = kv_rope,
                                       .kv_int8 = kv_int8, .kv_index = kv_index,
                                       .kv_snapshot_every = snap_every, .kv_snapshots = snaps };

    if (colibri_tokenizer_load(dir, &tok, &err) || cli_load_chat_template(tok, chat_template, &err) ||
        colibri_tokenizer_chat_check(tok, &err) || colibri_model_load(dir, &mo, &m, &err) ||
        colibri_tokenizer_check_model(tok, m, &err) ||
        colibri_session_new(m, &sopt, &s, &err) || colibri_sampler_new(&so, colibri_model_vocab(m), &smp, &err) ||
        colibri_gen_new(m, s, tok, &gen, &err))
        goto fail;
    struct colibri_model_info info;
    colibri_model_get_info(m, &info);
    if (opts_mtp(mtp_mode, n_draft, info.n_mtp_layers, &draft, &draft_auto)) {
        status = 2;
        goto done;
    }
    if (kv_path) {
        struct colibri_kv_info ki;
        if (colibri_kv_file_open(s, kv_path, &kvf, &ki, &err)) {
            fprintf(stderr, "colibri chat: %s; running without it\n", err.msg);
            err = (struct colibri_err){ 0 };
        } else if (ki.message[0]) {
            fprintf(stderr, "colibri chat: kv file %s: %s\n", kv_path, ki.message);
        }
    }
    size_t base = 0;
    if (system) {
        char *sys = strdup(system);
        if (!sys || convo_add(&c, "system", sys)) { free(sys); goto oom; }
        base = 1;
    }
    int v4 = !strcmp(colibri_tokenizer_chat_name(tok), "deepseek_v4");
    if (tty) fprintf(stderr, "colibri chat (%s, template %s %s): /help, /reset, /exit\n", dir,
                     colibri_tokenizer_chat_name(tok), colibri_tokenizer_chat_origin(tok));
    struct sigaction sa = { .sa_handler = on_sigint };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);

    for (;;) {
        if (tty) { fprintf(stderr, "> "); fflush(stderr); }
        char *line = read_line(stdin);
        if (!line || !strcmp(line, "/exit")) { free(line); break; }
        if (!strcmp(line, "/reset")) {
            free(line);
            convo_clear(&c, base);
            continue;
        }
        if (!strcmp(line, "/help") || !strcmp(line, "/?")) {
            free(line);
            fputs(CHAT_HELP, stderr);
            continue;
        }
        if (line[0] == '/' && line[1] >= 'a' && line[1] <= 'z' && !strchr(line, ' ')) {
            /* a command we do not know is not sent to the model */
            fprintf(stderr, "colibri chat: unknown command '%s' (/help lists them)\n", line);
            free(line);
            continue;
        }
        if (!line[0]) { free(line); continue; }
        if (convo_add(&c, "user", line)) { free(line); goto oom; }

        char *text = NULL;
        size_t len, replaced = 0, n_ids = 0;
        int32_t *ids = NULL;
        if (cli_chat_render(tok, c.m, c.n, chat_kwargs, &text, &len, &err) ||
            colibri_tokenizer_encode(tok, text, len, 0, &ids, &n_ids, &replaced, &err)) {
            free(text);
            goto fail;
        }
        free(text);
        if (replaced)
            fprintf(stderr, "colibri chat: warning: %zu invalid UTF-8 sequence%s replaced by U+FFFD\n", replaced,
                    replaced == 1 ? "" : "s");
        /* One sampler for the whole chat: its RNG goes on from turn to turn. */
        struct colibri_gen_opts go = { .sampler = smp, .n_predict = n_predict, .prompt_in_history = 1,
                                       .cancel = chat_cancel, .n_draft = draft, .draft_auto = draft_auto };
        struct gen_print pr = { .out = stdout, .keep = 1 };
        chat_interrupted = 0;
        chat_generating = 1;
        rc = colibri_gen_run(gen, ids, (int)n_ids, &go, gen_print_text, &pr, &err);
        chat_generating = 0;
        free(ids);
        if (chat_interrupted) fprintf(stderr, "\n[stopped]");
        if (rc == COLIBRI_ERANGE) {   /* the conversation outgrew the context: say so, drop the turn */
            base_sb_free(&pr.text);
            fprintf(stderr, "colibri chat: %s; /reset to start over\n", err.msg);
            convo_clear(&c, c.n - 1);
            continue;
        }
        if (rc || pr.text.failed) {
            int oom = pr.text.failed;
            base_sb_free(&pr.text);
            if (oom) goto oom;
            goto fail;
        }
        printf("\n");
        fflush(stdout);
        struct colibri_gen_stats st;
        colibri_gen_get_stats(gen, &st);
        if (kv_path) fprintf(stderr, "reused %d of %d prompt tokens\n", st.n_cached, st.n_prompt);
        if (kvf && colibri_kv_file_save(kvf, &err)) fprintf(stderr, "colibri chat: %s\n", err.msg);
        gen_print_stats(stderr, &st);
        char *reply = pr.text.s ? pr.text.s : strdup("");
        if (!reply) goto oom;
        if (v4) {   /* DeepSeek-V4 drops earlier turns' reasoning: the answer is what stays */
            const char *answer = reply;
            for (const char *p = reply; (p = strstr(p, "</think>")); p += 8) answer = p + 8;
            memmove(reply, answer, strlen(answer) + 1);
        }
        if (convo_add(&c, "assistant", reply)) { free(reply); goto oom; }
    }
    status = 0;
    goto done;
oom:
    snprintf(err.msg, sizeof err.msg, "out of memory");
fail:
    fprintf(stderr, "colibri chat: %s\n", err.msg);
done:
    cli_mpi_print_stats(stderr, m, &cm);
    convo_clear(&c, 0);
    free(c.m);
    free(c.owned);
    colibri_gen_free(gen);
    colibri_sampler_free(smp);
    colibri_kv_file_close(kvf);
    colibri_session_free(s);
    colibri_model_free(m);
    colibri_tokenizer_free(tok);
    return cli_mpi_end(&cm, status);
}
