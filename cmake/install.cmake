# `cmake --install` puts ActorFlow where another project finds it:
#   <prefix>/include/actorflow/...            the public headers (engine, ops, actors, net)
#   <prefix>/<libdir>/libactorflow.so*        the one shared library
#   <prefix>/<libdir>/libactorflow_cuda.so     with CUDA: the GPU module it loads on demand
#   <prefix>/<libdir>/cmake/actorflow/        find_package(actorflow): actorflow::actorflow
#   <prefix>/<libdir>/pkgconfig/actorflow.pc  pkg-config --cflags --libs actorflow
#
# The package config is written by hand rather than with install(EXPORT): the library is
# assembled from object libraries whose usage requirements (Eigen, CAF, Cap'n Proto,
# internal include folders) are the library's own business. An installed consumer needs
# only the headers and the .so; no public header includes Eigen, CAF or generated
# Cap'n Proto code, so none of those is a dependency of the package.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# 0.x: every minor version may change the ABI, so the soname carries major.minor.
set_target_properties(actorflow PROPERTIES
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
  # Keep the run paths of libraries outside the system's folders (CUDA's, a custom CAF).
  INSTALL_RPATH_USE_LINK_PATH TRUE)

# Headers that sit beside the public ones for the library's own parts and its tests, but
# are no API: the wire and file codecs' internals, the runtime's step machinery, and
# tensor_codec_capnp.h (it includes generated Cap'n Proto headers, which are not
# installed). tests/readme/install_test.sh checks that none is installed and that every
# installed header compiles on its own.
set(AF_INTERNAL_HEADERS protobuf_wire.h crc32c.h log_time.h tensor_codec_capnp.h
    actor_count.h partition_executor.h remote_edges.h step_plan.h)
set(AF_INTERNAL_EXCLUDES)
foreach(h ${AF_INTERNAL_HEADERS})
  list(APPEND AF_INTERNAL_EXCLUDES PATTERN ${h} EXCLUDE)
endforeach()
foreach(dir engine/include ops/include actors/include net/include)
  if(IS_DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/actorflow)
    install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/actorflow
            DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
            FILES_MATCHING PATTERN "*.h" ${AF_INTERNAL_EXCLUDES})
  endif()
endforeach()
install(TARGETS actorflow
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The CUDA module goes beside the library, where libactorflow looks for it.
if(TARGET actorflow_cuda)
  set_target_properties(actorflow_cuda PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
  install(TARGETS actorflow_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
# The node daemon, where this tree builds one; it finds the library through its run path.
if(TARGET actorflow-node)
  set_target_properties(actorflow-node PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
  install(TARGETS actorflow-node RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

set(AF_CONFIG_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/actorflow)
set(AF_LIB_FILE libactorflow.so.${PROJECT_VERSION})
set(AF_LIB_SONAME libactorflow.so.${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/actorflowConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake-package/actorflowConfig.cmake
  INSTALL_DESTINATION ${AF_CONFIG_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake-package/actorflowConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake-package/actorflowConfig.cmake ${PROJECT_BINARY_DIR}/cmake-package/actorflowConfigVersion.cmake
        DESTINATION ${AF_CONFIG_DIR})

# pkg-config: the prefix is found from the .pc file's own folder, so the tree may be
# installed with `cmake --install build --prefix DIR` or moved afterwards.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(AF_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(AF_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  file(RELATIVE_PATH _af_up "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
  string(REGEX REPLACE "/$" "" _af_up "${_af_up}")
  set(AF_PC_PREFIX "\${pcfiledir}/${_af_up}")
  set(AF_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(AF_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(AF_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/actorflow.pc.in ${PROJECT_BINARY_DIR}/cmake-package/actorflow.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/cmake-package/actorflow.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# -march=native never reaches consumers (it is a compile option of the library's own
# objects, not a usage requirement), but a library built with it may use instructions
# another CPU lacks. AF_NATIVE is therefore OFF unless asked for; installing a native
# build says so.
if(AF_NATIVE)
  install(CODE "message(WARNING \"actorflow: this libactorflow.so was built with -march=native and runs only on CPUs like this one; configure with -DAF_NATIVE=OFF to install a portable library\")")
endif()
