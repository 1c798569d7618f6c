/* cli/cmd_run.c - `colibri run`: one prompt in, generated text streamed out,
 * then a line with prefill and decode tokens/s (on stderr, so stdout holds
 * only the text). Uses only colibri.h. */
#include <limits.h>
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

int cmd_run(int argc, char **argv)
{
    const char *dir = "models/colibri-tiny", *prompt = NULL, *file = NULL, *system = NULL, *stop_str = NULL;
    const char *chat_template = NULL, *chat_kwargs = NULL;
    const char *kv_tier = NULL, *kv_rope = NULL, *kv_path = NULL, *kv_index = NULL;
    int snap_every = 0, snaps = 0;
    int kv_int8 = 0, n_draft = 0;
    const char *mtp_mode = NULL;
    int expert_layers = 0;
    int n_predict = 128, n_ctx = 0, chat = 0, threads = 0, seed = 0, raw = 0, show_prompt = 0, hide_prompt = 0;
    struct colibri_sampler_opts so = colibri_sampler_default_opts();
    struct colibri_model_opts mo = { 0 };
    struct cli_mpi cm = CLI_MPI_INIT;
    const struct opt opts[] = {
        { "model", 'm', OPT_STR, &dir, "model directory (default models/colibri-tiny)" },
        { "prompt", 'p', OPT_STR, &prompt, "the prompt text" },
        { "file", 'f', OPT_STR, &file, "read the prompt from a file ('-' = stdin)" },
        { "n-predict", 'n', OPT_INT, &n_predict, "tokens to generate at most; -1 = until the end of text or a full context (default 128)", -1, 1 << 24 },
        OPTS_SAMPLER(so),
        OPTS_MTP(mtp_mode, n_draft),
        { "presence-penalty", 0, OPT_FLOAT, &so.presence_penalty, "presence penalty (default 0)", -100, 100 },
        { "seed", 's', OPT_INT, &seed, "sampler seed (default 0): same seed, same text", 0, 2147483647 },
        { "ctx", 'c', OPT_INT, &n_ctx, "context length; 0 = the model's maximum", 0, 1 << 24 },
        { "chat", 0, OPT_FLAG, &chat, "wrap the prompt in the model's chat template" },
        { "system", 0, OPT_STR, &system, "system prompt (implies --chat)" },
        OPTS_CHAT_TEMPLATE(chat_template),
        OPTS_CHAT_TEMPLATE_KWARGS(chat_kwargs),
        { "stop", 0, OPT_STR, &stop_str, "stop when this text is generated (it is not printed)" },
        { "display-prompt", 0, OPT_FLAG, &show_prompt, "print the prompt before the generated text (the default "
                                                       "when stdout is a terminal; not with --chat)" },
        { "no-display-prompt", 0, OPT_FLAG, &hide_prompt, "print only the generated text" },
        { "no-special", 0, OPT_FLAG, &raw, "no BOS, and special-token text in the prompt stays text" },
        { "expert-layers", 0, OPT_FLAG, &expert_layers, "with streamed experts (--ram), also print per MoE layer "
                                                        "what was read and why, and how much of it went unused" },
        { "threads", 't', OPT_INT, &threads, "OpenMP threads (default: all cores)", 0, 1024 },
        OPTS_KV_CACHE(kv_tier, kv_rope, kv_int8),
        OPTS_KV_INDEX(kv_index),
        OPTS_KV_SNAPSHOT(snap_every, snaps),
        { "kv-file", 0, OPT_STR, &kv_path, "keep the KV cache in this file: reuse its prefix, save after generating" },
        OPTS_WEIGHT_FORMATS(mo),
        OPTS_MODEL_MEMORY(mo),
        OPTS_BF16_ACT(mo.bf16_act),
        OPTS_DEVICE(mo),
        OPTS_MPI(cm),
    };
    const struct opts_spec spec = {
        "colibri run [-m DIR] (-p TEXT | -f FILE) [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P] "
        "[--seed S] [--ctx N] [--chat] [--system TEXT]",
        "Generates text after the prompt and streams it to stdout; the last line (on stderr) gives "
        "prefill and decode tokens/s. Stops at the model's end-of-sequence token, --stop text, -n tokens "
        "or a full context. Invalid UTF-8 in the prompt is replaced by U+FFFD with a warning.",
        opts, sizeof opts / sizeof opts[0] };
    char *pos[1];
    int npos, rc = opts_parse(&spec, argc, argv, pos, 0, &npos);
    if (rc) return rc > 0 ? 0 : 2;
    if (n_predict == 0) {
        fprintf(stderr, "colibri: --n-predict: 0 generates nothing; give a count, or -1 for no limit\n");
        return 2;
    }
    if (n_predict < 0) n_predict = INT_MAX;   /* the end of text or a full context stops it */
    if (!prompt == !file) {
        fprintf(stderr, "colibri run: give the prompt with exactly one of -p TEXT or -f FILE\n");
        return 2;
    }
    so.seed = (uint64_t)seed;
    if (system || chat_kwargs) chat = 1;
    mo.n_threads = threads;
    int mpi_status;
    if (cli_mpi_begin("run", &cm, dir, &mo, &mpi_status)) return mpi_status;
    struct colibri_err err = { 0 };
    if (colibri_model_probe(dir, &err)) {
        fprintf(stderr, "colibri run: %s\n", err.msg);
        return cli_mpi_end(&cm, 1);
    }

    size_t len = 0;
    char *owned = NULL;
    if (file) {
        if (!(owned = cli_read_text(file, &len))) { perror(file); return cli_mpi_end(&cm, 1); }
        prompt = owned;
    } else {
        len = strlen(prompt);
    }
    if (len == 0) {
        fprintf(stderr, "colibri run: the prompt is empty: nothing to continue\n");
        free(owned);
        return cli_mpi_end(&cm, 1);
    }

    colibri_tokenizer *tok = NULL;
    colibri_model *m = NULL;
    colibri_session *s = NULL;
    colibri_sampler *smp = NULL;
    colibri_gen *gen = NULL;
    colibri_kv_file *kvf = NULL;
    char *rendered = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0, replaced = 0, rlen;
    int status = 1;

    if (colibri_tokenizer_load(dir, &tok, &err) || cli_load_chat_template(tok, chat_template, &err)) goto fail;
    const char *text = prompt;
    if (chat) {
        struct colibri_chat_msg msgs[2];
        int n = 0;
        if (system) msgs[n++] = (struct colibri_chat_msg){ "system", system };
        msgs[n++] = (struct colibri_chat_msg){ "user", prompt };
        if (cli_chat_render(tok, msgs, (size_t)n, chat_kwargs, &rendered, &rlen, &err)) goto fail;
        text = rendered;
        len = rlen;
    }
    /* A chat rendering already holds its BOS and role tokens (as text to be parsed). */
    unsigned flags = chat ? 0 : raw ? COLIBRI_ENCODE_NO_PARSE_SPECIAL : COLIBRI_ENCODE_ADD_SPECIAL;
    if (colibri_tokenizer_encode(tok, text, len, flags, &ids, &n_ids, &replaced, &err)) goto fail;
    if (replaced)
        fprintf(stderr, "colibri run: warning: %zu invalid UTF-8 sequence%s in the prompt replaced by U+FFFD\n",
                replaced, replaced == 1 ? "" : "s");
    if (colibri_model_load(dir, &mo, &m, &err) || colibri_tokenizer_check_model(tok, m, &err)) goto fail;
    struct colibri_model_info info;
    colibri_model_get_info(m, &info);
    int draft = 0, draft_auto = 0;
    if (opts_mtp(mtp_mode, n_draft, info.n_mtp_layers, &draft, &draft_auto)) {
        status = 2;
        goto done;
    }
    if (!kv_tier) kv_tier = opts_env_kv_tier();
    struct colibri_session_opts sopt = { .n_ctx = n_ctx, .kv_tier = kv_tier, .kv_rope = kv_rope,
                                       .kv_int8 = kv_int8, .kv_index = kv_index,
                                       .kv_snapshot_every = snap_every, .kv_snapshots = snaps };
    if (colibri_session_new(m, &sopt, &s, &err)) goto fail;
    if (kv_path) {
        struct colibri_kv_info ki;
        if (colibri_kv_file_open(s, kv_path, &kvf, &ki, &err)) {
            fprintf(stderr, "colibri run: %s; running without it\n", err.msg);
            err = (struct colibri_err){ 0 };
        } else if (ki.message[0]) {
            fprintf(stderr, "colibri run: kv file %s: %s\n", kv_path, ki.message);
        }
    }
    if (colibri_sampler_new(&so, colibri_model_vocab(m), &smp, &err) || colibri_gen_new(m, s, tok, &gen, &err))
        goto fail;

    struct colibri_gen_opts go = { .sampler = smp, .n_predict = n_predict, .stops = &stop_str,
                                   .n_stops = stop_str ? 1 : 0, .prompt_in_history = 1, .n_draft = draft,
                                   .draft_auto = draft_auto };
    struct gen_print pr = { .out = stdout };
    if (!chat && !hide_prompt && (show_prompt || isatty(1))) {
        fputs(text, stdout);
        fflush(stdout);
    }
    rc = colibri_gen_run(gen, ids, (int)n_ids, &go, gen_print_text, &pr, &err);
    if (rc == COLIBRI_ERANGE && colibri_gen_phase(gen) == COLIBRI_GEN_PHASE_IDLE) {
        fprintf(stderr, "colibri run: %s; shorten it or raise --ctx\n", err.msg);
        goto done;
    }
    if (rc) goto fail;
    printf("\n");
    fflush(stdout);
    struct colibri_gen_stats st;
    colibri_gen_get_stats(gen, &st);
    if (kv_path) fprintf(stderr, "reused %d of %d prompt tokens\n", st.n_cached, st.n_prompt);
    if (kvf && colibri_kv_file_save(kvf, &err)) fprintf(stderr, "colibri run: %s\n", err.msg);
    gen_print_stats(stderr, &st);
    gen_print_expert_stats(stderr, m, (uint64_t)(st.n_prefilled + st.n_generated), st.t_prefill + st.t_generate);
    if (expert_layers) gen_print_expert_layers(stderr, m);
    cli_mpi_print_stats(stderr, m, &cm);
    status = 0;
    goto done;
fail:
    fprintf(stderr, "colibri run: %s\n", err.msg);
done:
    colibri_gen_free(gen);
    colibri_sampler_free(smp);
    colibri_kv_file_close(kvf);
    colibri_session_free(s);
    colibri_model_free(m);
    colibri_tokenizer_free(tok);
    free(ids);
    free(rendered);
    free(owned);
    return cli_mpi_end(&cm, status);
}
