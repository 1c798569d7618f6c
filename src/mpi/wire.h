/* mpi/wire.h - the messages rank 0 and the expert-owning ranks exchange.
 *
 * Every message is one MPI_BYTE buffer: a header of six int32 words, then a
 * body. Ranks run the same build on the same byte order (one MPI job), so
 * words and floats are in the machine's own order; floats start at a
 * multiple of 4 bytes.
 *
 *   word  field
 *     0   kind (enum mpi_wire_kind)
 *     1   seq: WORK's number, echoed by its RESULT/FAIL; HELLO: 0 loaded, 1 failed
 *     2   layer (HELLO: the model's layer count)
 *     3   hid: floats per row (HELLO: hidden size)
 *     4   n_rows: WORK: distinct input rows; RESULT: output rows (= sum of cnt);
 *         HELLO: routed experts per layer
 *     5   n_exp: experts in the WORK/RESULT (HELLO: first MoE layer)
 *
 *   WORK body: n_exp pairs (expert, cnt), ascending experts, cnt >= 1;
 *              then sum(cnt) row refs (each < n_rows): expert j's rows in
 *              batch order; then n_rows * hid f32: the distinct rows, each
 *              sent once however many of the owner's experts it goes to.
 *   RESULT body: sum(cnt) * hid f32: each expert's SwiGLU output rows, in
 *              the WORK's expert and row order, unweighted and unsummed
 *              (rank 0 weights and sums them in ascending expert order).
 *   FAIL, HELLO (failed): a NUL-terminated message of at most
 *              MPI_WIRE_MSG_MAX bytes.
 *   STOP: no body (the model is being freed: leave the serving loop).
 *
 * Tags: rank 0 sends on MPI_WIRE_TAG_WORK, owners answer on
 * MPI_WIRE_TAG_REPLY (RESULT, FAIL, HELLO). */
#ifndef COLIBRI_MPI_WIRE_H
#define COLIBRI_MPI_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "colibri.h"

enum mpi_wire_kind {
    MPI_WIRE_HELLO = 1,
    MPI_WIRE_WORK = 2,
    MPI_WIRE_RESULT = 3,
    MPI_WIRE_FAIL = 4,
    MPI_WIRE_STOP = 5,
};

#define MPI_WIRE_TAG_WORK 7101
#define MPI_WIRE_TAG_REPLY 7102
#define MPI_WIRE_HEADER_BYTES 24
#define MPI_WIRE_MSG_MAX 512

struct mpi_wire_header {
    int32_t kind, seq, layer, hid, n_rows, n_exp;
};

/* A parsed WORK: pointers into the message buffer. */
struct mpi_wire_work {
    struct mpi_wire_header h;
    const int32_t *pairs;       /* [n_exp][2]: expert, cnt */
    const int32_t *refs;        /* [sum cnt] */
    const float *rows;          /* [n_rows][hid] */
    int64_t n_refs;             /* sum of cnt */
};

void mpi_wire_put_header(unsigned char *buf, const struct mpi_wire_header *h);
/* The header of a message of len bytes; COLIBRI_EFORMAT when shorter than one. */
int mpi_wire_get_header(const unsigned char *buf, size_t len, struct mpi_wire_header *h, struct colibri_err *err);

/* Bytes of a WORK / RESULT message. */
size_t mpi_wire_work_bytes(int hid, int n_rows, int n_exp, int64_t n_refs);
size_t mpi_wire_result_bytes(int hid, int64_t n_rows);

/* Checks a WORK of len bytes against the receiver's model (hid floats per
 * row, n_experts per layer, layers [first_moe, n_layers)): every count,
 * expert id (ascending, in range), ref and the exact length. 0, or
 * COLIBRI_EFORMAT naming the field, its value and the allowed range. */
int mpi_wire_parse_work(const unsigned char *buf, size_t len, int hid, int n_experts, int first_moe,
                        int n_layers, struct mpi_wire_work *w, struct colibri_err *err);

/* Checks a reply of len bytes to WORK (seq, layer, hid, n_rows result rows,
 * n_exp) from `rank`: a RESULT of exactly that shape sets *rows and returns
 * 0; a FAIL returns COLIBRI_EIO with "rank R: <its message>"; anything else
 * is COLIBRI_EFORMAT naming the rank and the field. */
int mpi_wire_parse_result(const unsigned char *buf, size_t len, int rank, int seq, int layer, int hid,
                          int64_t n_rows, int n_exp, const float **rows, struct colibri_err *err);

/* Writes a message (FAIL, HELLO) of header h with text msg (cut to
 * MPI_WIRE_MSG_MAX - 1 bytes) into buf (at least MPI_WIRE_HEADER_BYTES +
 * MPI_WIRE_MSG_MAX bytes); returns its length. */
size_t mpi_wire_put_text(unsigned char *buf, const struct mpi_wire_header *h, const char *msg);
/* The text of a message of len bytes (NUL-terminated within it), or "" . */
const char *mpi_wire_text(const unsigned char *buf, size_t len);

/* Grows the buffer *(void **)pp to at least `need` bytes (doubling from
 * 256), keeping its contents; the message and row buffers of both sides. */
int mpi_buf_grow(void *pp, size_t *cap, size_t need, struct colibri_err *err);

#endif
