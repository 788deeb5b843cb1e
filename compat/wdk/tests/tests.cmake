# Included (deferred) at the end of the top-level directory: softndk_add_test() and the test
# harness exist by then. Paths are absolute because the including scope is the top level.
set(SOFTNDK_WDK_TEST_DIR ${PROJECT_SOURCE_DIR}/compat/wdk/tests)
softndk_add_test(wdk_unit
  SOURCES ${SOFTNDK_WDK_TEST_DIR}/test_sync.c ${SOFTNDK_WDK_TEST_DIR}/test_pool.c
          ${SOFTNDK_WDK_TEST_DIR}/test_rtl.c ${SOFTNDK_WDK_TEST_DIR}/test_io.c
          ${SOFTNDK_WDK_TEST_DIR}/test_wsk.c
  LIBS softndk_wdk softndk
  LABELS wdk
  TIMEOUT 300)
# libsoftndk-wdk exports Windows names and SoftNdkWdk*: nothing else (no internal helper).
add_test(NAME wdk_exports
  COMMAND sh ${SOFTNDK_WDK_TEST_DIR}/exports.sh $<TARGET_FILE:softndk_wdk>)
set_tests_properties(wdk_exports PROPERTIES LABELS wdk)
