/* colibri.h - the public C API of colibri, an inference engine for the
 * DeepSeek-V3 family (MLA attention + DeepSeekMoE).
 *
 * Conventions (stated once, true for every function below unless it says
 * otherwise):
 *  - Functions return 0 (COLIBRI_OK) or a negative COLIBRI_E* code. On failure
 *    they fill the caller-supplied `struct colibri_err` (which may be NULL) with
 *    a message naming the file, tensor, field or offset at fault, and leave
 *    their out-parameters untouched.
 *  - Objects come in new/free pairs; *_free(NULL) is a no-op.
 *  - A model is read-only after load and may be shared by any number of
 *    sessions on any threads. A session is not thread-safe: one thread at a
 *    time per session.
 *
 * Developer tools (synthetic models, the attention and compute-peak benchmarks,
 * the oracle check) are declared in colibri_dev.h, not here.
 */
#ifndef COLIBRI_H
#define COLIBRI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum colibri_status {
    COLIBRI_OK           = 0,
    COLIBRI_EINVAL       = -1,  /* bad argument or bad input value */
    COLIBRI_EIO          = -2,  /* a file could not be opened, read or written */
    COLIBRI_ENOMEM       = -3,
    COLIBRI_EFORMAT      = -4,  /* a file is malformed (header, JSON, offsets) */
    COLIBRI_EUNSUPPORTED = -5,  /* well-formed but not supported (dtype, model type) */
    COLIBRI_ERANGE       = -6,  /* token id out of range, context full */
    COLIBRI_EMISMATCH    = -7,  /* a file belongs to another model / tier */
};

#define COLIBRI_ERR_MSG_MAX 1024
struct colibri_err {
    int  code;
    char msg[COLIBRI_ERR_MSG_MAX];
};

/* A short name for a status code ("EINVAL", ...); never NULL. */
const char *colibri_status_name(int code);

/* The library's version, and the kernel level its weight products run at on
 * this CPU ("avx512vbmi", "avx512", "avx2", "neon", "scalar"). */
#define COLIBRI_VERSION "0.2.0"
const char *colibri_kernel_level(void);

/* ---------------------------------------------------------------- models */

typedef struct colibri_model colibri_model;

/* Threads: the forward pass runs on OpenMP. libgomp's idle workers spin by
 * default, which on a machine doing anything else costs several-fold (decode
 * measured 5x slower on 2 busy cores); the policy is read once, when the
 * process starts, so a program using the library should run with
 * OMP_WAIT_POLICY=passive GOMP_SPINCOUNT=1000 in its environment (a short
 * spin before sleeping: passive alone pays a wake-up per region, 2-thread
 * decode 0.75x; the colibri command re-executes itself with both). The
 * library never changes the variables itself. */
typedef struct colibri_mpi colibri_mpi;

struct colibri_model_opts {
    int n_threads;              /* 0 = OpenMP default */
    /* Weight formats, by name (colibri_weight_format_names lists them);
     * NULL keeps each tensor as stored (fp8 checkpoints run as shipped). */
    const char *experts_fmt;    /* routed experts */
    const char *dense_fmt;      /* attention, shared experts, dense MLPs */
    const char *embed_fmt;      /* embeddings and lm_head */
    /* 1 keeps an f32 copy of each layer's kv_b for the absorbed decode
     * (H*(dn+dv)*r floats, counted in copy_bytes; about 4 GB at DeepSeek-V3
     * shapes). By default the decode dequantizes each kv_b row as it reads
     * it: the same f32 values, so the same output, and with AVX-512 as fast
     * as reading the copy (bench/kvb-results.md). The copy can be faster
     * where the dequantization is not vectorized (fp8b without AVX-512).
     * Nothing to copy when kv_b is f32. */
    int kv_b_f32;
    /* Leave weights borrowed from the checkpoint mapped on demand instead of
     * reading them in at load (load returns at once; the first forwards read
     * from disk). Loads of models above 80% of the machine's memory are lazy
     * anyway. */
    int lazy_load;
    /* The most memory kept for weights ("12G", "512M", "900K"; binary
     * units; NULL: 70% of the machine's memory when the model does not fit in
     * 80% of it, else no limit). Routed experts the budget cannot hold are
     * streamed from the checkpoint: same output, slower decode. A budget that
     * cannot hold everything but the experts plus one token's experts is
     * COLIBRI_EINVAL stating the minimum. */
    const char *ram;
    /* Where a streamed store keeps the routing counts its pinned hot set is
     * learned from (one small file per model, written when the model is
     * freed); NULL: $XDG_CACHE_HOME/colibri, else ~/.cache/colibri. "none":
     * no state file. Never the model's directory. */
    const char *state_dir;
    /* Expert parallelism over MPI (colibri_mpi_start; NULL: this process
     * alone). Every rank loads the same model with the same options: rank 0
     * runs it and sends each MoE layer's rows to the ranks owning the routed
     * experts they route to; the others serve those requests
     * (colibri_mpi_serve_experts). Same output as without. */
    colibri_mpi *mpi;
    /* Opt-in: products with bf16 weights round their activations to bf16 and
     * run on VDPBF16PS (AVX-512 BF16): faster prefill, slightly different
     * numbers (each activation rounded to 8 significant bits; measured in
     * bench/gemm-results-2.md). Weights in other formats are unaffected. A
     * CPU without AVX-512 BF16, a model with no bf16 weight or routed bf16
     * experts streamed from disk (--ram) is COLIBRI_EUNSUPPORTED naming the
     * option. */
    int bf16_act;
    /* Decode (colibri_session_decode) on a compute device: "host" (the CUDA
     * kernels replayed on the CPU: slow, for checking the device wiring),
     * "cuda" (a build with the CUDA backend: make CUDA=1's build/cuda/colibri;
     * refused by name otherwise). NULL: the CPU. Prefill stays on the CPU.
     * The weights (routed experts included) are copied to the device at
     * load, each session's cache at its capacity when it is created;
     * streamed experts, MPI, DSA models, drafting (--mtp) and bf16_act are
     * refused by name. The device runs one decode at a time: decode the model's
     * sessions from one thread. */
    const char *device;
    /* colibri_convert only: the format of the MTP layers' matrices (eh_proj,
     * attention, shared and routed experts), e.g. "q8" to keep drafts
     * accepted in a model whose --dense/--experts are below 8 bits. NULL:
     * as those roles say. colibri_model_load refuses it (the layer is loaded
     * as converted). */
    const char *mtp_fmt;
};

/* Loads a Hugging Face model directory (config.json + *.safetensors, single or
 * sharded). opts may be NULL. An unknown format name is COLIBRI_EINVAL naming
 * the option. Release with colibri_model_free(). */
