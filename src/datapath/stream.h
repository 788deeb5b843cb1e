/* The byte stream under a connection: everything the connection does with its transport goes
 * through these operations. Today's stream is a TCP socket (stream_tcp.c). A second transport
 * (peers on one host, say) is a new file behind the same operations; the connection, its TX
 * and RX drivers and every hook stay as they are (docs/datapath.md, "The byte stream").
 *
 * Every operation is non-blocking and called with the connection's locks as its caller holds
 * them: writes under tx_lock, reads under rx_lock, the rest from the connection's own paths. */
#ifndef SOFTNDK_DATAPATH_STREAM_H
#define SOFTNDK_DATAPATH_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct sndk_stream;

struct sndk_stream_ops {
    const char *name; /* "tcp": in the log and ndkstat */
    /* Write from iov[0..n) as much as fits now. Bytes written (> 0), or -errno: -EAGAIN when
     * nothing fits (the progress thread's epoll reports EPOLLOUT on `fd` when some does),
     * -EINTR to try again, any other a failed stream (its error is then consumed). */
    ssize_t (*writev)(struct sndk_stream *s, const struct iovec *iov, int n);
    /* As writev, but iov[i] with lend[i] set and at least SNDK_STREAM_LEND_MIN bytes is lent:
     * its memory stays as it is until settled() passes it, so the transport may let the peer
     * copy it straight from there (shm: the reader pulls it). NULL: writev for everything. */
    ssize_t (*writev_lent)(struct sndk_stream *s, const struct iovec *iov, int n,
                           const uint8_t *lend);
    /* The stream position (bytes accepted since it began, stream.written) up to which nothing
     * written refers to lent memory any more. NULL: all of them at once. Under tx_lock.
     * `ask`: nobody polls for the requests' completions, so ask the peer to say when it
     * moves on (the answer comes as room_events). */
    uint64_t (*settled)(struct sndk_stream *s, bool ask);
    /* Read into iov[0..n) what is there. Bytes read (> 0), 0 at the peer's orderly end of
     * stream, or -errno (-EAGAIN: nothing yet; EPOLLIN on `fd` reports more). */
    ssize_t (*readv)(struct sndk_stream *s, const struct iovec *iov, int n);
    /* Is a byte waiting, without taking it? 1: yes; 0: not yet; -errno: end or error. */
    int (*peek)(struct sndk_stream *s);
    /* The next bytes of the stream where they already lie in memory, for a reader that copies
     * what it takes (a whole FPDU parsed where it lies, rx.c): their address and *len (> 0),
     * contiguous. Else NULL with *len 0: nothing yet, and a read would say no more than
     * -EAGAIN (a poll-only reader's empty look); or NULL with *len SIZE_MAX: read the usual
     * way (an end, a failure, a piece only readv takes). The peer may write these bytes while
     * they are read (shared memory): read each once, trust only copies. Under rx_lock. NULL
     * op: never (a socket's bytes are in the kernel). */
    const void *(*in_place)(struct sndk_stream *s, size_t *len);
    /* The first n bytes (at most *len) of the last in_place were taken. 0, or -errno: the
     * stream failed (as a readv's error). Bytes left after them keep fd readable, as after a
     * read that filled its buffer, unless poll_only. */
    int (*take_in_place)(struct sndk_stream *s, size_t n);
    /* End our direction after what was written (TCP: FIN). Called once (the wrapper below
     * keeps the record). */
    void (*shutdown_write)(struct sndk_stream *s);
    /* The stream's pending error (0: none), consumed. */
    int (*error)(struct sndk_stream *s);
    /* The largest FPDU to cut so that one FPDU rides in one segment of the transport. */
    uint32_t (*fpdu_max)(struct sndk_stream *s);
    /* Close it; `abort`: tell the peer it was reset (TCP: RST) rather than ended. Last call. */
    void (*close)(struct sndk_stream *s, bool abort);
    /* Somebody sleeps on fd's readiness for the peer's bytes again (the progress thread
     * watches EPOLLIN after a consumer's polling, say): make fd report the bytes already there
     * and those to come. NULL when readiness is always kept (a socket's). Called under the
     * connection's tx_lock, beside reads. */
    void (*arm)(struct sndk_stream *s);
    /* Events on fd, besides EPOLLOUT, that may mean room to write: 0 for a socket; EPOLLIN for
     * a stream whose fd is an epoll set, which never reports EPOLLOUT (stream_shm.c). */
    uint32_t room_events;
    /* Without any lock, beside reads and writes: true when a receive pass would surely find
     * nothing new (no byte, no end, no failure), so that a polling consumer spares it. A
     * look, not a promise: now and then it says "look" anyway, for what only a pass sees (the
     * peer's death on a socket). NULL: always pass (a socket's read is its look). */
    bool (*idle)(struct sndk_stream *s);
    /* A read that finds nothing costs no system call while poll_only (below) holds: polls may
     * look as often as they like, so the connection does not hold them back (conn.c). */
    bool cheap_empty_polls;
    /* A read sees every end of the stream by itself (a socket's recv returns the reset or the
     * FIN), so while a polling consumer does the reading (the connection is parked) fd may
     * leave the progress thread's epoll altogether: in the set, every segment's wake-up would
     * run epoll's callback for nothing (watch.c). False: fd stays watched for a hang-up. */
    bool parked_quiet;
    /* Give back the memory a busy period left (shm: ring pages past the first), if the
     * stream is quiet: nothing written since the last call and nothing in flight. Under
     * tx_lock, from the connection's trim timer while trim_wanted (below) holds. True: not
     * quiet yet, ask again a period later; false: done, or nothing left to give (trim_wanted
     * is then clear). NULL: the transport holds nothing worth giving back (a socket). */
    bool (*trim)(struct sndk_stream *s);
};

