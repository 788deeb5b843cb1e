/* The byte stream in shared memory (stream.h; docs/transport-shm.md): two softndk processes
 * of one host, the same user, met through the rendezvous socket (core/rendezvous.c). The FPDUs
 * are the same bytes TCP would carry; they go through two single-producer, single-consumer
 * byte rings in one memfd instead of the kernel's socket buffers.
 *
 * Layout of the memfd (sealed against shrinking and growing, so the peer cannot make our
 * mapping fault):
 *
 *   page 0          struct shm_hdr: magic, version, ring size, one struct shm_ctl per ring
 *   page 1 ...      ring 0 (active -> passive), SHM_RING bytes
 *   ... then        ring 1 (passive -> active), SHM_RING bytes
 *
 * Every index the peer writes (the head of the ring we fill, the tail and end of the ring we
 * drain) is read once into a local, checked against what we know (never more bytes than the
 * ring holds, never backwards), and only then used; a bad one fails the stream with -EPROTO.
 * Offsets into a ring are always pos & (SHM_RING - 1), so no value reaches outside it.
 *
 * Wake-ups: the AF_UNIX socket carries single bytes, each "look at the rings". A reader that
 * finds its ring empty says so in the ring's `reader_waiting` (then looks once more: the
 * seq_cst fences on both sides make either the reader see the new bytes or the writer see the
 * flag); a writer that fills a ring tells a waiting reader with a byte. A writer that finds
 * the ring full does the same with `writer_waiting`, and the reader that frees room answers.
 * While a ring is being read, nobody writes to the socket.
 *
 * The stream's fd is an epoll set over the socket and an eventfd of our own, so that the
 * connection's level-triggered EPOLLIN keeps reporting bytes left in the ring when a receive
 * pass stops early (its budget, a try-lock another thread holds): the socket alone could only
 * report bytes the peer sent. Such a set reports EPOLLIN only, never EPOLLOUT: a writer
 * blocked on a full ring is resumed by the peer's wake byte (EPOLLIN), on which the
 * connection's event handler pushes its sender too (ops.room_events). The peer's death is the
 * socket's hang-up, which the set reports as EPOLLIN; the read that follows finds the socket
 * ended without the ring's end mark and reports ECONNRESET, as TCP's reset. */
#include "datapath/stream.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "iwarp/fpdu.h"
#include "util/lock.h"
#include "util/log.h"

#define SHM_MAGIC   0x314d48534b444e53ull /* "SNDKSHM1" */
#define SHM_VERSION 4u         /* 2: records, spans; 3: stamped records; 4: lap records */
#define SHM_RING    (4u << 20) /* per direction: 4 MiB, 64 of the largest FPDUs in flight */
#define SHM_PAGE    4096u
#define SHM_SIZE    ((size_t)SHM_PAGE + 2u * (size_t)SHM_RING)
#define SHM_LINE    64

_Static_assert((SHM_RING & (SHM_RING - 1)) == 0, "ring offsets are pos & (SHM_RING - 1)");

/* One ring's indices, each written by one side, on lines of their own. The tail, written at
 * every record, has its line alone: a polling reader never reads it (it finds records by their
 * stamps), so its look at the end mark is no miss per message. */
struct shm_ctl {
    _Alignas(SHM_LINE) _Atomic uint64_t tail; /* writer: bytes written so far */
    _Alignas(SHM_LINE) _Atomic uint64_t end;  /* writer: tail + 1 at its end of stream, else 0 */
    _Atomic uint32_t reset;                   /* writer: it closed abortively */
    _Atomic uint32_t wakes_r;                 /* writer: wake bytes it sent the reader */
    _Alignas(SHM_LINE) _Atomic uint64_t head; /* reader: bytes consumed so far */
    _Atomic uint32_t wakes_w;                 /* reader: wake bytes it sent the writer */
    _Alignas(SHM_LINE) _Atomic uint32_t reader_waiting; /* set by the reader, taken by writer */
    _Alignas(SHM_LINE) _Atomic uint32_t writer_waiting; /* set by the writer, taken by reader */
    /* set by a writer with lent memory out and nobody polling for its completions, taken by
     * the reader when its head passed SETTLE_BATCH spans, or all it was given */
    _Alignas(SHM_LINE) _Atomic uint32_t settle_waiting;
    /* The one-copy handshake: the writer's address of its probe word; the reader, once it
     * read that word from the writer's memory (process_vm_readv), says spans may come. */
    _Alignas(SHM_LINE) _Atomic uint64_t probe_addr; /* writer */
    _Atomic uint32_t pull_ok;                       /* reader: 1 = spans welcome */
};

/* A ring holds records, each on an 8-byte boundary (so a header's words never straddle the
 * ring's end): a header, then for REC_BYTES `len` bytes of the stream (padded to 8), for
 * REC_SPAN the writer's address of `len` bytes that the reader copies straight out of the
 * writer's memory (process_vm_readv) before its head passes the record. The writer publishes
 * whole records only.
 *
 * Each header begins with its stamp, the record's ring position XOR the stream's key, stored
 * (release) after the rest of the record. A polling reader watches the stamp word at its head,
 * so the record's arrival is one cache line crossing cores, the one that holds the record,
 * rather than two in a row (the tail's, then the record's). What was at that position before,
 * an older lap's header or payload, cannot pass for the stamp: an older header's stamp is
 * another position's, and payload, which may be anybody's bytes (a file an SMB client wrote),
 * would have to hold this position XOR a key that only the two processes hold. The tail is
 * still published after the records and still checked: by a reader about to sleep, and by a
 * polling one once a clock tick. */
enum {
    REC_BYTES = 0x42594553u, /* "SEYB" */
    REC_SPAN = 0x4e415053u,  /* "SPAN" */
    REC_LAP = 0x2050414cu,   /* "LAP ": no bytes; the next record is at the next lap's start */
};
/* Resident past this many ring bytes, a stream asks to be trimmed once quiet (shm_trim): less
 * is not worth the connection's timer. */
#define TRIM_ABOVE (16u * SHM_PAGE)
/* Warm pages: a ring's pages are the memfd's, allocated and mapped into each process at their
 * first touch, a page fault each (on a virtual machine one cost 10-15 us, a whole 64 B round
 * trip many times over: every 40th message of a ping-pong paid one through the first 4 MiB).
 * A quiet stream therefore stays on the pages it has touched: a writer about to go past them
 * with a write that fits in them, finding the ring empty, writes a lap record and goes on at
 * the start of the ring. A busy stream (the ring not empty) goes on into new pages, and once
 * the whole ring was touched nothing is skipped any more. The memory a connection holds is
 * what its traffic needed, not the whole ring. */
struct shm_rec {
    uint64_t stamp;
    uint32_t kind;
    uint32_t len;
};
struct shm_span {
    struct shm_rec h;
    uint64_t addr;
};
#define REC_ALIGN  8u
#define REC_PAD(n) (((n) + (REC_ALIGN - 1)) & ~(uint64_t)(REC_ALIGN - 1))
/* shm_stream.idle_at while a record is half read: no position to look at */
#define IDLE_MID UINT64_MAX
/* Spans outstanding at once on one stream; more go as bytes. */
#define SPANS_MAX 256u
/* A writer waiting for its spans to settle hears of them in batches: one wake byte (a system
 * call on each side) per this many, or when the reader caught up. */
#define SETTLE_BATCH 8u
/* A writer blocked on a full ring is woken once this much is free again (or the ring is
 * empty), not at the first record read: with the ring full of 64 KiB FPDUs, a wake byte per
 * record (a system call on each side, the writer's progress thread scheduled beside the
 * polling consumers) was a wake per 64 KiB. TCP tells a writer of room the same way, once a
 * third of its buffer is free. A writer whose consumer polls finds room itself. Every head
 * the reader publishes looks again, and the one that empties the ring always tells. */
#define WAKE_ROOM (SHM_RING / 4u)

/* Whether this reader may pull the writer's spans (a phase: logged as any other). */
enum shm_pull {
    PULL_UNKNOWN,  /* not probed yet: the writer sends bytes */
    PULL_ONE_COPY, /* the probe read the writer's word: spans welcome */
    PULL_STAGED,   /* process_vm_readv refused (ptrace scope, seccomp, ...): bytes only */
    PULL_STATES
};
static const char *const pull_names[PULL_STATES] = {
    [PULL_UNKNOWN] = "unknown",
    [PULL_ONE_COPY] = "one-copy",
    [PULL_STAGED] = "staged",
};

struct shm_hdr {
    uint64_t magic;
    uint32_t version;
    uint32_t ring_size;
    struct shm_ctl ctl[2];
};
_Static_assert(sizeof(struct shm_hdr) <= SHM_PAGE, "the header fits its page");

/* What the active end sends, with the memfd attached. */
struct shm_hello {
    uint64_t magic;
    uint32_t version;
    uint32_t ring_size;
    uint64_t stamp_key; /* the records' key (struct shm_rec), sent where only the peer reads it */
};

/* The stream's phases: every move is logged "X => Y (why)". */
enum shm_phase {
    SHM_HANDSHAKE, /* passive: the rings have not arrived yet */
    SHM_MAPPED,    /* both rings mapped: bytes flow */
    SHM_FAILED,    /* a bad index, a bad hello or the peer gone: every call says `err` */
    SHM_PHASES
};
static const char *const phase_names[SHM_PHASES] = {
    [SHM_HANDSHAKE] = "handshake",
    [SHM_MAPPED] = "rings-mapped",
    [SHM_FAILED] = "failed",
};