int  colibri_model_load(const char *dir, const struct colibri_model_opts *opts,
                        colibri_model **out, struct colibri_err *err);

/* Reads only dir/config.json and checks it as colibri_model_load would: a
 * path that is not a directory, a directory without config.json, a
 * model_type colibri does not implement or a bad field is an error naming it.
 * For front ends, to say so before reading anything else (a tokenizer, a
 * prompt file, gigabytes of weights). */
int  colibri_model_probe(const char *dir, struct colibri_err *err);
void colibri_model_free(colibri_model *m);

struct colibri_model_info {
    const char *family;         /* "deepseek_v3" or "kimi_k2" */
    int n_layers, n_dense_layers, n_moe_layers;
    int hidden, vocab, n_heads;
    int n_routed_experts, n_shared_experts, n_experts_per_tok;
    int kv_lora_rank, qk_rope_head_dim, q_lora_rank;
    int max_position_embeddings;
    int64_t n_params;           /* every tensor's element count, summed */
    int64_t bytes_by_dtype[16]; /* indexed by safetensors dtype, see names */
    const char *dtype_names[16];
    int64_t kv_bytes_per_token; /* latent + rope (+ DSA index key), f32, all layers; DeepSeek-V4:
                                   its compressed entries (and index keys) per token, f32 */
    int64_t kv_session_bytes;   /* cache bytes a session holds whatever its length (V4: the window
                                   rings, f32); 0 for MLA */
    char attention[192];        /* the attention in words */
    int64_t snapshot_bytes;     /* one session snapshot of every layer's state (GLM-5.3: the KDA
                                   states and the indexed layers' open pools); 0 where not stated */
    int64_t weight_bytes;       /* every weight as loaded (data + scales) */
    int64_t active_bytes;       /* weight bytes one decode step reads: attention, dense or
                                   shared MLPs, top-k average routed experts, routers, lm_head,
                                   one embedding row */
    int64_t expert_bytes;       /* every routed expert (in memory or on disk) */
    int64_t expert_cache_bytes; /* routed-expert bytes kept in memory (= expert_bytes when resident) */
    int64_t copy_bytes;         /* copies made at load for speed (f32 kv_b) */
    int64_t resident_bytes;     /* what the loaded model holds: weights, copies, norms */
    const char *expert_store;   /* "resident" or "streamed" */
    int n_mtp_layers;           /* multi-token-prediction layers loaded (0: none); config's num_nextn_predict_layers */
    int n_mtp_declared;
    int64_t mtp_bytes;          /* their weights (included in weight_bytes) */
    int64_t mtp_active_bytes;   /* weight bytes one MTP draft reads */
};
void colibri_model_get_info(const colibri_model *m, struct colibri_model_info *info);

/* Whether the checkpoint's files are still what was loaded: COLIBRI_EIO
 * naming the file when one was truncated while mapped (a forward that read
 * past its new end failed with the same error instead of killing the
 * process: colibri guards the mappings with a SIGBUS handler for the
 * process, and passes faults elsewhere to the handler that was there
 * before), or its size or mtime changed in place; a file replaced by rename
 * leaves the loaded one whole and is not reported. A stat per file.
 * Thread-safe. */
int colibri_model_check(const colibri_model *m, struct colibri_err *err);

/* What the expert store did since load: expert acquisitions by the MoE
 * layers, those that had to start a read of the expert (0 when resident),
 * experts named in prefetch hints, bytes read from the checkpoint; experts
 * read (misses plus reads started by a prefetch or a next-layer prediction),
 * of those prefetched how many an acquire used, acquires that waited for a
 * read already in flight and the time acquires spent waiting; routed experts
 * of layers that had a next-layer prediction and how many of them it named
 * (its recall); layer steps that computed a next-layer prediction, and of
 * those how many withheld its reads because the layer's recent predictions
 * named too few of the experts its routing then used. Safe to call while other threads run forwards (the counts
 * are atomic). */
struct colibri_expert_stats {
    uint64_t acquires, misses, prefetch_hints, bytes_read;
    uint64_t reads, prefetch_reads, prefetch_used, waits, io_wait_ns, predicted, predicted_hits;
    uint64_t predict_steps, predict_withheld;
};
void colibri_model_expert_stats(const colibri_model *m, struct colibri_expert_stats *out);

/* One layer's share of those counts, kept by a store that reads (zeros for a
 * resident store, a dense layer or a layer out of range). Reads by why:
 * [0] an acquire missed, [1] the layer's routing named the expert (prefetch),
 * [2] the previous layer's prediction named it (speculative); for each the
 * experts read, the bytes read and how many of those reads an acquire used
 * before the slot was reused (reads - used: wasted reads; a read still
 * cached and not yet used counts as wasted). Then the layer's predictions:
 * routed experts of steps that had one and how many it named, steps that
 * predicted and how many withheld their reads. */
struct colibri_expert_layer_stats {
    uint64_t reads[3], bytes[3], used[3];
    uint64_t predicted, predicted_hits, predict_steps, predict_withheld;
};
void colibri_model_expert_layer_stats(const colibri_model *m, int layer, struct colibri_expert_layer_stats *out);

/* ------------------------------------------- expert parallelism over MPI */

/* Built with `make MPI=1`; otherwise each of these is COLIBRI_EUNSUPPORTED
 * saying so. Launched with `mpirun -np N colibri ... --mpi`: rank 0 holds
 * attention, the dense layers, the shared experts, sampling and the KV cache;
 * each MoE layer's routed experts are dealt out over the ranks (rank 0 too
 * unless no_rank0_experts), each rank with its own expert store and --ram
 * budget. Per MoE layer rank 0 sends each owner one message (the distinct
 * rows its experts need) before computing the shared experts, and sums the
 * experts' returned rows in ascending expert order, exactly as one process
 * does, so the output is the same bits. Not thread-safe unless stated. */
struct colibri_mpi_opts {
    /* Longest wait for a rank's answer to one MoE layer; past it the request
     * fails with COLIBRI_EIO naming the rank, and so does every later one
     * (0: 60 s). A model load waits at most 10 times as long. */
    double timeout_s;
    int no_rank0_experts;       /* 1: only ranks 1..N-1 own routed experts */
    /* How many of each layer's experts each rank owns: in proportion to
     * weights[rank] (n_weights must be the number of ranks, the same values
     * on every rank); or, with disk_rate_dir, to each rank's read rate of the
     * model files there, timed by each rank at start (O_DIRECT, at most
     * 256 MiB or 2 s) and gathered from all; else equal shares. Which rank
     * owns an expert never changes the output. */
    const double *weights;
    int n_weights;
    const char *disk_rate_dir;
};
/* Starts MPI in this process (once). Release with colibri_mpi_end(). */
int colibri_mpi_start(const struct colibri_mpi_opts *opts, colibri_mpi **out, struct colibri_err *err);
int colibri_mpi_rank(const colibri_mpi *p);
int colibri_mpi_size(const colibri_mpi *p);
/* The weight of rank's expert share (a read rate in bytes/s with
 * disk_rate_dir); 0 when the shares are equal. */
