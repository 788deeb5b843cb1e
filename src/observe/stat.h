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

#include <stddef.h>

struct sndk_adapter;
struct sndk_stat;

/* Open the endpoint of adapter a as its configuration says (a->cfg.stat, stat_path). Returns 0
 * (*out NULL when the endpoint is off) or -errno (logged). Any non-progress thread. */
int sndk_stat_open(struct sndk_adapter *a, struct sndk_stat **out);
/* Close it: no client is served after it returns; the socket file is removed. Blocking; never
 * on a progress thread. NULL is ignored. */
void sndk_stat_close(struct sndk_stat *s);
/* The socket's path ("@name" for an abstract one). */
const char *sndk_stat_path(const struct sndk_stat *s);

/* Write the snapshot of a into a malloc'd buffer; *len its length. NULL when out of memory. */
char *sndk_stat_snapshot(struct sndk_adapter *a, size_t *len);

#endif
