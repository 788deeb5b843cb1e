# Included (deferred) at the end of the top-level directory: softndk_add_test() and the test
# harness exist by then. Paths are absolute because the including scope is the top level.
set(SOFTNDK_WDK_TEST_DIR ${PROJECT_SOURCE_DIR}/compat/wdk/tests)
softndk_add_test(wdk_unit
  SOURCES ${SOFTNDK_WDK_TEST_DIR}/test_sync.c ${SOFTNDK_WDK_TEST_DIR}/test_pool.c
          ${SOFTNDK_WDK_TEST_DIR}/test_rtl.c ${SOFTNDK_WDK_TEST_DIR}/test_io.c
          ${SOFTNDK_WDK_TEST_DIR}/test_wsk.c ${SOFTNDK_WDK_TEST_DIR}/test_crt.c
          ${SOFTNDK_WDK_TEST_DIR}/test_names.c
  LIBS softndk_wdk softndk
  LABELS wdk
  TIMEOUT 300)
# libsoftndk-wdk exports Windows names and SoftNdkWdk*: nothing else (no internal helper).
add_test(NAME wdk_exports
  COMMAND sh ${SOFTNDK_WDK_TEST_DIR}/exports.sh $<TARGET_FILE:softndk_wdk>)
set_tests_properties(wdk_exports PROPERTIES LABELS wdk)
# A module that uses names the harness lacks fails to build, naming every one; the runner
# names every undefined symbol of a module built without the link check.
# The flags a consumer gets from softndk::wdk (this file runs at the top level: read the target).
get_target_property(SOFTNDK_WDK_TEST_FLAGS softndk_wdk INTERFACE_COMPILE_OPTIONS)
list(JOIN SOFTNDK_WDK_TEST_FLAGS " " SOFTNDK_WDK_TEST_CFLAGS)
add_test(NAME wdk_missing_names
  COMMAND sh ${SOFTNDK_WDK_TEST_DIR}/missing_names.sh ${CMAKE_C_COMPILER}
    "-I${PROJECT_SOURCE_DIR}/compat/wdk/include -I${PROJECT_SOURCE_DIR}/include ${SOFTNDK_WDK_TEST_CFLAGS}"
    $<TARGET_FILE_DIR:softndk_wdk> $<TARGET_FILE_DIR:softndk> $<TARGET_FILE:softndk-wdkrun>)
set_tests_properties(wdk_missing_names PROPERTIES LABELS wdk TIMEOUT 120)
# softndk-wdk-case-aliases makes a driver with mis-cased includes build.
add_test(NAME wdk_case_aliases
  COMMAND sh ${SOFTNDK_WDK_TEST_DIR}/case_aliases.sh
    ${PROJECT_SOURCE_DIR}/compat/wdk/scripts/softndk-wdk-case-aliases ${CMAKE_C_COMPILER}
    "-I${PROJECT_SOURCE_DIR}/compat/wdk/include -I${PROJECT_SOURCE_DIR}/include ${SOFTNDK_WDK_TEST_CFLAGS}")
set_tests_properties(wdk_case_aliases PROPERTIES LABELS wdk TIMEOUT 60)
# Bugcheck reports: a driver with deliberate bugs, each run ending with its class's exit status
# and a report naming the bugcheck and the driver's line (crash_reports.sh).
add_test(NAME wdk_crash_reports
  COMMAND sh ${SOFTNDK_WDK_TEST_DIR}/crash_reports.sh $<TARGET_FILE:softndk-wdkrun>
    $<TARGET_FILE:wdk_crash_driver> ${SOFTNDK_WDK_TEST_DIR}/crash_driver.c "${SOFTNDK_SANITIZE}"
    ${CMAKE_C_COMPILER_ID})
set_tests_properties(wdk_crash_reports PROPERTIES LABELS wdk TIMEOUT 300)
# The build-level traps: a miniport's DriverEntry, MSVC anonymous members and __declspec forms,
# Windows' IN_ADDR compile with the consumer flags; glibc's <wchar.h>, <netinet/in.h> and an
# unknown __declspec form are clear build errors (driver_traps.sh).
add_test(NAME wdk_driver_traps
  COMMAND sh ${SOFTNDK_WDK_TEST_DIR}/driver_traps.sh ${CMAKE_C_COMPILER}
    "-I${PROJECT_SOURCE_DIR}/compat/wdk/include -I${PROJECT_SOURCE_DIR}/include ${SOFTNDK_WDK_TEST_CFLAGS}")
set_tests_properties(wdk_driver_traps PROPERTIES LABELS wdk TIMEOUT 60)
# WPP tracing: softndk-wdk-tmh writes the .tmh files a traced driver includes; its trace calls
# print with WPP's conversions (wpp_tmh.sh).
add_test(NAME wdk_wpp_tmh
  COMMAND sh ${SOFTNDK_WDK_TEST_DIR}/wpp_tmh.sh
    ${PROJECT_SOURCE_DIR}/compat/wdk/scripts/softndk-wdk-tmh ${CMAKE_C_COMPILER}
    "-I${PROJECT_SOURCE_DIR}/compat/wdk/include -I${PROJECT_SOURCE_DIR}/include ${SOFTNDK_WDK_TEST_CFLAGS}"
    $<TARGET_FILE_DIR:softndk_wdk> $<TARGET_FILE_DIR:softndk> $<TARGET_FILE:softndk-wdkrun>)
set_tests_properties(wdk_wpp_tmh PROPERTIES LABELS wdk TIMEOUT 60)
