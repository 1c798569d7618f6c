/* The pure parts of expert parallelism, tested without MPI: the expert
 * shares (every expert has exactly one owner in range, each layer spread
 * evenly, rank 0 left out when asked, the assignment moving along the
 * layers; with weights, counts in proportion to them) and the messages (a WORK and a RESULT read back field by field;
 * each malformed one refused naming what is wrong; a FAIL carries its rank
 * and text). */
#include <string.h>

#include "check.h"
#include "colibri.h"
#include "mpi/share.h"
#include "mpi/wire.h"

static void test_every_expert_has_one_owner_spread_evenly(void)
{
    for (int size = 1; size <= 5; size++)
        for (int r0 = 0; r0 <= 1; r0++) {
            char msg[256];
            struct mpi_share sh;
            int E = 37;
            if (mpi_share_init(&sh, size, r0, NULL, E, msg, sizeof msg)) {
                CHECK(size == 1 && !r0, "size %d rank0 %d refused: %s", size, r0, msg);
                CHECK(strstr(msg, "rank 0 owns no routed experts") != NULL, "%s", msg);
                continue;
            }
            int owners = r0 ? size : size - 1;
            for (int layer = 3; layer < 9; layer++) {
                int count[8] = { 0 };
                for (int e = 0; e < E; e++) {
                    int w = mpi_share_owner(&sh, layer, e);
                    CHECK(w >= (r0 ? 0 : 1) && w < size, "layer %d expert %d owner %d of %d", layer, e, w, size);
                    if (w >= 0 && w < 8) count[w]++;
                    if (owners > 1)
                        CHECK(mpi_share_owner(&sh, layer + 1, e) != w, "expert %d stays on rank %d", e, w);
                }
                for (int w = r0 ? 0 : 1; w < size; w++)
                    CHECK(count[w] == E / owners || count[w] == E / owners + 1, "rank %d holds %d of %d", w,
                          count[w], E);
            }
            mpi_share_free(&sh);
        }
    char msg[64];
    struct mpi_share sh;
    CHECK(mpi_share_init(&sh, 0, 1, NULL, 8, msg, sizeof msg) != 0, "0 ranks accepted");
}

/* Weighted shares: each owner's count per layer is within one of
 * E * w / sum(w) (worked out here from the weights, not by the code), the
 * same in every layer; a weight of 0 owns nothing; the owners alternate
 * within a layer rather than holding blocks; equal weights give the counts
 * of no weights; rank 0's weight is ignored without its share; bad weights
 * are refused by name. */