struct shm_stream {
    int sock;      /* the rendezvous socket: the hello, wake bytes, hang-up */
    int evfd;      /* our own wake: readable while the ring may hold bytes nobody reported */
    int room_evfd; /* readable while a room byte for our blocked writer waits for a write */
    int epfd;      /* the stream's fd: sock + evfd + room_evfd */
    bool active;
    _Atomic int phase;
    _Atomic int err;      /* the failure, positive errno, once SHM_FAILED */
    _Atomic bool claimed; /* the handshake's try-lock: one of reader and writer takes the hello */
    void *base;           /* the mapping, SHM_SIZE bytes */
    struct shm_ctl *in, *out;
    uint8_t *in_ring, *out_ring;
    /* reader side (under the connection's rx_lock) */
    uint64_t head;             /* our copy: the shared one is never read back */
    uint32_t wakes_seen;       /* wake bytes taken off the socket */
    uint32_t room_wakes;       /* the peer's count of wakes for our writer, as last drained */
    _Atomic bool room_armed;   /* room_evfd holds a count */
    _Atomic bool w_blocked;    /* the writer said "full" (-EAGAIN) and has not written since */
    _Atomic bool self_armed;   /* evfd holds a count (set by the reader, or by a writer that
                                  mapped the rings: the reader then looks at them) */
    bool in_ended;             /* the peer's end of stream reached */
    int pull;                  /* enum shm_pull: can we read the peer's spans */
    uint32_t rec_kind;         /* the record being read: 0 (none), REC_BYTES, REC_SPAN
                                  (REC_LAP only between next_record and its caller) */
    uint32_t rec_left;         /* its bytes not read yet */
    uint64_t rec_data;         /* REC_BYTES: ring position of its next byte */
    uint64_t rec_addr;         /* REC_SPAN: the peer's address of its next byte */
    uint64_t rec_end;          /* ring position after the record */
    uint64_t pulled;           /* bytes read straight from the peer's memory (tests) */
    uint32_t spans_passed;     /* spans our head passed since the writer last heard of it */
    uint64_t socket_looked_ms; /* a polling reader's last look at the socket (coarse ms) */
    uint32_t polls_since_look; /* empty polls since the clock was last read for that */
    _Atomic uint32_t idle_looks; /* shm_idle's count, lock-free: every 64th says "look" */
    /* where a lock-free look (shm_idle) finds the next record's stamp, IDLE_MID while a record
     * is half read; written by the reader */
    _Atomic uint64_t idle_at;
    uint64_t key;              /* the records' stamp key, for both rings (from the hello) */
    pid_t peer_pid;            /* the peer process, as the kernel told (SO_PEERCRED) */
    uint64_t probe_word;       /* what the peer's probe reads from us */
    /* writer side (under tx_lock) */
    uint64_t tail;
    uint64_t seen_head; /* the peer's head as last validated: it never goes back */
    uint64_t warm_end;  /* ring offset up to which pages were touched (page-rounded) */
    uint64_t trim_seen; /* stream.written at the last trim look: writes since mean busy */
    uint64_t logical;   /* stream bytes accepted (the connection's stream.written) */
    /* spans not yet passed by the peer's head: ring position after each, and the stream
     * position of its first byte */
    struct {
        uint64_t ring_end, first;
    } spans[SPANS_MAX];
    uint32_t span_head, span_n;
    _Atomic uint32_t lent; /* span_n, for the reader side's room-wake decision */
};

static struct shm_stream *st_of(struct sndk_stream *s)
{
    return s->priv;
}

/* The legal moves: handshake -> rings-mapped, and either -> failed (final). */
static bool may_move(int from, enum shm_phase to)
{
    return (from == SHM_HANDSHAKE && to == SHM_MAPPED) || (from != SHM_FAILED && to == SHM_FAILED);
}

/* Move to `to` if that is legal from where the stream is; false (and nothing) when it is not:
 * a failure that came first stays. */
static bool set_phase(struct shm_stream *st, enum shm_phase to, const char *why)
{
    int from = atomic_load(&st->phase);
    do {
        if (!may_move(from, to))
            return false;
    } while (!atomic_compare_exchange_weak(&st->phase, &from, (int)to));
    sndk_debug("shm", "stream %p: %s => %s (%s)", (void *)st, phase_names[from], phase_names[to],
               why);
    return true;
}

/* Make the stream's fd readable for good: its end or its failure is a state, like TCP's FIN
 * or reset, which every later look must find. A reader that returns bytes with it, or a
 * writer that finds it, leaves no wake byte that would report it; the read after this one
 * returns it, and the connection then stops watching. */
static void hold_readable(struct shm_stream *st)
{
    /* the count before the flag: a reader that takes the flag finds the count to take */
    uint64_t one = 1;
    (void)!write(st->evfd, &one, sizeof one);
    atomic_store_explicit(&st->self_armed, true, memory_order_release);
}

/* Fail once: the first error is the one reported. */
static int fail(struct shm_stream *st, int err, const char *why)
{
    int none = 0;
    if (atomic_compare_exchange_strong(&st->err, &none, err)) {
        if (err == EPROTO)
            sndk_warn("shm", "stream %p: %s: the stream fails", (void *)st, why);
        set_phase(st, SHM_FAILED, why);
        hold_readable(st);
    }
    return -atomic_load(&st->err);
}

