# Defines the imported target Nerve::libnerve_c: the Rust library (libnerve_c.so or
# libnerve_c.a) in LIBDIR. Used by Nerve's own CMakeLists.txt (the cargo output or
# NERVE_PREBUILT_LIB_DIR) and by NerveConfig.cmake (the installed lib/ or the build
# tree's cargo output). Nerve::nerve_c and Nerve::nerve (NerveTargets.cmake) link it.
include_guard(GLOBAL)

# What the Rust standard library needs beside a static libnerve_c.a on Linux/glibc
# (`cargo rustc -p nerve-c -- --print native-static-libs`:
#  -ldl -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc).
set(NERVE_STATIC_SYSTEM_LIBS Threads::Threads ${CMAKE_DL_LIBS} util rt m gcc_s)

function(nerve_add_rust_lib libdir static)
  if(TARGET Nerve::libnerve_c)
    return()
  endif()
  if(static)
    if(NOT TARGET Threads::Threads)
      find_package(Threads REQUIRED)
    endif()
    add_library(Nerve::libnerve_c STATIC IMPORTED GLOBAL)
    set_target_properties(Nerve::libnerve_c PROPERTIES
      IMPORTED_LOCATION "${libdir}/libnerve_c.a"
      IMPORTED_LINK_INTERFACE_LANGUAGES C
      INTERFACE_LINK_LIBRARIES "${NERVE_STATIC_SYSTEM_LIBS}")
  else()
    add_library(Nerve::libnerve_c SHARED IMPORTED GLOBAL)
    # A Rust cdylib has no DT_SONAME: linked by its full path, the path itself would be
    # recorded as DT_NEEDED. IMPORTED_NO_SONAME makes CMake link it as -L<dir> -lnerve_c,
    # so consumers record `libnerve_c.so` and find it by RUNPATH / LD_LIBRARY_PATH.
    set_target_properties(Nerve::libnerve_c PROPERTIES
      IMPORTED_LOCATION "${libdir}/libnerve_c.so"
      IMPORTED_NO_SONAME TRUE)
  endif()
endfunction()