double colibri_mpi_weight(const colibri_mpi *p, int rank);
/* On a rank other than 0, after colibri_model_load with opts.mpi: runs rank
 * 0's requests on m until rank 0 frees its model (0). A request it cannot
 * run (an expert read failed) is answered with the error, and it serves on. */
int colibri_mpi_serve_experts(colibri_mpi *p, colibri_model *m, struct colibri_err *err);
/* What rank 0 exchanged with `rank` for model m (loaded with opts.mpi):
 * layer requests, bytes each way (headers included) and the seconds rank 0
 * waited for its answers after doing its own share. rank 0: its own share
 * (no bytes), and as requests the layers whose exchange waited on any other
 * rank (the round trips on rank 0's path: one per such layer, however many
 * owners it asked at once). COLIBRI_EINVAL for a model without MPI or a rank out of range. */
struct colibri_mpi_rank_stats {
    uint64_t requests, bytes_sent, bytes_received, experts_run;
    double wait_s;
};
int colibri_mpi_stats(const colibri_model *m, int rank, struct colibri_mpi_rank_stats *out);
/* Ends MPI for this process and frees p (after every model using it is
 * freed): 0 after MPI_Finalize; COLIBRI_EIO when a rank stopped answering
 * or died, without finalizing (that would wait for it forever): the caller
 * then ends the whole job with colibri_mpi_abort(). NULL: 0. */
int colibri_mpi_end(colibri_mpi *p);
/* MPI_Abort: ends every rank of the job with exit status code. Never returns. */
_Noreturn void colibri_mpi_abort(int code);

/* -------------------------------------------------------------- sessions */

typedef struct colibri_session colibri_session;

struct colibri_session_opts {
    int n_ctx;                  /* 0 = the model's max_position_embeddings */
    /* KV-cache tier by name (colibri_kv_tier_names lists them; NULL is f32,
     * the reference), optionally with per-layer entries
     * "TIER@LAYERS:SETTING[:SETTING]..." (LAYERS N or N-M, SETTING a tier
     * or rope=PREC; e.g. "int8r@1:rope=f32" keeps layer 1's RoPE part in
     * f32); and the RoPE part's precision (colibri_kv_rope_names; NULL: each
     * layer's tier's default). Unknown names, layers outside the model and
     * overlapping entries: COLIBRI_EINVAL naming them. */
    const char *kv_tier;
    const char *kv_rope;
    /* Decode attention on int8/int4/fp8 tiers with integer dot products
     * (AVX-512 VNNI): 0 exact (default), 1 int8 rotated query, 2 two-part
     * (16-bit) query. Faster, not exact: measure its cost with colibri eval
     * --decode (entries TIER+int8 / TIER+int16). Ignored by other tiers. */
    int kv_int8;
    /* DeepSeek Sparse Attention models: the tier of the index keys the
     * cache rows carry, "f32" (NULL; exact) or "fp8" (e4m3 with one f32 scale
     * per row, 132 B per token per layer at index_head_dim 128; its cost is
     * in bench/dsa-results.md). Ignored by other models. */
    const char *kv_index;
    /* Models whose attention state does not rewind (DeepSeek-V4: a window
     * ring and compressor blocks): the session snapshots that state every
     * kv_snapshot_every positions (0: 512), and before the last token and at
     * the end of each prefill call (the same prompt again keeps all but its
     * last token), keeping at most kv_snapshots of them (0: 8), spread over the
     * context; colibri_session_resume_point says where it can go back to.
     * Each snapshot holds every layer's window and open blocks (about 23 MB
     * at V4-Flash dims), counted in colibri_session_bytes. Ignored by other
     * models; negative values are refused. */
    int kv_snapshot_every;
    int kv_snapshots;
};

int  colibri_session_new(colibri_model *m, const struct colibri_session_opts *opts,
                         colibri_session **out, struct colibri_err *err);
void colibri_session_free(colibri_session *s);

/* Feeds n tokens after the current position (MLA in the expanded form, or the
 * absorbed one after cached rows when cheaper; slices of 2048 tokens).
 * If logits is non-NULL it receives n x vocab floats when all_logits is set,
 * else only the last position's vocab floats. */
int colibri_session_prefill(colibri_session *s, const int32_t *tokens, int n,
                            float *logits, int all_logits, struct colibri_err *err);

/* Feeds one token with absorbed MLA; logits (vocab floats) may be NULL. */
int colibri_session_decode(colibri_session *s, int32_t token, float *logits,
                           struct colibri_err *err);

/* Number of tokens in the session's cache, and its capacity. */
int colibri_session_pos(const colibri_session *s);
int colibri_session_n_ctx(const colibri_session *s);

/* The token ids cached at positions [0, pos); valid until the next call that
 * changes the session. */
const int32_t *colibri_session_tokens(const colibri_session *s);

/* Length of the longest common prefix of the cached tokens and tokens[0..n).
 * To reuse a cache for a new prompt: truncate to this length (keeping at least
 * one token to prefill, so the last prompt token yields logits) and prefill
 * the rest. */
int colibri_session_common_prefix(const colibri_session *s, const int32_t *tokens, int n);

/* Bytes the session's KV cache spends per token: every part of every layer
 * (latent, RoPE, index keys), each in its layer's layout. */
int64_t colibri_session_kv_token_bytes(const colibri_session *s);

/* Bytes the session holds: its KV cache at full capacity (pages are
 * committed as rows are written), attention scratch and run buffers. */
int64_t colibri_session_bytes(const colibri_session *s);

/* The largest position <= n (n clamped to [0, pos]) the session can be
 * truncated to, or copied from: n itself for a model whose cache rewinds
 * anywhere (MLA); for one whose attention state only goes forward
 * (DeepSeek-V4), its position, the latest of its snapshots at or before n
 * (colibri_session_opts.kv_snapshot_every), or 0. To go back to n: truncate
 * to this, then feed the tokens from it to n again (the same logits as a
 * cold prefill, bit for bit). */
int colibri_session_resume_point(const colibri_session *s, int n);

/* Forgets every cached token at position >= n (n <= pos). A session whose
 * attention state only goes forward goes back exactly to n or refuses
 * (COLIBRI_EUNSUPPORTED naming the resume point) when n is not one of its
 * resume points (colibri_session_resume_point(s, n) != n). */
int colibri_session_truncate(colibri_session *s, int n, struct colibri_err *err);

