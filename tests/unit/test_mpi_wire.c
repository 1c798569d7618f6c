/* The pure parts of expert parallelism, tested without MPI: the expert
 * shares (every expert has exactly one owner in range, each layer spread
 * evenly, rank 0 left out when asked, the assignment moving along the
 * layers) and the messages (a WORK and a RESULT read back field by field;
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
            if (mpi_share_check(size, r0, msg, sizeof msg)) {
                CHECK(size == 1 && !r0, "size %d rank0 %d refused: %s", size, r0, msg);
                CHECK(strstr(msg, "rank 0 owns no routed experts") != NULL, "%s", msg);
                continue;
            }
            int owners = r0 ? size : size - 1, E = 37;
            for (int layer = 3; layer < 9; layer++) {
                int count[8] = { 0 };
                for (int e = 0; e < E; e++) {
                    int w = mpi_share_owner(layer, e, size, r0);
                    CHECK(w >= (r0 ? 0 : 1) && w < size, "layer %d expert %d owner %d of %d", layer, e, w, size);
                    if (w >= 0 && w < 8) count[w]++;
                    if (owners > 1)
                        CHECK(mpi_share_owner(layer + 1, e, size, r0) != w, "expert %d stays on rank %d", e, w);
                }
                for (int w = r0 ? 0 : 1; w < size; w++)
                    CHECK(count[w] == E / owners || count[w] == E / owners + 1, "rank %d holds %d of %d", w,
                          count[w], E);
            }
        }
    char msg[64];
    CHECK(mpi_share_check(0, 1, msg, sizeof msg) != 0, "0 ranks accepted");
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
    RUN_TEST(test_work_reads_back);
    RUN_TEST(test_malformed_work_is_refused_by_name);
    RUN_TEST(test_result_and_fail);
    return CHECK_SUMMARY();
}
