#include "mpi/wire.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"

void mpi_wire_put_header(unsigned char *buf, const struct mpi_wire_header *h)
{
    int32_t w[6] = { h->kind, h->seq, h->layer, h->hid, h->n_rows, h->n_exp };
    memcpy(buf, w, sizeof w);
}

int mpi_wire_get_header(const unsigned char *buf, size_t len, struct mpi_wire_header *h, struct colibri_err *err)
{
    if (len < MPI_WIRE_HEADER_BYTES)
        return base_err_set(err, COLIBRI_EFORMAT, "MPI message of %zu bytes: shorter than its %d-byte header", len,
                            MPI_WIRE_HEADER_BYTES);
    int32_t w[6];
    memcpy(w, buf, sizeof w);
    *h = (struct mpi_wire_header){ w[0], w[1], w[2], w[3], w[4], w[5] };
    return 0;
}

size_t mpi_wire_work_bytes(int hid, int n_rows, int n_exp, int64_t n_refs)
{
    return MPI_WIRE_HEADER_BYTES + 8 * (size_t)n_exp + 4 * (size_t)n_refs + 4 * (size_t)n_rows * (size_t)hid;
}

size_t mpi_wire_result_bytes(int hid, int64_t n_rows)
{
    return MPI_WIRE_HEADER_BYTES + 4 * (size_t)n_rows * (size_t)hid;
}

int mpi_wire_parse_work(const unsigned char *buf, size_t len, int hid, int n_experts, int first_moe,
                        int n_layers, struct mpi_wire_work *w, struct colibri_err *err)
{
    int rc = mpi_wire_get_header(buf, len, &w->h, err);
    if (rc) return rc;
    const struct mpi_wire_header *h = &w->h;
    if (h->kind != MPI_WIRE_WORK)
        return base_err_set(err, COLIBRI_EFORMAT, "MPI WORK message: kind %d, not %d", h->kind, MPI_WIRE_WORK);
    if (h->layer < first_moe || h->layer >= n_layers)
        return base_err_set(err, COLIBRI_EFORMAT, "MPI WORK message: layer %d outside the MoE layers [%d, %d)",
                            h->layer, first_moe, n_layers);
    if (h->hid != hid)
        return base_err_set(err, COLIBRI_EFORMAT, "MPI WORK message: rows of %d floats, the model's are %d", h->hid,
                            hid);
    if (h->n_rows < 1 || h->n_exp < 1 || h->n_exp > n_experts)
        return base_err_set(err, COLIBRI_EFORMAT, "MPI WORK message: %d rows, %d experts (want >= 1 rows, 1..%d "
                            "experts)", h->n_rows, h->n_exp, n_experts);
    size_t pairs_end = MPI_WIRE_HEADER_BYTES + 8 * (size_t)h->n_exp;
    if (len < pairs_end)
        return base_err_set(err, COLIBRI_EFORMAT, "MPI WORK message: %zu bytes cannot hold %d expert pairs", len,
                            h->n_exp);
    w->pairs = (const int32_t *)(buf + MPI_WIRE_HEADER_BYTES);
    w->n_refs = 0;
    for (int j = 0; j < h->n_exp; j++) {
        int32_t e = w->pairs[2 * j], cnt = w->pairs[2 * j + 1];
        if (e < 0 || e >= n_experts || (j && e <= w->pairs[2 * j - 2]))
            return base_err_set(err, COLIBRI_EFORMAT, "MPI WORK message: expert %d at pair %d (want ascending ids "
                                "in [0, %d))", e, j, n_experts);
        if (cnt < 1 || cnt > h->n_rows)
            return base_err_set(err, COLIBRI_EFORMAT, "MPI WORK message: expert %d has %d rows (want 1..%d)", e, cnt,
                                h->n_rows);
        w->n_refs += cnt;
    }
    size_t want = mpi_wire_work_bytes(hid, h->n_rows, h->n_exp, w->n_refs);
    if (len != want)
        return base_err_set(err, COLIBRI_EFORMAT, "MPI WORK message: %zu bytes, its header and pairs say %zu", len,
                            want);
    w->refs = (const int32_t *)(buf + pairs_end);
    for (int64_t i = 0; i < w->n_refs; i++)
        if (w->refs[i] < 0 || w->refs[i] >= h->n_rows)
            return base_err_set(err, COLIBRI_EFORMAT, "MPI WORK message: row ref %d at %lld outside [0, %d)",
                                w->refs[i], (long long)i, h->n_rows);
    w->rows = (const float *)(buf + pairs_end + 4 * (size_t)w->n_refs);
    return 0;
}

int mpi_wire_parse_result(const unsigned char *buf, size_t len, int rank, int seq, int layer, int hid,
                          int64_t n_rows, int n_exp, const float **rows, struct colibri_err *err)
{
    struct mpi_wire_header h;
    struct colibri_err e2 = { 0 };
    int rc = mpi_wire_get_header(buf, len, &h, &e2);
    if (rc) return base_err_set(err, rc, "rank %d: %s", rank, e2.msg);
    if (h.kind == MPI_WIRE_FAIL)
        return base_err_set(err, COLIBRI_EIO, "rank %d: %s", rank, mpi_wire_text(buf, len));
    if (h.kind != MPI_WIRE_RESULT)
        return base_err_set(err, COLIBRI_EFORMAT, "rank %d answered with a message of kind %d, not a result", rank,
                            h.kind);
    if (h.seq != seq || h.layer != layer)
        return base_err_set(err, COLIBRI_EFORMAT, "rank %d answered request %d (layer %d), not %d (layer %d)", rank,
                            h.seq, h.layer, seq, layer);
    if (h.hid != hid || h.n_rows != n_rows || h.n_exp != n_exp || len != mpi_wire_result_bytes(hid, n_rows))
        return base_err_set(err, COLIBRI_EFORMAT, "rank %d: result of %d rows x %d floats for %d experts in %zu "
                            "bytes, want %lld x %d for %d", rank, h.n_rows, h.hid, h.n_exp, len, (long long)n_rows,
                            hid, n_exp);
    *rows = (const float *)(buf + MPI_WIRE_HEADER_BYTES);
    return 0;
}

size_t mpi_wire_put_text(unsigned char *buf, const struct mpi_wire_header *h, const char *msg)
{
    mpi_wire_put_header(buf, h);
    size_t n = strnlen(msg, MPI_WIRE_MSG_MAX - 1);
    memcpy(buf + MPI_WIRE_HEADER_BYTES, msg, n);
    buf[MPI_WIRE_HEADER_BYTES + n] = 0;
    return MPI_WIRE_HEADER_BYTES + n + 1;
}

const char *mpi_wire_text(const unsigned char *buf, size_t len)
{
    if (len <= MPI_WIRE_HEADER_BYTES || buf[len - 1]) return "";
    return (const char *)buf + MPI_WIRE_HEADER_BYTES;
}

int mpi_buf_grow(void *pp, size_t *cap, size_t need, struct colibri_err *err)
{
    void **ptr = pp;
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    void *np = realloc(*ptr, c);
    if (!np) return base_err_set(err, COLIBRI_ENOMEM, "MPI: out of memory for a %zu-byte buffer", c);
    *ptr = np;
    *cap = c;
    return 0;
}
