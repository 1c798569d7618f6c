/* Connection admission by client (serve/conn_admit.h): the client key
 * (IPv4 address, IPv4-mapped as IPv4, IPv6 /64), the per-client limit, the
 * share of the table kept for clients holding none, and the counts against
 * a plain array after random opens and closes over many keys. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "serve/conn_admit.h"

static struct admit_key key4(const char *ip)
{
    struct sockaddr_in sa = { .sin_family = AF_INET };
    inet_pton(AF_INET, ip, &sa.sin_addr);
    return serve_admit_key((struct sockaddr *)&sa, sizeof sa);
}

static struct admit_key key6(const char *ip)
{
    struct sockaddr_in6 sa = { .sin6_family = AF_INET6 };
    inet_pton(AF_INET6, ip, &sa.sin6_addr);
    return serve_admit_key((struct sockaddr *)&sa, sizeof sa);
}

static int same(struct admit_key a, struct admit_key b) { return !memcmp(&a, &b, sizeof a); }

static void test_keys(void)
{
    CHECK(same(key4("127.0.0.2"), key4("127.0.0.2")), "same IPv4");
    CHECK(!same(key4("127.0.0.2"), key4("127.0.0.3")), "IPv4 addresses are separate clients");
    CHECK(same(key6("::ffff:127.0.0.2"), key4("127.0.0.2")), "IPv4-mapped is the IPv4 client");
    CHECK(same(key6("2001:db8:1:2::1"), key6("2001:db8:1:2:ffff:ffff:ffff:fffe")), "one /64 is one client");
    CHECK(!same(key6("2001:db8:1:2::1"), key6("2001:db8:1:3::1")), "another /64 is another client");
    CHECK(!same(key6("::7f00:2"), key4("127.0.0.2")), "IPv4-compatible is not IPv4");
    struct sockaddr sa = { .sa_family = AF_UNIX };
    CHECK(serve_admit_key(&sa, sizeof sa).family == 0, "other families: one key");
}

/* limit 16, 4 per client, 4 kept for new clients */
static void test_rule(void)
{
    struct conn_admit *a = serve_admit_new(16, 4, 4);
    struct admit_key k[8];
    char ip[32];
    for (int i = 0; i < 8; i++) snprintf(ip, sizeof ip, "10.0.0.%d", i + 1), k[i] = key4(ip);
    for (int n = 0; n < 4; n++) {
        CHECK(serve_admit_ask(a, &k[0]) == ADMIT_YES, "client 0 connection %d", n);
        serve_admit_add(a, &k[0]);
    }
    CHECK(serve_admit_ask(a, &k[0]) == ADMIT_KEY_FULL, "client 0 at its limit");
    /* clients 1, 2 fill the unreserved 12 */
    for (int c = 1; c <= 2; c++)
        for (int n = 0; n < 4; n++) {
            CHECK(serve_admit_ask(a, &k[c]) == ADMIT_YES, "client %d connection %d", c, n);
            serve_admit_add(a, &k[c]);
        }
    CHECK(serve_admit_open(a) == 12, "12 open");
    /* a client that holds some gets no more; a new one gets the reserve */
    struct admit_key k1 = k[1];
    serve_admit_remove(a, &k1);
    CHECK(serve_admit_ask(a, &k[1]) == ADMIT_YES, "room again below the reserve");
    serve_admit_add(a, &k[1]);
    CHECK(serve_admit_ask(a, &k[3]) == ADMIT_YES, "a new client gets a reserved slot");
    serve_admit_add(a, &k[3]);
    CHECK(serve_admit_ask(a, &k[3]) == ADMIT_TABLE_FULL, "its second is not from the reserve");
    for (int c = 4; c <= 6; c++) {
        CHECK(serve_admit_ask(a, &k[c]) == ADMIT_YES, "new client %d", c);
        serve_admit_add(a, &k[c]);
    }
    CHECK(serve_admit_open(a) == 16 && serve_admit_ask(a, &k[7]) == ADMIT_TABLE_FULL, "full: %d",
          serve_admit_open(a));
    serve_admit_remove(a, &k[4]);
    CHECK(serve_admit_count(a, &k[4]) == 0 && serve_admit_ask(a, &k[7]) == ADMIT_YES, "a close makes room");
    CHECK(!serve_admit_over(a, &k[0]), "nobody over");
    serve_admit_add(a, &k[0]);
    CHECK(serve_admit_over(a, &k[0]), "a fifth of client 0 is over");
    serve_admit_free(a);
}

/* Random opens and closes over 3000 keys against a plain count array (the
 * table grows and deletes by backward shift: every count must survive). */
static void test_counts_against_array(void)
{
    enum { K = 3000 };
    struct conn_admit *a = serve_admit_new(1 << 20, 1 << 20, 0);
    static int ref[K];
    static struct admit_key keys[K];
    char ip[64];
    for (int i = 0; i < K; i++) {
        if (i % 2) snprintf(ip, sizeof ip, "10.%d.%d.1", i / 256, i % 256), keys[i] = key4(ip);
        else snprintf(ip, sizeof ip, "2001:db8:%x:%x::9", i / 7, i), keys[i] = key6(ip);
    }
    unsigned s = 12345;
    int open = 0;
    for (int step = 0; step < 200000; step++) {
        s = s * 1103515245u + 12345u;
        int i = (int)((s >> 8) % K);
        if ((s >> 28) % 3 && ref[i] < 5) {
            CHECK(serve_admit_add(a, &keys[i]) == 0, "add");
            ref[i]++, open++;
        } else if (ref[i]) {
            serve_admit_remove(a, &keys[i]);
            ref[i]--, open--;
        }
    }
    int bad = 0;
    for (int i = 0; i < K; i++) bad += serve_admit_count(a, &keys[i]) != ref[i];
    CHECK(bad == 0 && serve_admit_open(a) == open, "%d keys differ; open %d vs %d", bad, serve_admit_open(a), open);
    for (int i = 0; i < K; i++)
        while (ref[i]--) serve_admit_remove(a, &keys[i]);
    CHECK(serve_admit_open(a) == 0, "all closed: %d", serve_admit_open(a));
    serve_admit_free(a);
}

int main(void)
{
    RUN_TEST(test_keys);
    RUN_TEST(test_rule);
    RUN_TEST(test_counts_against_array);
    return CHECK_SUMMARY();
}
