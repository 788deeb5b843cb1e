/* Wireshark oracle: frames built by our encoders cross a real loopback TCP connection (both ends
 * in this process), dumpcap captures them, tshark decodes them with the recipe of
 * [IW-RECIPE], and every MPA frame and FPDU must come out as we meant it: recognised as
 * iWARP, Good CRC32 (except the one FPDU we corrupt on purpose), right opcodes and fields, nothing
 * malformed. Skips, with the reason, when tshark/dumpcap are missing or capture is not permitted.
 *
 * Note: tshark 4.0 has no "Decode As" for iWARP (-d tcp.port==N,iwarp_mpa is refused); the MPA
 * heuristic needs the handshake in the capture, which this test always has. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "harness.h"
#include "iwarp/fpdu.h"
#include "iwarp/mpa.h"
#include "iwarp/parser.h"
#include "wire_util.h"

#define ORACLE_PORT_BASE 47231 /* high, outside the default ephemeral range of Linux */

static bool in_path(const char *name)
{
    const char *path = getenv("PATH");
    char buf[4096];
    if (!path)
        path = "/usr/bin:/bin:/usr/sbin:/sbin";
    while (*path) {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        snprintf(buf, sizeof buf, "%.*s/%s", (int)len, path, name);
        if (access(buf, X_OK) == 0)
            return true;
        path += len + (end ? 1 : 0);
    }
    return false;
}

static pid_t spawn(const char *const argv[], const char *out, const char *err)
{
    pid_t pid = fork();
    if (pid == 0) {
        int o = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(err ? err : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (o < 0 || e < 0)
            _exit(126);
        dup2(o, 1);
        dup2(e, 2);
        execvp(argv[0], (char *const *)(uintptr_t)argv); /* execvp never writes argv */
        _exit(127);
    }
    return pid;
}

/* Wait for pid up to timeout_ms; kill it past that. Returns its exit status, or -1. */
static int reap(pid_t pid, unsigned timeout_ms)
{
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long ms = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
        if (r < 0 || ms > (long)timeout_ms) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static bool file_has(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char line[1024];
    bool hit = false;
    while (!hit && fgets(line, sizeof line, f))
        hit = strstr(line, needle) != NULL;
    fclose(f);
    return hit;
}

struct dumpcap_wait {
    pid_t pid;
    const char *err;
    bool exited;
};

static bool dumpcap_ready(void *p)
{
    struct dumpcap_wait *w = p;
    int st;
    if (waitpid(w->pid, &st, WNOHANG) == w->pid) {
        w->exited = true;
        return true;
    }
    return file_has(w->err, "Capturing on");
}

/* dumpcap says "Capturing on" a little before its filter really sees packets. Send UDP probes
 * to the capture port until one shows up in the (per-packet flushed) capture file. */
struct probe_wait {
    const char *cap;
    uint16_t port;
    int fd;
    off_t base;
    struct timespec last;
};

static bool probe_seen(void *p)
{
    struct probe_wait *w = p;
    struct stat st;
    if (stat(w->cap, &st) == 0 && w->base == 0 && st.st_size > 0)
        w->base = st.st_size; /* pcapng section and interface blocks */
    if (w->base && stat(w->cap, &st) == 0 && st.st_size > w->base)
        return true;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long ms = (now.tv_sec - w->last.tv_sec) * 1000 + (now.tv_nsec - w->last.tv_nsec) / 1000000;
    if (ms >= 20) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(w->port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        (void)sendto(w->fd, "p", 1, MSG_DONTWAIT, (struct sockaddr *)&a, sizeof a);
        w->last = now;
    }
    return false;
}

/* ---------------------------------------------------------------- traffic */

static int listen_on(uint16_t *port)
{
    for (int i = 0; i < 40; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)(ORACLE_PORT_BASE + i)),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 1) == 0) {
            *port = (uint16_t)(ORACLE_PORT_BASE + i);
            return fd;
        }
        close(fd);
    }
    return -1;
}

static void write_all(int fd, struct iovec *iov, int n)
{
    while (n > 0) {
        ssize_t w = writev(fd, iov, n);
        CHECK(w > 0);
        sndk_iov_advance(&iov, &n, (size_t)w);
    }
}

