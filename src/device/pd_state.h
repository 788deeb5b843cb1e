#ifndef SOFTNDK_DEVICE_PD_STATE_H
#define SOFTNDK_DEVICE_PD_STATE_H

#include "device/adapter_state.h"

struct sndk_pd {
    struct sndk_obj base;
    uint32_t privileged_stag; /* local read/write of LAM logical addresses; never remote */
};

static inline struct sndk_pd *sndk_pd_from(const void *pub)
{
    struct sndk_obj *o = sndk_obj_check(pub, NdkObjectTypePd);
    return o ? sndk_container_of(o, struct sndk_pd, base) : NULL;
}

#endif