/* Makes dst's cache the first n cached positions of src (n <= src's pos and
 * < dst's n_ctx): their rows are copied byte for byte, so dst then computes
 * exactly what it would after prefilling those tokens itself. Both sessions
 * must be of one model with the same KV layout (else COLIBRI_EINVAL naming
 * the difference, dst untouched). A model whose attention state only goes
 * forward copies the state of a resume point of src (n must be one:
 * colibri_session_resume_point(src, n) == n, else COLIBRI_EUNSUPPORTED) and
 * src's snapshots up to it. Drafting state (MTP) is not copied: dst's
 * drafts after the copied rows are worse, never its output (as after a KV
 * file restore). */
int colibri_session_copy_prefix(colibri_session *dst, const colibri_session *src, int n, struct colibri_err *err);

int colibri_model_vocab(const colibri_model *m);

/* The names colibri_model_opts' formats, colibri_session_opts.kv_tier and
 * .kv_rope accept, in a fixed order joined by sep (e.g. " " or ","), written
 * to buf[n] as snprintf would: NUL-terminated when n > 0, cut at n - 1 bytes.
 * Each returns the length of the whole list; a result >= n means buf was too
 * small. Thread-safe. */
size_t colibri_weight_format_names(char *buf, size_t n, const char *sep);
size_t colibri_kv_tier_names(char *buf, size_t n, const char *sep);
size_t colibri_kv_rope_names(char *buf, size_t n, const char *sep);

/* ------------------------------------------------------------ conversion */

/* Rewrites the checkpoint in src_dir into dst_dir with the weight formats of
 * opts (NULL names keep a role as stored): a sharded safetensors container
 * (format in docs/FORMATS.md) that colibri_model_load reads like any
 * checkpoint. Resumable (finished shards of an identical earlier run are
 * kept), atomic per shard, verified after writing. shard_bytes 0 = 4 GiB. */
struct colibri_convert_report { int shards, shards_reused, tensors; uint64_t bytes; };
int colibri_convert(const char *src_dir, const char *dst_dir, const struct colibri_model_opts *opts,
                    uint64_t shard_bytes, int show_progress, struct colibri_convert_report *rep,
                    struct colibri_err *err);

/* ============================================================ tokenizer
 * A model's own tokenizer (byte-level BPE from tokenizer.json) and chat
 * template. A tokenizer is read-only after load: any number of threads may
 * encode/decode with it at once. Invalid UTF-8 in text is replaced by U+FFFD
 * (as Python's errors="replace" does) and the count of replacements is
 * reported; it is never an error. Unsupported tokenizer.json features (model
 * or pre-tokenizer types, normalizers) are refused at load, by name. */

typedef struct colibri_tokenizer colibri_tokenizer;

/* Reads dir/tokenizer.json (required), dir/tokenizer_config.json and
 * dir/generation_config.json (optional). Release with colibri_tokenizer_free(). */
int  colibri_tokenizer_load(const char *dir, colibri_tokenizer **out, struct colibri_err *err);
void colibri_tokenizer_free(colibri_tokenizer *t);

enum colibri_encode_flags {
    COLIBRI_ENCODE_ADD_SPECIAL   = 1 << 0, /* BOS/EOS as tokenizer_config.json says */
    COLIBRI_ENCODE_NO_PARSE_SPECIAL = 1 << 1, /* special-token text stays plain text */
};

/* Encodes text[0..len) into a new malloc'd array *ids of *n_ids ids (free
 * with free(); NULL when *n_ids is 0). *n_replaced (may be NULL) receives the
 * number of invalid UTF-8 sequences replaced by U+FFFD. */
int colibri_tokenizer_encode(const colibri_tokenizer *t, const char *text, size_t len,
                             unsigned flags, int32_t **ids, size_t *n_ids, size_t *n_replaced,
                             struct colibri_err *err);

/* Decodes ids to the exact bytes they stand for: a new malloc'd,
 * NUL-terminated *text of *len bytes (free with free()). skip_special drops
 * special tokens. An id out of range is COLIBRI_ERANGE. */
int colibri_tokenizer_decode(const colibri_tokenizer *t, const int32_t *ids, size_t n_ids,
                             int skip_special, char **text, size_t *len, struct colibri_err *err);

int32_t colibri_tokenizer_n_vocab(const colibri_tokenizer *t); /* largest id + 1 */
/* Whether t's ids all have a row in m's embedding and logits: a tokenizer
 * with more ids than the model's vocab_size (one from another model) is
 * COLIBRI_EINVAL naming both sizes. A model larger than its tokenizer (a
 * padded vocabulary) is fine. colibri_gen_new checks it too. */
int colibri_tokenizer_check_model(const colibri_tokenizer *t, const colibri_model *m, struct colibri_err *err);
int32_t colibri_tokenizer_bos(const colibri_tokenizer *t);     /* -1 if none */
int32_t colibri_tokenizer_eos(const colibri_tokenizer *t);     /* -1 if none */
/* 1 for ids that end generation: eos_token and generation_config eos ids. */
int     colibri_tokenizer_is_eog(const colibri_tokenizer *t, int32_t id);
/* The id of a token given by its exact text (added tokens first), or -1. */
int32_t colibri_tokenizer_token_id(const colibri_tokenizer *t, const char *text);

/* Chat messages; content may be NULL (rendered as ""). role is one of
 * "system", "user", "assistant", "tool". */
struct colibri_chat_msg {
    const char *role;
    const char *content;
};

/* The chat template in use: "jinja" when the model ships one
 * (tokenizer_config.json chat_template, else chat_template.jinja) or one was
 * set with colibri_tokenizer_set_chat_template(), run by colibri's Jinja
 * interpreter as transformers' apply_chat_template runs it; otherwise the
 * built-in family its tokens name ("deepseek_v3", "kimi_k2", "glm"), or
 * "deepseek_v4" when the directory's config.json says model_type
 * deepseek_v4 (DeepSeek-V4's format, which renders tools, tool calls and
 * the variables thinking and reasoning_effort too), or "none". colibri_tokenizer_chat_origin() says where it came from (a file
 * path, "built-in" or "none"). */
const char *colibri_tokenizer_chat_name(const colibri_tokenizer *t);
const char *colibri_tokenizer_chat_origin(const colibri_tokenizer *t);

/* 0 when chat rendering works; else why not: the shipped template uses
 * something the interpreter does not support (COLIBRI_EUNSUPPORTED naming the
 * construct and line: the built-in renderers are not used in its place), or
 * there is no template at all. */
int colibri_tokenizer_chat_check(const colibri_tokenizer *t, struct colibri_err *err);

/* Whether the Jinja chat template's source names the variable `name` as a
 * word (1) or never (0: a keyword argument of that name would have no
 * effect); -1 when the template is not Jinja. */
int colibri_tokenizer_chat_reads(const colibri_tokenizer *t, const char *name);

