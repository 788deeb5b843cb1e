/* wdmsec.h — secure device objects (softndk kernel-consumer harness). There is no security
 * model here: IoCreateDeviceSecure is IoCreateDevice (the SDDL string and class GUID are
 * accepted and not enforced); the SDDL_DEVOBJ_* strings are Windows' text. */
#ifndef SOFTNDK_WDK_WDMSEC_H
#define SOFTNDK_WDK_WDMSEC_H

#include "wdm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Windows keeps these in wdmsec.lib; here each file that includes the header has a copy. */
#define SOFTNDK_WDK_SDDL(_var, _string)                                                            \
    static const UNICODE_STRING _var __attribute__((unused)) = {                                   \
        (USHORT)(sizeof(_string) - sizeof(WCHAR)), (USHORT)sizeof(_string), (PWCH)(_string)}

SOFTNDK_WDK_API NTSTATUS IoCreateDeviceSecure(PDRIVER_OBJECT DriverObject,
                                              ULONG DeviceExtensionSize, PUNICODE_STRING DeviceName,
                                              DEVICE_TYPE DeviceType, ULONG DeviceCharacteristics,
                                              BOOLEAN Exclusive, PCUNICODE_STRING DefaultSDDLString,
                                              LPCGUID DeviceClassGuid,
                                              PDEVICE_OBJECT *DeviceObject);

SOFTNDK_WDK_SDDL(SDDL_DEVOBJ_KERNEL_ONLY, L"D:P");
SOFTNDK_WDK_SDDL(SDDL_DEVOBJ_SYS_ALL, L"D:P(A;;GA;;;SY)");
SOFTNDK_WDK_SDDL(SDDL_DEVOBJ_SYS_ALL_ADM_ALL, L"D:P(A;;GA;;;SY)(A;;GA;;;BA)");
SOFTNDK_WDK_SDDL(SDDL_DEVOBJ_SYS_ALL_ADM_RX, L"D:P(A;;GA;;;SY)(A;;GRGX;;;BA)");
SOFTNDK_WDK_SDDL(SDDL_DEVOBJ_SYS_ALL_ADM_RWX_WORLD_R,
                 L"D:P(A;;GA;;;SY)(A;;GRGWGX;;;BA)(A;;GR;;;WD)");
SOFTNDK_WDK_SDDL(SDDL_DEVOBJ_SYS_ALL_ADM_RWX_WORLD_RW_RES_R,
                 L"D:P(A;;GA;;;SY)(A;;GRGWGX;;;BA)(A;;GRGW;;;WD)(A;;GR;;;RC)");
SOFTNDK_WDK_SDDL(SDDL_DEVOBJ_SYS_ALL_ADM_RWX_WORLD_RWX_RES_RWX,
                 L"D:P(A;;GA;;;SY)(A;;GRGWGX;;;BA)(A;;GRGWGX;;;WD)(A;;GRGWGX;;;RC)");

#ifdef __cplusplus
}
#endif

#endif /* SOFTNDK_WDK_WDMSEC_H */
