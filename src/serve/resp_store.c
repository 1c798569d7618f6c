/* serve/resp_store.c - the bounded store of responses (contract in
 * resp_store.h): a ring in the order they were put, searched by id. */
#include "serve/resp_store.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct entry {
    char *id, *text;
    size_t bytes;
};

struct resp_store {
    pthread_mutex_t mu;
    struct entry e[RESP_STORE_MAX];
    int head, n;                /* the oldest entry and the count */
    size_t bytes;
};

struct resp_store *serve_resp_store_new(void)
{
    struct resp_store *rs = calloc(1, sizeof *rs);
    if (rs) pthread_mutex_init(&rs->mu, NULL);
    return rs;
}

static void drop(struct resp_store *rs, struct entry *x)
{
    rs->bytes -= x->bytes;
    free(x->id);
    free(x->text);
    *x = (struct entry){ 0 };
}

void serve_resp_store_free(struct resp_store *rs)
{
    if (!rs) return;
    for (int i = 0; i < RESP_STORE_MAX; i++) drop(rs, &rs->e[i]);
    pthread_mutex_destroy(&rs->mu);
    free(rs);
}

/* The entry of id, or NULL; under mu. */
static struct entry *find(struct resp_store *rs, const char *id)
{
    for (int i = 0; i < rs->n; i++) {
        struct entry *x = &rs->e[(rs->head + i) % RESP_STORE_MAX];
        if (x->id && !strcmp(x->id, id)) return x;
    }
    return NULL;
}

int serve_resp_store_put(struct resp_store *rs, const char *id, const char *text)
{
    size_t bytes = strlen(id) + strlen(text) + 2;
    if (!rs || bytes > RESP_STORE_BYTES) return -1;
    char *i2 = strdup(id), *t2 = strdup(text);
    if (!i2 || !t2) { free(i2); free(t2); return -1; }
    pthread_mutex_lock(&rs->mu);
    struct entry *old = find(rs, id);
    if (old) drop(rs, old);     /* its slot stays in the ring, empty, until it is the oldest */
    while (rs->n && (rs->n == RESP_STORE_MAX || rs->bytes + bytes > RESP_STORE_BYTES)) {
        drop(rs, &rs->e[rs->head]);
        rs->head = (rs->head + 1) % RESP_STORE_MAX;
        rs->n--;
    }
    rs->e[(rs->head + rs->n) % RESP_STORE_MAX] = (struct entry){ i2, t2, bytes };
    rs->n++;
    rs->bytes += bytes;
    pthread_mutex_unlock(&rs->mu);
    return 0;
}

char *serve_resp_store_get(struct resp_store *rs, const char *id)
{
    if (!rs) return NULL;
    pthread_mutex_lock(&rs->mu);
    struct entry *x = find(rs, id);
    char *t = x ? strdup(x->text) : NULL;
    pthread_mutex_unlock(&rs->mu);
    return t;
}
