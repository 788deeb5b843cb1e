/* ws2ipdef.h — softndk kernel-consumer harness: see ws2def.h. Like the WDK's socket headers it
 * leads to mstcpip.h, so the IP address text routines (ip2string.h) are reachable from it. The
 * IN6_* / IN4_* address predicates are Windows' (ws2ipdef.h, mstcpip.h), on IN_ADDR / IN6_ADDR
 * (driver code only: the harness's own sources use <netinet/in.h>'s). */
#ifndef SOFTNDK_WDK_WS2IPDEF_H
#define SOFTNDK_WDK_WS2IPDEF_H
#include "ws2def.h"

#ifndef SOFTNDK_WDK_INTERNAL
FORCEINLINE BOOLEAN IN6_ADDR_EQUAL(const IN6_ADDR *x, const IN6_ADDR *y)
{
    return memcmp(x, y, sizeof *x) == 0;
}
FORCEINLINE BOOLEAN IN6_IS_ADDR_UNSPECIFIED(const IN6_ADDR *a)
{
    static const IN6_ADDR any = IN6ADDR_ANY_INIT;
    return IN6_ADDR_EQUAL(a, &any);
}
FORCEINLINE BOOLEAN IN6_IS_ADDR_LOOPBACK(const IN6_ADDR *a)
{
    static const IN6_ADDR lo = IN6ADDR_LOOPBACK_INIT;
    return IN6_ADDR_EQUAL(a, &lo);
}
FORCEINLINE BOOLEAN IN6_IS_ADDR_MULTICAST(const IN6_ADDR *a)
{
    return a->u.Byte[0] == 0xff;
}
FORCEINLINE BOOLEAN IN6_IS_ADDR_LINKLOCAL(const IN6_ADDR *a)
{
    return a->u.Byte[0] == 0xfe && (a->u.Byte[1] & 0xc0) == 0x80;
}
FORCEINLINE BOOLEAN IN6_IS_ADDR_SITELOCAL(const IN6_ADDR *a)
{
    return a->u.Byte[0] == 0xfe && (a->u.Byte[1] & 0xc0) == 0xc0;
}
FORCEINLINE BOOLEAN IN6_IS_ADDR_V4MAPPED(const IN6_ADDR *a)
{
    return a->u.Word[0] == 0 && a->u.Word[1] == 0 && a->u.Word[2] == 0 && a->u.Word[3] == 0 &&
           a->u.Word[4] == 0 && a->u.Word[5] == 0xffff;
}
FORCEINLINE BOOLEAN IN4_ADDR_EQUAL(const IN_ADDR *a, const IN_ADDR *b)
{
    return a->s_addr == b->s_addr;
}
FORCEINLINE BOOLEAN IN4_IS_ADDR_UNSPECIFIED(const IN_ADDR *a)
{
    return a->s_addr == INADDR_ANY;
}
FORCEINLINE BOOLEAN IN4_IS_ADDR_LOOPBACK(const IN_ADDR *a)
{
    return a->S_un.S_un_b.s_b1 == 127;
}
#endif

#include "mstcpip.h"
#endif
