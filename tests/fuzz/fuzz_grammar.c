/* libFuzzer harness: GBNF grammars and JSON Schemas (src/sample/grammar*.c).
 * First byte even: the rest is a GBNF grammar; odd: a JSON Schema turned
 * into GBNF. What compiles is walked for up to 64 tokens over a vocabulary
 * of every single byte, a few multi-byte pieces and an end-of-generation id,
 * checking that the mask and sample_grammar_allows agree and that an allowed token
 * is accepted. */
#include <stdlib.h>
#include <string.h>

#include "sample/grammar.h"

#define N_VOCAB (256 + 5)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    static char bytes[256][2];
    static const char *piece[N_VOCAB];
    static uint32_t len[N_VOCAB];
    static uint8_t eog[N_VOCAB];
    if (!piece[0]) {
        for (int i = 0; i < 256; i++) {
            bytes[i][0] = (char)i;
            piece[i] = bytes[i];
            len[i] = 1;
        }
        static const char *const MULTI[] = { "true", "\"name\"", "null", ", " };
        for (int i = 0; i < 4; i++) {
            piece[256 + i] = MULTI[i];
            len[256 + i] = (uint32_t)strlen(MULTI[i]);
        }
        piece[260] = NULL;   /* end of generation */
        eog[260] = 1;
    }
    struct grammar_vocab v = { N_VOCAB, piece, len, eog };
    char *text = malloc(size);
    if (!text) return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = 0;
    struct colibri_err err = { 0 };
    char *gbnf = NULL;
    const char *src = text;
    size_t n = size - 1;
    if (data[0] & 1) {
        if (sample_grammar_from_json_schema(text, &gbnf, &err)) {
            if (!err.msg[0]) abort();   /* every refusal says why */
            free(text);
            return 0;
        }
        src = gbnf;
        n = strlen(gbnf);
    }
    struct grammar *g = NULL;
    if (sample_grammar_compile(src, n, &v, &g, &err)) {
        if (!err.msg[0]) abort();
    } else {
        struct grammar_state *st = NULL;
        uint8_t *allowed = malloc(N_VOCAB);
        if (allowed && !sample_grammar_state_new(g, &st, &err)) {
            for (int step = 0; step < 64 && !sample_grammar_done(st); step++) {
                int32_t k = sample_grammar_mask(st, allowed), pick = -1, seen = 0;
                for (int32_t id = 0; id < N_VOCAB; id++) {
                    if ((sample_grammar_allows(st, id) != 0) != (allowed[id] != 0)) abort();
                    if (allowed[id] && seen++ == (int32_t)(data[step % size] % (k ? k : 1))) pick = id;
                }
                if (seen != k) abort();
                if (pick < 0) break;
                if (sample_grammar_accept(st, pick)) abort();   /* an allowed token must be accepted */
            }
            sample_grammar_state_free(st);
        }
        free(allowed);
        sample_grammar_free(g);
    }
    free(gbnf);
    free(text);
    return 0;
}
