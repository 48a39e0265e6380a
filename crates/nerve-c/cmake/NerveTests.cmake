# The C/C++ tests (included by CMakeLists.txt when NERVE_BUILD_TESTS is ON):
#   nerve_cpp_tests  GoogleTest, tests/cpp/*.cpp, one ctest test per TEST() (gtest_discover_tests)
#   nerve_c_test     tests/c/test_c.c, one ctest test
# Each gets NERVE_DOMAIN=NERVE_TEST_DOMAIN and a state directory in the build tree (tests
# may pick their own), so none meets nodes of the default domain. NERVE_SANITIZE builds
# them (not the Rust library) with ASan + UBSan; see examples/cpp/README.md.
option(NERVE_TESTS_REQUIRE_GTEST "Fail the configure when GoogleTest is missing (else: warn and skip the C++ tests)" OFF)

set(_nerve_test_state "${CMAKE_CURRENT_BINARY_DIR}/test-state")
set(NERVE_TEST_ENVIRONMENT
  "NERVE_DOMAIN=${NERVE_TEST_DOMAIN}"
  "NERVE_STATE_DIR=${_nerve_test_state}")

option(NERVE_SANITIZE_LEAKS "With NERVE_SANITIZE: LeakSanitizer on (suppressions: cmake/lsan.supp)" ON)
if(NERVE_SANITIZE)
  set(NERVE_SANITIZE_FLAGS -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  # The Rust library is not instrumented; the ASan runtime linked into the test binary
  # intercepts malloc/free for the whole process, the library's allocations included.
  # What the library keeps for the life of the process by design (iceoryx2's global
  # state, the standard library's thread-locals) is suppressed in cmake/lsan.supp.
  if(NERVE_SANITIZE_LEAKS)
    set(_nerve_detect_leaks 1)
  else()
    set(_nerve_detect_leaks 0)
  endif()
  list(APPEND NERVE_TEST_ENVIRONMENT
    "ASAN_OPTIONS=detect_leaks=${_nerve_detect_leaks}:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1"
    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1"
    "LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_LIST_DIR}/lsan.supp:print_suppressions=0")
endif()

function(nerve_test_target target)
  if(NERVE_SANITIZE)
    target_compile_options(${target} PRIVATE ${NERVE_SANITIZE_FLAGS})
    target_link_options(${target} PRIVATE ${NERVE_SANITIZE_FLAGS})
  endif()
  # the headers and the tests clean under every warning a strict user turns on (g++ and
  # clang++ alike): conversions that change a value or its sign included
  if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wconversion -Wsign-conversion -Werror)
  endif()
endfunction()

# --- C++: GoogleTest ------------------------------------------------------------------
file(GLOB NERVE_CPP_TEST_SOURCES CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/tests/cpp/*.cpp")
if(NOT NERVE_CPP_TEST_SOURCES)
  message(STATUS "Nerve: no tests/cpp/*.cpp: the C++ tests are not built")
else()
  find_package(GTest CONFIG QUIET)
  if(NOT GTest_FOUND)
    find_package(GTest MODULE)
  endif()
  if(NOT GTest_FOUND)
    if(NERVE_TESTS_REQUIRE_GTEST)
      message(FATAL_ERROR "Nerve: GoogleTest not found (Debian/Ubuntu: apt-get install libgtest-dev)")
    endif()
    message(WARNING "Nerve: GoogleTest not found (Debian/Ubuntu: libgtest-dev): the C++ tests are not built")
  else()
    include(GoogleTest)
    add_executable(nerve_cpp_tests ${NERVE_CPP_TEST_SOURCES})
    # a test file may bring its own main(); otherwise gtest_main's
    set(_nerve_own_main FALSE)
    foreach(_src IN LISTS NERVE_CPP_TEST_SOURCES)
      file(STRINGS "${_src}" _main REGEX "^[ \t]*int[ \t]+main[ \t]*\\(")
      if(_main)
        set(_nerve_own_main TRUE)
      endif()
    endforeach()
    if(_nerve_own_main)
      target_link_libraries(nerve_cpp_tests PRIVATE Nerve::nerve GTest::gtest)
    else()
      target_link_libraries(nerve_cpp_tests PRIVATE Nerve::nerve GTest::gtest_main)
    endif()
    nerve_test_target(nerve_cpp_tests)
    # test_ros2.cpp: the classes `nerve types gen-cpp` generated from ROS 2's test_msgs
    target_include_directories(nerve_cpp_tests PRIVATE
      "${CMAKE_CURRENT_SOURCE_DIR}/../../examples/cpp/ros2_msgs")
    # discovery runs the binary when ctest starts, not at build time: a broken test binary
    # shows up as a failing test with its output, not as a failed build
    gtest_discover_tests(nerve_cpp_tests
      DISCOVERY_MODE PRE_TEST
      DISCOVERY_TIMEOUT 60
      TEST_LIST nerve_cpp_tests_TESTS
      PROPERTIES
        TIMEOUT 120
        LABELS "cpp")
    # gtest_discover_tests (CMake < 3.29) splits a list-valued property such as
    # ENVIRONMENT: a ctest include file that runs after the discovered tests' sets it
    set(_nerve_env_file "${CMAKE_CURRENT_BINARY_DIR}/nerve_cpp_tests_environment.cmake")
    file(WRITE "${_nerve_env_file}" "foreach(_t IN LISTS nerve_cpp_tests_TESTS)
  set_tests_properties(\"\${_t}\" PROPERTIES ENVIRONMENT [==[${NERVE_TEST_ENVIRONMENT}]==])
endforeach()
")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${_nerve_env_file}")
  endif()
endif()

# --- C ----------------------------------------------------------------------------------
if(EXISTS "${CMAKE_CURRENT_SOURCE_DIR}/tests/c/test_c.c")
  add_executable(nerve_c_test tests/c/test_c.c)
  set_target_properties(nerve_c_test PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
  target_link_libraries(nerve_c_test PRIVATE Nerve::nerve_c)
  nerve_test_target(nerve_c_test)
  add_test(NAME nerve_c_test COMMAND nerve_c_test)
  set_tests_properties(nerve_c_test PROPERTIES
    ENVIRONMENT "${NERVE_TEST_ENVIRONMENT}"
    TIMEOUT 120
    LABELS "c")
else()
  message(STATUS "Nerve: no tests/c/test_c.c: the C test is not built")
endif()
