/* pcap writer (docs/observability.md): every connection's bytes, both directions, as a
 * classic pcap file (Ethernet / IPv4 or IPv6 / TCP, headers synthesized) that Wireshark and
 * tshark decode as MPA / DDP / RDMAP without root or tcpdump.
 *
 * - One writer per file, shared by the adapters of a process that name the same path
 *   (acquire/release count them); one mutex per writer. Capture is a debugging aid: the cost
 *   when it is off is one predictable branch on a NULL connection handle.
 * - Each connection gets SYN / SYN-ACK / ACK when opened, sequence and acknowledgement numbers
 *   that follow the bytes recorded, FIN per direction (explicitly, or when it is closed).
 * - The first MPA frame of each direction (Request or Reply: 20 bytes + PD_Length) is always
 *   written as a segment of its own, because Wireshark's MPA heuristic only recognises it at
 *   the start of a segment and skips whatever follows it in the same one ([IW-TSHARK]).
 * - When both ends of one TCP connection live in this process (loopback), the second one to
 *   open is a mirror of the first and records nothing: the stream appears once.
 * - Segments are at most SNDK_PCAP_MSS bytes; larger writes are cut. */
#ifndef SOFTNDK_OBSERVE_PCAP_H
#define SOFTNDK_OBSERVE_PCAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#define SNDK_PCAP_MSS 65000

struct sndk_pcap;
struct sndk_pcap_conn;

/* Open (or share) the writer of path, truncating a new file. NULL with errno on failure. */
struct sndk_pcap *sndk_pcap_acquire(const char *path);
/* Drop one user; the last flushes and closes the file. NULL is ignored. */
void sndk_pcap_release(struct sndk_pcap *p);

/* A connection to record: local and peer addresses (AF_INET / AF_INET6), `active` when the
 * local end connected (its SYN comes first). NULL when p is NULL or out of memory. */
struct sndk_pcap_conn *sndk_pcap_conn_new(struct sndk_pcap *p, uint64_t id,
                                          const struct sockaddr *local,
                                          const struct sockaddr *peer, bool active);
/* FIN for every direction not yet finished, then forget it. NULL is ignored. */
void sndk_pcap_conn_close(struct sndk_pcap_conn *c);

/* Record `bytes` bytes from the start of iov[0..iovcnt) as sent (out) or received. */
void sndk_pcap_record(struct sndk_pcap_conn *c, bool out, const struct iovec *iov, int iovcnt,
                      size_t bytes);
/* This direction ended (our shutdown, or the peer's FIN read). */
void sndk_pcap_fin(struct sndk_pcap_conn *c, bool out);

/* The hooks: one branch when capture is off. */
static inline void sndk_pcap_iov(struct sndk_pcap_conn *c, bool out, const struct iovec *iov,
                                 int iovcnt, size_t bytes)
{
    if (__builtin_expect(c != NULL, 0) && bytes > 0)
        sndk_pcap_record(c, out, iov, iovcnt, bytes);
}
static inline void sndk_pcap_buf(struct sndk_pcap_conn *c, bool out, const void *buf,
                                 size_t bytes)
{
    if (__builtin_expect(c != NULL, 0) && bytes > 0) {
        struct iovec v = {(void *)(uintptr_t)buf, bytes};
        sndk_pcap_record(c, out, &v, 1, bytes);
    }
}

#endif
