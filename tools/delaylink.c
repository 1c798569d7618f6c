/* tools/delaylink.c - a user-space IP link with a fixed one-way delay between
 * network namespaces, for measuring MPI expert parallelism against link
 * latency on a kernel without sch_netem (bench/mpi_delay.sh runs it).
 *
 *   delaylink --delay-us D --seconds S [--mtu M] [--queue N] [--spin-us W] NS=ADDR/PREFIX...
 *
 * For each NS=ADDR/PREFIX (2 to 8 of them, NS a name under /var/run/netns,
 * made by `ip netns add`) it creates a TUN device "dl0" inside namespace NS,
 * gives it ADDR/PREFIX and the MTU, and brings it up; so every namespace
 * reaches the others' addresses through its dl0. It then reads each IPv4
 * packet that any dl0 sends, and writes it into the dl0 of the namespace that
 * owns the destination address D microseconds after it read it: a router with
 * one timed FIFO (every packet waits the same D, so arrival order is due
 * order). Packets to no listed address, and non-IPv4 ones, are dropped and
 * counted; so are packets that find the FIFO full (N slots of M bytes: the
 * memory is bounded, and TCP resends what was dropped).
 *
 * It sleeps until W microseconds before the next due packet and polls
 * without sleeping from there (W = 0: sleeps to the due time itself, and a
 * busy machine's wake-up lateness adds to every delay).
 *
 * It prints "ready" on stdout once every device is up, stops after S seconds
 * or at SIGINT/SIGTERM, and then prints what it forwarded: packets, bytes,
 * drops, and how late each packet left against its due time (the delay it
 * actually gave is D plus that lateness; the time from the sender's write to
 * this program's read is not seen here and is part of what a ping-pong
 * through the link measures). The devices vanish when it exits.
 *
 * Needs root (setns, TUN). It touches only the namespaces it is given. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_LINKS 8
#define LATE_BUCKETS 1001 /* lateness in whole microseconds, the last one 1000 us and over */

struct link_end {
    const char *ns;
    uint32_t addr, mask; /* host order */
    int fd;
};

struct slot {
    int64_t due_ns;
    int to, len;
};

struct fifo {
    struct slot *slots;
    unsigned char *bytes; /* cap * mtu */
    int cap, mtu, head, count;
};

struct stats {
    long long packets, bytes, dropped_full, dropped_unrouted, dropped_other;
    long long late_us[LATE_BUCKETS];
    double late_sum_us, late_max_us;
};

static volatile sig_atomic_t stop_requested; /* set by the signal handler only */

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int fail(const char *what, const char *name)
{
    fprintf(stderr, "delaylink: %s %s: %s\n", what, name, strerror(errno));
    return -1;
}

/* Splits arg (NS=ADDR/PREFIX, argv's own writable string) in place. */
static int parse_end(char *arg, struct link_end *e)
{
    char *eq = strchr(arg, '='), *slash = eq ? strchr(eq, '/') : NULL, *end;
    if (!eq || !slash || eq == arg) {
        fprintf(stderr, "delaylink: '%s' is not NS=ADDR/PREFIX\n", arg);
        return -1;
    }
    *eq = *slash = 0;
    struct in_addr a;
    long prefix = strtol(slash + 1, &end, 10);
    if (inet_pton(AF_INET, eq + 1, &a) != 1 || *end || end == slash + 1 || prefix < 8 || prefix > 30) {
        fprintf(stderr, "delaylink: %s=%s/%s: ADDR must be IPv4 and PREFIX 8..30\n", arg, eq + 1, slash + 1);
        return -1;
    }
    e->ns = arg;
    e->addr = ntohl(a.s_addr);
    e->mask = ~0u << (32 - prefix);
    e->fd = -1;
    return 0;
}

static int set_ifaddr(int sock, const char *dev, unsigned long req, uint32_t host_order)
{
    struct ifreq ifr = {0};
    struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;
    snprintf(ifr.ifr_name, IFNAMSIZ, "%s", dev);
    sin->sin_family = AF_INET;
    sin->sin_addr.s_addr = htonl(host_order);
    return ioctl(sock, req, &ifr);
}

/* Creates, addresses and raises dl0 inside e->ns; leaves this thread in
 * namespace `home` again. */