/* Replaces the chat template with the Jinja text src[0..len) (e.g. the file
 * of --chat-template); origin names it in messages. Call before the
 * tokenizer is shared between threads. On failure the old one stays. */
int colibri_tokenizer_set_chat_template(colibri_tokenizer *t, const char *src, size_t len, const char *origin,
                                        struct colibri_err *err);

/* Renders messages with the model's chat template (adding the assistant
 * prompt when add_generation_prompt), as a new malloc'd NUL-terminated
 * string (free with free()). The result already holds BOS where the template
 * puts it: encode it without COLIBRI_ENCODE_ADD_SPECIAL. COLIBRI_EUNSUPPORTED
 * when the model has no recognised template. */
int colibri_chat_render(const colibri_tokenizer *t, const struct colibri_chat_msg *msgs,
                        size_t n_msgs, int add_generation_prompt, char **text, size_t *len,
                        struct colibri_err *err);

/* The same from JSON, for what struct colibri_chat_msg cannot carry:
 * messages_json is an array of OpenAI-style message objects (role, content,
 * tool_calls, tool_call_id, name, reasoning_content...), passed to the
 * template as they are; tools_json an array of tool definitions or NULL;
 * vars_json an object of apply_chat_template's other keyword arguments or
 * NULL: "documents" (a list of objects) and any template variable
 * (enable_thinking, thinking...), set over the special tokens. As under
 * transformers, a Jinja template also gets every special token the
 * tokenizer config names (bos_token, eos_token, pad_token, unk_token,
 * image_token...), and numbers as the JSON spells them (2.0 a float, 2 an
 * int). A built-in renderer refuses, by name, tools, variables and message
 * fields other than role and string content, rather than drop them
 * (deepseek_v4 takes what its format has a place for: src/tok/tok_chat_v4.h). */
int colibri_chat_render_json(const colibri_tokenizer *t, const char *messages_json, const char *tools_json,
                             const char *vars_json, int add_generation_prompt, char **text, size_t *len,
                             struct colibri_err *err);

/* Streaming detokenizer: push ids one at a time; each call gives the bytes
 * that are ready, never ending inside a UTF-8 character. All outputs plus the
 * final flush equal colibri_tokenizer_decode() of the same ids. The tokenizer
 * must outlive it. Not thread-safe. */
typedef struct colibri_detok colibri_detok;
int  colibri_detok_new(const colibri_tokenizer *t, int skip_special, colibri_detok **out,
                       struct colibri_err *err);
void colibri_detok_free(colibri_detok *d);
/* *text (valid until the next call on d) and *len get the ready bytes. */
int  colibri_detok_push(colibri_detok *d, int32_t id, const char **text, size_t *len,
                        struct colibri_err *err);
void colibri_detok_flush(colibri_detok *d, const char **text, size_t *len);

/* ============================================================== sampler
 * Picks the next token from logits. Each sampler owns its RNG (seeded from
 * opts.seed) and its token history: the same seed, settings and logits give
 * the same tokens, and samplers never share state. Not thread-safe: one
 * thread at a time per sampler.
 *
 * Order of operations: repetition/presence/frequency penalties on the raw
 * logits (over the last repeat_last_n accepted tokens); then temperature <= 0
 * means greedy (argmax, lowest id on ties); otherwise logits / temperature,
 * top-k, min-p (drop p < min_p * p_max), softmax over the survivors, top-p
 * (the smallest most-likely set with mass >= top_p), draw. Ties in ranking
 * go to the lower id. */
struct colibri_sampler_opts {
    float    temperature;       /* <= 0: greedy */
    int      top_k;             /* <= 0: off */
    float    top_p;             /* >= 1: off */
    float    min_p;             /* <= 0: off */
    float    repeat_penalty;    /* 1: off; > 1 discourages repeats (divides positive logits) */
    int      repeat_last_n;     /* window for the penalties; 0: off, -1: the whole history */
    float    presence_penalty;  /* subtracted once from any token in the window */
    float    frequency_penalty; /* subtracted per occurrence in the window */
    uint64_t seed;
    /* Added to the logits before anything else (OpenAI's logit_bias): +-100
     * in effect forces or bans a token. Copied by colibri_sampler_new. */
    const struct colibri_logit_bias *logit_bias;
    size_t   n_logit_bias;
    /* Constrained decoding (NULL: none): only tokens the grammar allows are
     * sampled, end-of-generation only where its text is complete. The rule:
     * sample as without it; if the grammar allows that token take it, else
     * mask every token it does not allow and sample again (exact for greedy
     * and for plain temperature sampling). The grammar must outlive the
     * sampler; colibri_sampler_accept() advances it with sampled tokens only. */
    const struct colibri_grammar *grammar;
};

struct colibri_logit_bias { int32_t token; float bias; };

/* Grammars for constrained decoding, compiled against a tokenizer's
 * vocabulary. Read-only once made: any number of samplers may use one.
 * colibri_grammar_new takes GBNF text (llama.cpp's format: rules
 * `name ::= ...`, `root` first to match; see src/sample/grammar.h);
 * colibri_grammar_from_json_schema a JSON Schema (NULL: any JSON object),
 * the subset in src/sample/grammar_schema.c, other keywords refused by name
 * (COLIBRI_EUNSUPPORTED). A grammar that no token of the vocabulary can
 * start is COLIBRI_EINVAL. Release with colibri_grammar_free(). */
typedef struct colibri_grammar colibri_grammar;
int  colibri_grammar_new(const colibri_tokenizer *t, const char *gbnf, size_t len, colibri_grammar **out,
                         struct colibri_err *err);
int  colibri_grammar_from_json_schema(const colibri_tokenizer *t, const char *schema_json, colibri_grammar **out,
                                      struct colibri_err *err);
/* Another reference to g (returned), for a second owner; each owner calls
 * colibri_grammar_free, the last one frees it. Thread-safe. */
colibri_grammar *colibri_grammar_share(colibri_grammar *g);
void colibri_grammar_free(colibri_grammar *g);

/* temperature 0.8, top_k 40, top_p 0.95, min_p 0.05, penalties off
 * (repeat_penalty 1, repeat_last_n 64), seed 0, no logit bias. The order:
 * logit bias, penalties, then greedy (temperature 0) or temperature, min-p,
 * top-k, top-p and a seeded draw. */
struct colibri_sampler_opts colibri_sampler_default_opts(void);

typedef struct colibri_sampler colibri_sampler;
/* COLIBRI_EINVAL names the option out of range. */
int  colibri_sampler_new(const struct colibri_sampler_opts *opts, int32_t n_vocab,
                         colibri_sampler **out, struct colibri_err *err);
