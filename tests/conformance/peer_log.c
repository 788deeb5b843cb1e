/* A remote peer cannot write the server's log at its connection rate (docs/observability.md,
 * "Logs"): every line on a peer's path is written at most once a second per kind, the others
 * counted in LogLinesSuppressed. 10,000 bad MPA Requests (fewer under a sanitizer, which makes
 * each connection slower) must leave a handful of lines, and the lines written plus the lines
 * suppressed must be exactly one per bad Request. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "counters.h"
#include "objects.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif
#ifdef UNDER_SANITIZER
#define BAD_REQUESTS 2000
#else
#define BAD_REQUESTS 10000
#endif

static void on_event_never(void *ctx, NDK_CONNECTOR *c)
{
    (void)ctx, (void)c;
    CHECK_MSG(false, "a bad Request made a connect event");
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Two kinds of bad Request (24 bytes each, RFC 5044 section 7.1 layout): i even, a wrong key
 * (the "bad MPA Request" line); i odd, a valid frame that asks for markers, which softndk
 * never uses (the "MPA Request refused" line). */
static void bad_request(int i, unsigned char out[24])
{
    memcpy(out, i % 2 ? "MPA ID Req Frame" : "MPA ID Xyz Frame", 16);
    out[16] = i % 2 ? 0x80 | 0x10 : 0x10; /* M (markers) | enhanced */
    out[17] = 2;
    out[18] = 0;
    out[19] = 4;
    out[20] = 0;
    out[21] = 1;
    out[22] = 0;
    out[23] = 1;
}

/* One bad Request on a new connection; waits (bounded) until the server closed it, then
 * resets it so that no TIME_WAIT is left on either side. */
static void send_bad_request(uint16_t port, int i)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    struct sockaddr_in sa = ndk_loopback4(port);
    CHECK(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    unsigned char req[24];
    bad_request(i, req);
    CHECK(send(fd, req, sizeof req, MSG_NOSIGNAL) == sizeof req);
    unsigned char sink[64];
    struct pollfd p = {fd, POLLIN, 0};
    for (;;) {
        CHECK_MSG(poll(&p, 1, FIXTURE_WAIT_MS) == 1, "bad Request %d: the server did not close", i);
        if (recv(fd, sink, sizeof sink, 0) <= 0)
            break; /* the reject Reply (odd i) comes first */
    }
    struct linger lg = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
}

/* Lines of the log file that contain `what`. */
static unsigned count_lines(FILE *f, const char *what)
{
    rewind(f);
    char line[2048];
    unsigned n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, what) != NULL;
    return n;
}

/* A listener on 127.0.0.1 whose consumer must never see an event; its address in *sin. */
static NDK_LISTENER *listen_never(NDK_ADAPTER *a, struct sockaddr_in *sin)
{
    NDK_LISTENER *l;
    CHECK_STATUS(
        a->Dispatch->NdkCreateListener(a, on_event_never, NULL, ndk_create_never, NULL, &l),
        STATUS_SUCCESS);
    *sin = ndk_loopback4(0);
    CHECK_STATUS(
        l->Dispatch->NdkListen(l, (struct sockaddr *)sin, sizeof *sin, ndk_request_never, NULL),
        STATUS_SUCCESS);
    ULONG len = sizeof *sin;
    CHECK_STATUS(l->Dispatch->NdkGetLocalAddress(l, (struct sockaddr *)sin, &len), STATUS_SUCCESS);
    return l;
}

/* The provider's log (stderr) goes to a file until log_capture_end; returns the saved fd. */
static int log_capture_begin(FILE **log)
{
    *log = tmpfile();
    CHECK(*log != NULL);
    fflush(stderr);
    int saved = dup(2);
    CHECK(saved >= 0 && dup2(fileno(*log), 2) == 2);
    return saved;
}

static void log_capture_end(int saved)
{
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
}

