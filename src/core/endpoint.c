/* Shared endpoints and the ND port space (spec/ndkpi.md §1.7, §5.8). A shared endpoint binds a
 * local address:port, which is the connection layer's job; until it lands, creation answers
 * STATUS_NOT_SUPPORTED after validating its arguments. */
#include <netinet/in.h>

#include "core/adapter.h"

NTSTATUS sndk_endpoint_create(NDK_ADAPTER *pNdkAdapter, const struct sockaddr *pAddress,
                              ULONG AddressLength, NDK_FN_CREATE_COMPLETION CreateCompletion,
                              PVOID RequestContext, NDK_SHARED_ENDPOINT **ppNdkSharedEndpoint)
{
    (void)CreateCompletion, (void)RequestContext;
    struct sndk_adapter *a = sndk_adapter_from(pNdkAdapter);
    if (!a || !pAddress || !ppNdkSharedEndpoint)
        return STATUS_INVALID_PARAMETER;
    bool v4 = pAddress->sa_family == AF_INET && AddressLength >= sizeof(struct sockaddr_in);
    bool v6 = pAddress->sa_family == AF_INET6 && AddressLength >= sizeof(struct sockaddr_in6);
    if (!v4 && !v6)
        return STATUS_INVALID_ADDRESS;
    return STATUS_NOT_SUPPORTED; /* the connection layer is not in this build */
}
