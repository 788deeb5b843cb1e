/* Wdmsec.h — the spelling some drivers use for wdmsec.h (Windows' file system ignores case;
 * docs/wdk.md, "Case-insensitive includes"). */
#include "wdmsec.h"
