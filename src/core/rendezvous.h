/* Same-host rendezvous (docs/transport-shm.md): how two softndk processes on one host find
 * each other without TCP. A listener of an adapter whose transport is shm or auto also listens
 * on an abstract AF_UNIX stream socket named for its network namespace, address and port; a
 * connector to a local address tries that name first. The MPA handshake then runs unchanged
 * over the AF_UNIX socket, and the connection's byte stream is shared memory
 * (datapath/stream_shm.c). */
#ifndef SOFTNDK_CORE_RENDEZVOUS_H
#define SOFTNDK_CORE_RENDEZVOUS_H

#include <stdbool.h>

#include "device/adapter_state.h"
#include "util/addr.h"

/* The adapter's transport as it applies to a new connection or listener: SoftNdkTransportTcp
 * when the configuration says tcp, or when something needs the TCP wire bytes (pcap capture,
 * fault rules): then *why names it (once per adapter in the log is the caller's business). */
SOFTNDK_TRANSPORT sndk_rdv_transport(const struct sndk_adapter *a, const char **why);

/* Listen on the name of addr (its address and port; a wildcard address listens for every
 * local address of its family). The socket is non-blocking. fd >= 0, or -errno. */
int sndk_rdv_listen(const struct sndk_addr *addr);

/* Try the name of dst (then of the wildcard of its family: a listener on every address) from
 * local (the connector's reserved address and port; a wildcard address is taken to be dst's).
 * A connected non-blocking AF_UNIX socket (>= 0), or -errno: -ECONNREFUSED or -ENOENT when no
 * listener has the name, -EHOSTUNREACH when dst is not an address of this host. *local gets
 * the address the peer is told. */
int sndk_rdv_connect(struct sndk_addr *local, const struct sndk_addr *dst);

/* Accept one connection on the rendezvous socket of a listener on listen_addr: the peer must
 * run as our user (else it is refused and the log says why), and its name tells its (address,
 * port) and the address it dialed. fd >= 0 with *local (the listener's address, or the dialed
 * one for a wildcard listener; the listener's port) and *peer filled; -EAGAIN when none waits;
 * -EPERM / -EPROTO for a refused one (already closed); other -errno from accept. */
int sndk_rdv_accept(int lfd, const struct sndk_addr *listen_addr, struct sndk_addr *local,
                    struct sndk_addr *peer);

/* Is fd a rendezvous (AF_UNIX) socket rather than TCP? */
bool sndk_rdv_is_unix(int fd);

#endif
