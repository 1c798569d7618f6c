/* serve/conn_admit.h - which connections the server accepts, by client
 * address. Internal to src/serve/ (used by http_conn.c).
 *
 * Connections are counted per client key: an IPv4 address (an IPv4-mapped
 * IPv6 address counts as its IPv4 address), or an IPv6 /64 (one host is
 * commonly given a whole /64, so its addresses are one client). A connection
 * is admitted when
 *   - its key holds fewer than per_key connections, and
 *   - fewer than `limit` are open in all, where a key that holds none yet
 *     may use the whole table, and a key that holds some only limit - reserve:
 *     the reserved share keeps a client not yet seen from being shut out by
 *     clients that already hold connections.
 * When the table is full the caller may close an idle connection (http_conn.c
 * closes the one idle longest) and ask again.
 *
 * Not thread-safe: the caller locks (conn_watch's mutex). */
#ifndef COLIBRI_SERVE_CONN_ADMIT_H
#define COLIBRI_SERVE_CONN_ADMIT_H

#include <stdint.h>
#include <sys/socket.h>

/* A client key: family (4 or 6, 0 for other sockets) and the address bits
 * that name the client (IPv4: 32, IPv6: the /64 prefix). */
struct admit_key { uint8_t family; uint8_t bytes[8]; };

/* The key of a peer address. */
struct admit_key serve_admit_key(const struct sockaddr *sa, socklen_t len);

enum admit_verdict {
    ADMIT_YES = 0,
    ADMIT_TABLE_FULL,           /* no room for this key: an idle connection may be closed to make some */
    ADMIT_KEY_FULL,             /* the key holds per_key connections already */
};

struct conn_admit;

/* limit >= 1, per_key >= 1, 0 <= reserve < limit. NULL when out of memory. */
struct conn_admit *serve_admit_new(int limit, int per_key, int reserve);
void serve_admit_free(struct conn_admit *a);

enum admit_verdict serve_admit_ask(const struct conn_admit *a, const struct admit_key *k);
/* A connection of key k opened / closed. */
int  serve_admit_add(struct conn_admit *a, const struct admit_key *k);       /* 0, or -1 out of memory */
void serve_admit_remove(struct conn_admit *a, const struct admit_key *k);
int  serve_admit_count(const struct conn_admit *a, const struct admit_key *k);
/* 1 when k holds more than per_key or the table more than limit: accepts
 * that raced past serve_admit_ask on other threads, which the caller closes. */
int  serve_admit_over(const struct conn_admit *a, const struct admit_key *k);
int  serve_admit_open(const struct conn_admit *a);      /* connections open in all */

#endif
