/* The ndkstat control endpoint (docs/observability.md): a Unix stream socket per adapter,
 * served by the adapter's progress engine. A client connects and reads a text snapshot until
 * end of stream; nothing is read from it. Only the adapter's own user is served (SO_PEERCRED);
 * a filesystem socket is mode 0600 in a 0700 directory.
 *
 * Snapshot format (one record per line, tab-separated; values never contain tabs):
 *   softndk  version=.. pid=.. adapter=N if=.. ndk=M.m mpa_rev=.. crc=on|off threads=..
 *            time=<unix seconds> uptime=<seconds>
 *   counter  <Name> <value>                (every SOFTNDK_COUNTERS field; arrays as Name.i)
 *   term     sent|received 0xLLTTCC <count>
 *   objects  <type>=<count> ...            (live NDK objects)
 *   listener id=0x.. addr=<ip:port>
 *   conn     id=N role=active|passive state=.. local=.. peer=.. ird=.. ord=.. crc=.. mpa_rev=..
 *            sq=<used>/<depth> rq=<used>/<depth> out_octets=.. in_octets=.. out_frames=..
 *            in_frames=.. hs_out=.. hs_in=..
 *   end
 */
#ifndef SOFTNDK_OBSERVE_STAT_H
#define SOFTNDK_OBSERVE_STAT_H

#include <stdbool.h>
#include <stddef.h>

struct sndk_adapter_ctrs;
struct sndk_engine;
struct sndk_stat;

/* The snapshot a client is served, written by the endpoint's owner (the adapter, which knows
 * its objects: core/adapter_stat.c) into a malloc'd buffer; *len its length. NULL when out of
 * memory (the client then gets an empty stream). Called on a progress thread. */
typedef char *(*sndk_stat_snapshot_fn)(void *owner, size_t *len);

/* Where and how the endpoint serves. */
struct sndk_stat_where {
    const char *path;               /* SOFTNDK_STAT_PATH; NULL or "": the per-user default */
    unsigned seq;                   /* the adapter's number in this process: the default name */
    struct sndk_engine *engine;     /* serves the socket */
    struct sndk_adapter_ctrs *ctrs; /* counts the log lines of refused clients left out */
};

/* Open the endpoint: each client gets snapshot(owner). Returns 0 with *out set, or -errno
 * (logged). Any non-progress thread. */
int sndk_stat_open(const struct sndk_stat_where *where, sndk_stat_snapshot_fn snapshot, void *owner,
                   struct sndk_stat **out);
/* Close it: no client is served after it returns; the socket file is removed. Blocking; never
 * on a progress thread. NULL is ignored. */
void sndk_stat_close(struct sndk_stat *s);
/* The socket's path ("@name" for an abstract one). */
const char *sndk_stat_path(const struct sndk_stat *s);

/* A snapshot being written: start from {0}, append with sndk_stat_printf, finish with
 * sndk_stat_text_take. */
struct sndk_stat_text {
    char *p;
    size_t len, cap;
    bool oom; /* an append failed: the snapshot is lost */
};

/* Append to t (grows as needed; out of memory marks t lost). */
void sndk_stat_printf(struct sndk_stat_text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The text written (the caller frees it), *len its length; NULL (and t freed) when it was lost
 * or is empty. */
char *sndk_stat_text_take(struct sndk_stat_text *t, size_t *len);

#endif
