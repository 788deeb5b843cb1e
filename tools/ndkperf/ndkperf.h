/* ndkperf: perftest-style benchmarks over the public NDKPI interface of softndk.
 *
 * Files, one per concern:
 *   options.c  command line, the option block exchanged at connect, the agreement check
 *   conn.c     adapter/PD/CQ/QP/MR set-up, listen/connect/accept, teardown, failure, watchdog
 *   loops.c    the test loops (send/write/read, bandwidth/latency)
 *   output.c   header block, perftest tables, statistics, JSON
 *   main.c     server, client and --loopback orchestration
 *   perftest.c --perftest: perftest's own -R exchange, to run against ib_*_bw/lat -R
 *
 * Wire conventions between the two ndkperf processes (all on the data QPs, no side channel):
 *   - the option block (struct wire_opts, little-endian, versioned) travels as MPA private data,
 *     the client's with NdkConnect, the server's with NdkAccept; each side checks agreement;
 *   - data messages of a Send test are exactly `size` bytes; control messages are Sends whose
 *     length (0..5 bytes, never equal to `size`) tells their type: CREDIT (the receiver reposted
 *     `credit_batch` receives), END (the sender finished its data), SYNC (end-of-round barrier).
 */
#ifndef NDKPERF_H
#define NDKPERF_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <ndk/ndkpi.h>
#include <ndk/softndk.h>

#define NDKPERF_VERSION "1.0"
#define NDKPERF_DEFAULT_PORT 18515

/* Exit statuses (docs/tools.md). */
enum {
    EXIT_OK = 0,
    EXIT_FAIL = 1,        /* the run failed: the one-line reason says why */
    EXIT_USAGE = 2,       /* bad command line */
    EXIT_UNSUPPORTED = 3, /* this provider build refuses an operation the test needs */
};

enum test_kind { T_SEND_BW, T_SEND_LAT, T_WRITE_BW, T_WRITE_LAT, T_READ_BW, T_READ_LAT, T_COUNT };

static inline bool test_is_bw(enum test_kind t)
{
    return t == T_SEND_BW || t == T_WRITE_BW || t == T_READ_BW;
}
static inline bool test_is_send(enum test_kind t)
{
    return t == T_SEND_BW || t == T_SEND_LAT;
}

struct opts {
    enum test_kind test;
    const char *server;    /* client mode: the server's address; NULL = server mode */
    bool loopback;         /* both ends in this process */
    uint32_t size;         /* -s (the largest size with -a) */
    bool all;              /* -a: sizes 2 .. 2^23 */
    uint32_t all_max;      /* --max-size with -a (default 8 MiB) */
    uint32_t iters;        /* -n */
    uint32_t duration;     /* -D seconds (BW tests), 0 = use -n */
    uint32_t num_qps;      /* -q */
    uint32_t tx_depth;     /* -t */
    uint32_t rx_depth;     /* -r */
    uint32_t inline_size;  /* -I; NDKPERF_INLINE_DEFAULT when not given */
    uint32_t post_list;    /* -l: requests per DEFER chain */
    uint32_t outs;         /* -o: outstanding reads (ORD asked) */
    bool events;           /* -e: block on CQ notifications */
    bool callback;         /* --callback: -e, the latency loop runs in the notification callback */
    bool bidir;            /* -b */
    bool verify;           /* -c */
    bool report_gbits;     /* --report_gbits */
    bool histogram;        /* --histogram: latency samples per µs on stderr */
    bool json;             /* --out_json */
    const char *json_file; /* --out_json_file */
    uint16_t port;         /* -p (0 = ephemeral, server prints it) */
    const char *ifname;    /* -d (NULL = every address) */
    const char *bind_addr; /* --bind: server listen address / client source address */
    uint32_t timeout;      /* --timeout seconds */
    int cpu;               /* --cpu N (server/client mode), -1 = leave */
    bool no_pin;           /* --no-pin (loopback) */
    bool one_device;       /* --one-device (loopback): both sides on one interface */
    uint32_t mpa_rev;      /* --mpa-rev (0 = provider default) */
    int crc;               /* --crc on|off (0 = provider default, 1 on, 2 off) */
    bool verbose;          /* -v */
    bool perftest;         /* --perftest: perftest's -R exchange (perftest.c) */
    bool set_size, set_iters, set_tx, set_rx; /* given explicitly */
};