void colibri_sampler_free(colibri_sampler *s);
/* Returns the chosen token id (>= 0) or a negative code. logits has n_vocab
 * floats and is left untouched. Does not record the token: call accept. */
int32_t colibri_sampler_sample(colibri_sampler *s, const float *logits, struct colibri_err *err);
/* Records a token (prompt or generated) for the penalties. */
void colibri_sampler_accept(colibri_sampler *s, int32_t token);
/* Forgets the history and re-seeds with seed. */
void colibri_sampler_reset(colibri_sampler *s, uint64_t seed);

/* Stop strings over streamed text: feed the text as it is generated; text
 * that might be the start of a stop string is held back until it is known not
 * to be. Not thread-safe. */
typedef struct colibri_stop colibri_stop;
/* Copies the n stop strings (empty strings are ignored). */
int  colibri_stop_new(const char *const *stops, size_t n, colibri_stop **out, struct colibri_err *err);
void colibri_stop_free(colibri_stop *st);
/* Feeds text; *out and *out_len (valid until the next call) get the text that is
 * safe to show. Returns 1 when a stop string has been completed (the output
 * then ends just before it and later calls output nothing), else 0, or a
 * negative code. */
int  colibri_stop_feed(colibri_stop *st, const char *text, size_t len, const char **out,
                       size_t *out_len, struct colibri_err *err);
/* At the end of generation: the held-back text (none after a stop). */
void colibri_stop_flush(colibri_stop *st, const char **out, size_t *out_len);

/* ============================================================== serving
 * For programs that run sessions on threads other than the one that loaded
 * the model (colibri serve runs every session on one scheduler thread). */

/* Makes forward passes started from the calling thread use n compute threads
 * (n <= 0: leave the default). colibri_model_opts.n_threads reaches only the
 * thread that called colibri_model_load; a worker thread calls this once
 * before its first prefill or decode. Affects only the calling thread. */
void colibri_thread_set_compute_threads(int n);

/* One decode step for n sessions of the same model: s[i] is fed tokens[i]
 * (as colibri_session_decode would) and logits[i] (vocab floats, may be NULL)
 * receives its next-token logits. Sessions must be distinct and share one
 * model. One batched forward: every weight is read once for all sessions, and
 * each session gets exactly the logits colibri_session_decode would give it.
 * Returns 0 with *n_done (may be NULL) = n, or a negative code with *n_done
 * set to the number of leading sessions that advanced: s[*n_done] failed,
 * later ones are untouched. */
int colibri_batch_decode(colibri_session *const *s, const int32_t *tokens, int n, float *const *logits,
                         int *n_done, struct colibri_err *err);

/* ============================================================== KV files
 * A session's KV cache kept in a file (docs/FORMATS.md, "KV files"), so that
 * a later run restores the cached prefix instead of prefilling it again.
 *
 * A file belongs to one model (a fingerprint of its config and tensor table),
 * one set of weight formats, and one KV tier with all its codec parameters;
 * a file of anything else is refused with COLIBRI_EMISMATCH and a message that
 * names the difference and how to reuse the file ("saved with --kv tq4; run
 * with --kv tq4 to reuse it"), and is left exactly as it was. One exception:
 * an f32 file opened by a session of a quantized tier is re-encoded in memory
 * and rewritten in that tier at the next save (the old file stays whole until
 * the new one replaces it by rename).
 *
 * Saving is crash-safe: rows are synced before the count that publishes them,
 * so a crash loses at most the positions of the save in progress. Opening
 * trims a torn or damaged tail to the last sound position and says how many
 * were kept; a damaged file is never misread. One writer per file (an
 * advisory lock). A colibri_kv_file is bound to the session it was opened
 * with, which must outlive it. Not thread-safe. */

/* A DeepSeek-V4 session (an attention state that only goes forward) keeps
 * a version-3 file instead: chunks of tokens and compressed rows, each with
 * the state's snapshot at its end (docs/FORMATS.md); it resumes at the last
 * chunk's end and keeps the chunk ends as resume points
 * (colibri_session_resume_point). The rules above hold for it with
 * "positions" read as chunks; files of one kind refuse the other kind's
 * sessions by their read_version. */
typedef struct colibri_kv_file colibri_kv_file;

struct colibri_kv_info {
    int32_t restored;           /* positions restored into the session */
    int32_t in_file;            /* positions the file had published */
    int32_t trimmed;            /* published positions dropped (torn tail, failed checksum) */
    int created;                /* no file existed: an empty one was created */
    int upgraded;               /* an f32 file re-encoded to the session's tier; rewritten at the next save */
    int read_only;              /* written by a newer colibri: restored, never saved */
    char message[384];          /* why positions were trimmed; "" when none were */
};

/* Opens path for session s, which must be empty (position 0), creating the
 * file when absent, and restores its positions into s (at most n_ctx). info
 * may be NULL. Refusals leave the file untouched and s empty:
 * COLIBRI_EMISMATCH (another model, weight formats, tier or codec),
 * COLIBRI_EFORMAT / EUNSUPPORTED (not a readable KV file, or a newer one),
 * COLIBRI_EIO (I/O error, or another process holds the file). Release with
 * colibri_kv_file_close(). */
int colibri_kv_file_open(colibri_session *s, const char *path, colibri_kv_file **out,
                         struct colibri_kv_info *info, struct colibri_err *err);

/* Makes the file hold exactly the session's cached positions: appends those
 * not yet on disk; when the session diverged from the file (truncated, then
 * fed other tokens) the file's count is cut back first, then the new
 * positions are written from there. After a failed save the file still holds
 * its last saved state; close and reopen it to save again. */
int colibri_kv_file_save(colibri_kv_file *f, struct colibri_err *err);
void colibri_kv_file_close(colibri_kv_file *f);

/* Prepares s for the prompt prompt[0..n): keeps the longest common prefix of
 * its cached tokens and the prompt, leaving at least one prompt token to
 * prefill (its logits start generation), and truncates the rest. Returns the
 * number of positions kept (reused), or a negative code. Prefill
 * prompt[kept..n) next. */
int colibri_session_reuse_prefix(colibri_session *s, const int32_t *prompt, int n,
                                 struct colibri_err *err);

/* What a KV file holds and whether it is sound; read-only (no lock, nothing
 * written). Returns 0 when the header is readable (first_bad says whether
 * every published position is sound), else the header's error. */
