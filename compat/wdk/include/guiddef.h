/* guiddef.h — softndk kernel-consumer harness: GUID helpers as Windows' guiddef.h has them (the
 * GUID type itself is ndkinfo.h's). Without INITGUID, DEFINE_GUID declares the GUID; with it, it
 * defines it, as a selectany (weak) definition so that several translation units may;
 * `#include <initguid.h>` switches to definitions after the headers were included. */
#ifndef SOFTNDK_WDK_GUIDDEF_H
#define SOFTNDK_WDK_GUIDDEF_H

#include "wdm.h"

typedef const GUID *REFGUID, *REFIID, *REFCLSID, *REFFMTID;
typedef GUID IID, *LPIID, CLSID, *LPCLSID, FMTID, *LPFMTID;
#define IsEqualGUID(rguid1, rguid2)       (memcmp((rguid1), (rguid2), sizeof(GUID)) == 0)
#define InlineIsEqualGUID(rguid1, rguid2) IsEqualGUID(rguid1, rguid2)
#define IsEqualIID(riid1, riid2)          IsEqualGUID(riid1, riid2)

#endif /* SOFTNDK_WDK_GUIDDEF_H */

/* Outside the guard, as in Windows' guiddef.h: each inclusion re-reads INITGUID (initguid.h
 * defines it and includes this again). */
#undef DEFINE_GUID
#ifdef __cplusplus
#define SOFTNDK_GUID_LINKAGE extern "C" /* C++: const is internal without it */
#else
#define SOFTNDK_GUID_LINKAGE /* C: a const at file scope is external */
#endif
#ifdef INITGUID
#define DEFINE_GUID(name, l, w1, w2, b1, b2, b3, b4, b5, b6, b7, b8)                               \
    SOFTNDK_GUID_LINKAGE const GUID __attribute__((weak))                                          \
    name = {l, w1, w2, {b1, b2, b3, b4, b5, b6, b7, b8}}
#else
#define DEFINE_GUID(name, l, w1, w2, b1, b2, b3, b4, b5, b6, b7, b8) EXTERN_C const GUID name
#endif