static void wake_peer(struct shm_stream *st, _Atomic uint32_t *count)
{
    /* counted before it is sent: the peer drains at most what it was told of */
    atomic_fetch_add_explicit(count, 1, memory_order_relaxed);
    uint8_t b = 1;
    /* EAGAIN: the peer's queue is full of unread bytes, so it is awake already; EPIPE: gone,
     * which its own side reports */
    (void)send(st->sock, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

static void map_rings(struct shm_stream *st)
{
    struct shm_hdr *h = st->base;
    int me = st->active ? 0 : 1; /* the ring we write */
    st->out = &h->ctl[me];
    st->in = &h->ctl[1 - me];
    st->out_ring = (uint8_t *)st->base + SHM_PAGE + (size_t)me * SHM_RING;
    st->in_ring = (uint8_t *)st->base + SHM_PAGE + (size_t)(1 - me) * SHM_RING;
    /* Where the peer's reader finds our probe word; what it reads there proves it can read
     * our memory, and that the pid it has for us is ours (probe_peer). */
    st->probe_word = SHM_MAGIC ^ (uint64_t)getpid();
    atomic_store_explicit(&st->out->probe_addr, (uint64_t)(uintptr_t)&st->probe_word,
                          memory_order_release);
}

/* ---------------------------------------------------------------- one mapping per process */

/* The rings this process mapped, by their memfd's inode: when both ends of a connection live in
 * one process (two endpoints of one consumer; every in-process test pair) the passive end maps
 * nothing new but takes the active end's address. One set of atomics then serves both, and
 * ThreadSanitizer, which relates a release and an acquire only at one address, can follow every
 * hand-off through the rings. */
struct ring_map {
    struct ring_map *next;
    dev_t dev;
    ino_t ino;
    void *base;
    unsigned refs;
};
static struct sndk_mutex maps_lock = SNDK_MUTEX_INITIALIZER(SNDK_LOCK_SHM_MAPS);
static struct ring_map *maps;

/* Map mfd's rings, or take this process's mapping of them: the base, or MAP_FAILED (errno). */
static void *rings_map(int mfd)
{
    struct stat sb;
    if (fstat(mfd, &sb) != 0)
        return MAP_FAILED;
    sndk_mutex_lock(&maps_lock);
    for (struct ring_map *r = maps; r; r = r->next) {
        if (r->dev == sb.st_dev && r->ino == sb.st_ino) {
            r->refs++;
            sndk_mutex_unlock(&maps_lock);
            return r->base;
        }
    }
    struct ring_map *r = calloc(1, sizeof *r);
    void *m = r ? mmap(NULL, SHM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0) : MAP_FAILED;
    if (m == MAP_FAILED) {
        int err = r ? errno : ENOMEM;
        free(r);
        sndk_mutex_unlock(&maps_lock);
        errno = err;
        return MAP_FAILED;
    }
    *r = (struct ring_map){.next = maps, .dev = sb.st_dev, .ino = sb.st_ino, .base = m, .refs = 1};
    maps = r;
    sndk_mutex_unlock(&maps_lock);
    return m;
}

/* One end lets its rings go: unmapped with the last. */
static void rings_unmap(void *base)
{
    sndk_mutex_lock(&maps_lock);
    for (struct ring_map **pp = &maps; *pp; pp = &(*pp)->next) {
        struct ring_map *r = *pp;
        if (r->base != base)
            continue;
        if (--r->refs == 0) {
            *pp = r->next;
            munmap(r->base, SHM_SIZE);
            free(r);
        }
        break;
    }
    sndk_mutex_unlock(&maps_lock);
}

/* ---------------------------------------------------------------- the handshake */

static int create_rings(struct shm_stream *st)
{
    /* The stamps' key: unknown to anybody whose bytes the stream carries. getrandom without
     * flags waits only before the kernel's pool is first ready, long past at any connect. */
    if (getrandom(&st->key, sizeof st->key, 0) != (ssize_t)sizeof st->key)
        return errno ? -errno : -EIO;
    int mfd = memfd_create("softndk-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (mfd < 0)
        return -errno;
    if (ftruncate(mfd, (off_t)SHM_SIZE) != 0 ||
        fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        int err = errno;
        close(mfd);
        return -err;
    }
    void *m = rings_map(mfd);
    if (m == MAP_FAILED) {
        int err = errno;
        close(mfd);
        return -err;
    }
    st->base = m;
    struct shm_hdr *h = m; /* zero-filled by ftruncate: every index 0 */
    h->magic = SHM_MAGIC;
    h->version = SHM_VERSION;
    h->ring_size = SHM_RING;
    /* Both readers start out waiting: nothing has read either ring yet, and a connection whose
     * receive pass runs only on readiness (a CQ's readiness set, an idle progress thread) would
     * otherwise never hear of the first bytes. */
    atomic_store(&h->ctl[0].reader_waiting, 1);
    atomic_store(&h->ctl[1].reader_waiting, 1);
    struct shm_hello hello = {
        .magic = SHM_MAGIC, .version = SHM_VERSION, .ring_size = SHM_RING, .stamp_key = st->key};
    struct iovec iov = {&hello, sizeof hello};
    union {
        struct cmsghdr c;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &mfd, sizeof mfd);
    /* the socket's queue holds at most the RTR ahead of this: it fits at once */
    ssize_t w = sendmsg(st->sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    int err = w == (ssize_t)sizeof hello ? 0 : (w < 0 ? errno : EIO);
    close(mfd); /* the mapping and the peer's copy keep it */
    if (err) {
        rings_unmap(st->base);
        st->base = NULL;
        return -err;
    }
    map_rings(st);
    return 0;
}

/* Passive: take the hello and its memfd if they are here. 0: mapped; -EAGAIN: not yet; other:
 * the stream failed. The caller holds the claim. */
static int receive_rings(struct shm_stream *st)
{
    struct shm_hello hello;
    struct iovec iov = {&hello, sizeof hello};
    union {
        struct cmsghdr c;
        char buf[CMSG_SPACE(4 * sizeof(int))];
    } ctl;
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
    ssize_t got = recvmsg(st->sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return -EAGAIN;
    if (got < 0)
        return fail(st, errno, "receiving the rings");
    if (got == 0)
        return fail(st, ECONNRESET, "the peer left before its rings came");
    /* every descriptor that came is ours to close, whatever else is wrong */
    int mfd = -1, extra = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            if (mfd < 0) {
                mfd = fd;
            } else {
                close(fd);
                extra++;
            }
        }
    }
    const char *bad = NULL;
    struct stat sb;
    int seals = mfd >= 0 ? fcntl(mfd, F_GET_SEALS) : -1;
    if (got != (ssize_t)sizeof hello || (mh.msg_flags & (MSG_CTRUNC | MSG_TRUNC)))
        bad = "a short or truncated hello";
    else if (hello.magic != SHM_MAGIC || hello.version != SHM_VERSION ||
             hello.ring_size != SHM_RING)
        bad = "a hello of another version or ring size";
    else if (mfd < 0 || extra)
        bad = "not exactly one descriptor with the hello";
    else if (fstat(mfd, &sb) != 0 || !S_ISREG(sb.st_mode) || (size_t)sb.st_size != SHM_SIZE)
        bad = "rings of the wrong size";
    else if (seals < 0 || !(seals & F_SEAL_SHRINK))
        bad = "rings that could shrink under us";
    if (bad) {
        if (mfd >= 0)
            close(mfd);
        return fail(st, EPROTO, bad);
    }
    void *m = rings_map(mfd);
    int err = m == MAP_FAILED ? errno : 0;
    close(mfd);
    if (err)
        return fail(st, err, "mapping the rings");
    st->base = m;
    st->key = hello.stamp_key;
    map_rings(st);
    /* The peer may have written already, and nobody has said it waits: whoever reads next
     * must look (a writer that took the hello would otherwise leave the bytes unreported). */
    uint64_t one = 1;
    (void)!write(st->evfd, &one, sizeof one);
    atomic_store(&st->self_armed, true);
    if (!set_phase(st, SHM_MAPPED, "the peer's rings arrived"))
        return -atomic_load(&st->err);
    return 0;
}

/* 0 when the rings are mapped, -EAGAIN before, -errno once failed. */
static int ready(struct shm_stream *st)
{
    int ph = atomic_load_explicit(&st->phase, memory_order_acquire);
    if (ph == SHM_MAPPED)
        return 0;
    if (ph == SHM_FAILED)
        return -atomic_load(&st->err);
    /* Reader and writer may both get here: one takes the hello, the other says "not yet"
     * (the taker raises evfd, so a reader comes back; a writer is kicked by that reader). */
    bool free_claim = false;
    if (!atomic_compare_exchange_strong(&st->claimed, &free_claim, true))
        return -EAGAIN;
    int rc = atomic_load(&st->phase) == SHM_HANDSHAKE ? receive_rings(st) : 0;
    atomic_store(&st->claimed, false);
    return rc == 0 ? ready(st) : rc;
}

/* ---------------------------------------------------------------- reading */

/* The bytes waiting in the ring we drain as the writer's tail tells, validated: >= 0, or
 * -EPROTO. The tail may lag behind records we took already: the writer stamps each record as
 * it goes and publishes the tail once, after the last of a write; then 0. Either way the two
 * are at most a ring apart. */
static int64_t in_avail(struct shm_stream *st, uint64_t *tail_out)
{
    uint64_t tail = atomic_load_explicit(&st->in->tail, memory_order_acquire);
    uint64_t n = tail - st->head;
    *tail_out = tail;
    if (n <= SHM_RING)
        return (int64_t)n;
    if (st->head - tail <= SHM_RING)
        return 0; /* behind our head: still being published */
    return fail(st, EPROTO, "the peer's tail is outside its ring");
}

/* The stamp a record at ring position pos carries (struct shm_rec). */
static inline uint64_t stamp_of(const struct shm_stream *st, uint64_t pos)
{
    return pos ^ st->key;
}

/* The word at ring position pos (8-aligned: it never straddles the ring's end). */
static inline uint64_t *ring_word(uint8_t *ring, uint64_t pos)
{
    assert((pos & (REC_ALIGN - 1)) == 0);
    return (uint64_t *)(void *)(ring + (pos & (SHM_RING - 1)));
}

/* Has the writer published a record at pos (of the ring we drain)? The acquire pairs with the
 * writer's release of the stamp, stored after the record's other bytes. */
static inline bool rec_at(struct shm_stream *st, uint64_t pos)
{
    return __atomic_load_n(ring_word(st->in_ring, pos), __ATOMIC_ACQUIRE) == stamp_of(st, pos);
}

/* Is the next record at our head? 1: yes; 0: not yet; -EPROTO. With `check` the writer's tail
 * is read too, and bytes it says it published at our head without their stamp fail the
 * stream. The writer stores the stamp before the tail, so once the tail read (acquire) shows
 * the bytes, their stamp shows as well. */
static int rec_ready(struct shm_stream *st, bool check)
{
    if (rec_at(st, st->head))
        return 1;
    if (!check)
        return 0;
    uint64_t tail = 0;
    int64_t avail = in_avail(st, &tail);
    if (avail <= 0)
        return (int)avail;
    if (rec_at(st, st->head))
        return 1;
    return fail(st, EPROTO, "bytes published at our head without their record's stamp");
}

/* Keep the stream's fd readable: bytes are left in the ring that no wake byte reports. */
static void raise_self(struct shm_stream *st)
{
    if (atomic_load_explicit(&st->self_armed, memory_order_relaxed))
        return;
    hold_readable(st);
}

/* After taking wake bytes: was one of them the peer's "room in your ring" for our blocked
 * writer? The event that brought it may have run the sender before the byte came, so taking
 * it would lose it: the stream stays readable once more, and the next event pushes. The peer
 * counts such a byte before it sends it, so once we have read the byte the count shows it. */
static void keep_room_wake(struct shm_stream *st)
{
    uint32_t room = atomic_load_explicit(&st->out->wakes_w, memory_order_acquire);
    if (room == st->room_wakes)
        return;
    st->room_wakes = room;
    /* Kept on an eventfd of its own, which only a write takes: a later drain (a receive pass
     * that no push follows) must not take it either. A writer that is not blocked needs none. */
    if ((atomic_load(&st->w_blocked) || atomic_load_explicit(&st->lent, memory_order_relaxed)) &&
        !atomic_exchange(&st->room_armed, true)) {
        uint64_t one = 1;
        (void)!write(st->room_evfd, &one, sizeof one);
    }
}

/* Take the room signal: a write runs now, or the writer is no longer blocked. */
static void take_room(struct shm_stream *st)
{
    if (atomic_load_explicit(&st->room_armed, memory_order_relaxed) &&
        atomic_exchange(&st->room_armed, false)) {
        uint64_t v;
        (void)!read(st->room_evfd, &v, sizeof v);
    }
}

/* Take the wake bytes the peer said it sent, and our own wake: called when the ring is empty,
 * before saying we wait. 0, or -errno when the socket ended (the peer gone or closed). */
static int drain_wakes(struct shm_stream *st)
{
    /* Raised by us, or beside us by `arm` or a writer's failure: whoever takes the flag takes
     * the count, which was written before it (hold_readable). */
    if (atomic_load_explicit(&st->self_armed, memory_order_relaxed) &&
        atomic_exchange_explicit(&st->self_armed, false, memory_order_acquire)) {
        uint64_t v;
        (void)!read(st->evfd, &v, sizeof v);
    }
    if (!atomic_load(&st->w_blocked) && !atomic_load_explicit(&st->lent, memory_order_relaxed))
        take_room(st); /* raised for a writer that has written since (a race): not needed */
    uint32_t told = atomic_load_explicit(&st->in->wakes_r, memory_order_relaxed) +
                    atomic_load_explicit(&st->out->wakes_w, memory_order_relaxed);
    for (;;) {
        uint8_t sink[256];
        uint32_t want = told - st->wakes_seen;
        if (want == 0 || want > sizeof sink)
            want = sizeof sink; /* none said, or a lie: one read tells EOF or EAGAIN anyway */
        ssize_t got = recv(st->sock, sink, want, MSG_DONTWAIT);
        if (got > 0) {
            st->wakes_seen += (uint32_t)got;
            if ((size_t)got < want)
                break;
            continue;
        }
        if (got == 0)
            return -ECONNRESET; /* the peer's socket closed */
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        break;
    }
    keep_room_wake(st);
    /* a failure found by the writer meanwhile raised evfd, which may be what we just took */
    if (atomic_load(&st->phase) == SHM_FAILED)
        return -atomic_load(&st->err);
    return 0;
}

/* The ring looked empty: 0 (nothing more yet), 1 (the peer's end of stream), 2 (bytes came
 * after all), or -errno. The writer stores its tail before its end mark, so with the mark read
 * first the tail read after it is final. */
static int at_empty(struct shm_stream *st)
{
    uint64_t end = atomic_load_explicit(&st->in->end, memory_order_acquire);
    if (!end)
        return 0;
    uint64_t tail = 0;
    int64_t avail = in_avail(st, &tail);
    if (avail < 0)
        return (int)avail;
    if (end - 1 != tail)
        return fail(st, EPROTO, "the peer's end mark is not at its tail");
    if (avail == 0 && tail != st->head) /* the tail is final: it no longer lags */
        return fail(st, EPROTO, "records taken past the peer's final tail");
    if (avail > 0) {
        int r = rec_ready(st, true);
        return r < 0 ? r : 2;
    }
    if (atomic_load_explicit(&st->in->reset, memory_order_acquire))
        return fail(st, ECONNRESET, "the peer reset the stream");
    st->in_ended = true;
    /* This read may return bytes that came before the mark; the 0 comes with the next, and
     * the wake byte that announced both is taken already. */
    hold_readable(st);
    return 1;
}

static size_t iov_total(const struct iovec *iov, int n)
{
    size_t t = 0;
    for (int i = 0; i < n; i++)
        t += iov[i].iov_len;
    return t;
}

/* Copy n ring bytes from position pos into iov (from byte `skip` of it). */
static void ring_out_copy(const uint8_t *ring, uint64_t pos, const struct iovec *iov, int niov,
                          size_t skip, size_t n)
{
    assert(n <= SHM_RING); /* callers took at most what the validated indices allow */
    for (int i = 0; i < niov && n; i++) {
        if (skip >= iov[i].iov_len) {
            skip -= iov[i].iov_len;
            continue;
        }
        size_t take = iov[i].iov_len - skip;
        if (take > n)
            take = n;
        uint8_t *dst = (uint8_t *)iov[i].iov_base + skip;
        size_t done = 0;
        while (done < take) {
            size_t off = (size_t)((pos + done) & (SHM_RING - 1));
            size_t run = SHM_RING - off;
            if (run > take - done)
                run = take - done;
            memcpy(dst + done, ring + off, run);
            done += run;
        }
        pos += take;
        n -= take;
        skip = 0;
    }
}

/* Copy n ring bytes at pos into dst (a record header, which the peer may change under us:
 * read once, then checked). */
static void ring_peek(const uint8_t *ring, uint64_t pos, void *dst, size_t n)
{
    struct iovec v = {dst, n};
    ring_out_copy(ring, pos, &v, 1, 0, n);
}

/* The record at our head, its stamp seen (rec_at): checked and taken as the current one. 0, or
 * -EPROTO (the stream failed). Its kind and length are read once, after the stamp; a length
 * the ring cannot hold fails the stream. One that runs past what the writer wrote only reads
 * the writer's own stale bytes, and the head it leaves us past the writer's tail fails the
 * writer at its next look at our head, and us at its end mark (at_empty). */
static int next_record(struct shm_stream *st)
{
    struct shm_span sp;
    assert((st->head & (REC_ALIGN - 1)) == 0); /* every record ends on the boundary */
    ring_peek(st->in_ring, st->head, &sp.h, sizeof sp.h);
    if (sp.h.kind == REC_BYTES) {
        if (sp.h.len == 0 || sizeof sp.h + REC_PAD((uint64_t)sp.h.len) > SHM_RING)
            return fail(st, EPROTO, "a bytes record of no length, or longer than the ring");
        st->rec_data = st->head + sizeof sp.h;
        st->rec_end = st->head + sizeof sp.h + REC_PAD((uint64_t)sp.h.len);
    } else if (sp.h.kind == REC_LAP) {
        /* Where the next record is comes from our head, never from the peer. A lap that
         * takes us past what the writer wrote leaves us looking at stale bytes: its own
         * look at our head fails it then (out_room), as any head past its tail. None at a
         * lap's start (a writer laps only with bytes written in the lap): a lap record
         * always follows a record of another kind, so a read takes at most one in a row. */
        uint64_t at = st->head & (SHM_RING - 1);
        if (sp.h.len != 0 || at == 0 || at > SHM_RING - sizeof sp.h)
            return fail(st, EPROTO,
                        "a lap record with a length, at a lap's start, or astride "
                        "the ring's end");
        st->rec_end = (st->head | (SHM_RING - 1)) + 1;
    } else if (sp.h.kind == REC_SPAN) {
        /* only where we said spans are welcome: we can read that peer's memory */
        if (st->pull != PULL_ONE_COPY || sp.h.len == 0)
            return fail(st, EPROTO, "a span we did not ask for, or of no length");
        ring_peek(st->in_ring, st->head, &sp, sizeof sp);
        st->rec_addr = sp.addr;
        st->rec_end = st->head + sizeof sp;
    } else {
        return fail(st, EPROTO, "a record of unknown kind");
    }
    st->rec_kind = sp.h.kind;
    st->rec_left = sp.h.len;
    return 0;
}

/* Pull `take` bytes of the current span into iov (from byte `skip` of it), straight from the
 * peer's memory. The destination is what our receive side asked for: the memory it placed
 * after checking the STag, range and rights, or its staging buffer. Bytes pulled, or -errno
 * with the stream failed. */
static ssize_t pull_span(struct shm_stream *st, const struct iovec *iov, int niov, size_t skip,
                         size_t take)
{
    /* a peer that reset may be reusing what it lent: its data is not read any more */
    if (atomic_load_explicit(&st->in->reset, memory_order_acquire))
        return fail(st, ECONNRESET, "the peer reset the stream");
    struct iovec local[16];
    int nl = 0;
    size_t want = take;
    for (int i = 0; i < niov && want && nl < 16; i++) {
        if (skip >= iov[i].iov_len) {
            skip -= iov[i].iov_len;
            continue;
        }
        size_t len = iov[i].iov_len - skip;
        if (len > want)
            len = want;
        local[nl++] = (struct iovec){(uint8_t *)iov[i].iov_base + skip, len};
        want -= len;
        skip = 0;
    }
    struct iovec remote = {(void *)(uintptr_t)st->rec_addr, take - want};
    ssize_t r = process_vm_readv(st->peer_pid, local, (unsigned long)nl, &remote, 1, 0);
    if (r <= 0) {
        int err = r < 0 ? errno : EFAULT;
        if (err == ESRCH)
            return fail(st, ECONNRESET, "the peer process is gone");
        return fail(st, EPROTO,
                    err == EFAULT ? "a span outside the peer's memory"
                                  : "the peer's span could not be read");
    }
    st->rec_addr += (uint64_t)r;
    st->pulled += (uint64_t)r;
    return r;
}

static void set_pull(struct shm_stream *st, enum shm_pull to, const char *why)
{
    sndk_debug("shm", "stream %p: pull %s => %s (%s)", (void *)st, pull_names[st->pull],
               pull_names[to], why);
    st->pull = (int)to;
}

/* ---------------------------------------------------------------- one copy or two */

/* The process's choice, made once: pull the peer's large tagged payloads with one copy
 * (cross-memory attach), or take them through the ring with two (the writer's and ours, which
 * run at once on two cores). SOFTNDK_SHM_COPY=one|staged forces it; otherwise one copy only
 * where the kernel's copy is at least as fast as ours: then it costs no throughput and saves
 * the writer's copy. Measured on 64 KiB pieces (an FPDU's) of 2 MiB buffers, when the first
 * stream is made. */
static struct {
    bool one_copy;
    char why[160];
} copy_choice;
static pthread_once_t copy_once = PTHREAD_ONCE_INIT;

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void choose_copy(void)
{
    const char *env = getenv("SOFTNDK_SHM_COPY");
    if (env && (strcmp(env, "one") == 0 || strcmp(env, "staged") == 0)) {
        copy_choice.one_copy = env[0] == 'o';
        snprintf(copy_choice.why, sizeof copy_choice.why, "forced by SOFTNDK_SHM_COPY=%s", env);
        sndk_info("shm", "large RDMA Write and Read payloads: %s (%s)",
                  copy_choice.one_copy ? "one copy" : "two copies through the ring",
                  copy_choice.why);
        return;
    }
    enum { PIECE = 65536, SPAN = 2 << 20 }; /* about 1 ms in all, once per process */
    uint8_t *src = malloc(SPAN), *dst = malloc(SPAN);
    double best_cma = 0, best_mem = 0;
    bool cma_ok = src && dst;
    if (cma_ok) {
        memset(src, 0x5a, SPAN);
        memset(dst, 0xa5, SPAN);
        for (int round = 0; round < 2 && cma_ok; round++) {
            double t0 = mono_s();
            for (size_t o = 0; o < SPAN; o += PIECE) {
                struct iovec l = {dst + o, PIECE}, r = {src + o, PIECE};
                if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) != PIECE) {
                    cma_ok = false;
                    break;
                }
            }
            double t1 = mono_s();
            for (size_t o = 0; o < SPAN; o += PIECE)
                memcpy(dst + o, src + o, PIECE);
            double t2 = mono_s();
            double cma = SPAN / (t1 - t0) / 1e9, mem = SPAN / (t2 - t1) / 1e9;
            best_cma = cma > best_cma ? cma : best_cma;
            best_mem = mem > best_mem ? mem : best_mem;
        }
    }
    free(src);
    free(dst);
    if (!cma_ok) {
        snprintf(copy_choice.why, sizeof copy_choice.why, "cross-memory attach refused here (%s)",
                 strerror(errno));
        return;
    }
    copy_choice.one_copy = best_cma >= best_mem;
    snprintf(copy_choice.why, sizeof copy_choice.why,
             "measured at 64 KiB: cross-memory attach %.1f GB/s, memcpy %.1f GB/s", best_cma,
             best_mem);
    sndk_info("shm", "large RDMA Write and Read payloads: %s (%s)",
              copy_choice.one_copy ? "one copy" : "two copies through the ring", copy_choice.why);
}

bool sndk_stream_shm_one_copy(const char **why)
{
    pthread_once(&copy_once, choose_copy);
    if (why)
        *why = copy_choice.why;
    return copy_choice.one_copy;
}

/* Once the peer published its probe word's address: can we read its memory? Then say spans
 * are welcome. Under rx_lock (the reader's). */
static void probe_peer(struct shm_stream *st)
{
    uint64_t addr = atomic_load_explicit(&st->in->probe_addr, memory_order_acquire);
    if (!addr)
        return;
    const char *why;
    if (!sndk_stream_shm_one_copy(&why)) {
        set_pull(st, PULL_STAGED, why);
        return;
    }
    uint64_t v = 0;
    struct iovec local = {&v, sizeof v}, remote = {(void *)(uintptr_t)addr, sizeof v};
    ssize_t r = process_vm_readv(st->peer_pid, &local, 1, &remote, 1, 0);
    if (r != (ssize_t)sizeof v || v != (SHM_MAGIC ^ (uint64_t)st->peer_pid)) {
        int err = r < 0 ? errno : 0;
        sndk_info("shm", "stream %p: the peer's memory cannot be read (%s): staged copies",
                  (void *)st, err ? strerror(err) : "a wrong probe word");
        set_pull(st, PULL_STAGED, "the probe failed");
        return;
    }
    set_pull(st, PULL_ONE_COPY, "the probe read the peer's word");
    atomic_store_explicit(&st->in->pull_ok, 1, memory_order_release);
}

/* Once per coarse clock tick (a few ms): time for a polling reader to look at the socket. */
static bool poll_socket_now(struct shm_stream *st)
{
    /* the clock itself only every 64th empty poll: even a vDSO call is a cost per poll */
    if (++st->polls_since_look & 63u)
        return false;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    uint64_t tick = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
    if (tick == st->socket_looked_ms)
        return false;
    st->socket_looked_ms = tick;
    return true;
}

/* Somebody sleeps on our fd again: say we wait, then look (the writer stores its tail, then
 * reads the flag), and keep the fd readable for what is there already. Under tx_lock, beside a
 * reader: only shared indices and the eventfd are touched. */
static void shm_arm(struct sndk_stream *s)
{
    struct shm_stream *st = st_of(s);
    if (atomic_load_explicit(&st->phase, memory_order_acquire) != SHM_MAPPED)
        return; /* the rings' arrival and a failure raise the fd themselves */
    atomic_store_explicit(&st->in->reader_waiting, 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
    uint64_t tail = atomic_load_explicit(&st->in->tail, memory_order_acquire);
    uint64_t head = atomic_load_explicit(&st->in->head, memory_order_relaxed);
    if (tail != head || atomic_load_explicit(&st->in->end, memory_order_acquire))
        hold_readable(st);
}

/* The lines past a record's stamp that a polling look fetches too: a small message's record
 * (104 bytes for a 64 B Send) starts anywhere in its first line and ends in the second or the
 * third. Fetched only after the stamp showed, each line was one more crossing between cores
 * in a row (measured: the copy of that record took 130 ns after the stamp, 20 ns with them
 * fetched beside it). Prefetches, not loads: they read nothing the writer may be writing. */
#define LOOK_AHEAD_LINES 2

/* No record at the position the reader left for this look, no half-read record, no end mark,
 * no failure and nothing held readable: a pass would find nothing. The look reads the word a
 * record's stamp will come to, which is the line the record itself arrives in, and fetches
 * the lines after it (LOOK_AHEAD_LINES). */
static bool shm_idle(struct sndk_stream *s)
{
    struct shm_stream *st = st_of(s);
    if (atomic_load_explicit(&st->phase, memory_order_acquire) != SHM_MAPPED ||
        atomic_load_explicit(&st->self_armed, memory_order_relaxed))
        return false;
    uint64_t at = atomic_load_explicit(&st->idle_at, memory_order_relaxed);
    if (at == IDLE_MID)
        return false;
    for (unsigned k = 1; k <= LOOK_AHEAD_LINES; k++)
        __builtin_prefetch(ring_word(st->in_ring, at + k * SHM_LINE));
    if (rec_at(st, at) || atomic_load_explicit(&st->in->end, memory_order_relaxed))
        return false;
    /* a load and a store, not an increment: a count lost between two lookers costs nothing */
    uint32_t k = atomic_load_explicit(&st->idle_looks, memory_order_relaxed) + 1u;
    atomic_store_explicit(&st->idle_looks, k, memory_order_relaxed);
    return (k & 63u) != 0;
}

/* Our head moved: publish it, tell a writer that waits for room or for its spans to settle,
 * and leave the idle look its position. 0, or -EPROTO. */
static int head_moved(struct shm_stream *st)
{
    atomic_store_explicit(&st->idle_at, st->rec_kind ? IDLE_MID : st->head, memory_order_relaxed);
    atomic_store_explicit(&st->in->head, st->head, memory_order_release);
    atomic_thread_fence(memory_order_seq_cst);
    bool room_wanted = atomic_load_explicit(&st->in->writer_waiting, memory_order_relaxed);
    bool settle_wanted =
        st->spans_passed && atomic_load_explicit(&st->in->settle_waiting, memory_order_relaxed);
    if (!room_wanted && !settle_wanted)
        return 0; /* the common case: the writer's tail line is not read */
    uint64_t tail = 0;
    int64_t avail = in_avail(st, &tail);
    if (avail < 0)
        return (int)avail;
    bool caught_up = avail == 0;
    /* a writer that waits for room hears of it once WAKE_ROOM is free, or all of it */
    bool room_to_tell = caught_up || SHM_RING - (uint64_t)avail >= WAKE_ROOM;
    if (room_wanted && room_to_tell &&
        atomic_exchange_explicit(&st->in->writer_waiting, 0, memory_order_acq_rel)) {
        wake_peer(st, &st->in->wakes_w);
    } else if (settle_wanted &&
               (st->spans_passed >= SETTLE_BATCH || (caught_up && !st->rec_kind)) &&
               atomic_exchange_explicit(&st->in->settle_waiting, 0, memory_order_acq_rel)) {
        st->spans_passed = 0;
        wake_peer(st, &st->in->wakes_w);
    }
    return 0;
}

/* The ring looked empty: take the wake bytes (drain_wakes). 0: taken, still nothing; 1: the
 * socket ended, but bytes or the end mark came just before it, so look again; -errno: the
 * socket ended with neither (the peer gone), and the stream failed. */
static int take_wakes(struct shm_stream *st)
{
    int d = drain_wakes(st);
    if (d == 0)
        return 0;
    if (rec_ready(st, true) > 0 || at_empty(st) != 0)
        return 1;
    return fail(st, -d, "the peer's socket ended");
}

/* The current record's rec_left says what of it is still to be read: move the head past what
 * was taken. The writer gets the room of what was read; a span's only once all of it was
 * pulled (its head passing the record is what settles the writer's lent memory); a lap
 * record (no bytes) is passed at once. 0, or -EPROTO. */
static int record_taken(struct shm_stream *st)
{
    if (st->rec_left == 0) {
        st->head = st->rec_end;
        st->spans_passed += st->rec_kind == REC_SPAN;
        st->rec_kind = 0;
    } else if (st->rec_kind == REC_BYTES) {
        st->head = st->rec_data;
    } else {
        return 0; /* inside a span: the head waits for all of it */
    }
    return head_moved(st);
}

/* The current bytes record's next bytes, where they lie in the ring (stream.h, in_place): a
 * record between them and us is taken the way readv takes it (a lap moves the head; a span
 * stays current, for readv), and the empty ring answers as readv's poll-only look would. */
static const void *shm_in_place(struct sndk_stream *s, size_t *len)
{
    struct shm_stream *st = st_of(s);
    *len = SIZE_MAX;
    if (atomic_load_explicit(&st->phase, memory_order_acquire) != SHM_MAPPED || st->in_ended ||
        st->pull == PULL_UNKNOWN)
        return NULL; /* readv takes the rings, probes the peer, reports the end */
    while (!st->rec_kind) {
        if (!rec_at(st, st->head)) {
            /* readv's empty look: with the end marked, or not polled only, or the tick's
             * look due, readv itself */
            if (s->poll_only && !atomic_load_explicit(&st->in->end, memory_order_relaxed) &&
                !poll_socket_now(st))
                *len = 0;
            return NULL;
        }
        if (next_record(st) < 0)
            return NULL; /* failed: readv says so */
        if (st->rec_kind == REC_LAP && record_taken(st) < 0)
            return NULL;
    }
    if (st->rec_kind != REC_BYTES)
        return NULL;
    uint64_t off = st->rec_data & (SHM_RING - 1);
    uint64_t n = st->rec_left < SHM_RING - off ? st->rec_left : SHM_RING - off;
    *len = (size_t)n;
    return st->in_ring + off;
}

static int shm_take_in_place(struct sndk_stream *s, size_t n)
{
    struct shm_stream *st = st_of(s);
    assert(st->rec_kind == REC_BYTES && n <= st->rec_left);
    st->rec_data += n;
    st->rec_left -= (uint32_t)n;
    int m = record_taken(st);
    /* As after a read that filled its buffer: the pass may stop here (its budget), and a
     * reader that sleeps on the fd must hear of what is left. A polling one comes back. */
    if (m == 0 && !s->poll_only && (st->rec_kind || rec_at(st, st->head)))
        raise_self(st);
    return m;
}

static ssize_t shm_readv(struct sndk_stream *s, const struct iovec *iov, int n)
{
    struct shm_stream *st = st_of(s);
    int rc = ready(st);
    if (rc < 0)
        return rc;
    if (st->in_ended)
        return 0;
    if (st->pull == PULL_UNKNOWN)
        probe_peer(st);
    size_t want = iov_total(iov, n), got = 0;
    bool said_waiting = false;
    while (got < want) {
        if (!st->rec_kind) {
            /* a polling reader looks at the stamp alone; one that may sleep checks the tail */
            int here = rec_ready(st, !s->poll_only);
            if (here < 0)
                return got ? (ssize_t)got : here;
            if (here == 0) {
                int e = at_empty(st);
                if (e < 0)
                    return got ? (ssize_t)got : e;
                if (e == 2)
                    continue;
                if (e == 1)
                    break; /* the end: what was read, then 0 */
                if (said_waiting)
                    break; /* looked again after saying so: still empty */
                if (s->poll_only) {
                    /* A poll that nobody sleeps behind: no flag, so the peer's writes cost it
                     * no system call. Once a coarse tick the tail is checked and the socket
                     * looked at, for the peer's death (its hang-up) while the consumer only
                     * polls. */
                    if (!poll_socket_now(st))
                        break;
                    int v = rec_ready(st, true);
                    if (v == 0)
                        v = take_wakes(st);
                    if (v < 0)
                        return got ? (ssize_t)got : v;
                    if (v > 0)
                        continue;
                    break;
                }
                /* About to sleep: take the wake bytes, say so, look once more (the writer
                 * stores its stamp and tail, then reads the flag; we store the flag, then read
                 * the stamp). */
                int d = take_wakes(st);
                if (d < 0)
                    return got ? (ssize_t)got : d;
                if (d > 0)
                    continue;
                if (!atomic_load_explicit(&st->in->reader_waiting, memory_order_relaxed))
                    atomic_store_explicit(&st->in->reader_waiting, 1, memory_order_relaxed);
                atomic_thread_fence(memory_order_seq_cst);
                said_waiting = true;
                continue;
            }
            int r = next_record(st);
            if (r < 0)
                return got ? (ssize_t)got : r;
            if (st->rec_kind == REC_LAP) {
                int m = record_taken(st);
                if (m < 0)
                    return got ? (ssize_t)got : m;
                continue;
            }
        }
        size_t take = st->rec_left < want - got ? st->rec_left : want - got;
        if (st->rec_kind == REC_BYTES) {
            ring_out_copy(st->in_ring, st->rec_data, iov, n, got, take);
            st->rec_data += take;
        } else {
            ssize_t r = pull_span(st, iov, n, got, take);
            if (r <= 0)
                return got ? (ssize_t)got : (r < 0 ? r : -EAGAIN);
            take = (size_t)r;
        }
        got += take;
        st->rec_left -= (uint32_t)take;
        int m = record_taken(st);
        if (m < 0)
            return got ? (ssize_t)got : m;
    }
    if (got == want && !st->in_ended) {
        /* Full: the caller may not come back for what is left (a pass's budget, a try-lock
         * another thread held); keep the fd readable until a read finds the ring empty. */
        int here = st->rec_kind ? 1 : rec_ready(st, false);
        if (here > 0) {
            raise_self(st);
        } else if (!said_waiting && !s->poll_only) {
            /* emptied exactly: say we wait, as a short read would */
            atomic_store_explicit(&st->in->reader_waiting, 1, memory_order_relaxed);
            atomic_thread_fence(memory_order_seq_cst);
            here = rec_ready(st, true);
            if (here < 0)
                return here;
            if (here > 0)
                raise_self(st);
        }
    }
    if (got)
        return (ssize_t)got;
    return st->in_ended ? 0 : -EAGAIN;
}

static int shm_peek(struct sndk_stream *s)
{
    struct shm_stream *st = st_of(s);
    int rc = ready(st);
    if (rc == -EAGAIN)
        return 0;
    if (rc < 0)
        return rc;
    if (st->in_ended)
        return -EPIPE;
    int here = st->rec_kind ? 1 : rec_ready(st, true);
    if (here != 0)
        return here;
    int e = at_empty(st);
    return e == 1 ? -EPIPE : e == 2 ? 1 : e;
}

/* ---------------------------------------------------------------- writing */

/* Room in the ring we fill, validated: >= 0, or -EPROTO. */
static int64_t out_room(struct shm_stream *st)
{
    uint64_t head = atomic_load_explicit(&st->out->head, memory_order_acquire);
    if (st->tail - head > SHM_RING || head - st->seen_head > st->tail - st->seen_head)
        return fail(st, EPROTO, "the peer's head is outside its ring");
    st->seen_head = head;
    return (int64_t)(SHM_RING - (st->tail - head));
}

static void ring_in_copy(uint8_t *ring, uint64_t pos, const uint8_t *src, size_t n)
{
    assert(n <= SHM_RING);
    size_t done = 0;
    while (done < n) {
        size_t off = (size_t)((pos + done) & (SHM_RING - 1));
        size_t run = SHM_RING - off;
        if (run > n - done)
            run = n - done;
        memcpy(ring + off, src + done, run);
        done += run;
    }
}

/* The smallest record worth writing: a header and 8 bytes, or a span. */
#define REC_MIN_ROOM (sizeof(struct shm_span))

/* The record at pos is whole: its stamp goes last (rec_at's acquire pairs with this). */
static inline void publish_record(struct shm_stream *st, uint64_t pos)
{
    __atomic_store_n(ring_word(st->out_ring, pos), stamp_of(st, pos), __ATOMIC_RELEASE);
}

/* A lap record at pos (neither at a lap's start nor astride the ring's end): the position of
 * the record after it, the next lap's start. */
static uint64_t write_lap(struct shm_stream *st, uint64_t pos)
{
    uint64_t off = pos & (SHM_RING - 1);
    assert(off != 0 && off <= SHM_RING - sizeof(struct shm_rec));
    (void)off;
    struct shm_rec h = {.kind = REC_LAP, .len = 0};
    memcpy(ring_word(st->out_ring, pos + sizeof h.stamp), &h.kind, sizeof h - sizeof h.stamp);
    publish_record(st, pos);
    return (pos | (SHM_RING - 1)) + 1;
}

/* Warm pages (REC_LAP): a write at pos of `need` ring bytes at most (records and all) that
 * would touch pages this stream has not, fits in those it has, and finds the ring empty (the
 * one case where it reads the reader's head) goes to the next lap's start, behind a lap
 * record. True when it did; *pos and *room are then the new ones, and the lap's room holds
 * the whole write. *room < 0: the peer's head was bad (the stream failed). */
static bool lap_to_warm_pages(struct shm_stream *st, uint64_t need, uint64_t *pos, int64_t *room)
{
    uint64_t off = *pos & (SHM_RING - 1);
    if (st->warm_end >= SHM_RING || off > SHM_RING - sizeof(struct shm_rec))
        return false;
    if (off + need <= st->warm_end || need > off)
        return false; /* on warm pages already, or the lap's room would not hold it */
    int64_t r = out_room(st);
    *room = r;
    if (r < 0 || (uint64_t)r != SHM_RING)
        return false; /* bytes are in flight: go on into new pages */
    *pos = write_lap(st, *pos);
    /* the skipped rest of the lap is the reader's until its head passes the lap record */
    *room = (int64_t)(SHM_RING - (*pos - st->seen_head));
    return true;
}

/* Records were written from first to end: the pages they touched are warm. */
static void mark_warm(struct shm_stream *st, uint64_t first, uint64_t end)
{
    uint64_t lap = first & ~(uint64_t)(SHM_RING - 1);
    uint64_t to = end - lap >= SHM_RING ? SHM_RING : end - lap;
    to = (to + SHM_PAGE - 1) & ~(uint64_t)(SHM_PAGE - 1);
    if (to > st->warm_end)
        st->warm_end = to;
}

/* Write iov[0..n) as records: lendable pieces (lend[i], SNDK_STREAM_LEND_MIN bytes or more,
 * the reader said it can pull) as spans, the rest as bytes, as far as the ring has room.
 * Stream bytes accepted (> 0), or -errno. */
static ssize_t shm_writev_lent(struct sndk_stream *s, const struct iovec *iov, int n,
                               const uint8_t *lend)
{
    struct shm_stream *st = st_of(s);
    int rc = ready(st);
    if (rc < 0)
        return rc;
    take_room(st); /* this write is what a room byte asked for */
    /* the most ring bytes the write takes: its bytes, and a record's header and padding (or a
     * span) for each piece */
    size_t total = iov_total(iov, n);
    uint64_t need = total + (uint64_t)n * (sizeof(struct shm_span) + REC_ALIGN);
    /* The room the peer's head gave when we last looked is room still (the head only grows):
     * a write that fits in it does not read the head, a line the reader writes at every read
     * (a cache miss per message across cores). Looked at again when it may not fit. */
    int64_t room = (int64_t)(SHM_RING - (st->tail - st->seen_head));
    if ((uint64_t)room < need)
        room = out_room(st);
    if (room < 0)
        return room;
    if ((uint64_t)room < REC_MIN_ROOM) {
        /* Full: say so (blocked before the flag: whoever sees the flag sees that), then look
         * once more (the reader stores its head, then reads the flag). The peer's wake byte
         * reaches us as EPOLLIN: see the top of the file. */
        atomic_store(&st->w_blocked, true);
        atomic_store_explicit(&st->out->writer_waiting, 1, memory_order_relaxed);
        atomic_thread_fence(memory_order_seq_cst);
        room = out_room(st);
        if (room < 0)
            return room;
        if ((uint64_t)room < REC_MIN_ROOM)
            return -EAGAIN;
    }
    atomic_store_explicit(&st->w_blocked, false, memory_order_relaxed);
    bool may_lend = lend && atomic_load_explicit(&st->out->pull_ok, memory_order_acquire) == 1;
    uint64_t pos = st->tail; /* where the next record goes */
    bool lapped = total > 0 && lap_to_warm_pages(st, need, &pos, &room);
    if (room < 0)
        return room;
    uint64_t first = pos;    /* the first record's position: warm_end is judged from it */
    size_t put = 0;          /* stream bytes in the records written */
    int i = 0;
    size_t off = 0; /* into iov[i] */
    while (i < n && (uint64_t)room >= REC_MIN_ROOM) {
        if (off == iov[i].iov_len) {
            i++;
            off = 0;
            continue;
        }
        size_t left = iov[i].iov_len - off;
        if (may_lend && lend[i] && left >= SNDK_STREAM_LEND_MIN && st->span_n < SPANS_MAX &&
            left <= UINT32_MAX) {
            struct shm_span sp = {
                .h = {.kind = REC_SPAN, .len = (uint32_t)left},
                .addr = (uint64_t)(uintptr_t)((const uint8_t *)iov[i].iov_base + off)};
            /* all but the stamp, then the stamp */
            ring_in_copy(st->out_ring, pos + sizeof sp.h.stamp,
                         (const uint8_t *)&sp + sizeof sp.h.stamp, sizeof sp - sizeof sp.h.stamp);
            publish_record(st, pos);
            pos += sizeof sp;
            room -= (int64_t)sizeof sp;
            uint32_t k = (st->span_head + st->span_n) % SPANS_MAX;
            st->spans[k].ring_end = pos;
            st->spans[k].first = st->logical + put;
            st->span_n++;
            put += left;
            i++;
            off = 0;
            continue;
        }
        /* a bytes record: as much of what follows as is not lent and fits */
        uint64_t cap = (uint64_t)room - sizeof(struct shm_rec);
        cap &= ~(uint64_t)(REC_ALIGN - 1);
        if (cap > UINT32_MAX)
            cap = UINT32_MAX;
        uint64_t data = pos + sizeof(struct shm_rec);
        uint32_t len = 0;
        while (i < n && len < cap) {
            if (off == iov[i].iov_len) {
                i++;
                off = 0;
                continue;
            }
            size_t piece = iov[i].iov_len - off;
            if (may_lend && lend[i] && piece >= SNDK_STREAM_LEND_MIN && len > 0 &&
                st->span_n < SPANS_MAX)
                break; /* a span next */
            if (piece > cap - len)
                piece = (size_t)(cap - len);
            ring_in_copy(st->out_ring, data + len, (const uint8_t *)iov[i].iov_base + off, piece);
            len += (uint32_t)piece;
            off += piece;
        }
        if (len == 0)
            break; /* only empty iovecs were left */
        /* kind and length (one aligned word: it never wraps), then the stamp */
        struct shm_rec h = {.kind = REC_BYTES, .len = len};
        memcpy(ring_word(st->out_ring, pos + sizeof h.stamp), &h.kind, sizeof h - sizeof h.stamp);
        publish_record(st, pos);
        uint64_t rec = sizeof h + REC_PAD((uint64_t)len);
        pos += rec;
        room -= (int64_t)rec;
        put += len;
    }
    /* a lap is taken only with room for the whole write behind it (lap_to_warm_pages) */
    assert(put > 0 || !lapped);
    if (put == 0)
        return total == 0 ? 0 : -EAGAIN;
    mark_warm(st, first, pos);
    if (st->warm_end > TRIM_ABOVE)
        s->trim_wanted = true;
    st->tail = pos;
    st->logical += put;
    atomic_store_explicit(&st->lent, st->span_n, memory_order_relaxed);
    atomic_store_explicit(&st->out->tail, st->tail, memory_order_release);
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&st->out->reader_waiting, memory_order_relaxed) &&
        atomic_exchange_explicit(&st->out->reader_waiting, 0, memory_order_acq_rel))
        wake_peer(st, &st->out->wakes_r);
    return (ssize_t)put;
}

