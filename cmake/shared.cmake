# shared.cmake — libharp.so and `make install`.
# Needs: the harp_lib (static, position-independent) and harp targets of
# the top CMakeLists.txt.  Gives: harp_shared (libharp.so.0: the objects of
# libharp.a, whole, exporting only the public harp_* API through
# cmake/libharp.map), install rules for it, the public headers, the CLI,
# harp.pc and the CMake package (find_package(harp) -> harp::harp), and
# the Python extension (python/CMakeLists.txt) when nanobind is there.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

add_library(harp_shared SHARED ${CMAKE_SOURCE_DIR}/cmake/libharp_so.c)
add_dependencies(harp_shared harp_lib)
set_target_properties(harp_shared PROPERTIES
  OUTPUT_NAME harp VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
  EXPORT_NAME harp LINK_DEPENDS ${CMAKE_SOURCE_DIR}/cmake/libharp.map)
target_include_directories(harp_shared PUBLIC $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include>
                           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_link_libraries(harp_shared PRIVATE
  -Wl,--whole-archive $<TARGET_FILE:harp_lib> -Wl,--no-whole-archive
  -Wl,--version-script=${CMAKE_SOURCE_DIR}/cmake/libharp.map $<$<NOT:$<BOOL:${HARP_SANITIZE}${HARP_TSAN}>>:-Wl,--no-undefined>
  PkgConfig::JANSSON PkgConfig::ISL PkgConfig::PROTOBUF_C Threads::Threads m ${CMAKE_DL_LIBS})

if(SKBUILD) # in a wheel: libharp.so.0 alone (a wheel has no symlinks)
  set_target_properties(harp_shared PROPERTIES VERSION ${PROJECT_VERSION_MAJOR})
else()
  install(TARGETS harp_shared EXPORT harpTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(TARGETS harp RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(FILES ${CMAKE_SOURCE_DIR}/include/harp.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/harp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  # harp.pc finds the prefix from where it lies (${pcfiledir}): right for
  # `cmake --install --prefix`, DESTDIR staging and a moved tree alike
  file(RELATIVE_PATH HARP_PC_UP /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
  string(REGEX REPLACE "/$" "" HARP_PC_UP "${HARP_PC_UP}")
  configure_file(${CMAKE_SOURCE_DIR}/cmake/harp.pc.in ${CMAKE_BINARY_DIR}/harp.pc @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/harp.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
  install(EXPORT harpTargets NAMESPACE harp:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/harp)
  configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/harpConfig.cmake.in ${CMAKE_BINARY_DIR}/harpConfig.cmake
    INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/harp)
  write_basic_package_version_file(${CMAKE_BINARY_DIR}/harpConfigVersion.cmake COMPATIBILITY SameMajorVersion)
  install(FILES ${CMAKE_BINARY_DIR}/harpConfig.cmake ${CMAKE_BINARY_DIR}/harpConfigVersion.cmake
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/harp)
endif()

# The Python extension (python/): built when nanobind is installed, not
# under the sanitizers (Python itself is not built with them).
if(NOT HARP_SANITIZE AND NOT HARP_TSAN)
  add_subdirectory(${CMAKE_SOURCE_DIR}/python ${CMAKE_BINARY_DIR}/python_ext)
endif()