struct sndk_stream {
    const struct sndk_stream_ops *ops;
    int fd; /* what the progress thread's epoll and the CQs' readiness sets watch */
    void *priv; /* the transport's own state (NULL for TCP) */
    /* Our direction has ended (shutdown_write went): nothing more may be written. A fact of
     * the stream, as a socket keeps it, written under the connection's tx_lock. */
    bool write_ended;
    /* Bytes accepted by writes so far (the wrappers below count them), under tx_lock. */
    uint64_t written;
    /* The transport holds memory that ops.trim could give back once the stream is quiet: set
     * by its writes, cleared by trim, under tx_lock. The connection keeps a trim timer
     * pending while it holds (conn.c). */
    bool trim_wanted;
    /* The reads about to run are a polling consumer's that nobody's sleep depends on: nothing
     * waits for fd's readiness (the connection's receiving is parked with that consumer, and
     * no readiness set drives it). A transport whose readiness costs the peer a system call
     * per message (shm) then does not ask for it; `arm` asks again. Set by the connection
     * under rx_lock before each receive pass. */
    bool poll_only;
};

/* TCP: a connected, non-blocking socket (stream_tcp.c); sets TCP_NODELAY. The stream owns fd
 * from here and closes it. */
void sndk_stream_tcp_init(struct sndk_stream *s, int fd);

/* Shared memory between two processes of one host (stream_shm.c, docs/transport-shm.md),
 * over a connected AF_UNIX socket whose MPA handshake is done. The active end creates the two
 * rings and sends them over the socket; the passive end maps them when they arrive (its
 * operations say "nothing yet" until then). Returns the state to hand to the connection as
 * sndk_link_params.stream_priv with stream_ops = &sndk_stream_shm_ops and fd =
 * sndk_stream_shm_fd(), or NULL with errno set (the socket is still the caller's). From a
 * successful call on, the state owns sock: the stream's close, or sndk_stream_shm_free when it
 * was never attached, closes it. */