static ssize_t shm_writev(struct sndk_stream *s, const struct iovec *iov, int n)
{
    return shm_writev_lent(s, iov, n, NULL);
}

/* Give the ring's pages back from off to end (ring offsets, page-aligned): removed from the
 * memfd, so from both processes' mappings; the next touch faults in a zeroed page. */
static void give_back(struct shm_stream *st, uint64_t off, uint64_t end)
{
    if (end <= off)
        return;
    if (madvise(st->out_ring + off, (size_t)(end - off), MADV_REMOVE) != 0)
        sndk_debug("shm", "stream %p: MADV_REMOVE of ring bytes %" PRIu64 "..%" PRIu64 ": errno %d",
                   (void *)st, off, end, errno);
}

/* Trim (stream.h): a quiet stream keeps the ring's first page and, when the writer stood past
 * it, the page of the lap record that takes the reader back there; every other page goes. Only
 * with the ring empty (the reader's head at our tail: no byte it has yet to read is in a page
 * that goes, and the next record it looks for is the lap record or in the first page) and
 * nothing written for a whole period, so that a stream that pauses between bursts does not
 * pay the page faults of its next burst again. */
static bool shm_trim(struct sndk_stream *s)
{
    struct shm_stream *st = st_of(s);
    if (atomic_load_explicit(&st->phase, memory_order_acquire) != SHM_MAPPED || s->write_ended ||
        st->warm_end <= TRIM_ABOVE) {
        s->trim_wanted = false; /* failed, ended (the mapping goes with the stream) or small */
        return false;
    }
    if (s->written != st->trim_seen) {
        st->trim_seen = s->written;
        return true; /* written since the last look: busy */
    }
    int64_t room = out_room(st);
    if (room < 0) {
        s->trim_wanted = false;
        return false;
    }
    uint64_t off = st->tail & (SHM_RING - 1);
    if ((uint64_t)room != SHM_RING || off > SHM_RING - sizeof(struct shm_rec))
        return true;   /* bytes in flight, or a lap record would straddle the ring's end */
    uint64_t kept = 0; /* the lap record's page, when it is not the first */
    if (off >= SHM_PAGE) {
        kept = off & ~(uint64_t)(SHM_PAGE - 1);
        st->tail = write_lap(st, st->tail);
        atomic_store_explicit(&st->out->tail, st->tail, memory_order_release);
        /* A reader asleep on the ring needs no wake for this: the lap record carries no
         * bytes, and the next write, which has some, wakes it and is read after the lap. */
    }
    give_back(st, SHM_PAGE, kept ? kept : SHM_RING);
    if (kept)
        give_back(st, kept + SHM_PAGE, SHM_RING);
    sndk_debug("shm",
               "stream %p: quiet: ring pages past the first given back (%" PRIu64
               " KiB were touched)",
               (void *)st, st->warm_end / 1024u);
    st->warm_end = SHM_PAGE;
    s->trim_wanted = false;
    return false;
}