struct colibri_kv_file_stat {
    int write_version, read_version;
    int read_only;              /* write version newer than this build */
    uint64_t model_fingerprint, salt, codec_check, latent_seed, rope_seed;
    char weights[48], tier[16], rope[16];
    int n_layers, r, dr, latent_bits, rope_bits;
    int latent_bytes, rope_bytes, row_bytes, record_bytes;
    int64_t file_bytes;
    int64_t published, valid;   /* positions published; sound from position 0 */
    int64_t first_bad;          /* first published position that is not sound, or -1 */
    int64_t tail_bytes;         /* bytes after the published positions */
    char problem[256];          /* why first_bad is not sound */
    /* The options that give a session the file's layout ("--kv int8r@1:rope=f32");
     * version 2 files keep codecs, sizes and seeds per layer and part, and
     * the single-layout fields above (bits, seeds, bytes, codec_check) are 0. */
    char layout[160];
    int index_key_layers;       /* layers whose rows carry an index key */
    /* Version 3 (a DeepSeek-V4 state file): chunks published and sound, and
     * the bytes of each chunk's snapshot; published / valid count positions
     * up to the last sound chunk's end, first_bad the position where the
     * first unsound chunk starts. The row fields above are 0. */
    int64_t chunks, chunks_valid, snapshot_bytes;
};
int colibri_kv_file_stat(const char *path, struct colibri_kv_file_stat *st, struct colibri_err *err);

/* ============================================================ generation
 * A generator turns prompt ids into generated tokens and streamed text in one
 * session. Per token it masks the ids the tokenizer has no text for (models
 * pad their vocabulary), samples with the caller's sampler, ends on the
 * tokenizer's end-of-generation ids (colibri_tokenizer_is_eog), detokenizes
 * (special tokens give no text), holds back what may begin a stop string,
 * and checks the limits and the cancel callback.
 *
 * It runs step by step, so that the model can run outside it (colibri serve
 * runs one colibri_batch_decode over many sessions, then hands each
 * generator its logits):
 *
 *   colibri_gen_start(g, prompt, n, &opts, err);          reuse the cached prefix
 *   while (colibri_gen_phase(g) == COLIBRI_GEN_PHASE_PREFILL)
 *       colibri_gen_prefill(g, chunk, err);               prompt tokens through the model
 *   while (colibri_gen_phase(g) == COLIBRI_GEN_PHASE_SAMPLE) {
 *       colibri_gen_sample(g, &step, err);                logits -> token -> text
 *       show step.text, then step.tail;
 *       if (colibri_gen_phase(g) == COLIBRI_GEN_PHASE_FEED)
 *           colibri_gen_decode(g, err);                   or colibri_gen_batch_decode, or see colibri_gen_pending
 *   }
 *
 * colibri_gen_run() is that loop with a text callback.
 *
 * What enters the session's cache: the prompt and each generated token that
 * does not end the generation. The last token (an end-of-generation id, the
 * one that completes a stop string, the n_predict-th, or one sampled when the
 * context is full) is not fed: its logits would go unused, and a prompt that
 * holds it (a chat's next turn) prefills it along with its own new tokens,
 * where a decode step would read every weight for it alone.
 *
 * Text: the bytes of the generated tokens, cut just before a completed stop
 * string. A piece never ends inside a UTF-8 character that later bytes could
 * complete. With repair_utf8 every piece is valid UTF-8 (each invalid
 * sequence replaced by U+FFFD, as Python's errors="replace"); without it the
 * bytes are passed as decoded. All pieces, in order, are the whole text.
 *
 * Ownership: a generator is bound to the model, session and tokenizer it was
 * created with, which must outlive it; it borrows each generation's sampler
 * (which must outlive that generation and is used by nothing else meanwhile)
 * and copies the prompt and the stop strings. Text and token pointers it
 * returns are valid until the next call on it. Thread safety: as its session
 * (one thread at a time); the cancel callback runs on that thread.
 * Errors: a call in the wrong phase is COLIBRI_EINVAL naming the phase and
 * changes nothing; a failure while generating (the model, the sampler, the
 * detokenizer, memory) ends the generation with COLIBRI_GEN_END_ERROR, the
 * session's cache then holding what colibri_session_pos says. start may be
 * called in any phase and begins anew. */

typedef struct colibri_gen colibri_gen;

enum colibri_gen_phase {
    COLIBRI_GEN_PHASE_IDLE = 0,     /* nothing started */
    COLIBRI_GEN_PHASE_PREFILL = 1,  /* prompt tokens left to run: colibri_gen_prefill */
    COLIBRI_GEN_PHASE_SAMPLE = 2,   /* logits ready: colibri_gen_sample */
    COLIBRI_GEN_PHASE_FEED = 3,     /* tokens to run: colibri_gen_decode, or pending + fed */
    COLIBRI_GEN_PHASE_DONE = 4,     /* ended: colibri_gen_get_stats says why */
};

/* Why a generation ended; colibri_gen_end_name gives "eos", "stop", "limit",
 * "context", "cancelled", "error" ("" for NONE). */
enum colibri_gen_end {
    COLIBRI_GEN_END_NONE = 0,       /* still running */
    COLIBRI_GEN_END_EOS = 1,        /* an end-of-generation id (counted, no text) */
    COLIBRI_GEN_END_STOP = 2,       /* a stop string was completed */
    COLIBRI_GEN_END_LIMIT = 3,      /* n_predict tokens generated */
    COLIBRI_GEN_END_CONTEXT = 4,    /* the context is full: the last token shown could not be fed */
    COLIBRI_GEN_END_CANCELLED = 5,  /* the cancel callback returned nonzero; held text is dropped */
    COLIBRI_GEN_END_ERROR = 6,      /* a call failed */
};
const char *colibri_gen_end_name(enum colibri_gen_end end);

struct colibri_gen_opts {
    colibri_sampler *sampler;       /* required; borrowed for the generation */
    int n_predict;                  /* tokens to generate at most, >= 1 */
    const char *const *stops;       /* n_stops stop strings (copied; empty ones ignored) */
    size_t n_stops;
    int repair_utf8;                /* 1: every piece is valid UTF-8 (for JSON) */
    /* 1: the prompt's tokens enter the sampler's history, so its penalties
     * count them (llama.cpp's way); 0: only generated tokens (OpenAI's
     * presence/frequency penalties). */
    int prompt_in_history;
    /* Called before every prefill chunk and every sampled token; nonzero
     * ends the generation (COLIBRI_GEN_END_CANCELLED). May be NULL. */
    int (*cancel)(void *user);
    void *cancel_user;
    /* Speculative decoding with the model's own MTP layer: each decode step
     * drafts up to n_draft tokens (chained through the MTP layer), verifies
     * them with the token before them in one forward of the main model and
     * keeps the longest prefix the sampler agrees with, plus the sampler's
     * own token after it. The sampler draws once per position from the main
     * model's logits exactly as without drafts (a draft is kept only when it
     * is the token drawn), so the output is the one n_draft = 0 gives, for
     * greedy and for sampling with the same seed. 0: off; at most
     * COLIBRI_GEN_MAX_DRAFT; a model without an MTP layer refuses n_draft > 0
     * (COLIBRI_EUNSUPPORTED). */
    int n_draft;
    /* With n_draft: measure as it goes and draft only while it pays. The
     * generator times its decode forwards with and without drafts (wall
     * time, so the extra expert reads of a verify, with streamed experts,
     * count as the time they take), probes one draft first and n_draft only
     * if one draft won, cuts a probe short as soon as it cannot win, keeps
     * the winner for a while, and after each lost probe waits twice as long
     * before the next (the state carries over to the generator's next
     * generations). See auto_drafts() in api/generate.c for the rule and
     * the overhead it bounds. */
    int draft_auto;
    /* Benchmarks and tests (NULL otherwise): called with the n drafts for
     * positions pos.. before they are verified; may rewrite them (ids in the
     * vocabulary), e.g. to force an acceptance pattern. */
    void (*draft_hook)(void *user, int pos, int32_t *drafts, int n);
    void *draft_user;
};
#define COLIBRI_GEN_MAX_DRAFT 3

