/* initguid.h — softndk kernel-consumer harness: from here on DEFINE_GUID defines its GUID (see
 * guiddef.h), as Windows' initguid.h does. */
#define INITGUID
#include "guiddef.h"