/* Spans the peer's head has passed are settled. Under tx_lock. */
static void drop_passed_spans(struct shm_stream *st)
{
    uint64_t head = atomic_load_explicit(&st->out->head, memory_order_acquire);
    while (st->span_n > 0) {
        uint64_t end = st->spans[st->span_head].ring_end;
        /* positions only grow, and head never passes our tail (out_room checks it) */
        if ((int64_t)(head - end) < 0)
            break;
        st->span_head = (st->span_head + 1) % SPANS_MAX;
        st->span_n--;
    }
    atomic_store_explicit(&st->lent, st->span_n, memory_order_relaxed);
}

static uint64_t shm_settled(struct sndk_stream *s, bool ask)
{
    struct shm_stream *st = st_of(s);
    if (st->span_n == 0)
        return st->logical;
    take_room(st); /* this look is what the peer's byte asked for */
    drop_passed_spans(st);
    if (st->span_n > 0 && ask) {
        /* nobody polls for us: ask the reader to say when it passed them (in batches), then
         * look again (it stores its head, then reads the flag) */
        atomic_store_explicit(&st->out->settle_waiting, 1, memory_order_relaxed);
        atomic_thread_fence(memory_order_seq_cst);
        drop_passed_spans(st);
    }
    return st->span_n ? st->spans[st->span_head].first : st->logical;
}