TEST_T(bad_mpa_requests_cannot_flood_the_log, 120)
{
    SOFTNDK_OPTIONS o;
    conf_options(&o);
    o.LogLevel = SoftNdkLogWarn;
    NDK_ADAPTER *a = conf_open_with(&o);
    struct sockaddr_in sin;
    NDK_LISTENER *l = listen_never(a, &sin);
    uint16_t port = ntohs(sin.sin_port);
    SOFTNDK_COUNTERS before = counters_of(a);

    /* the provider's log (stderr) goes to a file while the peer misbehaves */
    FILE *log;
    int saved = log_capture_begin(&log);
    uint64_t t0 = mono_ms();
    for (int i = 0; i < BAD_REQUESTS; i++)
        send_bad_request(port, i);
    bool done = wait_counter(a, offsetof(SOFTNDK_COUNTERS, ConnectFailure),
                             before.ConnectFailure + BAD_REQUESTS);
    uint64_t took_ms = mono_ms() - t0;
    log_capture_end(saved);
    CHECK_MSG(done, "the server did not fail every bad Request");

    SOFTNDK_COUNTERS after = counters_of(a);
    unsigned bad = count_lines(log, "bad MPA Request"),
             refused = count_lines(log, "MPA Request refused"), all = count_lines(log, "softndk ");
    fclose(log);
    ULONG64 suppressed = after.LogLinesSuppressed - before.LogLinesSuppressed;
    fprintf(stderr,
            "%d bad Requests in %llu ms: %u \"bad MPA Request\" and %u \"MPA Request refused\" "
            "lines, %u softndk lines in all, %llu suppressed\n",
            BAD_REQUESTS, (unsigned long long)took_ms, bad, refused, all,
            (unsigned long long)suppressed);
    CHECK_EQ_U64(after.ConnectFailure - before.ConnectFailure, BAD_REQUESTS);
    /* one line a second per kind at most (the first of each comes at once) */
    unsigned per_kind = (unsigned)(took_ms / 1000u) + 1;
    CHECK(bad >= 1 && bad <= per_kind);
    CHECK(refused >= 1 && refused <= per_kind);
    CHECK_EQ_U64(all, bad + refused); /* no other line did the peer write */
    /* each bad Request made exactly one line, written or suppressed */
    CHECK_EQ_U64(bad + refused + suppressed, BAD_REQUESTS);
    fixture_close_wait(&l->Header);
    ndk_close_adapter(a);
}

/* Connections that never send their Request are closed after RequestTimeoutMs, each counted in
 * HandshakeTimeouts, and the listener says so at warn (the client sees only a refusal): one
 * line for the first, the rest of the burst suppressed and counted, not one line each. */
TEST_T(silent_connections_are_named_in_the_log_once_a_second, 60)
{
    enum { SILENT = 24 };
    SOFTNDK_OPTIONS o;
    conf_options(&o);
    o.LogLevel = SoftNdkLogWarn;
    o.RequestTimeoutMs = 200;
    NDK_ADAPTER *a = conf_open_with(&o);
    struct sockaddr_in sin;
    NDK_LISTENER *l = listen_never(a, &sin);
    SOFTNDK_COUNTERS before = counters_of(a);

    FILE *log;
    int saved = log_capture_begin(&log);
    uint64_t t0 = mono_ms();
    int fds[SILENT];
    for (int i = 0; i < SILENT; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(fds[i] >= 0);
        CHECK(connect(fds[i], (struct sockaddr *)&sin, sizeof sin) == 0);
    }
    /* each is closed by the server: end of stream, nothing before it */
    for (int i = 0; i < SILENT; i++) {
        struct pollfd p = {fds[i], POLLIN, 0};
        CHECK_MSG(poll(&p, 1, FIXTURE_WAIT_MS) == 1, "silent connection %d was not closed", i);
        unsigned char sink[16];
        CHECK_EQ_U64(recv(fds[i], sink, sizeof sink, 0) <= 0, 1);
        close(fds[i]);
    }
    bool done = wait_counter(a, offsetof(SOFTNDK_COUNTERS, HandshakeTimeouts),
                             before.HandshakeTimeouts + SILENT);
    uint64_t took_ms = mono_ms() - t0;
    log_capture_end(saved);
    CHECK_MSG(done, "HandshakeTimeouts did not count every silent connection");
    CHECK_MSG(took_ms >= 200, "closed after %llu ms, before RequestTimeoutMs",
              (unsigned long long)took_ms);

    SOFTNDK_COUNTERS after = counters_of(a);
    unsigned named = count_lines(log, "no MPA Request within 200 ms"),
             all = count_lines(log, "softndk ");
    fclose(log);
    ULONG64 suppressed = after.LogLinesSuppressed - before.LogLinesSuppressed;
    CHECK_EQ_U64(after.HandshakeTimeouts - before.HandshakeTimeouts, SILENT);
    CHECK_EQ_U64(after.ConnectFailure - before.ConnectFailure, SILENT);
    unsigned per_second = (unsigned)(took_ms / 1000u) + 1;
    CHECK(named >= 1 && named <= per_second);
    CHECK_EQ_U64(all, named);
    CHECK_EQ_U64(named + suppressed, SILENT);
    fixture_close_wait(&l->Header);
    ndk_close_adapter(a);
}