static int open_end(struct link_end *e, int home, int mtu)
{
    char path[300];
    snprintf(path, sizeof path, "/var/run/netns/%s", e->ns);
    int nsfd = open(path, O_RDONLY | O_CLOEXEC);
    if (nsfd < 0) return fail("cannot open namespace", path);
    int rc = setns(nsfd, CLONE_NEWNET);
    close(nsfd);
    if (rc) return fail("cannot enter namespace", e->ns);
    int ok = -1, sock = -1;
    struct ifreq ifr = {0};
    e->fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (e->fd < 0) {
        fail("cannot open /dev/net/tun in", e->ns);
        goto out;
    }
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
    snprintf(ifr.ifr_name, IFNAMSIZ, "dl0");
    if (ioctl(e->fd, TUNSETIFF, &ifr)) {
        fail("cannot create TUN device dl0 in", e->ns);
        goto out;
    }
    sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (sock < 0 || set_ifaddr(sock, "dl0", SIOCSIFADDR, e->addr) ||
        set_ifaddr(sock, "dl0", SIOCSIFNETMASK, e->mask)) {
        fail("cannot address dl0 in", e->ns);
        goto out;
    }
    ifr.ifr_mtu = mtu;
    if (ioctl(sock, SIOCSIFMTU, &ifr)) {
        fail("cannot set the MTU of dl0 in", e->ns);
        goto out;
    }
    if (ioctl(sock, SIOCGIFFLAGS, &ifr) == 0) ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(sock, SIOCSIFFLAGS, &ifr)) {
        fail("cannot raise dl0 in", e->ns);
        goto out;
    }
    ok = 0;
out:
    if (sock >= 0) close(sock);
    if (setns(home, CLONE_NEWNET)) return fail("cannot return to the starting namespace", "");
    return ok;
}

static int route(const struct link_end *ends, int n, const unsigned char *p, int len)
{
    if (len < 20 || (p[0] >> 4) != 4) return -2;
    uint32_t dst = (uint32_t)p[16] << 24 | (uint32_t)p[17] << 16 | (uint32_t)p[18] << 8 | p[19];
    for (int i = 0; i < n; i++)
        if (ends[i].addr == dst) return i;
    return -1;
}

/* Writes every packet due by `now`; returns the next due time or -1. */
static int64_t send_due(struct fifo *q, const struct link_end *ends, struct stats *st)
{
    while (q->count) {
        struct slot *s = &q->slots[q->head];
        int64_t t = now_ns();
        if (s->due_ns > t) return s->due_ns;
        if (write(ends[s->to].fd, q->bytes + (size_t)q->head * q->mtu, (size_t)s->len) == s->len) {
            double late = (double)(t - s->due_ns) / 1000.0;
            st->packets++;
            st->bytes += s->len;
            st->late_sum_us += late;
            if (late > st->late_max_us) st->late_max_us = late;
            st->late_us[late >= LATE_BUCKETS - 1 ? LATE_BUCKETS - 1 : (int)late]++;
        } else {
            st->dropped_other++;
        }
        q->head = (q->head + 1) % q->cap;
        q->count--;
    }
    return -1;
}

static double late_percentile(const struct stats *st, double frac)
{
    long long want = (long long)(frac * (double)st->packets), seen = 0;
    for (int i = 0; i < LATE_BUCKETS; i++)
        if ((seen += st->late_us[i]) > want) return i;
    return LATE_BUCKETS - 1;
}

/* Sleeps in ppoll until spin_ns before the next due packet, then polls
 * without sleeping: a sleeping process wakes tens of microseconds late on a
 * busy machine, which would add that much to every delay. */