/* What one colibri_gen_sample produced. */
struct colibri_gen_step {
    int n_tokens;                   /* tokens generated by this step: 0 (cancelled) or 1 (with
                                       n_draft, a verify's kept drafts come one per step, the phase
                                       staying SAMPLE between them) */
    const int32_t *tokens;          /* n_tokens ids, an end-of-generation id included */
    const char *text;               /* the text that became final with them */
    size_t len;
    const char *tail;               /* on the step that ends the generation: the text held back until
                                       then (follows text); else empty */
    size_t tail_len;
    enum colibri_gen_end end;       /* NONE while the generation goes on */
    const float *logits;            /* the distribution the token was drawn from (the model's vocab
                                       floats, ids past the tokenizer's -inf); NULL without a token */
};

struct colibri_gen_stats {
    int n_prompt;                   /* prompt tokens */
    int n_cached;                   /* of which found in the session's cache */
    int n_prefilled;                /* of which run through the model so far */
    int n_generated;                /* tokens sampled, an end-of-generation id included */
    double t_prefill;               /* seconds in start and prefill */
    double t_generate;              /* seconds from the end of the prefill to the last step */
    enum colibri_gen_end end;
    /* Decode forwards of the main model (one per fed token without drafts,
     * one per verify with them): n_generated / n_forwards is tokens per
     * forward. With n_draft: drafts made at draft position i (0-based) and
     * how many were kept. */
    int n_forwards;
    int n_forwards_drafted;         /* of which verified drafts */
    int n_drafted[COLIBRI_GEN_MAX_DRAFT];
    int n_accepted[COLIBRI_GEN_MAX_DRAFT];
};

/* A generator for session s of model m with tokenizer t (its own logits
 * buffer and detokenizer). Release with colibri_gen_free(). */
int  colibri_gen_new(const colibri_model *m, colibri_session *s, const colibri_tokenizer *t, colibri_gen **out,
                     struct colibri_err *err);
void colibri_gen_free(colibri_gen *g);

/* Begins a generation after prompt[0..n_prompt): checks the options, keeps
 * the longest prefix of the prompt already in the session's cache (at least
 * the last prompt token is run again, for its logits) and drops the rest of
 * the cache. A prompt that leaves no room to generate (n_prompt >= n_ctx)
 * is COLIBRI_ERANGE naming both numbers, with the session untouched. Phase
 * PREFILL afterwards. */
int colibri_gen_start(colibri_gen *g, const int32_t *prompt, int n_prompt, const struct colibri_gen_opts *opts,
                      struct colibri_err *err);

/* Runs up to max_tokens (<= 0: all) of the prompt tokens not yet in the
 * cache, in one prefill; after the last, phase SAMPLE. Returns the number of
 * prompt tokens still to run (>= 0) or a negative code. Cancellation is
 * checked first (phase DONE, returns 0). */
int colibri_gen_prefill(colibri_gen *g, int max_tokens, struct colibri_err *err);

/* Consumes the logits: picks the next token, turns it into text, checks the
 * end conditions. *step is filled (valid until the next call on g). Phase
 * FEED afterwards, or DONE when step->end is set. */
int colibri_gen_sample(colibri_gen *g, struct colibri_gen_step *step, struct colibri_err *err);

/* In phase FEED: the tokens the model must be fed next (*tokens, valid until
 * the next call on g), and their count (1 today); 0 in other phases. A batch
 * runner feeds them to g's session with colibri_gen_logits(g) as that
 * session's logits output, then calls colibri_gen_fed(g, count). */
int    colibri_gen_pending(const colibri_gen *g, const int32_t **tokens);
/* g's logits buffer (the model's vocab floats): the output of the next
 * decode, then read by colibri_gen_sample, which masks the ids past the
 * tokenizer's vocabulary with -inf in place and leaves the buffer as it
 * sampled from until the next decode. */
float *colibri_gen_logits(colibri_gen *g);
/* Says the first n pending tokens entered the cache and the logits buffer
 * holds the logits after them (n must be the pending count). Phase SAMPLE. */
int    colibri_gen_fed(colibri_gen *g, int n, struct colibri_err *err);
/* Feeds the pending tokens with colibri_session_decode (then as fed); with
 * n_draft, drafts and verifies them first. */
int    colibri_gen_decode(colibri_gen *g, struct colibri_err *err);
/* colibri_gen_decode for n <= 64 generators in phase FEED, each bound to its
 * own session of one model, in one batched forward (colibri_batch_decode):
 * a generator with n_draft contributes its pending token and its drafts
 * (rows verified and kept or rolled back as with colibri_gen_decode), the
 * others their pending token. Without n_draft anywhere it is exactly
 * colibri_batch_decode over the pending tokens. The first *n_done advance
 * (phase SAMPLE); on an error the one at *n_done is the one that failed
 * (its generation may have ended with COLIBRI_GEN_END_ERROR) and later ones
 * stay in phase FEED. Generators with draft_auto share what they measure:
 * one probes at a time, and a lost probe's back-off holds for the others. */
int    colibri_gen_batch_decode(colibri_gen *const *g, int n, int *n_done, struct colibri_err *err);

enum colibri_gen_phase colibri_gen_phase(const colibri_gen *g);
void colibri_gen_get_stats(const colibri_gen *g, struct colibri_gen_stats *st);

/* start, the whole prefill, then sample/decode until the end; on_text (may
 * be NULL) gets each non-empty piece of text as it becomes final. Returns 0
 * whatever ended the generation (see the stats), or a negative code. */
int colibri_gen_run(colibri_gen *g, const int32_t *prompt, int n_prompt, const struct colibri_gen_opts *opts,
                    void (*on_text)(void *user, const char *text, size_t len), void *user,
                    struct colibri_err *err);

#ifdef __cplusplus
}
#endif
#endif