/* Parse argv; exits with EXIT_USAGE on a bad command line. */
void parse_options(int argc, char **argv, struct opts *o);
const char *test_name(enum test_kind t);
const char *test_title(enum test_kind t);

/* ------------------------------------------------------------------------------------------ */
/* The option block exchanged at connect. */
#define WIRE_MAGIC 0x504B444Eu /* "NDKP" little-endian */
#define WIRE_VERSION 1
#define WIRE_LEN 96

/* -I not given: the latency tests' perftest defaults (conn.c, effective_inline) */
#define NDKPERF_INLINE_DEFAULT UINT32_MAX

#define WF_ALL 0x01
#define WF_BIDIR 0x02
#define WF_VERIFY 0x04
#define WF_EVENTS 0x08
#define WF_MISMATCH 0x80 /* server: "your options do not agree with mine" */

struct wire_opts {
    uint32_t magic;
    uint16_t version;
    uint16_t length;
    uint8_t test;
    uint8_t flags;
    uint16_t qp_index;
    uint32_t size;
    uint32_t iters;
    uint32_t duration;
    uint32_t num_qps;
    uint32_t tx_depth;
    uint32_t rx_depth;
    uint32_t post_list;
    uint32_t inline_size;
    uint32_t all_max;
    uint64_t land_addr;  /* where the peer may write / read (host order) */
    uint64_t land_len;
    uint32_t land_token; /* remote token of the region holding it */
    char tool_version[16];
};

void wire_from_opts(const struct opts *o, struct wire_opts *w);
size_t wire_encode(const struct wire_opts *w, uint8_t *buf, size_t cap);
/* 0 on success; -1 with *why set when the bytes are not an ndkperf option block. */
int wire_decode(const uint8_t *buf, size_t len, struct wire_opts *w, const char **why);
/* Compare what must agree. Returns true when they agree; otherwise writes a one-line
 * description of every difference ("-s 65536 (server) vs 4096 (client), ...") to msg. */
bool wire_agree(const struct wire_opts *server, const struct wire_opts *client, char *msg,
                size_t cap);

/* ------------------------------------------------------------------------------------------ */
/* Failure, time, the watchdog (conn.c). */

/* Print "ndkperf: <reason>" on stderr once (the first caller wins) and _exit(code). */
_Noreturn void die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* die() for a failed NDK call: "ndkperf: <test>: <call>: STATUS_X (<hint>)"; the exit status
 * is EXIT_UNSUPPORTED for STATUS_NOT_IMPLEMENTED / STATUS_NOT_SUPPORTED, else EXIT_FAIL. */
