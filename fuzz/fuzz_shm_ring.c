/* libFuzzer target: the same-host stream's reader (datapath/stream_shm.c) against ring bytes a
 * hostile peer wrote: record headers, lengths, spans (addresses into anything, pulled with
 * cross-memory attach from this process, which SOFTNDK_SHM_COPY=one lets it try), and end
 * marks anywhere. Per input: a fresh pair of streams on a socketpair; the input's first byte
 * picks the reads (poll or not, the size of each iovec) and whether an end mark follows, the
 * next one its offset from the tail; the rest is published raw into the ring the reader
 * drains, each record header the bytes frame stamped as a writer would (so that the kinds and
 * lengths the input chose are read, not refused at the first stamp). Every other read takes
 * bytes where they lie (in_place, then take_in_place, as the receive pass parses a whole FPDU
 * in the ring), falling back to readv when in_place says so. The reader must return bytes, the
 * end, -EAGAIN or an error, never read or write outside the rings and its iovecs (ASan/UBSan),
 * never hand out bytes past its record, and never spin: reads are bounded. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "datapath/stream.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    setenv("SOFTNDK_SHM_COPY", "one", 1); /* spans are accepted, so their pulls are fuzzed */
    setenv("SOFTNDK_LOG", "error", 1);
    return 0;
}

static uint8_t sink[3][70000];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint8_t flags = data[0], end_off = data[1];
    data += 2;
    size -= 2;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
        abort();
    void *w = sndk_stream_shm_new(sv[0], true);
    void *r = sndk_stream_shm_new(sv[1], false);
    if (!w || !r)
        abort();
    struct sndk_stream rs = {.ops = &sndk_stream_shm_ops, .fd = sndk_stream_shm_fd(r), .priv = r};
    struct iovec one = {sink[0], 1};
    (void)rs.ops->readv(&rs, &one, 1); /* takes the rings and probes the writer: -EAGAIN */
    uint64_t end = 0;
    if (flags & 1)
        end = sndk_stream_shm_tail(w) + size + 1 + (uint64_t)(int8_t)end_off;
    (void)sndk_stream_shm_publish_raw(w, data, size, end);
    rs.poll_only = (flags & 2) != 0;
    /* iovecs of 1 B to 64 KiB, one to three of them, as the receive side asks */
    size_t lens[3] = {(size_t)1 << ((flags >> 2) & 15), 18, 65536};
    if (lens[0] > sizeof sink[0])
        lens[0] = sizeof sink[0];
    int niov = 1 + ((flags >> 6) & 1) + ((flags >> 7) & 1);
    struct iovec iov[3];
    for (int i = 0; i < niov; i++)
        iov[i] = (struct iovec){sink[i], lens[i]};
    for (int i = 0; i < 64; i++) {
        if (!(i & 1)) {
            size_t avail;
            const uint8_t *at = rs.ops->in_place(&rs, &avail);
            if (at) {
                if (avail == 0 || avail > 4u << 20)
                    abort(); /* bytes it hands out are there, and inside the ring */
                size_t n = avail < lens[0] ? avail : lens[0];
                memcpy(sink[0], at, n);
                if (rs.ops->take_in_place(&rs, n) < 0)
                    break; /* a failed stream: it stays so */
                continue;
            }
            if (avail == 0)
                break; /* empty, as a poll-only readv's -EAGAIN */
            if (avail != SIZE_MAX)
                abort();
        }
        ssize_t got = rs.ops->readv(&rs, iov, niov);
        if (got <= 0 && got != -EAGAIN)
            break; /* the end, or a failed stream: it stays so */
        if (got == -EAGAIN)
            break;
    }
    (void)rs.ops->peek(&rs);
    struct sndk_stream ws = {.ops = &sndk_stream_shm_ops, .fd = sndk_stream_shm_fd(w), .priv = w};
    rs.ops->close(&rs, (flags & 4) != 0);
    ws.ops->close(&ws, false);
    return 0;
}