extern const struct sndk_stream_ops sndk_stream_shm_ops;
void *sndk_stream_shm_new(int sock, bool active);
int sndk_stream_shm_fd(const void *priv);
void sndk_stream_shm_free(void *priv);
/* Tests: the shared mapping (NULL before the rings are there) and its length, to play a
 * hostile peer that writes garbage into it. */
void *sndk_stream_shm_mapping(const void *priv, size_t *len);
/* Tests and fuzzing: append raw bytes (no record framing) to the ring this end writes and
 * publish its tail, and an end mark `end` unless 0, as a hostile writer could; 0, -EAGAIN
 * (rings not mapped) or -ENOSPC. And this end's tail as written so far. */
int sndk_stream_shm_publish_raw(void *priv, const void *bytes, size_t n, uint64_t end);
uint64_t sndk_stream_shm_tail(const void *priv);
/* Tests: the bytes this end read straight from the peer's memory (one copy). */
uint64_t sndk_stream_shm_pulled(const void *priv);
/* Does this process take the peer's large tagged payloads with one copy (cross-memory
 * attach) or through the ring? Chosen once (SOFTNDK_SHM_COPY=one|staged, else measured);
 * *why says how (static). */
bool sndk_stream_shm_one_copy(const char **why);

/* Lent memory is worth its bookkeeping from this size on (a payload piece, never a header). */
#define SNDK_STREAM_LEND_MIN 16384u

static inline ssize_t sndk_stream_writev(struct sndk_stream *s, const struct iovec *iov, int n)
{
    ssize_t w = s->ops->writev(s, iov, n);
    if (w > 0)
        s->written += (uint64_t)w;
    return w;
}
static inline ssize_t sndk_stream_writev_lent(struct sndk_stream *s, const struct iovec *iov, int n,
                                              const uint8_t *lend)
{
    if (!s->ops->writev_lent || !lend)
        return sndk_stream_writev(s, iov, n);
    ssize_t w = s->ops->writev_lent(s, iov, n, lend);
    if (w > 0)
        s->written += (uint64_t)w;
    return w;
}
static inline uint64_t sndk_stream_settled(struct sndk_stream *s, bool ask)
{
    return s->ops->settled ? s->ops->settled(s, ask) : s->written;
}
static inline ssize_t sndk_stream_readv(struct sndk_stream *s, const struct iovec *iov, int n)
{
    return s->ops->readv(s, iov, n);
}
static inline int sndk_stream_peek(struct sndk_stream *s)
{
    return s->ops->peek(s);
}
static inline const void *sndk_stream_in_place(struct sndk_stream *s, size_t *len)
{
    if (!s->ops->in_place) {
        *len = SIZE_MAX;
        return NULL;
    }
    return s->ops->in_place(s, len);
}
static inline int sndk_stream_take_in_place(struct sndk_stream *s, size_t n)
{
    return s->ops->take_in_place(s, n);
}
/* End our direction, once: true when this call ended it, false when it had ended before. */
static inline bool sndk_stream_shutdown_write(struct sndk_stream *s)
{
    if (s->write_ended)
        return false;
    s->write_ended = true;
    s->ops->shutdown_write(s);
    return true;
}
static inline int sndk_stream_error(struct sndk_stream *s)
{
    return s->ops->error(s);
}
static inline uint32_t sndk_stream_fpdu_max(struct sndk_stream *s)
{
    return s->ops->fpdu_max(s);
}
static inline void sndk_stream_arm(struct sndk_stream *s)
{
    if (s->ops->arm)
        s->ops->arm(s);
}
static inline bool sndk_stream_trim(struct sndk_stream *s)
{
    if (!s->ops->trim) {
        s->trim_wanted = false;
        return false;
    }
    return s->ops->trim(s);
}
static inline void sndk_stream_close(struct sndk_stream *s, bool abort)
{
    s->ops->close(s, abort);
}

#endif
