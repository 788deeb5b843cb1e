/* The connection's phase and its end record (phase.c). The types live in conn.h with the
 * connection. */
#ifndef SOFTNDK_DATAPATH_PHASE_H
#define SOFTNDK_DATAPATH_PHASE_H

#include "datapath/conn.h"

#endif
