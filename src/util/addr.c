/* Socket addresses (util/addr.h). */
#include "util/addr.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

NTSTATUS sndk_addr_from(struct sndk_addr *a, const struct sockaddr *sa, ULONG len)
{
    memset(a, 0, sizeof *a);
    /* Not a byte past the consumer's length is read, the family field included. */
    if (!sa || len < sizeof(struct sockaddr_in))
        return STATUS_INVALID_ADDRESS;
    if (sa->sa_family == AF_INET) {
        memcpy(&a->in, sa, sizeof a->in);
        a->len = sizeof a->in;
        return STATUS_SUCCESS;
    }
    if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        memcpy(&a->in6, sa, sizeof a->in6);
        a->len = sizeof a->in6;
        return STATUS_SUCCESS;
    }
    return STATUS_INVALID_ADDRESS;
}

uint16_t sndk_addr_port(const struct sndk_addr *a)
{
    return ntohs(a->sa.sa_family == AF_INET ? a->in.sin_port : a->in6.sin6_port);
}

void sndk_addr_set_port(struct sndk_addr *a, uint16_t port)
{
    if (a->sa.sa_family == AF_INET)
        a->in.sin_port = htons(port);
    else
        a->in6.sin6_port = htons(port);
}

bool sndk_addr_is_wildcard(const struct sndk_addr *a)
{
    if (a->sa.sa_family == AF_INET)
        return a->in.sin_addr.s_addr == htonl(INADDR_ANY);
    return IN6_IS_ADDR_UNSPECIFIED(&a->in6.sin6_addr);
}

bool sndk_addr_same_host(const struct sndk_addr *a, const struct sndk_addr *b)
{
    if (a->sa.sa_family != b->sa.sa_family)
        return false;
    if (a->sa.sa_family == AF_INET)
        return a->in.sin_addr.s_addr == b->in.sin_addr.s_addr;
    return memcmp(&a->in6.sin6_addr, &b->in6.sin6_addr, sizeof a->in6.sin6_addr) == 0;
}

bool sndk_addr_equal(const struct sndk_addr *a, const struct sndk_addr *b)
{
    return sndk_addr_same_host(a, b) && sndk_addr_port(a) == sndk_addr_port(b);
}

const char *sndk_addr_str(const struct sndk_addr *a, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    if (a->sa.sa_family == AF_INET) {
        inet_ntop(AF_INET, &a->in.sin_addr, host, sizeof host);
        snprintf(buf, len, "%s:%u", host, sndk_addr_port(a));
    } else {
        inet_ntop(AF_INET6, &a->in6.sin6_addr, host, sizeof host);
        snprintf(buf, len, "[%s]:%u", host, sndk_addr_port(a));
    }
    return buf;
}

NTSTATUS sndk_addr_copy_out(const struct sndk_addr *a, struct sockaddr *out, ULONG *plen)
{
    if (!out || *plen < a->len) {
        *plen = a->len;
        return STATUS_BUFFER_TOO_SMALL;
    }
    memcpy(out, &a->sa, a->len);
    *plen = a->len;
    return STATUS_SUCCESS;
}
