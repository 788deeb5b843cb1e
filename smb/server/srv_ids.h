/* The identifiers a connection hands out (TreeId, the low half of a SessionId) from counters
 * that wrap at 2^32. */
#ifndef SOFTNDK_SMB_SRV_IDS_H
#define SOFTNDK_SMB_SRV_IDS_H

#include <stdbool.h>
#include <stdint.h>

/* The next identifier after *counter (which it advances) that is neither 0 nor 0xFFFFFFFF nor
 * one still in use (in_use(ctx, id)). A counter alone is wrong once it wraps: 0 reads as a free
 * slot in the server's tables, 0xFFFFFFFF is what a client writes in a related request's header
 * for "the previous one" ([MS-SMB2] 3.2.4.1.4), and a long-lived tree or session keeps its id
 * while 2^32 others come and go, so the wrapped counter reaches it again. Ends: fewer ids than
 * 2^32 - 2 are ever in use at once. */
static inline uint32_t srv_next_id(uint32_t *counter, bool (*in_use)(const void *ctx, uint32_t id),
                                   const void *ctx)
{
    for (;;) {
        uint32_t id = ++*counter;
        if (id != 0 && id != UINT32_MAX && !in_use(ctx, id))
            return id;
    }
}

#endif
