/* Endpoints and the ND port space (docs/ndk-rules.md#ep). ND ports are TCP ports. A
 * process-wide table counts the references on every local (address, port) softndk uses, so
 * that a port stays taken while a listener, shared endpoint or any connector on it lives; the
 * OS bind() arbitrates against other processes. */
#ifndef SOFTNDK_CORE_ENDPOINT_H
#define SOFTNDK_CORE_ENDPOINT_H

#include <netinet/in.h>
#include <stdbool.h>
#include <sys/socket.h>

#include "device/adapter_state.h"
#include "util/addr.h"

/* Is the address (port ignored) one of adapter a's? Wildcards are. */
bool sndk_adapter_owns_address(const struct sndk_adapter *a, const struct sndk_addr *addr);

/* Does this host deliver addr (port ignored) to itself, on any interface? */
bool sndk_addr_is_local(const struct sndk_addr *addr);

enum sndk_ep_kind {
    SNDK_EP_LISTEN,  /* a listening socket; accepted connectors add references */
    SNDK_EP_SHARED,  /* a shared endpoint; its connectors add references */
    SNDK_EP_CONNECT, /* NdkConnect's own endpoint: one connector */
};

struct sndk_endpoint;

/* Reserve addr (port 0: draw from the adapter's ephemeral range) and create the socket bound
 * to it: a listening socket for SNDK_EP_LISTEN, a bound unconnected one otherwise.
 * Returns STATUS_SUCCESS with *out holding one reference and *fd the socket (the caller owns
 * the fd), STATUS_SHARING_VIOLATION (taken, here or by another process),
 * STATUS_TOO_MANY_ADDRESSES (port 0 and the range exhausted), STATUS_INVALID_ADDRESS (not an
 * address of the adapter), STATUS_INSUFFICIENT_RESOURCES. *addr gets the port chosen. */
NTSTATUS sndk_endpoint_open(struct sndk_adapter *a, enum sndk_ep_kind kind, struct sndk_addr *addr,
                            struct sndk_endpoint **out, int *fd);
/* Another socket on a shared endpoint's address (SO_REUSEADDR), bound, for connect(). */
NTSTATUS sndk_endpoint_socket(struct sndk_endpoint *ep, int *fd);
void sndk_endpoint_get(struct sndk_endpoint *ep);
void sndk_endpoint_put(struct sndk_endpoint *ep);
const struct sndk_addr *sndk_endpoint_addr(const struct sndk_endpoint *ep);

/* Remote peers connected through a shared endpoint: 4-tuple uniqueness. 0, -EEXIST (that peer
 * is connected over this endpoint already), -ENOMEM. */
int sndk_endpoint_add_peer(struct sndk_endpoint *ep, const struct sndk_addr *peer);
void sndk_endpoint_del_peer(struct sndk_endpoint *ep, const struct sndk_addr *peer);

/* The shared-endpoint object (NDK_SHARED_ENDPOINT). */
struct sndk_shared_endpoint {
    struct sndk_obj base;
    struct sndk_endpoint *ep;
    int fd; /* the reservation socket: keeps the port bound while the object lives */
};

static inline struct sndk_shared_endpoint *sndk_shared_endpoint_from(const void *pub)
{
    struct sndk_obj *o = sndk_obj_check(pub, NdkObjectTypeSharedEndpoint);
    return o ? sndk_container_of(o, struct sndk_shared_endpoint, base) : NULL;
}

#endif
