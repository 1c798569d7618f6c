/* api/snapshots.h - a session's snapshots of its token mixers' own states
 * (model/parts.h snap_*: DeepSeek-V4's window ring, compressor blocks and
 * row counts), so that a session with such a state can go back to an
 * earlier position: to the latest snapshot at or before it, then forward
 * again over the tokens after it (the same arithmetic per token as a cold
 * prefill, so the same logits bit for bit).
 *
 * A ring of at most `cap` snapshots, each of every layer at one position,
 * sorted by position, allocated whole at session start (nothing allocates
 * when one is taken). The session takes one at every multiple of `every`,
 * and before the last token and at the end of each prefill call; when the ring is full the snapshot
 * whose removal leaves the smallest gap between its neighbours goes (the
 * newest stays), so the positions stay spread over the context. A snapshot
 * is valid while the tokens before its position are unchanged: truncating
 * drops those after the new end. Not thread-safe (the session's). */
#ifndef COLIBRI_API_SNAPSHOTS_H
#define COLIBRI_API_SNAPSHOTS_H

#include <stddef.h>

#include "colibri.h"
#include "model/forward.h"

#define SESSION_SNAP_EVERY 512     /* default tokens between snapshots */
#define SESSION_SNAP_CAP 8         /* default snapshots per session */

struct session_snaps {
    int every, cap, n;
    size_t bytes;               /* one snapshot of every layer */
    int *pos;                   /* [cap]: positions of the n held, ascending */
    unsigned char **slot;       /* [cap]: slot[i] holds the snapshot at pos[i] */
    unsigned char *mem;
};

/* The bytes one snapshot of st's layers takes (0: no layer keeps a state
 * that snapshots). */
size_t colibri_api_snap_bytes(const struct fwd_state *st);

/* A ring for st (every, cap > 0); *out NULL (and 0) when st has nothing to
 * snapshot. *bytes grows by what it allocates. 0 or COLIBRI_ENOMEM. */
int  colibri_api_snaps_new(const struct fwd_state *st, int every, int cap, struct session_snaps **out, size_t *bytes,
                       struct colibri_err *err);
void colibri_api_snaps_free(struct session_snaps *r);

/* Records st at position pos (every layer's state is there). */
void colibri_api_snaps_take(struct session_snaps *r, const struct fwd_state *st, int pos);
/* The slot for a snapshot at pos (cap > 0), to be filled by the caller:
 * later ones dropped, the ring thinned when full. */
unsigned char *colibri_api_snaps_add(struct session_snaps *r, int pos);
/* The index of the latest snapshot at or before position n, or -1. */
int  colibri_api_snaps_find(const struct session_snaps *r, int n);
/* Forgets the snapshots after position n. */
void colibri_api_snaps_drop_after(struct session_snaps *r, int n);
/* Makes dst's ring the snapshots of src at or before n (the newest that fit). */
void colibri_api_snaps_copy(struct session_snaps *dst, const struct session_snaps *src, int n);

/* One snapshot of every layer of st into buf (colibri_api_snap_bytes), and back:
 * restoring takes the rows below the snapshot's counts from rows_from's
 * states (NULL: they are in st already). 0, or the layer's refusal. */
void colibri_api_snap_save(const struct fwd_state *st, unsigned char *buf);
int  colibri_api_snap_restore(struct fwd_state *st, const unsigned char *buf, const struct fwd_state *rows_from,
                          struct colibri_err *err);

#endif
