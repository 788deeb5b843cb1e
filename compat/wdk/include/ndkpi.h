/* ndkpi.h — where the WDK has it, beside wdm.h: softndk's NDKPI header (include/ndk/ndkpi.h),
 * with the harness's kernel names around it (softndk kernel-consumer harness). */
#ifndef SOFTNDK_WDK_NDKPI_FORWARD_H
#define SOFTNDK_WDK_NDKPI_FORWARD_H
#include "wdm.h" /* which includes <ndk/ndkpi.h> */
#endif