/* ---------------------------------------------------------------- the end */

static void shm_shutdown_write(struct sndk_stream *s)
{
    struct shm_stream *st = st_of(s);
    if (ready(st) < 0)
        return; /* no rings: the peer sees the socket end instead (a reset) */
    atomic_store_explicit(&st->out->end, st->tail + 1, memory_order_release);
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_exchange_explicit(&st->out->reader_waiting, 0, memory_order_acq_rel))
        wake_peer(st, &st->out->wakes_r);
    sndk_debug("shm", "stream %p: end of stream after %llu bytes", (void *)st,
               (unsigned long long)st->tail);
}

static int shm_error(struct sndk_stream *s)
{
    struct shm_stream *st = st_of(s);
    int ph = atomic_load(&st->phase);
    return ph == SHM_FAILED ? atomic_load(&st->err) : 0;
}

/* No segments here: the largest FPDU the TX path cuts by default (65480 bytes, under MPA's
 * 16-bit length) keeps the per-FPDU work (header, CRC, completion bookkeeping) lowest, and a
 * 4 MiB ring still holds 64 of them, so writer and reader overlap. */
static uint32_t shm_fpdu_max(struct sndk_stream *s)
{
    (void)s;
    return SNDK_FPDU_MAX_DEFAULT;
}