_Noreturn void die_status(const char *call, NTSTATUS st, const char *hint);
void set_phase(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void start_watchdog(uint32_t seconds);
uint64_t now_ns(void);
extern const struct opts *g_opts;
extern const char *g_prog; /* "ndkperf" */

/* ------------------------------------------------------------------------------------------ */
/* One side of the run (conn.c). */

#define CTRL_SLOTS_MIN 8
#define RESULT_BATCH 64

struct side;

struct qpctx {
    struct side *side;
    unsigned index;
    NDK_CQ *cq;
    NDK_QP *qp;
    NDK_CONNECTOR *conn;
    atomic_bool peer_gone; /* disconnect event seen */
    ULONG ird, ord;        /* effective */
    struct sockaddr_storage local, peer;
    struct wire_opts peer_opts;
    /* queue sizes of this QP */
    uint32_t rq_depth, sq_depth;
    uint32_t rx_data_slots; /* receives meant for data (Send tests) */
    uint32_t rx_ctrl_slots;
    uint32_t tx_slots;      /* distinct send buffers (verify) */
    uint32_t land_slots;    /* slots of max_size in the landing area */
    uint32_t peer_data_slots; /* data receives the peer keeps posted (send_bw credits) */
    uint32_t credit_batch;  /* C: one CREDIT message per C reposted data receives */
    uint32_t ctrl_out_max;  /* control sends that may be outstanding */
    /* memory (inside side->region) */
    uint8_t *tx, *rx, *land, *sink;
    NDK_MR *land_mr;     /* the landing area, the only memory the peer may reach */
    uint32_t land_token; /* its remote token */
    size_t rx_slot_len;
    bool rx_shared;         /* every receive uses the same buffer (no -c) */
    uint64_t remote_land;   /* peer's landing area */
    uint64_t remote_land_len;
    uint32_t remote_token;
    /* completion carry-over between rounds */
    NDK_RESULT_EX res[RESULT_BATCH];
    unsigned res_n, res_i;
    /* The bandwidth tests time completions: when the poll that brought res returned (one clock
     * read a poll, not one a completion: 27 ns each on one VM, a tenth of a small message's
     * cost at 3.7 million a second). The latency loops do not read the clock there. */
    uint64_t polled_ns;
    /* receives of the next round, met while this one was closing (FIFO, before res) */
    NDK_RESULT_EX *held;
    unsigned held_n, held_i, held_cap;
};

/* Peak bandwidth: the best rate over windows of at least 1 ms (completions come in bursts: a
 * shorter window would measure the burst, not the link). Each side owns one, so the loopback
 * server and client threads never share it. */
struct peak_meter {
    uint64_t n, t0;
    double peak; /* bytes per second */
    uint32_t size;
};

struct side {
    const struct opts *o;
    /* The CQ notification callback's work (--callback: loops.c's callback_loop, which main.c
     * hands the side): true when it did the work, so no waiting thread is woken. NULL: none. */
    bool (*on_notify)(struct side *s);
    bool is_server;
    const char *role; /* "server" / "client" */
    NDK_ADAPTER *adapter;
    const char *transport; /* "tcp" or "shm": what carried the connections (note_transport) */
    NDK_ADAPTER_INFO info;
    ULONG ifindex;
    NDK_PD *pd;
    NDK_MR *mr;
    UINT32 token;
    uint8_t *region;
    size_t region_len;
    uint32_t max_size;
    uint32_t inline_size; /* effective */
    NDK_LISTENER *listener;
    uint16_t listen_port;
    struct qpctx *qps;
    unsigned nqps;
    int cpu;              /* pinned CPU or -1 */
    /* notifications (-e): one count for every CQ of the side, bumped by the callbacks and
     * waited on with a futex: a callback takes no lock (a lock held by a preempted waiter would
     * make it wait, which a callback must not: the consumer verifier's callback_slow) */
    _Atomic unsigned ev_count;
    unsigned ev_timeouts;
    _Atomic NTSTATUS ev_status;
    /* --callback (loops.c): while cb_mode is CB_RUNNING the notification callback runs the
     * latency loop (cb holds its state) instead of waking the thread, which waits for CB_DONE
     * (a futex on cb_mode). cb_busy lets one caller at a time in (the CQ's polls and arms are
     * serialized, [CQ-3]); a caller that finds it taken leaves cb_pending for the one inside. */
    _Atomic unsigned cb_mode;
    atomic_bool cb_busy, cb_pending;
    void *cb;
    /* connect events (server) */
    pthread_mutex_t conn_lock;
    pthread_cond_t conn_cond;
    NDK_CONNECTOR *incoming[64];
    unsigned n_incoming;
    /* loopback hand-off: the server's port for the client */
    struct side *peer_side;
    bool print_rows;      /* print each table row as its round ends */
    /* results, filled by the loops, printed by output.c */
    struct round_result *rounds;
    unsigned nrounds;
    struct peak_meter meter;
};

void side_init(struct side *s, const struct opts *o, bool is_server);
/* Open the adapter (on o->ifname), query it, make PD, MR, CQs and QPs, post receives. */
void side_open(struct side *s);
/* Server: listen (prints the address on stderr) */
void side_listen(struct side *s);
/* Server: accept o->num_qps connections (checks agreement). */
void side_accept(struct side *s);
/* Client: connect every QP to host:port (checks agreement). */
void side_connect(struct side *s, const char *host, uint16_t port);
/* Disconnect and close everything, bounded. */
void side_close(struct side *s);
/* Pin the calling thread to cpu (no-op for -1); records it in s->cpu. */
void side_pin(struct side *s, int cpu);

/* Posting helpers. */
void post_recv(struct qpctx *q, uint32_t slot);
/* Next completion of q (held ones first, then the carry-over buffer, then the CQ); NULL when
 * none now. hold_completion keeps one for the next round. */
NDK_RESULT_EX *next_completion(struct qpctx *q);
NDK_RESULT_EX *next_cq_completion(struct qpctx *q); /* skips the held ones */
/* Every completion taken so far is handed out, and the CQ poll that took them found fewer than
 * it asked for: the CQ was empty right after them, so polling again now would only say so. */
bool completions_drained(const struct qpctx *q);
void hold_completion(struct qpctx *q, const NDK_RESULT_EX *r);
/* Arm every CQ of the side for the next completion; returns the notification count before the
 * arm, to pass to side_wait_event (so a notification between arm and wait is not lost). */
unsigned side_arm(struct side *s);
/* Block until a notification newer than `seen` (or 1 s, counted in ev_timeouts). */
void side_wait_event(struct side *s, unsigned seen);
/* Wake every thread waiting on a futex word. */
void futex_wake_all(_Atomic unsigned *word);
/* Wait on a futex word while it holds `value`, at most ms milliseconds. */
void futex_wait_ms(_Atomic unsigned *word, unsigned value, unsigned ms);
const char *sockaddr_text(const struct sockaddr_storage *ss, char *buf, size_t cap);

/* ------------------------------------------------------------------------------------------ */
/* Loops and results (loops.c, output.c). */

struct round_result {
    uint32_t size;
    uint64_t iters;      /* measured iterations (messages for BW) */
    /* BW */
    double bw_peak;      /* bytes per second */
    double bw_avg;
    double msg_rate;     /* messages per second */
    /* latency, microseconds */
    double t_min, t_max, t_typical, t_avg, t_stdev, t_p99, t_p999;
    bool is_lat;
};

/* Run every round of the test on the connected side; fills s->rounds. */
void run_test(struct side *s);
/* The CQ notification callback's part in --callback: runs the latency loop and returns true
 * while one runs in callbacks (CB_RUNNING), else returns false at once (the thread waits). */
enum { CB_OFF = 0, CB_RUNNING = 1, CB_DONE = 2 };
bool callback_loop(struct side *s);

/* Pattern for -c (pattern.c): fill / check len bytes of message `iter` of QP `qp`. */
void pattern_fill(uint8_t *buf, size_t len, uint64_t iter, unsigned qp);
/* Returns the offset of the first wrong byte, or (size_t)-1 when all are right. */
size_t pattern_check(const uint8_t *buf, size_t len, uint64_t iter, unsigned qp);
/* The byte at offset off of message `iter` of QP `qp`: what a failed check expected. */
uint8_t pattern_expected(size_t off, uint64_t iter, unsigned qp);

/* Latency statistics over n samples in ns (sorted in place). */
void lat_stats(uint64_t *samples, size_t n, struct round_result *r);
/* The sorted samples of lat_stats as counts per 1 µs bucket (the last bucket takes the rest). */
void lat_histogram(FILE *out, const uint64_t *sorted, size_t n);

/* Learn what carried s's connections, once connected (its adapter's SameHostConnections):
 * the header and the JSON say it. */
void note_transport(struct side *s);
void print_header(const struct side *s, const struct side *peer);
void print_table_head(const struct opts *o);
void print_row(const struct opts *o, const struct round_result *r);
void print_table_tail(const struct opts *o);
void write_json(const struct side *s, const struct side *peer);

/* Sizes of the run: -a gives 2..all_max, else the single -s. */
unsigned run_sizes(const struct opts *o, uint32_t *sizes, unsigned cap);

/* --perftest (perftest.c): the whole run against a perftest peer (or another ndkperf
 * --perftest); returns the exit status. */
int perftest_main(const struct opts *o);

#endif
