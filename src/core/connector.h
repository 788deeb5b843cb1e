/* Connector (connector.c, docs/connector.md): what the rest of core/ knows of it. A listener
 * creates incoming connectors (sndk_connector_incoming) and gives each its origin; the
 * connector knows no listener, only that origin, and the listener's door (admission.h) through
 * its entry. The layering is listener -> connector -> admission. */
#ifndef SOFTNDK_CORE_CONNECTOR_H
#define SOFTNDK_CORE_CONNECTOR_H

#include <stdbool.h>

#include "core/admission.h"
#include "core/endpoint.h"

/* A connector's state as its logs and ndkstat name it ("wait-request"), by value; "?" from the
 * count on. The states are connector.c's own (it checks the count statically). */
#define SNDK_CONN_STATES 12
const char *sndk_conn_state_name(unsigned s);
/* The connector's side machines, by value (docs/connector.md, "States"): its request
 * ("done-active"), its consumer events ("disconnect-due"), its link to the QP ("attached");
 * "?" from the count on. */
#define SNDK_CONN_REQ_PHASES   4
#define SNDK_CONN_EVENT_PHASES 5
#define SNDK_CONN_LINK_PHASES  4
const char *sndk_conn_req_name(unsigned s);
const char *sndk_conn_event_name(unsigned s);
const char *sndk_conn_link_name(unsigned s);

/* Where an incoming connection came from: filled by its listener, which outlives every
 * connector it created (each holds owner). */
struct sndk_conn_origin {
    struct sndk_obj *owner;     /* the listener */
    struct sndk_admission *adm; /* its door: the connector is listed until its Request is in */
    struct sndk_endpoint *ep;   /* its endpoint (the connector takes a reference), or NULL */
    /* Deliver the connect event for conn to the consumer and return true, or return false when
     * the owner takes no request now (the connector then rejects it). On a progress thread,
     * no lock held. */
    bool (*connect_event)(struct sndk_obj *owner, struct sndk_obj *conn);
};

/* A TCP connection arrived: start the passive MPA handshake on it. Takes fd (closed with a
 * reset when no connector can be made). */
void sndk_connector_incoming(const struct sndk_conn_origin *origin, int fd,
                             const struct sndk_addr *local, const struct sndk_addr *peer);

#endif