static void destroy(struct shm_stream *st)
{
    if (st->base)
        rings_unmap(st->base);
    if (st->epfd >= 0)
        close(st->epfd);
    if (st->evfd >= 0)
        close(st->evfd);
    if (st->room_evfd >= 0)
        close(st->room_evfd);
    if (st->sock >= 0)
        close(st->sock);
    free(st);
}

static void shm_close(struct sndk_stream *s, bool abort)
{
    struct shm_stream *st = st_of(s);
    if (abort && atomic_load(&st->phase) == SHM_MAPPED) {
        /* the peer reads this when our socket ends: a reset, not an orderly end */
        atomic_store_explicit(&st->out->reset, 1, memory_order_release);
    }
    /* the socket's end is the peer's hang-up; an abort without a mark reads as a reset too */
    shutdown(st->sock, SHUT_RDWR);
    sndk_debug("shm", "stream %p: closed%s", (void *)st, abort ? " (reset)" : "");
    destroy(st);
    s->priv = NULL;
    s->fd = -1;
}

const struct sndk_stream_ops sndk_stream_shm_ops = {
    .name = "shm",
    .writev = shm_writev,
    .writev_lent = shm_writev_lent,
    .settled = shm_settled,
    .readv = shm_readv,
    .peek = shm_peek,
    .in_place = shm_in_place,
    .take_in_place = shm_take_in_place,
    .shutdown_write = shm_shutdown_write,
    .error = shm_error,
    .fpdu_max = shm_fpdu_max,
    .close = shm_close,
    .arm = shm_arm,
    .idle = shm_idle,
    .trim = shm_trim,
    /* the peer's wake byte for a blocked writer arrives as EPOLLIN (top of the file) */
    .room_events = EPOLLIN,
    .cheap_empty_polls = true,
};

