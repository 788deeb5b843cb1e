/* The library's version: a unit of its own, so that what reports it (ndkstat's header, the
 * tools) depends on nothing else. SOFTNDK_VERSION_STRING comes from the build
 * (src/CMakeLists.txt: the project's version). */
#include <ndk/softndk.h>

const char *SoftNdkVersionString(void)
{
    return SOFTNDK_VERSION_STRING;
}
