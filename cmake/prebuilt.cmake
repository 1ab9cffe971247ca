# prebuilt.cmake — a wheel over a harp build that exists already
# (-Ccmake.define.HARP_PREBUILT_DIR=<build dir>): libharp.so.0 and the CLI
# imported from it, only the Python extension compiled (the wheel test).
# Needs: HARP_PREBUILT_DIR with libharp.so.0 and harp.  Gives: the
# imported targets harp_shared and harp, python/CMakeLists.txt.
if(NOT EXISTS ${HARP_PREBUILT_DIR}/libharp.so.${PROJECT_VERSION} OR NOT EXISTS ${HARP_PREBUILT_DIR}/harp)
  message(FATAL_ERROR "HARP_PREBUILT_DIR=${HARP_PREBUILT_DIR}: no libharp.so.${PROJECT_VERSION} and harp there")
endif()
add_library(harp_shared SHARED IMPORTED)
set_target_properties(harp_shared PROPERTIES IMPORTED_LOCATION ${HARP_PREBUILT_DIR}/libharp.so.${PROJECT_VERSION}
  IMPORTED_SONAME libharp.so.${PROJECT_VERSION_MAJOR} INTERFACE_INCLUDE_DIRECTORIES ${CMAKE_SOURCE_DIR}/include)
add_executable(harp IMPORTED)
set_target_properties(harp PROPERTIES IMPORTED_LOCATION ${HARP_PREBUILT_DIR}/harp)
add_subdirectory(${CMAKE_SOURCE_DIR}/python ${CMAKE_BINARY_DIR}/python_ext)