static int forward(struct link_end *ends, int n, int64_t delay_ns, int64_t spin_ns, double seconds, struct fifo *q,
                   struct stats *st)
{
    struct pollfd pf[MAX_LINKS];
    for (int i = 0; i < n; i++) pf[i] = (struct pollfd){.fd = ends[i].fd, .events = POLLIN};
    int64_t stop_at = now_ns() + (int64_t)(seconds * 1e9);
    while (!stop_requested) {
        int64_t next = send_due(q, ends, st), t = now_ns();
        if (t >= stop_at) break;
        int64_t wait = (next >= 0 ? next - spin_ns : stop_at) - t;
        if (wait > stop_at - t) wait = stop_at - t;
        if (wait < 0) wait = 0;
        struct timespec ts = {.tv_sec = wait / 1000000000, .tv_nsec = wait % 1000000000};
        int ready = ppoll(pf, (nfds_t)n, &ts, NULL);
        if (ready < 0) {
            if (errno == EINTR) continue;
            return fail("poll", "");
        }
        for (int i = 0; i < n && ready > 0; i++) {
            if (!(pf[i].revents & POLLIN)) continue;
            for (;;) { /* drain this device */
                int tail = (q->head + q->count) % q->cap;
                unsigned char scratch[65536], *buf = q->count < q->cap ? q->bytes + (size_t)tail * q->mtu : scratch;
                ssize_t len = read(ends[i].fd, buf, q->count < q->cap ? (size_t)q->mtu : sizeof scratch);
                if (len < 0) {
                    if (errno == EAGAIN || errno == EINTR) break;
                    return fail("read from dl0 in", ends[i].ns);
                }
                int to = route(ends, n, buf, (int)len);
                if (to < 0) {
                    st->dropped_unrouted++;
                    continue;
                }
                if (q->count == q->cap) {
                    st->dropped_full++;
                    continue;
                }
                q->slots[tail] = (struct slot){.due_ns = now_ns() + delay_ns, .to = to, .len = (int)len};
                q->count++;
            }
        }
    }
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: delaylink --delay-us D --seconds S [--mtu M] [--queue N] [--spin-us W] "
                    "NS=ADDR/PREFIX NS=ADDR/PREFIX...\n  (2 to %d namespaces; D 0..100000, S 1..86400, "
                    "M 576..9000 (1500), N 16..65536 (4096), W 0..1000 (50))\n",
            MAX_LINKS);
    return 2;
}

static int parse_num(const char *s, double lo, double hi, double *out)
{
    char *end;
    double v = s ? strtod(s, &end) : 0;
    if (!s || *end || end == s || !(v >= lo && v <= hi)) return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    struct link_end ends[MAX_LINKS];
    int n = 0;
    double delay_us = -1, seconds = -1, mtu = 1500, cap = 4096, spin_us = 50;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "--delay-us")) bad = parse_num(v, 0, 100000, &delay_us), i++;
        else if (!strcmp(a, "--seconds")) bad = parse_num(v, 1, 86400, &seconds), i++;
        else if (!strcmp(a, "--mtu")) bad = parse_num(v, 576, 9000, &mtu), i++;
        else if (!strcmp(a, "--queue")) bad = parse_num(v, 16, 65536, &cap), i++;
        else if (!strcmp(a, "--spin-us")) bad = parse_num(v, 0, 1000, &spin_us), i++;
        else if (a[0] == '-' || n == MAX_LINKS) {
            fprintf(stderr, "delaylink: unknown option or too many namespaces: '%s'\n", a);
            return usage();
        } else if (parse_end(a, &ends[n++])) return 2;
        if (bad) {
            fprintf(stderr, "delaylink: %s needs a number in range, not '%s'\n", a, v ? v : "(nothing)");
            return usage();
        }
    }
    if (delay_us < 0 || seconds < 0 || n < 2) return usage();
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (ends[i].addr == ends[j].addr || !strcmp(ends[i].ns, ends[j].ns)) {
                fprintf(stderr, "delaylink: %s and %s repeat a namespace or an address\n", ends[j].ns, ends[i].ns);
                return 2;
            }

    /* wake for each due packet within about a microsecond, not the default 50 us timer slack */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (home < 0) {
        fail("cannot open", "/proc/self/ns/net");
        return 1;
    }
    for (int i = 0; i < n; i++)
        if (open_end(&ends[i], home, (int)mtu)) return 1;
    close(home);

    struct fifo q = {.cap = (int)cap, .mtu = (int)mtu};
    q.slots = calloc((size_t)q.cap, sizeof *q.slots);
    q.bytes = malloc((size_t)q.cap * (size_t)q.mtu);
    struct stats *st = calloc(1, sizeof *st);
    if (!q.slots || !q.bytes || !st) {
        fprintf(stderr, "delaylink: out of memory for a %d-packet queue\n", q.cap);
        return 1;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    printf("ready\n");
    fflush(stdout);

    int rc = forward(ends, n, (int64_t)(delay_us * 1000.0), (int64_t)(spin_us * 1000.0), seconds, &q, st);
    printf("delaylink: delay %.0f us: %lld packets, %lld bytes forwarded; dropped %lld (queue full), "
           "%lld (no route), %lld (write failed); left late by mean %.1f us, p50 %.0f, p99 %.0f, max %.0f us\n",
           delay_us, st->packets, st->bytes, st->dropped_full, st->dropped_unrouted, st->dropped_other,
           st->packets ? st->late_sum_us / (double)st->packets : 0.0, late_percentile(st, 0.5),
           late_percentile(st, 0.99), st->late_max_us);
    free(q.slots);
    free(q.bytes);
    free(st);
    return rc ? 1 : 0;
}