static void send_msg(int fd, struct sndk_tx_msg *m)
{
    struct sndk_fpdu f;
    struct iovec iov[8];
    int n;
    while ((n = sndk_tx_msg_next(m, &f, iov, 8)) > 0)
        write_all(fd, iov, n);
    CHECK_EQ_I64(n, 0);
}

/* Read into the parser until it has taken `fpdus` FPDUs in all, or failed. */
static int pump(int fd, struct sndk_rx *rx, uint64_t fpdus)
{
    while (rx->fpdus < fpdus && rx->state != SNDK_RX_ERROR && rx->state != SNDK_RX_CLOSED) {
        struct iovec iov[8];
        int n = sndk_rx_want(rx, iov, 8);
        CHECK(n > 0);
        struct pollfd p = {fd, POLLIN, 0};
        CHECK_MSG(poll(&p, 1, 5000) == 1, "peer sent nothing for 5 s");
        ssize_t r = readv(fd, iov, n);
        CHECK(r > 0);
        int rc = sndk_rx_advance(rx, (size_t)r);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static void mpa_recv(int fd, struct sndk_mpa_rx *m)
{
    int rc = 0;
    while (rc == 0) {
        struct iovec iov;
        CHECK(sndk_mpa_rx_want(m, &iov) == 1);
        struct pollfd p = {fd, POLLIN, 0};
        CHECK(poll(&p, 1, 5000) == 1);
        ssize_t r = readv(fd, &iov, 1);
        CHECK(r > 0);
        rc = sndk_mpa_rx_advance(m, (size_t)r);
    }
    CHECK_EQ_I64(rc, 1);
}

/* What we expect tshark to report, per FPDU/frame, in sending order per direction. */
struct expect {
    bool from_ini;
    const char *kind; /* "REQ", "REP", "FPDU" */
    int opcode;       /* -1 for MPA frames */
    int tagged, last;
    long long qn, msn, mo; /* -1: absent */
    long long stag, to;
    bool bad_crc;
    int term_layer, term_etype, term_code; /* -1: not a Terminate */
    int hdrct_m, hdrct_d;
};

#define MAX_EXP 64
static struct expect exp_list[MAX_EXP];
static int nexp;

static void expect_fpdu(bool ini, int op, int last, long long qn, long long msn, long long mo,
                        long long stag, long long to)
{
    CHECK(nexp < MAX_EXP);
    exp_list[nexp++] = (struct expect){ini, "FPDU", op, sndk_op_is_tagged((unsigned)op), last,
                                       qn, msn, mo, stag, to, false, -1, -1, -1, -1, -1};
}

static uint8_t rbufs[8][128];
static uint8_t *big_src, *big_dst;
#define BIG_LEN 100000u

static void run_traffic(uint16_t port, int lfd, uint16_t *ini_port)
{
    static struct wu_rec rrec, irec; /* responder / initiator receive sides */
    struct sndk_rx rrx, irx;
    wu_rec_init(&rrec);
    wu_rec_init(&irec);
    for (int i = 0; i < 5; i++) {
        rrec.rbuf[i] = rbufs[i];
        rrec.rlen[i] = sizeof rbufs[i];
    }
    rrec.rbuf[5] = big_dst;
    rrec.rlen[5] = BIG_LEN;
    rrec.rbuf[6] = rbufs[6];
    rrec.rlen[6] = sizeof rbufs[6];
    rrec.nrbuf = 7;
    static uint8_t wmem[48], rmem[20];
    rrec.reg[0] = (struct wu_region){0xabcd0001, 0x1000, wmem, 48};
    rrec.nreg = 1;
    irec.reg[0] = (struct wu_region){0xaa01, 0x2000, rmem, 20};
    irec.nreg = 1;

    int ifd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK_EQ_I64(connect(ifd, (struct sockaddr *)&a, sizeof a), 0);
    int rfd = accept(lfd, NULL, NULL);
    CHECK(rfd >= 0);
    int one = 1;
    setsockopt(ifd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(rfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in me;
    socklen_t ml = sizeof me;
    getsockname(ifd, (struct sockaddr *)&me, &ml);
    *ini_port = ntohs(me.sin_port);

    /* MPA: Rev 2, CRC, IRD/ORD 8, P2P with Write RTR; one write per frame */
    uint8_t frame[SNDK_MPA_FRAME_MAX];
    struct sndk_mpa_policy ipol = {.rev = 2, .crc = true, .ird = 8, .ord = 8, .p2p = true};
    struct sndk_mpa_params req, rep;
    sndk_mpa_request_params(&ipol, "softndk-oracle", 14, &req);
    int n = sndk_mpa_build(frame, sizeof frame, false, &req);
    CHECK(n > 0);
    CHECK_EQ_I64(write(ifd, frame, (size_t)n), n);
    exp_list[nexp++] = (struct expect){true, "REQ", -1, -1, -1, -1, -1, -1, -1, -1, false,
                                       -1, -1, -1, -1, -1};
    struct sndk_mpa_rx m;
    sndk_mpa_rx_init(&m, false, 0);
    mpa_recv(rfd, &m);
    struct sndk_mpa_policy rpol = {.rev = 2, .crc = true, .ird = 8, .ord = 8};
    struct sndk_mpa_result res;
    CHECK_EQ_I64(sndk_mpa_accept(sndk_mpa_rx_frame(&m), &rpol, NULL, 0, &rep, &res), 0);
    CHECK_EQ_U64(res.rtr, SNDK_MPA_RTR_WRITE);
    n = sndk_mpa_build(frame, sizeof frame, true, &rep);
    CHECK_EQ_I64(write(rfd, frame, (size_t)n), n);
    exp_list[nexp++] = (struct expect){false, "REP", -1, -1, -1, -1, -1, -1, -1, -1, false,
                                       -1, -1, -1, -1, -1};
    sndk_mpa_rx_init(&m, true, 0);
    mpa_recv(ifd, &m);
    CHECK_EQ_I64(sndk_mpa_check_reply(&req, sndk_mpa_rx_frame(&m), &res), 0);
    CHECK(res.crc && res.p2p && res.rtr == SNDK_MPA_RTR_WRITE);

    wu_rx_init(&rrx, &rrec, true);
    wu_rx_init(&irx, &irec, true);
    struct sndk_tx_cfg cfg = {.crc = true};
    struct sndk_tx_msg msg;
    uint64_t rcount = 0;

    /* RTR: zero-length Write, STag 1, TO 0 (as siw) */
    sndk_tx_write(&msg, &cfg, 1, 0, NULL, 0);
    send_msg(ifd, &msg);
    expect_fpdu(true, SNDK_OP_WRITE, 1, -1, -1, -1, 1, 0);
    /* the four Sends */
    static const struct {
        unsigned op;
        uint32_t inv;
        const char *s;
    } sends[] = {{SNDK_OP_SEND, 0, "hello"},
                 {SNDK_OP_SEND_INV, 0x11223344, "inv!"},
                 {SNDK_OP_SEND_SE, 0, "se"},
                 {SNDK_OP_SEND_SE_INV, 0x55667788, "seinv"}};
    for (int i = 0; i < 4; i++) {
        struct iovec p = {(void *)(uintptr_t)sends[i].s, strlen(sends[i].s)};
        sndk_tx_send(&msg, &cfg, (uint32_t)i + 1, sends[i].op, sends[i].inv, &p, 1);
        send_msg(ifd, &msg);
        expect_fpdu(true, (int)sends[i].op, 1, 0, i + 1, 0, -1, -1);
    }
    /* a 48-byte Write in two segments */
    uint8_t wdata[48];
    for (int i = 0; i < 48; i++)
        wdata[i] = (uint8_t)i;
    struct sndk_tx_cfg small = {.crc = true, .max_fpdu = 56};
    struct iovec wp = {wdata, 48};
    sndk_tx_write(&msg, &small, 0xabcd0001, 0x1000, &wp, 1);
    send_msg(ifd, &msg);
    expect_fpdu(true, SNDK_OP_WRITE, 0, -1, -1, -1, 0xabcd0001, 0x1000);
    expect_fpdu(true, SNDK_OP_WRITE, 1, -1, -1, -1, 0xabcd0001, 0x1020);
    /* Read Request */
    struct sndk_fpdu f;
    struct iovec iov[8];
    struct sndk_read_req rr = {0xaa01, 0x2000, 20, 0xbb02, 0x3000};
    n = sndk_fpdu_read_req(&f, 1, &rr, true, iov, 8);
    write_all(ifd, iov, n);
    expect_fpdu(true, SNDK_OP_READ_REQ, 1, 1, 1, 0, -1, -1);
    rcount += 1 + 4 + 2 + 1;
    CHECK_EQ_I64(pump(rfd, &rrx, rcount), 0);
    CHECK_MEM(wmem, wdata, 48);
    CHECK(rrec.ev[rrec.nev - 1].type == WU_EV_RREQ);

    /* the Responder answers the read */
    uint8_t rdata[20];
    memset(rdata, 'R', 20);
    struct iovec rp = {rdata, 20};
    sndk_tx_read_resp(&msg, &cfg, rr.sink_stag, rr.sink_to, &rp, 1);
    send_msg(rfd, &msg);
    expect_fpdu(false, SNDK_OP_READ_RESP, 1, -1, -1, -1, 0xaa01, 0x2000);
    CHECK_EQ_I64(pump(ifd, &irx, 1), 0);
    CHECK_MEM(rmem, rdata, 20);

    /* a 3-segment Send in one write, then a 100000-byte Send at the default FPDU size */
    struct sndk_tx_cfg tiny = {.crc = true, .max_fpdu = 32};
    struct iovec sp = WU_IOV("0123456789abcdefXYZ");
    sndk_tx_send(&msg, &tiny, 5, SNDK_OP_SEND, 0, &sp, 1);
    uint8_t glued[256];
    size_t gl = 0;
    while ((n = sndk_tx_msg_next(&msg, &f, iov, 8)) > 0)
        gl += wu_flatten(iov, n, glued + gl, sizeof glued - gl);
    CHECK_EQ_I64(write(ifd, glued, gl), (ssize_t)gl);
    for (int i = 0; i < 3; i++)
        expect_fpdu(true, SNDK_OP_SEND, i == 2, 0, 5, 8 * i, -1, -1);
    struct iovec bp = {big_src, BIG_LEN};
    sndk_tx_send(&msg, &cfg, 6, SNDK_OP_SEND, 0, &bp, 1);
    send_msg(ifd, &msg);
    expect_fpdu(true, SNDK_OP_SEND, 0, 0, 6, 0, -1, -1);
    expect_fpdu(true, SNDK_OP_SEND, 1, 0, 6, 65456, -1, -1);
    rcount += 3 + 2;
    CHECK_EQ_I64(pump(rfd, &rrx, rcount), 0);
    CHECK_MEM(big_dst, big_src, BIG_LEN);

    /* a Send with a corrupted CRC: the Responder finds it and answers with a Terminate */
    struct iovec cp = WU_IOV("badcrc");
    sndk_tx_send(&msg, &cfg, 7, SNDK_OP_SEND, 0, &cp, 1);
    n = sndk_tx_msg_next(&msg, &f, iov, 8);
    f.trailer[f.trailer_len - 1] ^= 0x5a;
    write_all(ifd, iov, n);
    expect_fpdu(true, SNDK_OP_SEND, 1, 0, 7, 0, -1, -1);
    exp_list[nexp - 1].bad_crc = true;
    CHECK_EQ_I64(pump(rfd, &rrx, rcount + 1), -EPROTO);
    CHECK_EQ_U64(sndk_rx_fault(&rrx)->err, SNDK_WERR_CRC);
    struct sndk_term t;
    sndk_term_from_fault(&t, sndk_rx_fault(&rrx));
    n = sndk_fpdu_terminate(&f, 1, &t, true, iov, 8);
    write_all(rfd, iov, n);
    exp_list[nexp++] = (struct expect){false, "FPDU", SNDK_OP_TERMINATE, 0, 1, 2, 1, 0, -1, -1,
                                       false, SNDK_TERM_LAYER_LLP, 0, SNDK_TERM_LLP_CRC, 0, 0};
    CHECK_EQ_I64(pump(ifd, &irx, 2), 0);
    CHECK_EQ_U64(irx.state, SNDK_RX_CLOSED);
    CHECK(irec.ev[irec.nev - 1].type == WU_EV_TERM);

    /* and the Initiator's own Terminate, an RDMAP one carrying a DDP header (M=1 D=1) */
    struct sndk_wire_fault wf = {.err = SNDK_WERR_INV_STAG, .hdr_len = 18, .ulpdu_len = 22};
    wu_unhex("414411223344000000000000000200000000", wf.hdr, 18);
    sndk_term_from_fault(&t, &wf);
    n = sndk_fpdu_terminate(&f, 1, &t, true, iov, 8);
    write_all(ifd, iov, n);
    exp_list[nexp++] = (struct expect){true, "FPDU", SNDK_OP_TERMINATE, 0, 1, 2, 1, 0, -1, -1,
                                       false, SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_OP,
                                       SNDK_TERM_RDMAP_CANT_INV_STAG, 1, 1};
    /* drain what the Responder got, then close both ends */
    uint8_t sink[256];
    struct pollfd p = {rfd, POLLIN, 0};
    CHECK(poll(&p, 1, 5000) == 1);
    CHECK(read(rfd, sink, sizeof sink) > 0);
    shutdown(ifd, SHUT_WR);
    shutdown(rfd, SHUT_WR);
    CHECK(poll(&p, 1, 5000) == 1);
    close(ifd);
    close(rfd);
}

/* ---------------------------------------------------------------- PDML */

struct orec {
    const char *kind;
    long sport;
    int crc; /* 1 good, 2 bad, 3 unchecked */
    bool malformed;
    int nf;
    struct {
        char name[64];
        char show[64];
    } f[40];
};

#define MAX_REC 80
static struct orec recs[MAX_REC];
static int nrec;

static bool attr(const char *line, const char *key, char *out, size_t cap)
{
    const char *p = strstr(line, key);
    if (!p)
        return false;
    p += strlen(key);
    size_t i = 0;
    while (*p && *p != '"' && i + 1 < cap)
        out[i++] = *p++;
    out[i] = 0;
    return true;
}

static void parse_pdml(const char *path)
{
    FILE *fp = fopen(path, "r");
    CHECK(fp);
    static char line[1 << 16];
    long sport = -1;
    struct orec *cur = NULL;
    bool in_ddp = false;
    while (fgets(line, sizeof line, fp)) {
        char name[64], show[64], showname[256];
        if (strstr(line, "<packet>")) {
            cur = NULL;
            sport = -1;
            continue;
        }
        if (strstr(line, "<proto name=\"iwarp_mpa\"")) {
            CHECK(nrec < MAX_REC);
            cur = &recs[nrec++];
            memset(cur, 0, sizeof *cur);
            cur->kind = "?";
            cur->sport = sport;
            in_ddp = false;
            continue;
        }
        if (strstr(line, "<proto name=\"iwarp_ddp_rdmap\"")) {
            in_ddp = true;
            continue;
        }
        if (strstr(line, "_ws.malformed") && cur)
            cur->malformed = true;
        if (!strstr(line, "<field") || !attr(line, " name=\"", name, sizeof name))
            continue;
        if (strcmp(name, "tcp.srcport") == 0 && attr(line, " show=\"", show, sizeof show))
            sport = strtol(show, NULL, 10);
        if (!cur || (strncmp(name, "iwarp_", 6) != 0))
            continue;
        (void)in_ddp;
        if (strcmp(name, "iwarp_mpa.req") == 0)
            cur->kind = "REQ";
        else if (strcmp(name, "iwarp_mpa.rep") == 0)
            cur->kind = "REP";
        else if (strcmp(name, "iwarp_mpa.fpdu") == 0)
            cur->kind = "FPDU";
        else if (strcmp(name, "iwarp_mpa.crc_check") == 0 &&
                 attr(line, " showname=\"", showname, sizeof showname))
            cur->crc = strstr(showname, "Good CRC32") ? 1 : 2;
        else if (strcmp(name, "iwarp_mpa.crc") == 0)
            cur->crc = 3;
        if (attr(line, " show=\"", show, sizeof show) && cur->nf < 40) {
            snprintf(cur->f[cur->nf].name, sizeof cur->f[0].name, "%s", name);
            snprintf(cur->f[cur->nf].show, sizeof cur->f[0].show, "%s", show);
            cur->nf++;
        }
    }
    fclose(fp);
}

static long long rec_num(const struct orec *r, const char *name)
{
    for (int i = 0; i < r->nf; i++)
        if (strcmp(r->f[i].name, name) == 0)
            return (long long)strtoull(r->f[i].show, NULL, 0);
    return -1;
}

static void check_record(const struct orec *r, const struct expect *e, int idx)
{
    CHECK_MSG(strcmp(r->kind, e->kind) == 0, "record %d: %s, want %s", idx, r->kind, e->kind);
    CHECK_MSG(!r->malformed, "record %d malformed", idx);
    if (e->opcode < 0) {
        CHECK_EQ_I64(rec_num(r, "iwarp_mpa.rev"), 2);
        CHECK_EQ_I64(rec_num(r, "iwarp_mpa.crc_flag"), 1);
        CHECK_EQ_I64(rec_num(r, "iwarp_mpa.rej_flag"), 0);
        return;
    }
    CHECK_MSG(r->crc == (e->bad_crc ? 2 : 1), "record %d: CRC verdict %d", idx, r->crc);
    CHECK_MSG(rec_num(r, "iwarp_rdma.opcode") == e->opcode, "record %d: opcode %lld want %d", idx,
              rec_num(r, "iwarp_rdma.opcode"), e->opcode);
    CHECK_EQ_I64(rec_num(r, "iwarp_ddp.tagged_flag"), e->tagged);
    CHECK_MSG(rec_num(r, "iwarp_ddp.last_flag") == e->last, "record %d: last flag", idx);
    CHECK_EQ_I64(rec_num(r, "iwarp_ddp.qn"), e->qn);
    CHECK_EQ_I64(rec_num(r, "iwarp_ddp.msn"), e->msn);
    CHECK_EQ_I64(rec_num(r, "iwarp_ddp.mo"), e->mo);
    CHECK_EQ_I64(rec_num(r, "iwarp_ddp.stag"), e->stag);
    CHECK_EQ_I64(rec_num(r, "iwarp_ddp.tagged_offset"), e->to);
    if (e->opcode == SNDK_OP_SEND_INV)
        CHECK_EQ_I64(rec_num(r, "iwarp_rdma.inval_stag"), 0x11223344);
    if (e->opcode == SNDK_OP_READ_REQ) {
        CHECK_EQ_I64(rec_num(r, "iwarp_rdma.sinkstag"), 0xaa01);
        CHECK_EQ_I64(rec_num(r, "iwarp_rdma.sinkto"), 0x2000);
        CHECK_EQ_I64(rec_num(r, "iwarp_rdma.rdmardsz"), 20);
        CHECK_EQ_I64(rec_num(r, "iwarp_rdma.srcstag"), 0xbb02);
        CHECK_EQ_I64(rec_num(r, "iwarp_rdma.srcto"), 0x3000);
    }
    if (e->term_layer >= 0) {
        CHECK_EQ_I64(rec_num(r, "iwarp_rdma.term_layer"), e->term_layer);
        if (e->term_layer == SNDK_TERM_LAYER_LLP) {
            CHECK_EQ_I64(rec_num(r, "iwarp_rdma.term_etype_llp"), e->term_etype);
            CHECK_EQ_I64(rec_num(r, "iwarp_rdma.term_errcode_llp"), e->term_code);
        } else {
            CHECK_EQ_I64(rec_num(r, "iwarp_rdma.term_etype_rdma"), e->term_etype);
            CHECK_EQ_I64(rec_num(r, "iwarp_rdma.term_errcode_rdma"), e->term_code);
        }
        CHECK_EQ_I64(rec_num(r, "iwarp_rdma.term_hdrct_m"), e->hdrct_m);
        CHECK_EQ_I64(rec_num(r, "iwarp_rdma.hdrct_d"), e->hdrct_d);
    }
}

struct fin_wait {
    const char *cap, *out;
};

static bool capture_has_fins(void *p)
{
    const struct fin_wait *w = p;
    const char *argv[] = {"tshark", "-r", w->cap, "-Y", "tcp.flags.fin==1", "-T", "fields",
                    "-e", "tcp.srcport", NULL};
    if (reap(spawn(argv, w->out, NULL), 10000) < 0)
        return false;
    FILE *f = fopen(w->out, "r");
    int lines = 0;
    char buf[64];
    while (f && fgets(buf, sizeof buf, f))
        lines++;
    if (f)
        fclose(f);
    return lines >= 2;
}

TEST_T(tshark_decodes_our_frames, 120)
{
    if (!in_path("tshark") || !in_path("dumpcap"))
        SKIP("tshark/dumpcap not installed (apt-get install tshark)");
    char dir[] = "/tmp/softndk-oracle-XXXXXX";
    CHECK(mkdtemp(dir));
    char cap[256], err[256], pdml[256], tmp[256];
    snprintf(cap, sizeof cap, "%s/cap.pcapng", dir);
    snprintf(err, sizeof err, "%s/dumpcap.err", dir);
    snprintf(pdml, sizeof pdml, "%s/decode.pdml", dir);
    snprintf(tmp, sizeof tmp, "%s/fins.txt", dir);

    uint16_t port;
    int lfd = listen_on(&port);
    CHECK_MSG(lfd >= 0, "no free port in %d..%d", ORACLE_PORT_BASE, ORACLE_PORT_BASE + 39);
    char filter[64];
    snprintf(filter, sizeof filter, "port %u", port); /* TCP traffic + UDP probes */
    /* "-w -": dumpcap flushes every packet when writing to stdout, so the file can be read
     * while the capture runs (to see the FINs before stopping it) */
    const char *dargv[] = {"dumpcap", "-q", "-i", "lo", "-f", filter, "-w", "-", NULL};
    pid_t dpid = spawn(dargv, cap, err);
    CHECK(dpid > 0);
    struct dumpcap_wait dw = {dpid, err, false};
    bool ready = harness_wait_until(dumpcap_ready, &dw, 15000);
    if (!ready || dw.exited) {
        char why[512] = "no \"Capturing on\" within 15 s";
        FILE *f = fopen(err, "r");
        if (f && fgets(why, sizeof why, f))
            why[strcspn(why, "\n")] = 0;
        if (f)
            fclose(f);
        if (!dw.exited) {
            kill(dpid, SIGKILL);
            waitpid(dpid, NULL, 0);
        }
        SKIP("capture not possible: %s", why);
    }

    struct probe_wait pw = {cap, port, socket(AF_INET, SOCK_DGRAM, 0), 0, {0, 0}};
    bool live = harness_wait_until(probe_seen, &pw, 15000);
    close(pw.fd);
    if (!live) {
        kill(dpid, SIGKILL);
        waitpid(dpid, NULL, 0);
        SKIP("capture not possible: dumpcap saw no packet on lo within 15 s");
    }

    big_src = malloc(BIG_LEN);
    big_dst = calloc(1, BIG_LEN);
    for (size_t i = 0; i < BIG_LEN; i++)
        big_src[i] = (uint8_t)(i * 13);
    uint16_t ini_port = 0;
    run_traffic(port, lfd, &ini_port);
    close(lfd);

    /* stop the capture only once both FINs are in the file: everything before them is too */
    struct fin_wait fw = {cap, tmp};
    bool fins = harness_wait_until(capture_has_fins, &fw, 20000);
    kill(dpid, SIGINT);
    CHECK_MSG(reap(dpid, 10000) == 0, "dumpcap did not stop cleanly");
    CHECK_MSG(fins, "the capture never showed both FINs");

    const char *targv[] = {"tshark", "-r", cap, "-2", "--enable-heuristic", "iwarp_mpa_tcp",
                     "--disable-heuristic", "rpcrdma_iwarp", "--disable-heuristic",
                     "smb_direct_iwarp", "-o", "tcp.try_heuristic_first:TRUE", "-Y",
                     "iwarp_mpa || _ws.malformed", "-T", "pdml", NULL};
    CHECK_EQ_I64(reap(spawn(targv, pdml, NULL), 60000), 0);
    parse_pdml(pdml);

    /* compare per direction, in sending order */
    int seen[2] = {0, 0};
    for (int dirn = 0; dirn < 2; dirn++) {
        bool ini = dirn == 0;
        int ri = 0;
        for (int ei = 0; ei < nexp; ei++) {
            if (exp_list[ei].from_ini != ini)
                continue;
            while (ri < nrec && recs[ri].sport != (ini ? ini_port : port))
                ri++;
            CHECK_MSG(ri < nrec, "%s: tshark shows %d records, we sent more",
                      ini ? "initiator" : "responder", seen[dirn]);
            check_record(&recs[ri], &exp_list[ei], ri);
            seen[dirn]++;
            ri++;
        }
        while (ri < nrec && recs[ri].sport != (ini ? ini_port : port))
            ri++;
        CHECK_MSG(ri == nrec, "tshark shows more records than we sent");
    }
    CHECK_EQ_I64(seen[0] + seen[1], nexp);
    CHECK_EQ_I64(nrec, nexp);
    free(big_src);
    free(big_dst);
    /* leave the capture behind when something failed, or when asked to */
    if (getenv("SOFTNDK_ORACLE_KEEP")) {
        fprintf(stderr, "capture kept in %s\n", dir);
        return;
    }
    unlink(cap);
    unlink(err);
    unlink(pdml);
    unlink(tmp);
    rmdir(dir);
}