static void test_weighted_shares_follow_the_weights(void)
{
    const struct { int size, r0; double w[4]; } cases[] = {
        { 3, 1, { 1, 2, 3 } }, { 3, 1, { 5, 1, 1 } }, { 3, 1, { 0, 1, 0 } }, { 4, 0, { 9, 1, 1, 2 } },
        { 2, 1, { 812e6, 405e6 } }, { 3, 1, { 1, 1, 1 } },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int size = cases[c].size, r0 = cases[c].r0, E = 256;
        const double *w = cases[c].w;
        double sum = 0;
        for (int r = r0 ? 0 : 1; r < size; r++) sum += w[r];
        char msg[256];
        struct mpi_share sh, plain;
        CHECK(mpi_share_init(&sh, size, r0, w, E, msg, sizeof msg) == 0, "case %zu: %s", c, msg);
        CHECK(mpi_share_init(&plain, size, r0, NULL, E, msg, sizeof msg) == 0, "%s", msg);
        for (int layer = 0; layer < 5; layer++) {
            int count[4] = { 0 }, runs = 0;
            for (int e = 0; e < E; e++) {
                int o = mpi_share_owner(&sh, layer, e);
                CHECK(o >= (r0 ? 0 : 1) && o < size, "case %zu: owner %d", c, o);
                if (o >= 0 && o < 4) count[o]++;
                runs += e > 0 && o == mpi_share_owner(&sh, layer, e - 1);
            }
            for (int r = 0; r < size; r++) {
                double want = r0 || r ? E * w[r] / sum : 0;
                CHECK(count[r] >= want - 1 && count[r] <= want + 1, "case %zu layer %d: rank %d owns %d, want %.2f",
                      c, layer, r, count[r], want);
                CHECK(count[r] == mpi_share_count(&sh, r), "case %zu: count %d", c, mpi_share_count(&sh, r));
                if (c == 5) CHECK(count[r] == mpi_share_count(&plain, r), "equal weights: %d", count[r]);
            }
            /* a rank with most of the weight must repeat; with the 1:2:3 weights no block forms */
            if (c == 0) CHECK(runs < E / 4, "case 0: %d neighbouring ids on one rank", runs);
        }
        mpi_share_free(&sh);
        mpi_share_free(&plain);
    }
    char msg[256];
    struct mpi_share sh;
    CHECK(mpi_share_init(&sh, 3, 1, (double[]){ 1, -1, 1 }, 8, msg, sizeof msg) != 0 && strstr(msg, "rank 1"),
          "a negative weight: %s", msg);
    CHECK(mpi_share_init(&sh, 3, 1, (double[]){ 1, NAN, 1 }, 8, msg, sizeof msg) != 0, "NaN accepted");
    CHECK(mpi_share_init(&sh, 3, 0, (double[]){ 5, 0, 0 }, 8, msg, sizeof msg) != 0 && strstr(msg, "weight 0"),
          "only rank 0 weighted without its share: %s", msg);
}

/* A WORK of 2 experts over 3 distinct rows of hid 4: expert 5 takes rows
 * 0, 2; expert 9 takes 1, 2, 0. */
static size_t make_work(unsigned char *buf, int hid)
{
    mpi_wire_put_header(buf, &(struct mpi_wire_header){ MPI_WIRE_WORK, 42, 3, hid, 3, 2 });
    int32_t pairs[4] = { 5, 2, 9, 3 }, refs[5] = { 0, 2, 1, 2, 0 };
    memcpy(buf + MPI_WIRE_HEADER_BYTES, pairs, sizeof pairs);
    memcpy(buf + MPI_WIRE_HEADER_BYTES + sizeof pairs, refs, sizeof refs);
    float *rows = (float *)(buf + MPI_WIRE_HEADER_BYTES + sizeof pairs + sizeof refs);
    for (int i = 0; i < 3 * hid; i++) rows[i] = 0.5f * (float)i;
    return mpi_wire_work_bytes(hid, 3, 2, 5);
}

static void test_work_reads_back(void)
{
    unsigned char buf[512];
    size_t len = make_work(buf, 4);
    CHECK(len == 24 + 16 + 20 + 48, "%zu bytes", len);
    struct mpi_wire_work w;
    struct colibri_err err = { 0 };
    CHECK(mpi_wire_parse_work(buf, len, 4, 16, 1, 6, &w, &err) == 0, "%s", err.msg);
    CHECK(w.h.seq == 42 && w.h.layer == 3 && w.h.n_rows == 3 && w.h.n_exp == 2 && w.n_refs == 5, "header");
    CHECK(w.pairs[0] == 5 && w.pairs[3] == 3 && w.refs[1] == 2 && w.refs[4] == 0, "pairs/refs");
    CHECK(w.rows[11] == 5.5f, "rows %g", w.rows[11]);
}

static void expect_refused(unsigned char *buf, size_t len, const char *what)
{
    struct mpi_wire_work w;
    struct colibri_err err = { 0 };
    int rc = mpi_wire_parse_work(buf, len, 4, 16, 1, 6, &w, &err);
    CHECK(rc == COLIBRI_EFORMAT, "%s: rc %d", what, rc);
    CHECK(strstr(err.msg, what) != NULL, "message '%s' lacks '%s'", err.msg, what);
}