void *sndk_stream_shm_new(int sock, bool active)
{
    struct shm_stream *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    st->sock = -1;
    st->active = active;
    atomic_init(&st->phase, SHM_HANDSHAKE);
    atomic_init(&st->err, 0);
    atomic_init(&st->claimed, false);
    atomic_init(&st->self_armed, false);
    atomic_init(&st->room_armed, false);
    atomic_init(&st->w_blocked, false);
    st->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    st->room_evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    st->epfd = epoll_create1(EPOLL_CLOEXEC);
    int err = 0;
    if (st->evfd < 0 || st->room_evfd < 0 || st->epfd < 0) {
        err = errno;
    } else {
        struct epoll_event es = {.events = EPOLLIN | EPOLLRDHUP, .data.u32 = 0};
        struct epoll_event ee = {.events = EPOLLIN, .data.u32 = 1};
        struct epoll_event er = {.events = EPOLLIN, .data.u32 = 2};
        if (epoll_ctl(st->epfd, EPOLL_CTL_ADD, sock, &es) != 0 ||
            epoll_ctl(st->epfd, EPOLL_CTL_ADD, st->evfd, &ee) != 0 ||
            epoll_ctl(st->epfd, EPOLL_CTL_ADD, st->room_evfd, &er) != 0)
            err = errno;
    }
    st->sock = sock;
    /* the process's copy choice, measured now rather than on a reader's path */
    (void)sndk_stream_shm_one_copy(NULL);
    struct ucred cred;
    socklen_t clen = sizeof cred;
    if (!err && getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0 && clen == sizeof cred)
        st->peer_pid = cred.pid;
    else if (!err)
        err = errno ? errno : EPROTO;
    if (!err && active) {
        int rc = create_rings(st);
        if (rc < 0)
            err = -rc;
    }
    if (err) {
        st->sock = -1; /* the caller keeps it */
        destroy(st);
        errno = err;
        return NULL;
    }
    if (active)
        set_phase(st, SHM_MAPPED, "rings created and sent");
    sndk_debug("shm", "stream %p on socket %d (%s)", (void *)st, sock,
               active ? "active" : "passive");
    return st;
}

int sndk_stream_shm_fd(const void *priv)
{
    return ((const struct shm_stream *)priv)->epfd;
}

void sndk_stream_shm_free(void *priv)
{
    if (priv)
        destroy(priv);
}

void *sndk_stream_shm_mapping(const void *priv, size_t *len)
{
    const struct shm_stream *st = priv;
    *len = SHM_SIZE;
    return atomic_load(&((struct shm_stream *)st)->phase) == SHM_MAPPED ? st->base : NULL;
}

uint64_t sndk_stream_shm_pulled(const void *priv)
{
    return ((const struct shm_stream *)priv)->pulled;
}

/* Tests and fuzzing: play a hostile writer. Append n raw bytes to the ring this end writes, as
 * they are, but for the stamps of the records they frame (their kinds and lengths as the bytes
 * say, however wrong), publish the tail, and optionally an end mark `end` (0: none). The peer's
 * reader then meets them as it would meet a peer's. Under tx_lock, or alone. */
int sndk_stream_shm_publish_raw(void *priv, const void *bytes, size_t n, uint64_t end)
{
    struct shm_stream *st = priv;
    if (atomic_load(&st->phase) != SHM_MAPPED)
        return -EAGAIN;
    if (n > SHM_RING - (st->tail - atomic_load_explicit(&st->out->head, memory_order_acquire)))
        return -ENOSPC;
    ring_in_copy(st->out_ring, st->tail, bytes, n);
    /* the stamps a framing writer would store, where the bytes put headers */
    for (uint64_t pos = st->tail;
         !(pos & (REC_ALIGN - 1)) && pos + sizeof(struct shm_rec) <= st->tail + n;) {
        struct shm_rec h;
        ring_peek(st->out_ring, pos, &h, sizeof h);
        publish_record(st, pos);
        if (h.kind == REC_SPAN)
            pos += sizeof(struct shm_span);
        else if (h.kind == REC_BYTES)
            pos += sizeof h + REC_PAD((uint64_t)h.len);
        else
            break; /* the reader fails there, or laps to where nothing is stamped */
    }
    st->tail += n;
    atomic_store_explicit(&st->out->tail, st->tail, memory_order_release);
    if (end)
        atomic_store_explicit(&st->out->end, end, memory_order_release);
    return 0;
}

uint64_t sndk_stream_shm_tail(const void *priv)
{
    return ((const struct shm_stream *)priv)->tail;
}