static void test_malformed_work_is_refused_by_name(void)
{
    unsigned char buf[512];
    size_t len = make_work(buf, 4);
    expect_refused(buf, len - 4, "header and pairs say");
    expect_refused(buf, 10, "shorter than its 24-byte header");
    int32_t v;
    make_work(buf, 4); v = 6; memcpy(buf + 8, &v, 4); expect_refused(buf, len, "layer 6 outside");
    make_work(buf, 4); v = 8; memcpy(buf + 12, &v, 4); expect_refused(buf, len, "rows of 8 floats");
    make_work(buf, 4); v = 5; memcpy(buf + 32, &v, 4); expect_refused(buf, len, "want ascending ids");
    make_work(buf, 4); v = 16; memcpy(buf + 32, &v, 4); expect_refused(buf, len, "expert 16 at pair 1");
    make_work(buf, 4); v = 0; memcpy(buf + 28, &v, 4); expect_refused(buf, len, "expert 5 has 0 rows");
    make_work(buf, 4); v = 3; memcpy(buf + 40 + 8, &v, 4); expect_refused(buf, len, "row ref 3 at 2");
    make_work(buf, 4); v = MPI_WIRE_RESULT; memcpy(buf, &v, 4); expect_refused(buf, len, "kind 3");
}

static void test_result_and_fail(void)
{
    unsigned char buf[512];
    mpi_wire_put_header(buf, &(struct mpi_wire_header){ MPI_WIRE_RESULT, 7, 2, 4, 5, 2 });
    size_t len = mpi_wire_result_bytes(4, 5);
    const float *rows = NULL;
    struct colibri_err err = { 0 };
    CHECK(mpi_wire_parse_result(buf, len, 2, 7, 2, 4, 5, 2, &rows, &err) == 0, "%s", err.msg);
    CHECK(rows == (const float *)(buf + MPI_WIRE_HEADER_BYTES), "rows");
    CHECK(mpi_wire_parse_result(buf, len, 2, 8, 2, 4, 5, 2, &rows, &err) == COLIBRI_EFORMAT &&
          strstr(err.msg, "rank 2 answered request 7 (layer 2), not 8") != NULL, "%s", err.msg);
    CHECK(mpi_wire_parse_result(buf, len - 4, 2, 7, 2, 4, 5, 2, &rows, &err) == COLIBRI_EFORMAT &&
          strstr(err.msg, "rank 2: result of 5 rows") != NULL, "%s", err.msg);
    len = mpi_wire_put_text(buf, &(struct mpi_wire_header){ MPI_WIRE_FAIL, 7, 2, 0, 0, 0 }, "expert 3: read failed");
    CHECK(mpi_wire_parse_result(buf, len, 3, 7, 2, 4, 5, 2, &rows, &err) == COLIBRI_EIO &&
          !strcmp(err.msg, "rank 3: expert 3: read failed"), "%s", err.msg);
    CHECK(!strcmp(mpi_wire_text(buf, len - 1), ""), "an unterminated text reads as empty");
    char big[2 * MPI_WIRE_MSG_MAX];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    unsigned char out[MPI_WIRE_HEADER_BYTES + MPI_WIRE_MSG_MAX];
    len = mpi_wire_put_text(out, &(struct mpi_wire_header){ MPI_WIRE_FAIL, 0, 0, 0, 0, 0 }, big);
    CHECK(len == sizeof out && strlen(mpi_wire_text(out, len)) == MPI_WIRE_MSG_MAX - 1, "cut to %zu", len);
}

int main(void)
{
    RUN_TEST(test_every_expert_has_one_owner_spread_evenly);
    RUN_TEST(test_weighted_shares_follow_the_weights);
    RUN_TEST(test_work_reads_back);
    RUN_TEST(test_malformed_work_is_refused_by_name);
    RUN_TEST(test_result_and_fail);
    return CHECK_SUMMARY();
}
